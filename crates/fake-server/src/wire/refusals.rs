//! What OpenAI's reasoning models (the o-series and GPT-5) refuse on chat completions, answered as OpenAI
//! answers it: HTTP 400 with an `invalid_request_error` naming the parameter. The bodies, as OpenAI sends
//! them (quoted in reports against o1, o3-mini, gpt-5 and gpt-5-mini):
//!
//! ```text
//! {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use
//!   'max_completion_tokens' instead.", "type": "invalid_request_error", "param": "max_tokens",
//!   "code": "unsupported_parameter"}}
//! {"error": {"message": "Unsupported value: 'temperature' does not support 0.7 with this model. Only the
//!   default (1) value is supported.", "type": "invalid_request_error", "param": "temperature",
//!   "code": "unsupported_value"}}
//! {"error": {"message": "Unsupported parameter: 'top_p' is not supported with this model.",
//!   "type": "invalid_request_error", "param": "top_p", "code": "unsupported_parameter"}}
//! ```
//!
//! One refusal per request, in that order, like the API (it stops at the first bad parameter).

use super::{ReceivedRequest, Wire};
use crate::Reply;

/// Whether the server treats `model` as an OpenAI reasoning model: `o` and a digit (`o1`, `o3-mini`,
/// `o4-mini`), or `gpt-5` and its variants. Kept apart from nmb's own rule on purpose.
pub fn is_reasoning_model(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    let o_series = m.len() >= 2
        && m.starts_with('o')
        && m.as_bytes()[1].is_ascii_digit()
        && m[1..]
            .find(|c: char| !c.is_ascii_digit())
            .is_none_or(|i| m[1 + i..].starts_with('-'));
    o_series || m == "gpt-5" || m.starts_with("gpt-5-") || m.starts_with("gpt-5.")
}

/// OpenAI's refusal of `req`, when it is a chat completion for a reasoning model with a parameter such a model
/// refuses.
pub(crate) fn refusal(req: &ReceivedRequest) -> Option<Reply> {
    if req.wire != Wire::OpenAi || !is_reasoning_model(&req.model) {
        return None;
    }
    let p = &req.params;
    let (param, code, message) = if p.max_tokens_field.as_deref() == Some("max_tokens") {
        (
            "max_tokens",
            "unsupported_parameter",
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use \
             'max_completion_tokens' instead."
                .to_string(),
        )
    } else if let Some(t) = p.temperature.filter(|t| *t != 1.0) {
        (
            "temperature",
            "unsupported_value",
            format!(
                "Unsupported value: 'temperature' does not support {t} with this model. Only the \
                 default (1) value is supported."
            ),
        )
    } else if p.top_p.is_some() {
        (
            "top_p",
            "unsupported_parameter",
            "Unsupported parameter: 'top_p' is not supported with this model.".to_string(),
        )
    } else {
        return None;
    };
    let body = serde_json::json!({"error": {
        "message": message,
        "type": "invalid_request_error",
        "param": param,
        "code": code,
    }});
    Some(Reply::Raw {
        status: 400,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::is_reasoning_model;

    #[test]
    fn reasoning_model_names() {
        for m in [
            "o1",
            "o1-mini",
            "o3",
            "o3-pro",
            "o4-mini",
            "gpt-5",
            "gpt-5-mini",
            "gpt-5.1",
        ] {
            assert!(is_reasoning_model(m), "{m}");
        }
        for m in [
            "gpt-4o",
            "test-model",
            "o",
            "omni",
            "o3x",
            "gpt-50",
            "Qwen/Qwen3-8B",
        ] {
            assert!(!is_reasoning_model(m), "{m}");
        }
    }
}
