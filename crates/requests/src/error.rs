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
    Auth,
    ClientError,
    Other,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 10] = [
        ErrorClass::RateLimit,
        ErrorClass::ServerError,
        ErrorClass::Network,
        ErrorClass::Timeout,
        ErrorClass::MalformedResponse,
        ErrorClass::Refusal,
        ErrorClass::ContextLength,
        ErrorClass::Auth,
        ErrorClass::ClientError,
        ErrorClass::Other,
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
            ErrorClass::Auth => "auth",
            ErrorClass::ClientError => "client_error",
            ErrorClass::Other => "other",
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

/// Removes `secret` from `text`. Short secrets are not searched for: they would match ordinary words.
pub fn redact(text: &str, secret: &str) -> String {
    if secret.len() < 6 || !text.contains(secret) {
        return text.to_string();
    }
    text.replace(secret, "[REDACTED]")
}

/// Classifies an HTTP error status and its body.
pub fn classify_status(status: u16, body: &str) -> ErrorClass {
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
