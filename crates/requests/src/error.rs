//! Failure classes and call errors. Every failed call ends as exactly one [`ErrorClass`], which is stored with the
//! sample; the scheduler decides retries from the class, unless the server said whether to retry
//! (`x-should-retry`), and waits as long as the server asked ([`parse_retry_after`], Gemini's `RetryInfo`), every
//! hint read through checked conversions.

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
    /// The account's quota or credit is used up (a daily quota, OpenAI's `insufficient_quota`, Anthropic's
    /// `billing_error`): nothing sent before it is renewed can succeed. Not retried, and the run's other calls to
    /// the same backend end with it without being sent.
    QuotaExhausted,
    /// The response passed its byte cap (or inflated past its ratio) before it was read whole: a server that
    /// sends more than any honest answer to the request takes. Not retried: the same request gets the same cap;
    /// a resumed run with a larger `--max-response-mib` asks again.
    ResponseTooLarge,
}

impl ErrorClass {
    pub const ALL: [ErrorClass; 14] = [
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
        ErrorClass::QuotaExhausted,
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
            ErrorClass::QuotaExhausted => "quota_exhausted",
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
    /// How long the server asked us to wait (Retry-After / retry-after-ms, Gemini's `RetryInfo`); a hint that is no
    /// usable wait (negative, not a number, beyond what a `Duration` holds) is [`ABSURD_HINT`].
    pub retry_after: Option<Duration>,
    /// What the server said about trying again (`x-should-retry: true|false`), which the official SDKs obey over
    /// the status.
    pub should_retry: Option<bool>,
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
            should_retry: None,
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
    if (400..=499).contains(&status) && quota_exhausted(status, body) {
        return ErrorClass::QuotaExhausted;
    }
    match status {
        429 => ErrorClass::RateLimit,
        // A lock timeout or conflict on the server's side: the official SDKs retry it (openai-python's and
        // anthropic-sdk's `_should_retry`: "Retry on lock timeouts", status 409).
        409 => ErrorClass::ServerError,
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

/// Whether a refusal says the account's quota or credit is used up, as each provider words it:
/// - OpenAI: HTTP 429 with `"code": "insufficient_quota"` ("You exceeded your current quota, please check your
///   plan and billing details"), told apart from a rate limit only by that code (OpenAI's error-code guide);
/// - Anthropic: `billing_error` (HTTP 402, "There is an issue with your account's billing or payment
///   information", Anthropic's errors page) and HTTP 400 "Your credit balance is too low to access the Anthropic
///   API";
/// - Gemini: HTTP 429 `RESOURCE_EXHAUSTED` whose `google.rpc.QuotaFailure` names only daily quotas (`quotaId`
///   `GenerateRequestsPerDayPerProjectPerModel`...): a per-minute quota in the same answer is a rate limit, to be
///   waited out (its `RetryInfo` says how long).
fn quota_exhausted(status: u16, body: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    if lower.contains("insufficient_quota")
        || lower.contains("billing_error")
        || lower.contains("credit balance is too low")
        || status == 402
    {
        return true;
    }
    status == 429 && only_daily_quotas(body)
}

/// Whether a Gemini error body's `QuotaFailure` violations are all daily quotas (and there is at least one).
fn only_daily_quotas(body: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return false;
    };
    let details = v["error"]["details"].as_array().into_iter().flatten();
    let ids: Vec<&str> = details
        .filter(|d| {
            d["@type"]
                .as_str()
                .is_some_and(|t| t.ends_with("QuotaFailure"))
        })
        .flat_map(|d| d["violations"].as_array().into_iter().flatten())
        .map(|v| v["quotaId"].as_str().unwrap_or(""))
        .collect();
    !ids.is_empty() && ids.iter().all(|id| id.contains("PerDay"))
}

/// The retry hint of a server that is no usable wait: negative, not a number, or longer than a `Duration` holds
/// (`Retry-After: 1e20`). The scheduler ends the call on it instead of sleeping.
pub const ABSURD_HINT: Duration = Duration::MAX;

/// `secs` seconds as a wait, or [`ABSURD_HINT`]: a conversion that cannot panic on any number a server sends.
pub fn hint_seconds(secs: f64) -> Duration {
    if secs.is_nan() || secs < 0.0 {
        return ABSURD_HINT;
    }
    Duration::try_from_secs_f64(secs).unwrap_or(ABSURD_HINT)
}

/// Parses `Retry-After` (delta-seconds or an HTTP date) and OpenAI's `retry-after-ms`; the larger wins. A value
/// that is a number but no usable wait (negative, NaN, infinite, huge) is [`ABSURD_HINT`]; one that is neither a
/// number nor a date is ignored.
pub fn parse_retry_after(
    retry_after: Option<&str>,
    retry_after_ms: Option<&str>,
    now: SystemTime,
) -> Option<Duration> {
    let secs = retry_after.and_then(|v| parse_retry_after_value(v.trim(), now));
    let ms = retry_after_ms
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| hint_seconds(v / 1000.0));
    match (secs, ms) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

fn parse_retry_after_value(v: &str, now: SystemTime) -> Option<Duration> {
    if let Ok(s) = v.parse::<f64>() {
        return Some(hint_seconds(s));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A `google.protobuf.Duration` in its JSON form (`"31s"`, `"0.500s"`), as Gemini's `RetryInfo.retryDelay`
/// carries it; a number that is no usable wait is [`ABSURD_HINT`].
pub fn parse_proto_duration(v: &str) -> Option<Duration> {
    let secs = v.trim().strip_suffix('s')?.parse::<f64>().ok()?;
    Some(hint_seconds(secs))
}

/// The HTTP status of a gRPC status code (`google.rpc.Code`, whose comments give each code's HTTP mapping), so
/// that an error reported as a `google.rpc.Status` (a Gemini batch's inline errors) is classed as the same error
/// of a single call. An unknown code is a server error (500), as `UNKNOWN` is.
pub fn grpc_http_status(code: u64) -> u16 {
    match code {
        1 => 499,          // CANCELLED
        3 | 9 | 11 => 400, // INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE
        4 => 504,          // DEADLINE_EXCEEDED
        5 => 404,          // NOT_FOUND
        6 | 10 => 409,     // ALREADY_EXISTS, ABORTED
        7 => 403,          // PERMISSION_DENIED
        8 => 429,          // RESOURCE_EXHAUSTED
        12 => 501,         // UNIMPLEMENTED
        14 => 503,         // UNAVAILABLE
        16 => 401,         // UNAUTHENTICATED
        _ => 500,          // UNKNOWN, INTERNAL, DATA_LOSS and codes gRPC does not define
    }
}

/// Maps a transport failure to a class. The URL is removed first: a base URL can carry credentials.
pub(crate) fn from_reqwest(e: reqwest::Error) -> CallError {
    let class = if e.is_timeout() {
        ErrorClass::Timeout
    } else if e.is_decode() {
        ErrorClass::MalformedResponse
    } else if e.is_connect() || e.is_request() || e.is_body() {
        ErrorClass::Network
    } else {
        ErrorClass::Other
    };
    let e = e.without_url();
    CallError::new(class, error_chain(&e))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(src) = cur {
        let part = src.to_string();
        if !s.contains(&part) {
            s.push_str(": ");
            s.push_str(&part);
        }
        cur = src.source();
    }
    s
}

/// The first `max` characters of `s`, on a char boundary.
pub(crate) fn snippet(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
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
    }

    #[test]
    fn retry_hints_that_are_no_wait_are_absurd_never_a_panic() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        for v in [
            "1e20",
            "-3",
            "NaN",
            "inf",
            "-inf",
            "1e400",
            "18446744073709551616",
        ] {
            assert_eq!(
                parse_retry_after(Some(v), None, now),
                Some(ABSURD_HINT),
                "{v}"
            );
        }
        for v in ["1e23", "-3", "NaN", "inf"] {
            assert_eq!(
                parse_retry_after(None, Some(v), now),
                Some(ABSURD_HINT),
                "{v} ms"
            );
        }
        assert_eq!(
            parse_retry_after(Some("1e9"), None, now),
            Some(Duration::from_secs(1_000_000_000))
        );
        assert_eq!(parse_proto_duration("31s"), Some(Duration::from_secs(31)));
        assert_eq!(
            parse_proto_duration("0.5s"),
            Some(Duration::from_millis(500))
        );
        assert_eq!(parse_proto_duration("1e30s"), Some(ABSURD_HINT));
        assert_eq!(parse_proto_duration("-1s"), Some(ABSURD_HINT));
        assert_eq!(parse_proto_duration("31"), None);
    }

    #[test]
    fn quota_refusals_are_told_from_rate_limits() {
        let openai = r#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        assert_eq!(classify_status(429, openai), ErrorClass::QuotaExhausted);
        let per_minute = r#"{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}"#;
        assert_eq!(classify_status(429, per_minute), ErrorClass::RateLimit);
        let billing = r#"{"type":"error","error":{"type":"billing_error","message":"There is an issue with your account's billing or payment information."}}"#;
        assert_eq!(classify_status(402, billing), ErrorClass::QuotaExhausted);
        let credit = r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API."}}"#;
        assert_eq!(classify_status(400, credit), ErrorClass::QuotaExhausted);
        let gemini = |ids: &[&str]| {
            let violations: Vec<_> = ids
                .iter()
                .map(|id| serde_json::json!({"quotaId": id}))
                .collect();
            serde_json::json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": violations},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "31s"}]}})
            .to_string()
        };
        let daily = gemini(&["GenerateRequestsPerDayPerProjectPerModel"]);
        assert_eq!(classify_status(429, &daily), ErrorClass::QuotaExhausted);
        let both = gemini(&[
            "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
            "GenerateRequestsPerDayPerProjectPerModel-FreeTier",
        ]);
        assert_eq!(classify_status(429, &both), ErrorClass::RateLimit);
        assert_eq!(classify_status(429, &gemini(&[])), ErrorClass::RateLimit);
    }

    #[test]
    fn grpc_codes_map_to_the_classes_of_their_http_statuses() {
        let class = |code| classify_status(grpc_http_status(code), "");
        assert_eq!(class(3), ErrorClass::ClientError);
        assert_eq!(class(8), ErrorClass::RateLimit);
        assert_eq!(class(13), ErrorClass::ServerError);
        assert_eq!(class(14), ErrorClass::ServerError);
        assert_eq!(class(4), ErrorClass::ServerError);
        assert_eq!(class(16), ErrorClass::Auth);
        assert_eq!(class(99), ErrorClass::ServerError);
        assert_eq!(
            classify_status(409, ""),
            ErrorClass::ServerError,
            "retried as the SDKs do"
        );
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
