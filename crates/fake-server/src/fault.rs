//! Faults the server can inject, and their textual form (`429:2`, `reset`, `slow:1500`, ...), used in fault
//! queues, command-line schedules and `FAULT:<spec>` markers inside prompts.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

pub use crate::fault_error::FaultParseError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Status 429. `retry_after` is sent verbatim as the Retry-After header (seconds or an HTTP date), and
    /// `retry_after_ms` as OpenAI's `retry-after-ms`.
    RateLimit {
        retry_after: Option<String>,
        retry_after_ms: Option<u64>,
    },
    /// An error status (500, 503, 529, 400, 401, 404, ...) with the wire's error JSON.
    Status(u16),
    /// 400 with the wire's "prompt too long" message.
    ContextLength,
    /// Connection reset: SO_LINGER 0, then close, before any response byte.
    Reset,
    /// The normal answer, sent after this delay (longer than the client's timeout to provoke one).
    Slow(Duration),
    /// No answer at all until the client closes the connection.
    Hang,
    /// HTTP 200 with a truncated JSON body.
    Malformed,
    /// HTTP 200 with empty `choices` / `content` / `candidates`.
    Empty,
    /// HTTP 200 with the wire's refusal: `content_filter`, `stop_reason: refusal`, `blockReason: SAFETY`.
    Refusal,
    /// HTTP 200 from a model that spent every output token thinking and wrote no answer: OpenAI's reasoning models
    /// answer no content with `finish_reason: length`; Anthropic a thinking block alone with `stop_reason:
    /// max_tokens`; Gemini a candidate with no parts and `finishReason: MAX_TOKENS`, `thoughtsTokenCount` near the
    /// limit (python-genai #811, adk-python #1357).
    Exhausted,
    /// Status 429 with Gemini's `google.rpc.RetryInfo` (`retryDelay: "<SECS>s"`) in the body and no Retry-After
    /// header (the other wires: a plain 429). The text is sent verbatim, so a delay no wait can honour is one too.
    RetryInfo(String),
    /// The account's quota or credit is used up: OpenAI 429 `insufficient_quota`, Anthropic 402 `billing_error`,
    /// Gemini 429 `RESOURCE_EXHAUSTED` with a `QuotaFailure` naming only a daily quota.
    Quota,
    /// An error status with `x-should-retry: false`, which the official SDKs obey over the status.
    NoRetry(u16),
    /// What no honest server sends (see [`crate::hostile`]).
    Hostile(crate::hostile::Hostile),
}

impl FromStr for Fault {
    type Err = FaultParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Ok(h) = s.parse::<crate::hostile::Hostile>() {
            return Ok(Fault::Hostile(h));
        }
        let bad = || FaultParseError(s.to_string());
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n, Some(a)),
            None => (s, None),
        };
        let millis = |a: Option<&str>| -> Result<u64, FaultParseError> {
            a.ok_or_else(bad)?.parse().map_err(|_| bad())
        };
        Ok(match name.to_ascii_lowercase().as_str() {
            "429" => Fault::RateLimit {
                retry_after: arg.map(str::to_string),
                retry_after_ms: None,
            },
            "429ms" => Fault::RateLimit {
                retry_after: None,
                retry_after_ms: Some(millis(arg)?),
            },
            "context" => Fault::ContextLength,
            "reset" => Fault::Reset,
            "slow" => Fault::Slow(Duration::from_millis(millis(arg)?)),
            "hang" => Fault::Hang,
            "malformed" => Fault::Malformed,
            "empty" => Fault::Empty,
            "refusal" => Fault::Refusal,
            "exhausted" => Fault::Exhausted,
            "quota" => Fault::Quota,
            "retryinfo" => Fault::RetryInfo(arg.ok_or_else(bad)?.to_string()),
            "noretry" => match arg.and_then(|a| a.parse::<u16>().ok()) {
                Some(code) if (400..600).contains(&code) => Fault::NoRetry(code),
                _ => return Err(bad()),
            },
            n => match n.parse::<u16>() {
                Ok(code) if (400..600).contains(&code) && arg.is_none() => Fault::Status(code),
                _ => return Err(bad()),
            },
        })
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::RateLimit {
                retry_after_ms: Some(ms),
                ..
            } => write!(f, "429ms:{ms}"),
            Fault::RateLimit {
                retry_after: Some(s),
                ..
            } => write!(f, "429:{s}"),
            Fault::RateLimit { .. } => f.write_str("429"),
            Fault::Status(c) => write!(f, "{c}"),
            Fault::ContextLength => f.write_str("context"),
            Fault::Reset => f.write_str("reset"),
            Fault::Slow(d) => write!(f, "slow:{}", d.as_millis()),
            Fault::Hang => f.write_str("hang"),
            Fault::Malformed => f.write_str("malformed"),
            Fault::Empty => f.write_str("empty"),
            Fault::Refusal => f.write_str("refusal"),
            Fault::Exhausted => f.write_str("exhausted"),
            Fault::RetryInfo(secs) => write!(f, "retryinfo:{secs}"),
            Fault::Quota => f.write_str("quota"),
            Fault::NoRetry(c) => write!(f, "noretry:{c}"),
            Fault::Hostile(h) => write!(f, "{h}"),
        }
    }
}

/// Parses a comma-separated schedule; `ok` entries mean "no fault" for that request.
pub fn parse_schedule(s: &str) -> Result<Vec<Option<Fault>>, FaultParseError> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            if p.eq_ignore_ascii_case("ok") {
                Ok(None)
            } else {
                p.parse().map(Some)
            }
        })
        .collect()
}

/// A `FAULT:<spec>[*K]` marker found in a prompt: the fault, and for how many arrivals of the same
/// conversation it applies (`None` = always).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    pub fault: Fault,
    pub times: Option<u64>,
    pub text: String,
}

/// Finds the first `FAULT:` marker in `text`.
pub fn find_marker(text: &str) -> Option<Marker> {
    let start = text.find("FAULT:")?;
    let token: &str = text[start + 6..]
        .split(|c: char| c.is_whitespace() || c == '"' || c == '\'')
        .next()
        .unwrap_or("");
    let token = token.trim_end_matches(['.', ',', ';', ')']);
    let (spec, times) = match token.rsplit_once('*') {
        Some((spec, k)) => (spec, k.parse().ok()),
        None => (token, None),
    };
    Some(Marker {
        fault: spec.parse().ok()?,
        times,
        text: format!("FAULT:{token}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        for s in [
            "429",
            "429:3",
            "429ms:1500",
            "500",
            "503",
            "529",
            "context",
            "reset",
            "slow:250",
            "hang",
            "malformed",
            "empty",
            "refusal",
            "401",
            "exhausted",
            "quota",
            "retryinfo:31",
            "retryinfo:1e20",
            "noretry:500",
        ] {
            let f: Fault = s.parse().unwrap();
            assert_eq!(f.to_string(), s);
        }
        assert!("teapot".parse::<Fault>().is_err());
        assert!("200".parse::<Fault>().is_err());
        assert!("slow".parse::<Fault>().is_err());
        let s = parse_schedule("429:1, ok ,reset").unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[1], None);
    }

    #[test]
    fn markers() {
        let m = find_marker("Case 3. FAULT:429:2*1. Please answer").unwrap();
        assert_eq!(m.times, Some(1));
        assert_eq!(
            m.fault,
            Fault::RateLimit {
                retry_after: Some("2".into()),
                retry_after_ms: None
            }
        );
        assert_eq!(m.text, "FAULT:429:2*1");
        assert_eq!(find_marker("x FAULT:reset").unwrap().fault, Fault::Reset);
        assert!(find_marker("no marker").is_none());
        assert!(find_marker("FAULT:nonsense").is_none());
    }
}
