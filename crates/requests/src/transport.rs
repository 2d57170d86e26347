//! What every HTTP call shares: one pooled client, a cache of base64-encoded images, API keys, the caps every
//! response is read under, and the send-and-classify step.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine;
use nmb_chat::ImagePart;

use crate::backend::ChatRequest;
use crate::body::{response_cap, Body, Limits, ERROR_BODY_BYTES};
use crate::error::{
    from_reqwest, parse_retry_after, snippet, CallError, ErrorClass, UNSUPPORTED_INPUT_HINT,
};

pub use nmb_chat::ApiKey;

#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub connect_timeout: Duration,
    /// The deadline of each HTTP exchange, from sending the request to the last byte of its body (`--timeout`;
    /// `None`: none). A model call's attempt also has the scheduler's timeout; a batch API request has this one.
    pub request_timeout: Option<Duration>,
    /// The most bytes any response may decode to, in place of each request's default
    /// ([`crate::body::response_cap`]; `--max-response-mib`). It also caps each line of a batch's output.
    pub max_response_bytes: Option<u64>,
    pub pool_idle_timeout: Duration,
    pub pool_max_idle_per_host: usize,
    /// Upper bound on the base64 image cache, in encoded bytes.
    pub image_cache_bytes: usize,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Some(Duration::from_secs(300)),
            max_response_bytes: None,
            pool_idle_timeout: Duration::from_secs(90),
            pool_max_idle_per_host: 256,
            image_cache_bytes: 32 << 20,
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot build the HTTP client: {0}")]
pub struct TransportError(String);

/// One HTTP client (connection pool) and image cache shared by every backend of a run. Cheap to clone.
#[derive(Clone)]
pub struct Transport {
    pub(crate) client: reqwest::Client,
    pub(crate) images: Arc<Base64Cache>,
    timeout: Option<Duration>,
    max_response_bytes: Option<u64>,
}

impl Transport {
    pub fn new(opts: &HttpOptions) -> Result<Transport, TransportError> {
        // The deadline is kept here rather than in the client: `send` holds it over headers and body alike.
        let client = reqwest::Client::builder()
            .connect_timeout(opts.connect_timeout)
            .pool_idle_timeout(opts.pool_idle_timeout)
            .pool_max_idle_per_host(opts.pool_max_idle_per_host)
            .tcp_nodelay(true)
            .user_agent(concat!("nmb/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| TransportError(e.to_string()))?;
        Ok(Transport {
            client,
            images: Arc::new(Base64Cache::new(opts.image_cache_bytes)),
            timeout: opts.request_timeout,
            max_response_bytes: opts.max_response_bytes,
        })
    }

    /// The most bytes the answer to `req` may take: the given cap, else [`response_cap`] of its parameters.
    pub fn response_cap(&self, req: &ChatRequest) -> u64 {
        self.max_response_bytes
            .unwrap_or_else(|| response_cap(&req.params, req.n))
    }

    /// How a response of at most `max_bytes` is read.
    pub(crate) fn limits(&self, max_bytes: u64) -> Limits {
        Limits {
            max_bytes,
            timeout: self.timeout,
        }
    }

    pub fn image_cache(&self) -> &Base64Cache {
        &self.images
    }
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Transport")
    }
}

/// Base64 encodings of images keyed by content hash: an image shared by many requests (samples of one task,
/// turns of a conversation) is encoded once. Bounded; the oldest entries go first.
pub struct Base64Cache {
    budget: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    map: HashMap<String, Arc<str>>,
    order: VecDeque<String>,
    bytes: usize,
    hits: u64,
    misses: u64,
}

impl Base64Cache {
    pub fn new(budget_bytes: usize) -> Self {
        Base64Cache {
            budget: budget_bytes,
            inner: Mutex::new(CacheInner::default()),
        }
    }

    /// The standard base64 of `image.bytes`.
    pub fn encode(&self, image: &ImagePart) -> Arc<str> {
        if let Some(hit) = self.lookup(&image.sha256) {
            return hit;
        }
        // Encoded outside the lock: two threads may encode the same image once each, which is harmless.
        let encoded: Arc<str> = base64::engine::general_purpose::STANDARD
            .encode(&image.bytes)
            .into();
        if !image.sha256.is_empty() && encoded.len() <= self.budget {
            self.insert(&image.sha256, encoded.clone());
        }
        encoded
    }

    fn lookup(&self, sha: &str) -> Option<Arc<str>> {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let hit = g.map.get(sha).cloned();
        match hit {
            Some(_) => g.hits += 1,
            None => g.misses += 1,
        }
        hit
    }

    fn insert(&self, sha: &str, encoded: Arc<str>) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.map.contains_key(sha) {
            return;
        }
        g.bytes += encoded.len();
        g.map.insert(sha.to_string(), encoded);
        g.order.push_back(sha.to_string());
        while g.bytes > self.budget {
            let Some(old) = g.order.pop_front() else {
                break;
            };
            if let Some(v) = g.map.remove(&old) {
                g.bytes -= v.len();
            }
        }
    }

    /// (hits, misses) so far.
    pub fn stats(&self) -> (u64, u64) {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        (g.hits, g.misses)
    }
}

/// Serializes a shared string (serde's `rc` feature is not enabled workspace-wide).
pub(crate) fn ser_arc_str<S: serde::Serializer>(v: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v)
}

/// A successful (2xx) HTTP exchange.
pub(crate) struct HttpReply {
    pub body: String,
    pub latency: Duration,
}

/// Sends a prepared request and reads its whole body under `limits`; every non-2xx outcome is a [`CallError`]
/// of the class `classify` gives its status and body, with `secret` redacted from anything that could carry it.
pub(crate) async fn send(
    req: reqwest::RequestBuilder,
    secret: Option<&str>,
    classify: impl Fn(u16, &str) -> ErrorClass,
    limits: Limits,
) -> Result<HttpReply, CallError> {
    let started = Instant::now();
    let body = open(req, secret, classify, limits).await?;
    let bytes = body.all().await.map_err(|e| e.redacted(secret))?;
    let latency = started.elapsed();
    let body = String::from_utf8_lossy(&bytes).into_owned();
    Ok(HttpReply { body, latency })
}

/// Sends a prepared request and returns its 2xx body, unread, to be read under `limits` (the deadline counts
/// from now). A non-2xx answer is read here, at most [`ERROR_BODY_BYTES`] of it, into its [`CallError`].
pub(crate) async fn open(
    req: reqwest::RequestBuilder,
    secret: Option<&str>,
    classify: impl Fn(u16, &str) -> ErrorClass,
    limits: Limits,
) -> Result<Body, CallError> {
    let deadline = limits
        .timeout
        .and_then(|t| tokio::time::Instant::now().checked_add(t));
    let sent = match deadline {
        Some(at) => tokio::time::timeout_at(at, req.send()).await.map_err(|_| {
            let t = limits.timeout.unwrap_or_default();
            CallError::new(
                ErrorClass::Timeout,
                format!("no response headers within {t:?}"),
            )
        })?,
        None => req.send().await,
    };
    let resp = sent.map_err(|e| from_reqwest(e).redacted(secret))?;
    let status = resp.status().as_u16();
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let retry_after = parse_retry_after(
        header("retry-after").as_deref(),
        header("retry-after-ms").as_deref(),
        SystemTime::now(),
    );
    // Not a standard header; the official SDKs obey it over the status ("If the server explicitly says whether
    // or not to retry, obey", openai-python's and anthropic-sdk's `_should_retry`).
    let should_retry = match header("x-should-retry").as_deref() {
        Some("true") => Some(true),
        Some("false") => Some(false),
        _ => None,
    };
    let ok = (200..300).contains(&status);
    let max_bytes = if ok { limits.max_bytes } else { u64::MAX };
    let body = Body::new(resp, max_bytes, deadline, limits.timeout).map_err(|e| e.redacted(secret));
    if ok {
        return body;
    }
    // The status decides the class; an error body that cannot be read whole still has one.
    let bytes = match body {
        Ok(b) => b.prefix(ERROR_BODY_BYTES).await.unwrap_or_default(),
        Err(_) => Vec::new(),
    };
    let mut body = String::from_utf8_lossy(&bytes).into_owned();
    if let Some(s) = secret {
        // Redacted before anything is cut from it, and a body cut short may end inside the key.
        body = crate::error::redact(&body, s);
        if bytes.len() as u64 >= ERROR_BODY_BYTES {
            body = without_partial(body, s);
        }
    }
    let class = classify(status, &body);
    let mut message = format!("HTTP {status}: {}", snippet(&body, 300));
    if class == ErrorClass::UnsupportedInput {
        message = format!("{message} ({UNSUPPORTED_INPUT_HINT})");
    }
    let mut error = CallError::new(class, message);
    error.should_retry = should_retry;
    Err(error
        .with_status(status)
        .with_retry_after(retry_after)
        .with_raw(body)
        .redacted(secret))
}

/// `text` without a tail that could be the start of `secret` (text cut short may end inside a key).
pub(crate) fn without_partial(mut text: String, secret: &str) -> String {
    let partial = (1..secret.len())
        .rev()
        .find(|&n| secret.is_char_boundary(n) && text.ends_with(&secret[..n]));
    if let Some(n) = partial {
        text.truncate(text.len() - n);
    }
    text
}

/// A JSON body that parsed but lacks what the wire format promises.
pub(crate) fn malformed(what: impl fmt::Display, raw: String) -> CallError {
    CallError::new(ErrorClass::MalformedResponse, what.to_string()).with_raw(raw)
}

/// Parses a 2xx body into the wire type, or a malformed-response error naming the parse failure.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(
    wire: &str,
    body: &str,
) -> Result<T, String> {
    serde_json::from_str(body).map_err(|e| {
        format!(
            "{wire} response is not the expected JSON ({e}): {}",
            snippet(body, 200)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn img(sha: &str, n: usize) -> ImagePart {
        ImagePart {
            sha256: sha.into(),
            mime: "image/png".into(),
            bytes: vec![7u8; n].into(),
        }
    }

    #[test]
    fn cache_encodes_once_and_stays_bounded() {
        let c = Base64Cache::new(100);
        let a = c.encode(&img("a", 30)); // 40 encoded bytes
        let a2 = c.encode(&img("a", 30));
        assert!(Arc::ptr_eq(&a, &a2));
        assert_eq!(c.stats(), (1, 1));
        c.encode(&img("b", 30));
        c.encode(&img("c", 30)); // 120 > 100: "a" is evicted
        let a3 = c.encode(&img("a", 30));
        assert!(!Arc::ptr_eq(&a, &a3));
        assert_eq!(&*a3, &*a);
        assert_eq!(c.stats(), (1, 4));
    }

    #[test]
    fn a_body_cut_inside_a_key_keeps_none_of_it() {
        let key = "sk-live-abcdef";
        assert_eq!(without_partial("error: sk-li".into(), key), "error: ");
        assert_eq!(without_partial("error: s".into(), key), "error: ");
        assert_eq!(without_partial("error: done".into(), key), "error: done");
    }

    #[test]
    fn key_debug_is_redacted() {
        let k = ApiKey::new("sk-live-abcdef");
        assert_eq!(format!("{k:?}"), "ApiKey([REDACTED])");
    }
}
