//! Failure classes and call errors. Every failed call ends as exactly one [`ErrorClass`], which is stored with the
//! sample; the scheduler decides retries from the class alone.

use std::fmt;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    RateLimit,
    ServerError,
    Network,
    Timeout,
    MalformedResponse,
    Refusal,
    ContextLength,
    /// The model cannot take this kind of input (images sent to a text-only server). Not retried.
    UnsupportedInput,
    Auth,
    ClientError,
    Other,
    /// A human baseline (`human:NAME`) has no stored answer to this task and turn yet. Not retried; a resumed run
    /// asks again once the answer is stored.
    NoAnswer,
    /// The response passed its byte cap (or inflated past its ratio) before it was read whole: a server that
    /// sends more than any honest answer to the request takes. Not retried: the same request gets the same cap;
    /// a resumed run with a larger `--max-response-mib` asks again.
    ResponseTooLarge,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 13] = [
        ErrorClass::RateLimit,
        ErrorClass::ServerError,
        ErrorClass::Network,
        ErrorClass::Timeout,
        ErrorClass::MalformedResponse,
        ErrorClass::Refusal,
        ErrorClass::ContextLength,
        ErrorClass::UnsupportedInput,
        ErrorClass::Auth,
        ErrorClass::ClientError,
        ErrorClass::Other,
        ErrorClass::NoAnswer,
        ErrorClass::ResponseTooLarge,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::RateLimit => "rate_limit",
            ErrorClass::ServerError => "server_error",
            ErrorClass::Network => "network",
            ErrorClass::Timeout => "timeout",
            ErrorClass::MalformedResponse => "malformed_response",
            ErrorClass::Refusal => "refusal",
            ErrorClass::ContextLength => "context_length",
            ErrorClass::UnsupportedInput => "unsupported_input",
            ErrorClass::Auth => "auth",
            ErrorClass::ClientError => "client_error",
            ErrorClass::Other => "other",
            ErrorClass::NoAnswer => "no_answer",
            ErrorClass::ResponseTooLarge => "response_too_large",
        }
    }

    pub fn parse(s: &str) -> Option<ErrorClass> {
        ErrorClass::ALL.into_iter().find(|c| c.as_str() == s)
    }

    /// Position in [`ErrorClass::ALL`] (for per-class counters).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed call. Messages and raw bodies have API keys redacted at construction, so `Debug`, `Display` and
/// storing `raw` are all safe.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{class}: {message}")]
pub struct CallError {
    pub class: ErrorClass,
    pub message: String,
    /// How long the server asked us to wait (Retry-After / retry-after-ms).
    pub retry_after: Option<Duration>,
    pub status: Option<u16>,
    /// The raw response body, when there was one.
    pub raw: Option<String>,
}

impl CallError {
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Self {
        CallError {
            class,
            message: message.into(),
            retry_after: None,
            status: None,
            raw: None,
        }
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    pub fn with_raw(mut self, raw: impl Into<String>) -> Self {
        self.raw = Some(raw.into());
        self
    }

    pub fn with_retry_after(mut self, d: Option<Duration>) -> Self {
        self.retry_after = d;
        self
    }

    /// Replaces every occurrence of `secret` in the message and raw body.
    pub fn redacted(mut self, secret: Option<&str>) -> Self {
        if let Some(s) = secret {
            self.message = redact(&self.message, s);
            if let Some(r) = &self.raw {
                self.raw = Some(redact(r, s));
            }
        }
        self
    }
}

pub use nmb_chat::redact;

/// What a stored `unsupported_input` error says to do.
pub const UNSUPPORTED_INPUT_HINT: &str =
    "the model cannot take this input (images need a vision model); run with --inputs text";

/// Classifies an HTTP error status and its body.
pub fn classify_status(status: u16, body: &str) -> ErrorClass {
    if (400..=599).contains(&status) && mentions_unsupported_input(body) {
        return ErrorClass::UnsupportedInput;
    }
    match status {
        429 => ErrorClass::RateLimit,
        401 | 403 => ErrorClass::Auth,
        408 => ErrorClass::Timeout,
        400 | 413 | 422 if mentions_context_length(body) => ErrorClass::ContextLength,
        400..=499 => ErrorClass::ClientError,
        500..=599 => ErrorClass::ServerError,
        _ => ErrorClass::Other,
    }
}

/// Phrases servers use when a text-only model is sent images (llama.cpp without a vision projector answers
/// HTTP 500 "image input is not supported - hint: ... you may need to provide the mmproj").
fn mentions_unsupported_input(body: &str) -> bool {
    let b = body.to_ascii_lowercase();
    [
        "image input is not supported",
        "mmproj",
        "does not support image",
        "images are not supported",
        "image inputs are not supported",
        "does not support vision",
        "multimodal input is not supported",
    ]
    .iter()
    .any(|p| b.contains(p))
}

/// Whether a failed call is the server refusing `n > 1` (llama.cpp: HTTP 400 "Only one completion choice is
/// allowed" or "Field 'n': ..."; TGI, Ollama and others differ), so its samples can be asked one per request.
pub fn rejects_n(err: &CallError) -> bool {
    if err.class != ErrorClass::ClientError {
        return false;
    }
    let text = format!("{} {}", err.message, err.raw.as_deref().unwrap_or("")).to_ascii_lowercase();
    [
        "'n'",
        "\"n\"",
        "\\\"n\\\"",
        "`n`",
        "field n ",
        "parameter n ",
        " n > 1",
        " n>1",
        "only one completion choice",
        "only one choice",
    ]
    .iter()
    .any(|p| text.contains(p))
}

/// Phrases the three vendors (and vLLM / llama.cpp) use when the prompt is too long.
fn mentions_context_length(body: &str) -> bool {
    let b = body.to_ascii_lowercase();
    [
        "context_length_exceeded",
        "maximum context length",
        "context length",
        "context window",
        "prompt is too long",
        "too many tokens",
        "exceeds the maximum number of tokens",
        "input token count",
        "string_above_max_length",
    ]
    .iter()
    .any(|p| b.contains(p))
}

/// Parses `Retry-After` (delta-seconds or an HTTP date) and OpenAI's `retry-after-ms`; the larger wins.
pub fn parse_retry_after(
    retry_after: Option<&str>,
    retry_after_ms: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    let secs = retry_after.and_then(|v| parse_retry_after_value(v.trim(), now));
    let ms = retry_after_ms
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .map(|v| Duration::from_secs_f64(v / 1000.0));
    match (secs, ms) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn parse_retry_after_value(v: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(s) = v.parse::<f64>() {
        return (s.is_finite() && s >= 0.0).then(|| Duration::from_secs_f64(s));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            parse_retry_after(Some("7"), None, now),
            Some(Duration::from_secs(7))
        );
        assert_eq!(
            parse_retry_after(None, Some("1500"), now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            parse_retry_after(Some("1"), Some("2500"), now),
            Some(Duration::from_millis(2500))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(Some(&date), None, now),
            Some(Duration::from_secs(30))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(Some(&past), None, now),
            Some(Duration::ZERO)
        );
        assert_eq!(parse_retry_after(Some("soon"), None, now), None);
        assert_eq!(parse_retry_after(Some("-3"), None, now), None);
    }

    #[test]
    fn status_classes() {
        assert_eq!(classify_status(429, ""), ErrorClass::RateLimit);
        assert_eq!(classify_status(529, "overloaded"), ErrorClass::ServerError);
        assert_eq!(classify_status(503, ""), ErrorClass::ServerError);
        assert_eq!(classify_status(401, ""), ErrorClass::Auth);
        assert_eq!(classify_status(403, ""), ErrorClass::Auth);
        assert_eq!(
            classify_status(400, r#"{"error":{"code":"context_length_exceeded"}}"#),
            ErrorClass::ContextLength
        );
        assert_eq!(
            classify_status(400, "prompt is too long: 210000 tokens > 200000 maximum"),
            ErrorClass::ContextLength
        );
        assert_eq!(
            classify_status(400, "bad temperature"),
            ErrorClass::ClientError
        );
        assert_eq!(classify_status(404, ""), ErrorClass::ClientError);
    }

    #[test]
    fn text_only_servers_refusing_images_are_unsupported_input() {
        let llama_cpp = r#"{"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj","type":"server_error"}}"#;
        assert_eq!(
            classify_status(500, llama_cpp),
            ErrorClass::UnsupportedInput
        );
        assert_eq!(
            classify_status(400, "This model does not support image inputs"),
            ErrorClass::UnsupportedInput
        );
        assert_eq!(
            classify_status(500, "out of memory"),
            ErrorClass::ServerError
        );
        assert_eq!(
            ErrorClass::parse("unsupported_input"),
            Some(ErrorClass::UnsupportedInput)
        );
    }

    #[test]
    fn rejections_of_n_are_told_from_other_client_errors() {
        let error = |body: &str| {
            CallError::new(ErrorClass::ClientError, format!("HTTP 400: {body}")).with_raw(body)
        };
        for body in [
            r#"{"error":{"code":400,"message":"Only one completion choice is allowed","type":"invalid_request_error"}}"#,
            r#"{"error":{"message":"Field 'n': Value must be between 1 <= value <= 1"}}"#,
            r#"{"detail":[{"loc":["body","n"],"msg":"n > 1 is not supported"}]}"#,
            "`n` must be 1",
        ] {
            assert!(rejects_n(&error(body)), "{body}");
        }
        for body in [
            r#"{"error":{"message":"completion must be shorter"}}"#,
            r#"{"error":{"message":"bad temperature"}}"#,
        ] {
            assert!(!rejects_n(&error(body)), "{body}");
        }
        let server = CallError::new(ErrorClass::ServerError, "Field 'n' broke the server");
        assert!(!rejects_n(&server), "only client errors are rejections");
    }

    #[test]
    fn redaction() {
        let e = CallError::new(ErrorClass::Auth, "bad key sk-SECRET-123 given")
            .with_raw("{\"key\":\"sk-SECRET-123\"}")
            .redacted(Some("sk-SECRET-123"));
        assert!(!format!("{e:?} {e}").contains("sk-SECRET-123"));
        assert!(e.message.contains("[REDACTED]"));
        for c in ErrorClass::ALL {
            assert_eq!(ErrorClass::parse(c.as_str()), Some(c));
            assert_eq!(ErrorClass::ALL[c.index()], c);
        }
    }
}
