//! A seeded mutation fuzzer over the HTTP responses of every wire: real response bodies of OpenAI, Anthropic and
//! Gemini, and the batch outputs of their three batch protocols, mutated (`nmb_test_support::fuzz`) and read
//! through each wire's parser, and through the transport from a loopback server that wraps each mutated body in
//! a random envelope: no encoding, gzip, deflate, a gzip header over a plain body or a gzip body without one, and
//! a `content-length` that is true, absent, short or long.
//!
//! A case fails on a panic, on taking more than 5 s, or on asking for more than [`BUDGET`] bytes at once (the
//! counting allocator refuses past [`REFUSED`], which aborts the run; the case printed last is the culprit).
//! `NMB_FUZZ_CASES` sets the cases per target (default 300, what CI runs), `NMB_FUZZ_SEED` another seed,
//! `NMB_FUZZ_TARGET` one target by name. Its own test binary, because it installs its own global allocator.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nmb_chat::{Message, OutputFormat, Role};
use nmb_requests::{
    connect, AnthropicOptions, AnthropicWire, ApiKey, Backend, BackendOptions, ChatRequest,
    GeminiWire, HttpOptions, ModelSpec, OpenAiOptions, OpenAiWire, Transport, Wire,
};
use nmb_test_support::fuzz::{Campaign, Counting, Mutator, Outcome};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most one allocation of a case may ask for: far more than any body and its mutations need.
const BUDGET: usize = 64 << 20;
/// Past this, an allocation is refused outright (which aborts the run) rather than risk the machine.
const REFUSED: usize = 4 << 30;

#[global_allocator]
static ALLOCATOR: Counting = Counting::new(REFUSED);

const OPENAI: &str = r#"{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": "<think>weighing it</think>Multiple sclerosis", "reasoning_content": "DWI first"}, "finish_reason": "stop"}, {"index": 1, "message": {"role": "assistant", "content": null, "refusal": "no"}, "finish_reason": "content_filter"}], "usage": {"prompt_tokens": 12, "completion_tokens": 30, "total_tokens": 42, "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 9}}}"#;
const ANTHROPIC: &str = r#"{"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [{"type": "thinking", "thinking": "Consider the DWI", "signature": "c2lnbmF0dXJl"}, {"type": "text", "text": "Glioblastoma"}, {"type": "tool_use", "id": "toolu_1", "name": "answer", "input": {"differential": [{"rank": 1, "diagnosis": "GBM"}]}}], "stop_reason": "end_turn", "stop_sequence": null, "usage": {"input_tokens": 10, "cache_read_input_tokens": 5, "cache_creation_input_tokens": 2, "output_tokens": 20}}"#;
const GEMINI: &str = r#"{"candidates": [{"content": {"parts": [{"text": "thinking", "thought": true}, {"text": "Ischemic stroke"}], "role": "model"}, "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 3, "thoughtsTokenCount": 7, "cachedContentTokenCount": 1, "totalTokenCount": 19}, "modelVersion": "m"}"#;

fn openai_jsonl() -> String {
    [("nmb-a", OPENAI), ("nmb-b", OPENAI)]
        .iter()
        .map(|(id, body)| format!(r#"{{"id": "batch_req_1", "custom_id": "{id}", "response": {{"status_code": 200, "request_id": "r", "body": {body}}}, "error": null}}"#))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n{\"id\": \"batch_req_3\", \"custom_id\": \"nmb-c\", \"response\": null, \"error\": {\"code\": \"batch_expired\", \"message\": \"late\"}}\n"
}

fn anthropic_jsonl() -> String {
    format!(
        "{{\"custom_id\": \"nmb-a\", \"result\": {{\"type\": \"succeeded\", \"message\": {ANTHROPIC}}}}}\n{{\"custom_id\": \"nmb-b\", \"result\": {{\"type\": \"errored\", \"error\": {{\"type\": \"error\", \"error\": {{\"type\": \"overloaded_error\", \"message\": \"busy\"}}}}}}}}\n{{\"custom_id\": \"nmb-c\", \"result\": {{\"type\": \"expired\"}}}}\n"
    )
}

fn gemini_operation() -> String {
    format!(
        r#"{{"name": "batches/1", "metadata": {{"state": "BATCH_STATE_SUCCEEDED", "displayName": "t"}}, "done": true, "response": {{"inlinedResponses": {{"inlinedResponses": [{{"response": {GEMINI}}}, {{"error": {{"code": 429, "message": "slow down"}}}}, {{"response": {GEMINI}, "metadata": {{"key": "nmb-c"}}}}]}}}}}}"#
    )
}

/// What the loopback server answers each path with: a whole raw HTTP response.
type Routes = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A loopback HTTP server answering from `routes` (the first route whose path the request's path starts with),
/// then closing the connection.
fn loopback(rt: &tokio::runtime::Runtime, routes: Routes) -> SocketAddr {
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("loopback");
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let routes = routes.clone();
            tokio::spawn(async move {
                let Some(path) = read_request(&mut stream).await else {
                    return;
                };
                let answer = (routes.lock().unwrap().iter())
                    .find(|(p, _)| path.starts_with(p.as_str()))
                    .map(|(_, r)| r.clone())
                    .unwrap_or_else(|| {
                        b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_vec()
                    });
                let _ = stream.write_all(&answer).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    addr
}

/// Reads one request's head and body; returns its path.
async fn read_request(stream: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    let path = head.split_whitespace().nth(1)?.to_string();
    Some(path)
}

/// `body` in an envelope `rng` picks (the first case of a target gets the plain one, which must read).
fn envelope(body: &[u8], rng: &mut Mutator, plain: bool) -> Vec<u8> {
    let (encoding, length) = if plain {
        (0, 0)
    } else {
        (rng.below(5), rng.below(4))
    };
    let (header, sent) = match encoding {
        0 => (None, body.to_vec()),
        1 => (Some("gzip"), gzip(body)),
        2 => (Some("deflate"), zlib(body)),
        3 => (Some("gzip"), body.to_vec()),
        _ => (None, gzip(body)),
    };
    let mut head =
        String::from("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n");
    if let Some(h) = header {
        head.push_str(&format!("content-encoding: {h}\r\n"));
    }
    let skew = 1 + rng.below(64);
    match length {
        0 => head.push_str(&format!("content-length: {}\r\n", sent.len())),
        1 => {}
        2 => head.push_str(&format!(
            "content-length: {}\r\n",
            sent.len().saturating_sub(skew)
        )),
        _ => head.push_str(&format!("content-length: {}\r\n", sent.len() + skew)),
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(&sent);
    out
}

fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn zlib(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

fn request() -> ChatRequest {
    let mut req = ChatRequest::new(
        vec![Message::text(Role::User, "Where is the lesion?")],
        nmb_chat::GenParams::default(),
    );
    req.output = OutputFormat::Text;
    req
}

/// A backend of `kind` on the loopback server, its deadline 2 s.
fn backend(kind: &str, addr: SocketAddr) -> Arc<dyn Backend> {
    let transport = Transport::new(&HttpOptions {
        request_timeout: Some(Duration::from_secs(2)),
        ..HttpOptions::default()
    })
    .unwrap();
    let base = match kind {
        "openai" => format!("http://{addr}/v1"),
        _ => format!("http://{addr}"),
    };
    let spec = ModelSpec::parse(&format!("{kind}:m@{base}")).unwrap();
    let opts = BackendOptions {
        key: Some(ApiKey::new("sk-fuzz")),
        ..BackendOptions::default()
    };
    connect(&spec, &transport, &opts).unwrap()
}

/// How a target reads one case: true when it read without an error (what the plain seed must give).
enum Read {
    /// The wire's parser, on the bytes as text.
    Parse(&'static str),
    /// One call through the transport, the server answering every path with the case.
    Call(&'static str),
    /// A poll of an ended batch whose output is the case.
    Poll(&'static str),
}

struct Target {
    name: String,
    seed: Vec<u8>,
    read: Read,
}

fn targets() -> Vec<Target> {
    let mut out = Vec::new();
    for (kind, seed) in [
        ("openai", OPENAI),
        ("anthropic", ANTHROPIC),
        ("gemini", GEMINI),
    ] {
        out.push(Target {
            name: format!("{kind} parser"),
            seed: seed.as_bytes().to_vec(),
            read: Read::Parse(kind),
        });
        out.push(Target {
            name: format!("{kind} transport"),
            seed: seed.as_bytes().to_vec(),
            read: Read::Call(kind),
        });
    }
    for (kind, seed) in [
        ("openai", openai_jsonl()),
        ("anthropic", anthropic_jsonl()),
        ("gemini", gemini_operation()),
    ] {
        out.push(Target {
            name: format!("{kind} batch output"),
            seed: seed.into_bytes(),
            read: Read::Poll(kind),
        });
    }
    out
}

fn parse(kind: &str, text: &str) -> bool {
    match kind {
        "openai" => OpenAiWire::new("m".into(), OpenAiOptions::default())
            .parse(text)
            .is_ok(),
        "anthropic" => AnthropicWire::new("m".into(), AnthropicOptions::default())
            .parse(text)
            .is_ok(),
        _ => GeminiWire::new("m".into()).parse(text).is_ok(),
    }
}

/// The routes of a batch poll of `kind` whose output is `raw`, and the poll's provider id.
fn batch_routes(
    kind: &str,
    addr: SocketAddr,
    raw: Vec<u8>,
) -> (Vec<(String, Vec<u8>)>, &'static str) {
    let json = |v: String| {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{v}",
            v.len()
        )
        .into_bytes()
    };
    match kind {
        "openai" => (
            vec![
                (
                    "/v1/batches/batch_1".into(),
                    json(
                        r#"{"id": "batch_1", "status": "completed", "output_file_id": "file-1"}"#
                            .into(),
                    ),
                ),
                ("/v1/files/file-1/content".into(), raw),
            ],
            "batch_1",
        ),
        "anthropic" => (
            vec![
                ("/v1/messages/batches/msgbatch_1/results".into(), raw),
                (
                    "/v1/messages/batches/msgbatch_1".into(),
                    json(format!(
                        r#"{{"id": "msgbatch_1", "processing_status": "ended", "results_url": "http://{addr}/v1/messages/batches/msgbatch_1/results"}}"#
                    )),
                ),
            ],
            "msgbatch_1",
        ),
        _ => (vec![("/v1beta/batches/1".into(), raw)], "batches/1"),
    }
}

#[test]
fn no_response_panics_hangs_or_allocates_past_its_budget() {
    let mut fuzz = Campaign::from_env(0x6e6d_6268_7474_7031, BUDGET);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let routes: Routes = Arc::default();
    let addr = loopback(&rt, routes.clone());
    let ids: Vec<String> = ["nmb-a", "nmb-b", "nmb-c"].map(String::from).to_vec();
    let all = targets();
    for target in &all {
        if !fuzz.runs(&target.name) {
            continue;
        }
        let mut rng = Mutator::new(fuzz.seed_of(&target.name));
        for case in 0..fuzz.cases {
            let bytes = if case == 0 {
                target.seed.clone()
            } else {
                rng.mutate(&target.seed)
            };
            let handle = rt.handle().clone();
            let input = bytes.clone();
            let read: Box<dyn FnOnce() -> bool + Send> = match target.read {
                Read::Parse(kind) => {
                    Box::new(move || parse(kind, &String::from_utf8_lossy(&input)))
                }
                Read::Call(kind) => {
                    let raw = envelope(&bytes, &mut rng, case == 0);
                    *routes.lock().unwrap() = vec![("/".into(), raw)];
                    Box::new(move || {
                        let b = backend(kind, addr);
                        handle.block_on(b.complete(&request())).is_ok()
                    })
                }
                Read::Poll(kind) => {
                    let raw = envelope(&bytes, &mut rng, case == 0);
                    let (r, id) = batch_routes(kind, addr, raw);
                    *routes.lock().unwrap() = r;
                    let ids = ids.clone();
                    Box::new(move || {
                        let b = backend(kind, addr);
                        let api = b.batch().expect("a batch API");
                        let cap = api.response_cap(&request());
                        handle.block_on(api.poll(id, &ids, cap)).is_ok()
                    })
                }
            };
            match fuzz.case(&ALLOCATOR, &target.name, case, &bytes, read) {
                Outcome::Read(read) => assert!(
                    read || case > 0,
                    "the {} seed itself does not read",
                    target.name
                ),
                Outcome::Failed => {}
                Outcome::Stuck => break,
            }
        }
    }
    let largest = fuzz.largest_per_target();
    fuzz.finish(&format!(
        "{} targets; largest allocation (bytes): {largest}",
        all.len()
    ));
}
