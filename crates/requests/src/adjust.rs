//! Parameters a server refuses, and what a wire sends instead.
//!
//! OpenAI's reasoning models (the o-series and GPT-5) refuse `max_tokens`, a temperature other than 1, and
//! `top_p`, each with HTTP 400 `invalid_request_error` naming the parameter. A wire that can do without the
//! parameter records an [`Adjustment`] and the request is sent again; every later request of the backend is
//! built with it, and the run manifest records it with the server's words.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::{CallError, ErrorClass};

/// One way a request is built differently from its parameters because the model refuses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Adjustment {
    /// The token limit goes in `max_completion_tokens` instead of `max_tokens`.
    MaxCompletionTokens,
    /// No `temperature` is sent unless it is 1, the only value OpenAI's reasoning models take.
    NoTemperature,
    /// No `top_p` is sent.
    NoTopP,
    /// A schema's answer tool is offered with `tool_choice: auto` rather than forced (Anthropic's extended
    /// thinking refuses forced tool use).
    ToolChoiceAuto,
    /// Gemini's `thinkingLevel` is one the model takes, not the one the reasoning effort names
    /// ([`crate::rules`]: Gemini 3 Pro takes low and high only).
    ThinkingLevel,
    /// Gemini's `thinkingBudget` is moved into the model's range ([`crate::rules`]: 2.5 Pro cannot stop
    /// thinking, so a budget of 0 is sent as its least).
    ThinkingBudget,
}

impl Adjustment {
    pub const ALL: [Adjustment; 6] = [
        Adjustment::MaxCompletionTokens,
        Adjustment::NoTemperature,
        Adjustment::NoTopP,
        Adjustment::ToolChoiceAuto,
        Adjustment::ThinkingLevel,
        Adjustment::ThinkingBudget,
    ];

    /// The name manifests record (`max_completion_tokens`, `no_temperature`, `no_top_p`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Adjustment::MaxCompletionTokens => "max_completion_tokens",
            Adjustment::NoTemperature => "no_temperature",
            Adjustment::NoTopP => "no_top_p",
            Adjustment::ToolChoiceAuto => "tool_choice_auto",
            Adjustment::ThinkingLevel => "thinking_level",
            Adjustment::ThinkingBudget => "thinking_budget",
        }
    }

    pub fn parse(name: &str) -> Option<Adjustment> {
        Adjustment::ALL.into_iter().find(|a| a.as_str() == name)
    }

    /// The adjustment that answers the refusal of parameter `param`.
    fn for_param(param: &str) -> Option<Adjustment> {
        match param {
            "max_tokens" => Some(Adjustment::MaxCompletionTokens),
            "temperature" => Some(Adjustment::NoTemperature),
            "top_p" => Some(Adjustment::NoTopP),
            _ => None,
        }
    }
}

impl std::fmt::Display for Adjustment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The parameter a failed call says the server refuses, when it is one a wire can do without: OpenAI's HTTP
/// 400 `invalid_request_error` with `param` and code `unsupported_parameter` or `unsupported_value`, or a
/// message "Unsupported parameter: 'max_tokens' ..." / "Unsupported value: 'temperature' ..." (proxies that
/// pass the message on without the object).
pub fn refused_parameter(err: &CallError) -> Option<Adjustment> {
    if err.class != ErrorClass::ClientError {
        return None;
    }
    let raw = err.raw.as_deref().unwrap_or("");
    if let Ok(body) = serde_json::from_str::<serde_json::Value>(raw) {
        let e = &body["error"];
        let code = e["code"].as_str().unwrap_or("");
        let message = e["message"].as_str().unwrap_or("");
        let unsupported = matches!(code, "unsupported_parameter" | "unsupported_value")
            || message.starts_with("Unsupported");
        if let (true, Some(param)) = (unsupported, e["param"].as_str()) {
            return Adjustment::for_param(param);
        }
    }
    let text = format!("{} {raw}", err.message).to_ascii_lowercase();
    ["max_tokens", "temperature", "top_p"]
        .into_iter()
        .find(|p| {
            text.contains(&format!("unsupported parameter: '{p}'"))
                || text.contains(&format!("unsupported value: '{p}'"))
        })
        .and_then(Adjustment::for_param)
}

/// The adjustments one backend makes, each with why; shared by every request it sends.
#[derive(Debug, Default)]
pub struct Adjustments(Mutex<BTreeMap<Adjustment, String>>);

impl Adjustments {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Adjustment, String>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn has(&self, a: Adjustment) -> bool {
        self.lock().contains_key(&a)
    }

    /// Adds `a` with its reason; false when it was already made.
    pub fn add(&self, a: Adjustment, why: impl Into<String>) -> bool {
        let mut map = self.lock();
        if map.contains_key(&a) {
            return false;
        }
        map.insert(a, why.into());
        true
    }

    pub fn all(&self) -> BTreeMap<Adjustment, String> {
        self.lock().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(body: &str) -> CallError {
        CallError::new(ErrorClass::ClientError, format!("HTTP 400: {body}"))
            .with_status(400)
            .with_raw(body.to_string())
    }

    #[test]
    fn reads_openais_refusals() {
        let cases = [
            (
                r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","type":"invalid_request_error","param":"max_tokens","code":"unsupported_parameter"}}"#,
                Some(Adjustment::MaxCompletionTokens),
            ),
            (
                r#"{"error":{"message":"Unsupported value: 'temperature' does not support 0.7 with this model. Only the default (1) value is supported.","type":"invalid_request_error","param":"temperature","code":"unsupported_value"}}"#,
                Some(Adjustment::NoTemperature),
            ),
            (
                r#"{"error":{"message":"Unsupported parameter: 'top_p' is not supported with this model.","type":"invalid_request_error","param":"top_p","code":"unsupported_parameter"}}"#,
                Some(Adjustment::NoTopP),
            ),
            // a proxy that passes the message on in its own object
            (
                r#"{"error":{"message":"Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.","code":"invalid_request_body"}}"#,
                Some(Adjustment::MaxCompletionTokens),
            ),
            // other client errors are not refusals of a parameter
            (
                r#"{"error":{"message":"Invalid value for 'n': must be 1","type":"invalid_request_error","param":"n","code":"invalid_value"}}"#,
                None,
            ),
            (
                r#"{"error":{"message":"Unsupported parameter: 'logprobs'","param":"logprobs","code":"unsupported_parameter"}}"#,
                None,
            ),
            ("temperature must be between 0 and 2", None),
        ];
        for (body, want) in cases {
            assert_eq!(refused_parameter(&refusal(body)), want, "{body}");
        }
        let server = CallError::new(ErrorClass::ServerError, "Unsupported parameter: 'top_p'");
        assert_eq!(refused_parameter(&server), None, "only client errors");
    }

    #[test]
    fn names_round_trip() {
        for a in Adjustment::ALL {
            assert_eq!(Adjustment::parse(a.as_str()), Some(a));
            let json = serde_json::to_string(&a).unwrap();
            assert_eq!(json, format!("\"{}\"", a.as_str()));
        }
    }
}
