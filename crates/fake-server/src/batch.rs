//! The three providers' batch APIs, as documented, over the same request handling a single call gets: each
//! request of a batch is parsed, refused, faulted and answered exactly as if it had come alone, when its batch
//! ends.
//!
//! - OpenAI (<https://platform.openai.com/docs/api-reference/batch>): `POST /v1/files` (multipart, `purpose`
//!   `batch`), `POST /v1/batches`, `GET /v1/batches[/{id}]`, `GET /v1/files/{id}/content`. "The output file
//!   contains the successful requests, the error file the failed ones"; "requests that were not completed in
//!   time are written to the error file with code `batch_expired`".
//! - Anthropic (<https://docs.anthropic.com/en/api/creating-message-batches>): `POST /v1/messages/batches`,
//!   `GET /v1/messages/batches[/{id}]`, results as JSONL at the batch's `results_url`, each result `succeeded`,
//!   `errored`, `canceled` or `expired`.
//! - Gemini (<https://ai.google.dev/api/batch-mode>): `POST /v1beta/models/{model}:batchGenerateContent` with
//!   inlined requests, `GET /v1beta/batches[/{id}]`; a finished operation's inlined responses "will be in the
//!   same order as the input requests". As users report, they do not echo the requests' metadata, so neither
//!   does this server.
//!
//! [`BatchConfig`] makes batches take a number of polls, expire part-way, or fail as a whole ([`BatchFailure`]).
//! An OpenAI batch goes through the statuses its API reference lists: `validating` when created, `in_progress`
//! while it runs, `finalizing` for one poll once answered, then `completed` (or `failed`, `expired`). A Gemini
//! batch's inline errors are `google.rpc.Status` objects, whose `code` is a gRPC code (3 INVALID_ARGUMENT, 8
//! RESOURCE_EXHAUSTED, 13 INTERNAL, 14 UNAVAILABLE), not an HTTP status.

use std::collections::{BTreeMap, HashMap};

use serde_json::{json, Value};

use crate::exchange::{Request, Response};
use crate::wire::{self, Head, Wire};
use crate::{lock, Fault, Reply, State};

/// How batches behave.
#[derive(Debug, Clone, Default)]
pub struct BatchConfig {
    /// Polls a batch answers as still running before it ends.
    pub polls: u32,
    /// A batch ends expired after answering only its first N requests (the rest come back expired).
    pub expire_after: Option<usize>,
    /// How long the answer to a batch's creation takes, after the batch is made (a client stopped meanwhile
    /// never learns its id).
    pub create_delay: std::time::Duration,
    /// The batches created first fail as a whole, the i-th (counted from 0, on every wire) as `fail[i]`.
    pub fail: Vec<BatchFailure>,
    /// Outputs no honest provider sends (see [`crate::hostile`]).
    pub hostile: Option<crate::hostile::HostileBatch>,
}

/// How a batch fails as a whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchFailure {
    /// The provider's queue is full. OpenAI: `failed` with `errors.data[].code = "token_limit_exceeded"`,
    /// "Enqueued token limit reached for {model} in organization org-fake. Limit: 90,000 enqueued tokens. Please
    /// try again once some in_progress batches have been completed." (the Batch API's `BatchError`, as users
    /// report it); Gemini: `BATCH_STATE_FAILED` with a `RESOURCE_EXHAUSTED` status.
    QueueLimit,
    /// The input was refused. OpenAI: `failed` with `errors.data[].code = "invalid_request"` naming a line;
    /// Gemini: `BATCH_STATE_FAILED` with an `INVALID_ARGUMENT` status.
    Invalid,
}

/// Every file and batch this server was given.
#[derive(Default)]
pub(crate) struct Batches {
    files: HashMap<String, String>,
    batches: BTreeMap<u64, FakeBatch>,
    /// How many times each custom id was submitted, in any batch.
    submissions: HashMap<String, u32>,
    next: u64,
}

struct FakeBatch {
    wire: Wire,
    model: String,
    tag: String,
    created_ms: i64,
    requests: Vec<(String, Value)>,
    headers: Vec<(String, String)>,
    polls_left: u32,
    /// Filled when it ends.
    ended: Option<Ended>,
    /// It fails as a whole on its first poll, unanswered.
    failure: Option<BatchFailure>,
    /// It was polled (an OpenAI batch is `validating` until then).
    polled: bool,
    /// It ended on the last poll: an OpenAI batch is `finalizing` for that poll.
    finalizing: bool,
}

struct Ended {
    answers: Vec<(String, Answer)>,
    expired: bool,
}

enum Answer {
    Ok(Value),
    Failed(u16, Value),
    Expired,
}

impl Batches {
    pub(crate) fn submissions(&self) -> HashMap<String, u32> {
        self.submissions.clone()
    }

    pub(crate) fn created(&self) -> usize {
        self.batches.len()
    }

    pub(crate) fn sizes(&self) -> Vec<usize> {
        self.batches.values().map(|b| b.requests.len()).collect()
    }
}

/// Answers a batch API request, with how long to wait before answering; `None` for any other request.
pub(crate) fn route(req: &Request, state: &State) -> Option<(Response, std::time::Duration)> {
    let path = req.path.split('?').next().unwrap_or("");
    let creates = req.method == "POST"
        && (path.ends_with("/v1/batches")
            || path.ends_with("/v1/messages/batches")
            || path.ends_with(":batchGenerateContent"));
    let delay = if creates {
        state.config.batch.create_delay
    } else {
        std::time::Duration::ZERO
    };
    answer_request(req, state).map(|r| (r, delay))
}

fn answer_request(req: &Request, state: &State) -> Option<Response> {
    let path = req.path.split('?').next().unwrap_or("");
    let get = req.method == "GET";
    let post = req.method == "POST";
    if post && path.ends_with("/v1/files") {
        return Some(openai_upload(req, state));
    }
    if post && path.ends_with("/v1/batches") {
        return Some(openai_create(req, state));
    }
    if get && path.ends_with("/v1/batches") {
        return Some(list(state, Wire::OpenAi, req));
    }
    if post && path.ends_with("/v1/messages/batches") {
        return Some(anthropic_create(req, state));
    }
    if get && path.ends_with("/v1/messages/batches") {
        return Some(list(state, Wire::Anthropic, req));
    }
    if post && path.ends_with(":batchGenerateContent") {
        return Some(gemini_create(req, state, path));
    }
    if get && path.ends_with("/v1beta/batches") {
        return Some(list(state, Wire::Gemini, req));
    }
    if get {
        if let Some(id) = path
            .split("/v1/files/")
            .nth(1)
            .and_then(|r| r.strip_suffix("/content"))
        {
            let file = lock(&state.batches).files.get(id).cloned();
            return Some(match file {
                Some(f) => ok_text(f),
                None => not_found(Wire::OpenAi, id),
            });
        }
        for (wire, prefix) in [
            (Wire::OpenAi, "/v1/batches/"),
            (Wire::Anthropic, "/v1/messages/batches/"),
            (Wire::Gemini, "/v1beta/batches/"),
        ] {
            if let Some(rest) = path.split(prefix).nth(1) {
                return Some(poll(state, wire, rest, req));
            }
        }
    }
    None
}

fn ok_json(v: Value) -> Response {
    Response {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: v.to_string(),
    }
}

fn ok_text(body: String) -> Response {
    Response {
        status: 200,
        headers: vec![("content-type".into(), "application/jsonl".into())],
        body,
    }
}

fn not_found(wire: Wire, id: &str) -> Response {
    wire::error(wire, 404, &format!("no batch or file {id:?}"))
}

fn bad(wire: Wire, msg: &str) -> Response {
    wire::error(wire, 400, msg)
}

/// Records a new batch and counts its custom ids as submitted.
fn create(state: &State, mut batch: FakeBatch) -> u64 {
    batch.polls_left = state.config.batch.polls;
    let mut b = lock(&state.batches);
    batch.failure = state.config.batch.fail.get(b.batches.len()).copied();
    for (id, _) in &batch.requests {
        *b.submissions.entry(id.clone()).or_insert(0) += 1;
    }
    b.next += 1;
    let n = b.next;
    b.batches.insert(n, batch);
    n
}

fn new_batch(
    wire: Wire,
    req: &Request,
    model: String,
    tag: String,
    requests: Vec<(String, Value)>,
) -> FakeBatch {
    FakeBatch {
        wire,
        model,
        tag,
        created_ms: now_ms(),
        requests,
        headers: req.headers.clone(),
        polls_left: 0,
        ended: None,
        failure: None,
        polled: false,
        finalizing: false,
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn openai_upload(req: &Request, state: &State) -> Response {
    let Some(file) = multipart_file(req) else {
        return bad(
            Wire::OpenAi,
            "expected a multipart/form-data body with a `file` part",
        );
    };
    let mut b = lock(&state.batches);
    b.next += 1;
    let id = format!("file-{}", b.next);
    let bytes = file.len();
    b.files.insert(id.clone(), file);
    ok_json(
        json!({"id": id, "object": "file", "bytes": bytes, "purpose": "batch", "filename": "input.jsonl"}),
    )
}

/// The `file` part of a multipart/form-data body.
fn multipart_file(req: &Request) -> Option<String> {
    let content_type = header(&req.headers, "content-type")?;
    let boundary = content_type.split("boundary=").nth(1)?.trim_matches('"');
    let body = String::from_utf8_lossy(&req.body);
    body.split(&format!("--{boundary}")).find_map(|part| {
        let (head, content) = part.split_once("\r\n\r\n")?;
        head.contains("name=\"file\"")
            .then(|| content.strip_suffix("\r\n").unwrap_or(content).to_string())
    })
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn openai_create(req: &Request, state: &State) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
        return bad(Wire::OpenAi, "body is not JSON");
    };
    let file_id = body
        .get("input_file_id")
        .and_then(Value::as_str)
        .unwrap_or("");
    if body.get("endpoint").and_then(Value::as_str) != Some("/v1/chat/completions")
        || body.get("completion_window").and_then(Value::as_str) != Some("24h")
    {
        return bad(
            Wire::OpenAi,
            "expected endpoint /v1/chat/completions and completion_window 24h",
        );
    }
    let Some(file) = lock(&state.batches).files.get(file_id).cloned() else {
        return bad(Wire::OpenAi, &format!("no file {file_id:?}"));
    };
    let mut requests = Vec::new();
    for line in file.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            return bad(Wire::OpenAi, "a line of the input file is not JSON");
        };
        let id = v
            .get("custom_id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if id.is_empty() || v.get("url").and_then(Value::as_str) != Some("/v1/chat/completions") {
            return bad(
                Wire::OpenAi,
                "each line needs a custom_id and url /v1/chat/completions",
            );
        }
        requests.push((id, v.get("body").cloned().unwrap_or(Value::Null)));
    }
    let tag = body
        .pointer("/metadata/nmb_batch")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let n = create(
        state,
        new_batch(Wire::OpenAi, req, String::new(), tag, requests),
    );
    let b = lock(&state.batches);
    ok_json(describe(&b.batches[&n], n, &host(req)))
}

fn anthropic_create(req: &Request, state: &State) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
        return bad(Wire::Anthropic, "body is not JSON");
    };
    let mut requests = Vec::new();
    for r in body
        .get("requests")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
    {
        let id = r.get("custom_id").and_then(Value::as_str).unwrap_or("");
        // "custom_id: must match ^[a-zA-Z0-9_-]{1,64}$"
        let valid = !id.is_empty()
            && id.len() <= 64
            && id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return bad(
                Wire::Anthropic,
                &format!("requests: custom_id {id:?} must match ^[a-zA-Z0-9_-]{{1,64}}$"),
            );
        }
        requests.push((
            id.to_string(),
            r.get("params").cloned().unwrap_or(Value::Null),
        ));
    }
    if requests.is_empty() {
        return bad(Wire::Anthropic, "requests: expected at least one request");
    }
    let n = create(
        state,
        new_batch(Wire::Anthropic, req, String::new(), String::new(), requests),
    );
    let b = lock(&state.batches);
    ok_json(describe(&b.batches[&n], n, &host(req)))
}

fn gemini_create(req: &Request, state: &State, path: &str) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(&req.body) else {
        return bad(Wire::Gemini, "body is not JSON");
    };
    let model = path
        .split("/models/")
        .nth(1)
        .and_then(|m| m.strip_suffix(":batchGenerateContent"))
        .unwrap_or("");
    let tag = body
        .pointer("/batch/displayName")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let items = body
        .pointer("/batch/inputConfig/requests/requests")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if tag.is_empty() || items.is_empty() {
        return bad(
            Wire::Gemini,
            "batch.displayName and batch.inputConfig.requests.requests are required",
        );
    }
    let requests = items
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let key = r
                .pointer("/metadata/key")
                .and_then(Value::as_str)
                .map_or_else(|| format!("#{i}"), str::to_string);
            (key, r.get("request").cloned().unwrap_or(Value::Null))
        })
        .collect();
    let n = create(
        state,
        new_batch(Wire::Gemini, req, model.to_string(), tag, requests),
    );
    let b = lock(&state.batches);
    ok_json(describe(&b.batches[&n], n, &host(req)))
}

fn host(req: &Request) -> String {
    header(&req.headers, "host")
        .unwrap_or("127.0.0.1")
        .to_string()
}

fn list(state: &State, wire: Wire, req: &Request) -> Response {
    let b = lock(&state.batches);
    let items: Vec<Value> = b
        .batches
        .iter()
        .rev()
        .filter(|(_, batch)| batch.wire == wire)
        .map(|(n, batch)| describe(batch, *n, &host(req)))
        .collect();
    ok_json(match wire {
        Wire::OpenAi => json!({"object": "list", "data": items, "has_more": false}),
        Wire::Anthropic => json!({"data": items, "has_more": false}),
        Wire::Gemini => json!({"operations": items}),
    })
}

/// A poll: counts down the batch's running polls, ends it (answering its requests) on the last, and answers
/// with its state, or a results file.
fn poll(state: &State, wire: Wire, rest: &str, req: &Request) -> Response {
    let (id, results) = match rest.strip_suffix("/results") {
        Some(id) => (id, true),
        None => (rest, false),
    };
    let Some(n) = number(id) else {
        return not_found(wire, id);
    };
    let ready = {
        let mut b = lock(&state.batches);
        let Some(batch) = b.batches.get_mut(&n).filter(|x| x.wire == wire) else {
            return not_found(wire, id);
        };
        if !results {
            batch.finalizing = false;
            batch.polled = true;
        }
        if batch.ended.is_none() && !results {
            batch.polls_left = batch.polls_left.saturating_sub(1);
        }
        batch.ended.is_none() && batch.polls_left == 0 && batch.failure.is_none()
    };
    if ready {
        end(state, n);
    }
    let b = lock(&state.batches);
    let batch = &b.batches[&n];
    if results {
        return ok_text(anthropic_results(batch));
    }
    ok_json(describe(batch, n, &host(req)))
}

fn number(id: &str) -> Option<u64> {
    id.trim_start_matches("batch_")
        .trim_start_matches("msgbatch_")
        .parse()
        .ok()
}

/// Answers every request of batch `n` as a single call would be answered, and writes OpenAI's result files.
fn end(state: &State, n: u64) {
    let (wire, model, headers, requests) = {
        let b = lock(&state.batches);
        let batch = &b.batches[&n];
        (
            batch.wire,
            batch.model.clone(),
            batch.headers.clone(),
            batch.requests.clone(),
        )
    };
    let keep = state.config.batch.expire_after.unwrap_or(usize::MAX);
    let answers: Vec<(String, Answer)> = requests
        .into_iter()
        .enumerate()
        .map(|(i, (id, body))| {
            let answer = if i < keep {
                answer(state, wire, &model, &headers, &body, &id)
            } else {
                Answer::Expired
            };
            (id, answer)
        })
        .collect();
    let expired = answers.iter().any(|(_, a)| matches!(a, Answer::Expired));
    let mut b = lock(&state.batches);
    if wire == Wire::OpenAi {
        let (output, errors) = openai_files(&answers);
        b.files.insert(format!("file-out-{n}"), output);
        b.files.insert(format!("file-err-{n}"), errors);
    }
    if let Some(batch) = b.batches.get_mut(&n) {
        batch.ended = Some(Ended { answers, expired });
        batch.finalizing = wire == Wire::OpenAi;
    }
}

/// One request of a batch, handled as the same request sent alone would be.
fn answer(
    state: &State,
    wire: Wire,
    model: &str,
    headers: &[(String, String)],
    body: &Value,
    id: &str,
) -> Answer {
    let path = match wire {
        Wire::OpenAi => "/v1/chat/completions".to_string(),
        Wire::Anthropic => "/v1/messages".to_string(),
        Wire::Gemini => format!("/v1beta/models/{model}:generateContent"),
    };
    let head = Head {
        path: &path,
        headers: headers.to_vec(),
    };
    let path_model = (wire == Wire::Gemini).then(|| model.to_string());
    let bytes = body.to_string().into_bytes();
    let received =
        match wire::parse_request(wire, path_model, head, &bytes, state.config.hash_images) {
            Ok(mut r) => {
                r.batch = Some(id.to_string());
                if state.config.keep_bodies {
                    r.body = Some(body.to_string().into());
                }
                r
            }
            Err(msg) => return failed(wire::error(wire, 400, &msg)),
        };
    let (received, reply) = state.decide(received);
    let response = match reply {
        Reply::Texts(texts) => wire::success(&received, &texts),
        Reply::Raw { status, body, .. } => Response {
            status,
            headers: Vec::new(),
            body,
        },
        Reply::Fault(Fault::Slow(_)) => match (state.responder)(&received) {
            Reply::Texts(t) => wire::success(&received, &t),
            _ => wire::success(&received, &["slow answer".to_string()]),
        },
        Reply::Fault(f) => wire::fault_response(&received, &f)
            .unwrap_or_else(|| wire::error(wire, 500, "connection reset")),
    };
    failed(response)
}

/// A response as a batch answer: its body, and whether it failed.
fn failed(r: Response) -> Answer {
    let body = serde_json::from_str(&r.body).unwrap_or(Value::String(r.body));
    if (200..300).contains(&r.status) {
        Answer::Ok(body)
    } else {
        Answer::Failed(r.status, body)
    }
}

fn openai_files(answers: &[(String, Answer)]) -> (String, String) {
    let mut output = String::new();
    let mut errors = String::new();
    for (i, (id, a)) in answers.iter().enumerate() {
        let (line, ok) = match a {
            Answer::Ok(body) => (
                json!({"id": format!("batch_req_{i}"), "custom_id": id, "response": {"status_code": 200, "request_id": format!("req_{i}"), "body": body}, "error": null}),
                true,
            ),
            Answer::Failed(status, body) => (
                json!({"id": format!("batch_req_{i}"), "custom_id": id, "response": {"status_code": status, "request_id": format!("req_{i}"), "body": body}, "error": null}),
                false,
            ),
            Answer::Expired => (
                json!({"id": format!("batch_req_{i}"), "custom_id": id, "response": null, "error": {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}}),
                false,
            ),
        };
        let file = if ok { &mut output } else { &mut errors };
        file.push_str(&line.to_string());
        file.push('\n');
    }
    (output, errors)
}

fn anthropic_results(batch: &FakeBatch) -> String {
    let Some(ended) = &batch.ended else {
        return String::new();
    };
    let mut out = String::new();
    for (id, a) in &ended.answers {
        let result = match a {
            Answer::Ok(message) => json!({"type": "succeeded", "message": message}),
            Answer::Failed(_, error) => json!({"type": "errored", "error": error}),
            Answer::Expired => json!({"type": "expired"}),
        };
        out.push_str(&json!({"custom_id": id, "result": result}).to_string());
        out.push('\n');
    }
    out
}

/// The batch object each provider answers with.
fn describe(batch: &FakeBatch, n: u64, host: &str) -> Value {
    let total = batch.requests.len();
    let ended = batch.ended.as_ref();
    let count = |f: fn(&Answer) -> bool| {
        ended.map_or(0, |e| e.answers.iter().filter(|(_, a)| f(a)).count())
    };
    let ok = count(|a| matches!(a, Answer::Ok(_)));
    let failed = count(|a| matches!(a, Answer::Failed(..)));
    let expired = count(|a| matches!(a, Answer::Expired));
    let created = crate::support::rfc3339(batch.created_ms);
    match batch.wire {
        Wire::OpenAi => {
            let status = match (ended, batch.failure) {
                _ if !batch.polled => "validating",
                (_, Some(_)) => "failed",
                (None, None) => "in_progress",
                (Some(_), None) if batch.finalizing => "finalizing",
                (Some(e), None) if e.expired => "expired",
                (Some(_), None) => "completed",
            };
            let files = ended.filter(|_| !batch.finalizing);
            json!({
                "id": format!("batch_{n}"), "object": "batch", "endpoint": "/v1/chat/completions",
                "errors": batch.failure.filter(|_| batch.polled).map(|f| openai_errors(f, &batch.requests)),
                "input_file_id": "file", "completion_window": "24h", "status": status,
                "output_file_id": files.map(|_| format!("file-out-{n}")),
                "error_file_id": files.map(|_| format!("file-err-{n}")),
                "created_at": batch.created_ms / 1000,
                "request_counts": {"total": total, "completed": ok, "failed": failed + expired},
                "metadata": {"nmb_batch": batch.tag},
            })
        }
        Wire::Anthropic => json!({
            "id": format!("msgbatch_{n}"), "type": "message_batch",
            "processing_status": if ended.is_some() { "ended" } else { "in_progress" },
            "request_counts": {
                "processing": if ended.is_some() { 0 } else { total },
                "succeeded": ok, "errored": failed, "canceled": 0, "expired": expired,
            },
            "created_at": created,
            "ended_at": ended.map(|_| crate::support::rfc3339(now_ms())),
            "results_url": ended.map(|_| format!("http://{host}/v1/messages/batches/msgbatch_{n}/results")),
        }),
        Wire::Gemini => {
            let failure = batch.failure.filter(|_| batch.polled);
            let state = match (ended, failure) {
                (_, Some(_)) => "BATCH_STATE_FAILED",
                (None, None) => "BATCH_STATE_RUNNING",
                (Some(e), None) if e.expired => "BATCH_STATE_EXPIRED",
                (Some(_), None) => "BATCH_STATE_SUCCEEDED",
            };
            let mut op = json!({
                "name": format!("batches/{n}"),
                "metadata": {
                    "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
                    "model": format!("models/{}", batch.model), "displayName": batch.tag, "state": state,
                    "createTime": created,
                },
                "done": ended.is_some() || failure.is_some(),
            });
            if let Some(f) = failure {
                op["error"] = match f {
                    BatchFailure::QueueLimit => json!({"code": 8, "status": "RESOURCE_EXHAUSTED",
                        "message": "Enqueued token limit reached for this model. Please try again later."}),
                    BatchFailure::Invalid => json!({"code": 3, "status": "INVALID_ARGUMENT",
                        "message": "Request 0 is invalid: contents is required."}),
                };
            }
            if let Some(e) = ended.filter(|e| !e.expired) {
                let responses: Vec<Value> = e
                    .answers
                    .iter()
                    .map(|(_, a)| match a {
                        Answer::Ok(body) => json!({"response": body}),
                        Answer::Failed(status, body) => json!({"error": {
                            "code": grpc_code(*status),
                            "message": body.pointer("/error/message").cloned().unwrap_or(Value::Null),
                            "status": body.pointer("/error/status").cloned().unwrap_or(Value::Null),
                            "details": body.pointer("/error/details").cloned().unwrap_or(json!([])),
                        }}),
                        Answer::Expired => json!({"error": {"code": 4, "message": "expired", "status": "DEADLINE_EXCEEDED"}}),
                    })
                    .collect();
                op["response"] = json!({
                    "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput",
                    "inlinedResponses": {"inlinedResponses": responses},
                });
            }
            op
        }
    }
}

/// The gRPC code of an HTTP status, as `google.rpc.Code` maps them (a `google.rpc.Status` carries the gRPC code).
fn grpc_code(status: u16) -> u32 {
    match status {
        400 => 3,
        401 => 16,
        403 => 7,
        404 => 5,
        409 => 10,
        429 => 8,
        499 => 1,
        501 => 12,
        503 => 14,
        504 => 4,
        402..=498 => 9,
        _ => 13,
    }
}

/// OpenAI's `errors` of a failed batch (a list of `BatchError`: `code`, `message`, `param`, `line`).
fn openai_errors(failure: BatchFailure, requests: &[(String, Value)]) -> Value {
    let model = requests
        .first()
        .and_then(|(_, body)| body.get("model"))
        .and_then(Value::as_str)
        .unwrap_or("the model");
    let error = match failure {
        BatchFailure::QueueLimit => json!({
            "code": "token_limit_exceeded", "param": null, "line": null,
            "message": format!("Enqueued token limit reached for {model} in organization org-fake. Limit: 90,000 enqueued tokens. Please try again once some in_progress batches have been completed."),
        }),
        BatchFailure::Invalid => json!({
            "code": "invalid_request", "param": "body", "line": 1,
            "message": "The request body is not valid for /v1/chat/completions.",
        }),
    };
    json!({"object": "list", "data": [error]})
}
