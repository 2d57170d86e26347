//! A loopback HTTP/1.1 server that speaks the real OpenAI chat-completions, Anthropic messages and Gemini
//! generateContent wire formats, for tests, benches and the kill test.
//!
//! This crate owns the server: it parses real request JSON (decoding inline images and hashing their bytes),
//! records every request for assertions (and optionally as JSON lines), answers with real response JSON
//! (usage fields included), refuses what OpenAI's reasoning models refuse ([`is_reasoning_model`]: `max_tokens`,
//! a temperature other than 1, `top_p`) as OpenAI does, what Claude 4.5 models and Gemini's thinking models
//! refuse (`temperature` with `top_p`, thinking levels and budgets) as Anthropic and Google do, and injects
//! faults on demand (among them a model out of tokens while thinking, quota refusals and Gemini's `RetryInfo`):
//! scripted per request, by
//! `FAULT:<spec>` markers in prompts, or every N-th request; and it runs the three providers' batch APIs over
//! the same handling ([`batch`]); its hostile mode ([`hostile`]) sends what no honest server does (bodies of any
//! size generated as they go, lying lengths, compression bombs, deep nesting, numbers at the limits, dripping
//! bodies, broken batch outputs). It is test support: it does not implement any model, and nmb's own code never
//! depends on it outside tests and benches. [`support`] holds what those tests and benches share besides the
//! server: noise PNGs and process measurements (CPU time, peak memory). [`judge`] plays a judge with injected
//! leanings (noise, a length bias, an effect of seeing the model's thinking) for tests with known truth;
//! [`visual_judge`] one that can tell a visual hallucination from a reasoning failure only from the image;
//! [`probe`] plays a model that defers to a suggested diagnosis with a designed probability.
//! [`vision`] plays a model that reads a diagnosis marked in the pixels and one that ignores images.

pub mod batch;
mod exchange;
pub mod fault;
mod fault_error;
pub mod hostile;
mod http;
pub mod judge;
pub mod probe;
pub mod support;
pub mod vision;
pub mod visual_judge;
pub mod wire;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;

pub use fault::{find_marker, parse_schedule, Fault, FaultParseError};
pub use hostile::{Hostile, HostileBatch};
pub use wire::{
    is_reasoning_model, AuthSeen, ReceivedMessage, ReceivedParams, ReceivedPart, ReceivedRequest,
    Wire,
};

/// What to answer one request with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A success in the request's wire format, one choice per text.
    Texts(Vec<String>),
    Fault(Fault),
    /// Exactly this status, extra headers and body.
    Raw {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
}

pub type Responder = Arc<dyn Fn(&ReceivedRequest) -> Reply + Send + Sync>;

#[derive(Clone)]
pub struct Config {
    /// 0 picks a free port.
    pub port: u16,
    pub backlog: i32,
    /// Added before every answer.
    pub latency: Duration,
    /// Decode inline images and hash their bytes (turn off only where the server's CPU matters more).
    pub hash_images: bool,
    /// Keep every request in memory for [`FakeServer::requests`].
    pub record: bool,
    /// With `record`: keep each request's body as sent too ([`ReceivedRequest::body`]), for tests that compare
    /// bytes. Off by default: bodies carry every image.
    pub keep_bodies: bool,
    /// Also append every request as a JSON line here (auth values never included).
    pub log_path: Option<PathBuf>,
    /// Fault for every `n`-th request (1-based: requests n, 2n, ...).
    pub fault_every: Option<(u64, Fault)>,
    pub responder: Responder,
    /// How the batch APIs behave.
    pub batch: batch::BatchConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            port: 0,
            backlog: 4096,
            latency: Duration::ZERO,
            hash_images: true,
            record: true,
            keep_bodies: false,
            log_path: None,
            fault_every: None,
            responder: Arc::new(default_reply),
            batch: batch::BatchConfig::default(),
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("port", &self.port)
            .field("latency", &self.latency)
            .field("hash_images", &self.hash_images)
            .field("log_path", &self.log_path)
            .field("fault_every", &self.fault_every)
            .finish_non_exhaustive()
    }
}

/// The deterministic default answer: derived from the conversation hash, a JSON differential when JSON output
/// was asked for, one text per requested sample.
pub fn default_reply(req: &ReceivedRequest) -> Reply {
    const DIAGNOSES: [&str; 8] = [
        "Multiple sclerosis",
        "Glioblastoma",
        "Ischemic stroke",
        "Autoimmune encephalitis",
        "Creutzfeldt-Jakob disease",
        "Cerebral venous thrombosis",
        "Progressive multifocal leukoencephalopathy",
        "Neurosarcoidosis",
    ];
    let h = &req.conversation_sha256;
    let seed = u64::from_str_radix(h.get(..8).unwrap_or("0"), 16).unwrap_or(0) as usize;
    let texts = (0..req.samples() as usize)
        .map(|i| {
            if req.params.json {
                let items: Vec<_> = (0..3)
                    .map(|r| {
                        serde_json::json!({
                            "rank": r + 1,
                            "diagnosis": DIAGNOSES[(seed + i + r) % DIAGNOSES.len()],
                            "evidence": format!("finding {} of conversation {}", r + 1, &h[..8.min(h.len())]),
                        })
                    })
                    .collect();
                serde_json::json!({ "differential": items }).to_string()
            } else {
                format!(
                    "Sample {i}: the most likely diagnosis is {} (conversation {}).",
                    DIAGNOSES[(seed + i) % DIAGNOSES.len()],
                    &h[..8.min(h.len())]
                )
            }
        })
        .collect();
    Reply::Texts(texts)
}

/// A sampled answer: [`default_reply`]'s, told apart by the request's arrival number, as a real model at a
/// temperature above 0 answers each call anew. Two calls never get the same text, so answers that should come
/// from separate calls (samples, judge repeats) can be seen to.
pub fn varied_reply(req: &ReceivedRequest) -> Reply {
    let mark = |text: String| match serde_json::from_str::<serde_json::Value>(&text) {
        // A JSON answer stays JSON of the same shape, with one more field.
        Ok(serde_json::Value::Object(mut fields)) => {
            fields.insert("answer".into(), req.seq.into());
            serde_json::Value::Object(fields).to_string()
        }
        _ => format!("{text} (answer {})", req.seq),
    };
    match default_reply(req) {
        Reply::Texts(texts) => Reply::Texts(texts.into_iter().map(mark).collect()),
        other => other,
    }
}

/// One line of the JSON-lines request log.
#[derive(Serialize)]
struct LogLine<'a> {
    #[serde(flatten)]
    request: &'a ReceivedRequest,
    /// `ok` or the fault's textual form.
    reply: String,
}

pub(crate) struct State {
    config: Config,
    responder: Responder,
    requests: Mutex<Vec<ReceivedRequest>>,
    count: AtomicU64,
    bad: AtomicU64,
    /// Well-formed requests being answered right now, and the most there ever were at once.
    in_flight: AtomicU64,
    peak_in_flight: AtomicU64,
    /// The numbers of the requests being answered right now (their reply not yet handed to the socket).
    open: Mutex<BTreeSet<u64>>,
    queue: Mutex<VecDeque<Option<Fault>>>,
    marker_seen: Mutex<HashMap<(String, String), u64>>,
    /// Prompt-cache prefixes written so far (Anthropic's prompt cache; they never expire here).
    cached_prefixes: Mutex<std::collections::HashSet<String>>,
    batches: Mutex<batch::Batches>,
    log: Option<Mutex<BufWriter<File>>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counts a request as being answered while it lives.
pub(crate) struct Answering<'a>(&'a State);

impl<'a> Answering<'a> {
    pub(crate) fn enter(state: &'a State) -> Self {
        let now = state.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        state.peak_in_flight.fetch_max(now, Ordering::SeqCst);
        Answering(state)
    }
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Keeps a numbered request in [`State::open`] while it lives.
pub(crate) struct Open<'a>(&'a State, u64);

impl<'a> Open<'a> {
    pub(crate) fn enter(state: &'a State, seq: u64) -> Self {
        lock(&state.open).insert(seq);
        Open(state, seq)
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        lock(&self.0.open).remove(&self.1);
    }
}

impl State {
    fn count_bad(&self) {
        self.bad.fetch_add(1, Ordering::Relaxed);
    }

    /// Numbers the request, picks its reply (queued fault, then prompt marker, then every-N fault, then the
    /// responder) and records it.
    pub(crate) fn decide(&self, mut req: ReceivedRequest) -> (ReceivedRequest, Reply) {
        req.seq = self.count.fetch_add(1, Ordering::SeqCst);
        self.prompt_cache(&mut req.params);
        let fault = self
            .queued_fault()
            .or_else(|| self.marker_fault(&req))
            .or_else(|| {
                self.config
                    .fault_every
                    .as_ref()
                    .filter(|(n, _)| *n > 0 && (req.seq + 1).is_multiple_of(*n))
                    .map(|(_, f)| f.clone())
            });
        let reply = match fault {
            Some(f) => Reply::Fault(f),
            None => wire::refusal(&req).unwrap_or_else(|| (self.responder)(&req)),
        };
        self.log(&req, &reply);
        if self.config.record {
            lock(&self.requests).push(req.clone());
        }
        (req, reply)
    }

    /// Anthropic's prompt cache as documented: a marked prefix of at least 1,024 tokens (the minimum of most
    /// Claude models; below it "nothing is cached") is written on first sight and read after.
    fn prompt_cache(&self, params: &mut ReceivedParams) {
        const MIN_TOKENS: u64 = 1024;
        let Some((hash, tokens)) = &params.cache_prefix else {
            return;
        };
        if *tokens < MIN_TOKENS {
            return;
        }
        if lock(&self.cached_prefixes).insert(hash.clone()) {
            params.cache_write = *tokens;
        } else {
            params.cache_read = *tokens;
        }
    }

    fn queued_fault(&self) -> Option<Fault> {
        lock(&self.queue).pop_front().flatten()
    }

    fn marker_fault(&self, req: &ReceivedRequest) -> Option<Fault> {
        let marker = find_marker(&req.all_text())?;
        let Some(times) = marker.times else {
            return Some(marker.fault);
        };
        let mut seen = lock(&self.marker_seen);
        let n = seen
            .entry((marker.text, req.conversation_sha256.clone()))
            .or_insert(0);
        *n += 1;
        (*n <= times).then_some(marker.fault)
    }

    fn log(&self, req: &ReceivedRequest, reply: &Reply) {
        let Some(log) = &self.log else { return };
        let label = match reply {
            Reply::Texts(_) => "ok".to_string(),
            Reply::Fault(f) => f.to_string(),
            Reply::Raw { status, .. } => format!("raw:{status}"),
        };
        let line = LogLine {
            request: req,
            reply: label,
        };
        if let Ok(text) = serde_json::to_string(&line) {
            let mut w = lock(log);
            // Flushed per line: a test may read the log while the server runs.
            let _ = writeln!(w, "{text}").and_then(|_| w.flush());
        }
    }
}

/// A running server. Dropping it stops accepting connections.
pub struct FakeServer {
    addr: SocketAddr,
    state: Arc<State>,
    accept: Option<tokio::task::JoinHandle<()>>,
    runtime: Option<tokio::runtime::Runtime>,
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open request log {path}: {source}")]
    Log {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot start the server runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

impl FakeServer {
    /// Starts on the current tokio runtime.
    pub async fn start(config: Config) -> Result<FakeServer, ServerError> {
        let (listener, state) = prepare(config)?;
        let addr = local_addr(&listener, state.config.port)?;
        let accept = tokio::spawn(http::accept_loop(listener, state.clone()));
        Ok(FakeServer {
            addr,
            state,
            accept: Some(accept),
            runtime: None,
        })
    }

    /// Starts on its own multi-threaded runtime with `threads` workers, independent of the caller's runtime
    /// (for sync callers and benches).
    pub fn start_in_background(config: Config, threads: usize) -> Result<FakeServer, ServerError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads.max(1))
            .thread_name("fake-server")
            .enable_all()
            .build()
            .map_err(ServerError::Runtime)?;
        let (listener, state, addr) = runtime.block_on(async {
            let (listener, state) = prepare(config)?;
            let addr = local_addr(&listener, state.config.port)?;
            Ok::<_, ServerError>((listener, state, addr))
        })?;
        let accept = runtime.spawn(http::accept_loop(listener, state.clone()));
        Ok(FakeServer {
            addr,
            state,
            accept: Some(accept),
            runtime: Some(runtime),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT` (append `/v1` for OpenAI-style base URLs).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests answered or faulted so far (well-formed ones; see [`FakeServer::bad_requests`]).
    pub fn request_count(&self) -> u64 {
        self.state.count.load(Ordering::SeqCst)
    }

    /// The most well-formed requests this server was answering at the same time (for concurrency limits).
    pub fn peak_in_flight(&self) -> u64 {
        self.state.peak_in_flight.load(Ordering::SeqCst)
    }

    /// The numbers ([`ReceivedRequest::seq`]) of the requests being answered at this moment: received, their
    /// reply not yet written. Taken just after a client is killed, these are the requests it had in flight
    /// whose answers it can never have stored.
    pub fn open_requests(&self) -> Vec<u64> {
        lock(&self.state.open).iter().copied().collect()
    }

    /// Requests the server could not parse or route (a client bug, answered with 400/404).
    pub fn bad_requests(&self) -> u64 {
        self.state.bad.load(Ordering::SeqCst)
    }

    /// Every recorded request, in arrival order.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        lock(&self.state.requests).clone()
    }

    /// How many times each custom id was submitted in a batch, across every batch API.
    pub fn batch_submissions(&self) -> HashMap<String, u32> {
        lock(&self.state.batches).submissions()
    }

    /// Batches created so far.
    pub fn batches_created(&self) -> usize {
        lock(&self.state.batches).created()
    }

    /// How many requests each batch held, in creation order.
    pub fn batch_sizes(&self) -> Vec<usize> {
        lock(&self.state.batches).sizes()
    }

    pub fn clear_requests(&self) {
        lock(&self.state.requests).clear();
    }

    /// Applies these faults to the next requests in order (`None` lets one through normally).
    pub fn push_faults(&self, faults: impl IntoIterator<Item = Option<Fault>>) {
        lock(&self.state.queue).extend(faults);
    }
}

fn prepare(config: Config) -> Result<(tokio::net::TcpListener, Arc<State>), ServerError> {
    let listener = http::bind(config.port, config.backlog).map_err(|source| ServerError::Bind {
        port: config.port,
        source,
    })?;
    let log = match &config.log_path {
        None => None,
        Some(path) => {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|source| ServerError::Log {
                    path: path.clone(),
                    source,
                })?;
            Some(Mutex::new(BufWriter::new(f)))
        }
    };
    let state = Arc::new(State {
        responder: config.responder.clone(),
        config,
        requests: Mutex::default(),
        count: AtomicU64::new(0),
        bad: AtomicU64::new(0),
        in_flight: AtomicU64::new(0),
        peak_in_flight: AtomicU64::new(0),
        open: Mutex::new(BTreeSet::new()),
        queue: Mutex::default(),
        marker_seen: Mutex::default(),
        cached_prefixes: Mutex::default(),
        batches: Mutex::default(),
        log,
    });
    Ok((listener, state))
}

fn local_addr(l: &tokio::net::TcpListener, port: u16) -> Result<SocketAddr, ServerError> {
    l.local_addr()
        .map_err(|source| ServerError::Bind { port, source })
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(a) = self.accept.take() {
            a.abort();
        }
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The `nmb-fake-server` command line: parses `args` (without the program name), starts the server, prints
/// `LISTENING <port>` on stdout and serves until killed.
pub fn run_cli(args: &[String]) -> Result<(), String> {
    let opts = CliOptions::parse(args)?;
    let server =
        FakeServer::start_in_background(opts.config, opts.threads).map_err(|e| e.to_string())?;
    server.push_faults(opts.schedule);
    println!("LISTENING {}", server.port());
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    loop {
        std::thread::park();
    }
}

pub const USAGE: &str = "usage: nmb-fake-server [--port N] [--latency-ms N] [--faults LIST] [--fault-every N:FAULT] \
[--log PATH] [--threads N] [--no-image-hash]
  LIST is comma-separated faults applied to the first requests in order (ok = no fault), e.g. 429:1,ok,500,reset
  FAULT is one of 429[:SECS] 429ms:MILLIS retryinfo:SECS 500 503 529 (any status) noretry:STATUS context reset
  slow:MILLIS hang malformed empty refusal exhausted quota,
  or hostile: huge:BYTES huge-close:BYTES lie:BYTES drip:MILLIS gzip-bomb:BYTES deflate-bomb:BYTES encoding:NAME
  deep:DEPTH numbers:2^63|max|negative|float|huge-float
  Prompts containing FAULT:<fault>[*K] get that fault (the first K times for the same conversation).";

struct CliOptions {
    config: Config,
    schedule: Vec<Option<Fault>>,
    threads: usize,
}

impl CliOptions {
    fn parse(args: &[String]) -> Result<CliOptions, String> {
        let mut o = CliOptions {
            // Nothing reads the in-memory record in a separate process; the log file is the record.
            config: Config {
                record: false,
                ..Config::default()
            },
            schedule: Vec::new(),
            threads: 2,
        };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value = || {
                it.next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))
            };
            let number = |v: String| {
                v.parse::<u64>()
                    .map_err(|_| format!("{flag}: {v:?} is not a number"))
            };
            match flag.as_str() {
                "--port" => o.config.port = number(value()?)? as u16,
                "--latency-ms" => o.config.latency = Duration::from_millis(number(value()?)?),
                "--faults" => o.schedule = parse_schedule(&value()?).map_err(|e| e.to_string())?,
                "--fault-every" => {
                    let v = value()?;
                    let (n, f) = v
                        .split_once(':')
                        .ok_or_else(|| format!("--fault-every {v:?}: expected N:FAULT"))?;
                    let n = number(n.to_string())?;
                    o.config.fault_every =
                        Some((n, f.parse().map_err(|e: FaultParseError| e.to_string())?));
                }
                "--log" => o.config.log_path = Some(PathBuf::from(value()?)),
                "--threads" => o.threads = number(value()?)? as usize,
                "--no-image-hash" => o.config.hash_images = false,
                "-h" | "--help" => return Err(USAGE.to_string()),
                other => return Err(format!("unknown option {other:?}\n{USAGE}")),
            }
        }
        Ok(o)
    }
}
