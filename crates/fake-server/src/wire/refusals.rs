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
//! One refusal per request, in that order, like the API (it stops at the first bad parameter). Claude's and
//! Gemini's documented rules are refused the same way, each with the API's words ([`refusal`]).

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

/// The refusal of `req`, when it carries a parameter its model refuses: OpenAI's reasoning models (above),
/// Claude's sampling rules ([`claude_refusal`]) or Gemini's thinking rules ([`gemini_refusal`]).
pub(crate) fn refusal(req: &ReceivedRequest) -> Option<Reply> {
    match req.wire {
        Wire::OpenAi => openai_refusal(req),
        Wire::Anthropic => claude_refusal(req),
        Wire::Gemini => gemini_refusal(req),
    }
}

/// A Claude model's family as this server knows it, from its id (`claude-sonnet-4-5-20250929` is
/// `claude-sonnet-4-5`). Kept apart from nmb's own rule on purpose.
fn claude_family(model: &str) -> &'static str {
    const FAMILIES: [&str; 7] = [
        "claude-opus-4-7",
        "claude-opus-4-6",
        "claude-sonnet-4-6",
        "claude-opus-4-5",
        "claude-haiku-4-5",
        "claude-sonnet-4-5",
        "claude-opus-4-1",
    ];
    let m = model.to_ascii_lowercase();
    FAMILIES
        .into_iter()
        .find(|f| m.starts_with(f))
        .unwrap_or("")
}

/// Claude's sampling rules as Anthropic documents and enforces them: Claude 4.5 models, Sonnet and Opus 4.6 and
/// Opus 4.1 take `temperature` or `top_p`, not both ("Migrating to Claude 4.5": "Use only temperature OR top_p,
/// not both"; the API: 400 "`temperature` and `top_p` cannot both be specified for this model. Please use only
/// one."); Claude Opus 4.7 takes neither ("`temperature` is deprecated for this model.").
fn claude_refusal(req: &ReceivedRequest) -> Option<Reply> {
    let p = &req.params;
    let message = match claude_family(&req.model) {
        "" => return None,
        "claude-opus-4-7" if p.temperature.is_some() => "`temperature` is deprecated for this model.",
        "claude-opus-4-7" if p.top_p.is_some() => "`top_p` is deprecated for this model.",
        "claude-opus-4-7" => return None,
        _ if p.temperature.is_some() && p.top_p.is_some() => {
            "`temperature` and `top_p` cannot both be specified for this model. Please use only one."
        }
        _ => return None,
    };
    let body = serde_json::json!({"type": "error", "error": {"type": "invalid_request_error", "message": message}});
    Some(raw(400, body))
}

/// Gemini's thinking rules as the API enforces them: Gemini 3 Pro takes `thinkingLevel` low or high only (400
/// "Thinking level MEDIUM is not supported for this model. Please retry with other thinking level."), and
/// Gemini 2.5 Pro cannot stop thinking (400 "Budget 0 is invalid. This model only works in thinking mode.").
fn gemini_refusal(req: &ReceivedRequest) -> Option<Reply> {
    let m = req.model.trim_start_matches("models/").to_ascii_lowercase();
    let thinking = req.params.reasoning.as_ref()?;
    let level = thinking["thinkingLevel"]
        .as_str()
        .map(str::to_ascii_lowercase);
    let message = if m.starts_with("gemini-3-pro")
        && matches!(level.as_deref(), Some("minimal" | "medium"))
    {
        format!(
            "Thinking level {} is not supported for this model. Please retry with other thinking level.",
            level.unwrap_or_default().to_ascii_uppercase()
        )
    } else if m.starts_with("gemini-2.5-pro") && thinking["thinkingBudget"].as_u64() == Some(0) {
        "Budget 0 is invalid. This model only works in thinking mode.".to_string()
    } else {
        return None;
    };
    let body = serde_json::json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}});
    Some(raw(400, body))
}

fn raw(status: u16, body: serde_json::Value) -> Reply {
    Reply::Raw {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.to_string(),
    }
}

/// OpenAI's refusal of `req`, when it is a chat completion for a reasoning model with a parameter such a model
/// refuses.
fn openai_refusal(req: &ReceivedRequest) -> Option<Reply> {
    if !is_reasoning_model(&req.model) {
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
