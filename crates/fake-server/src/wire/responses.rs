//! Response bodies in each wire format: successes, errors and injected faults.

use serde_json::json;

use super::{estimated_tokens, ReceivedPart, ReceivedRequest, Wire, IMAGE_CHARS};
use crate::exchange::Response;
use crate::fault::Fault;

/// Rough token counts ([`estimated_tokens`], one more so that none is 0) of the prompt and the answers.
fn usage(req: &ReceivedRequest, texts: &[String]) -> (u64, u64) {
    let chars: usize = req
        .messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .map(|p| match p {
            ReceivedPart::Text { text } => text.len(),
            _ => IMAGE_CHARS,
        })
        .sum();
    let out: usize = texts.iter().map(String::len).sum();
    (estimated_tokens(chars) + 1, estimated_tokens(out) + 1)
}

/// A forced tool's answer comes back as its input (when the text is a JSON object, as the real API guarantees);
/// anything else as text.
fn anthropic_block(req: &ReceivedRequest, text: String) -> serde_json::Value {
    let object = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .filter(serde_json::Value::is_object);
    match (&req.params.forced_tool, object) {
        (Some(name), Some(input)) => json!({
            "type": "tool_use", "id": format!("toolu_fake_{}", req.seq), "name": name, "input": input
        }),
        _ => json!({"type": "text", "text": text}),
    }
}

/// With extended thinking enabled, the thinking block that comes before the answer, signed so that the
/// server can tell it unchanged when a later turn sends it back.
fn anthropic_thinking(req: &ReceivedRequest) -> Option<serde_json::Value> {
    req.params.thinking_budget?;
    let asked = req
        .messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .and_then(|m| {
            m.parts.iter().find_map(|p| match p {
                ReceivedPart::Text { text } => Some(text.chars().take(60).collect::<String>()),
                _ => None,
            })
        })
        .unwrap_or_default();
    let thinking = format!("Thinking about request {}: {asked}", req.seq);
    let signature = super::anthropic::thinking_signature(&thinking);
    Some(json!({"type": "thinking", "thinking": thinking, "signature": signature}))
}

/// A successful answer with one choice per text.
pub(crate) fn success(req: &ReceivedRequest, texts: &[String]) -> Response {
    let (input, output) = usage(req, texts);
    let body = match req.wire {
        Wire::OpenAi => json!({
            "id": format!("chatcmpl-fake-{}", req.seq),
            "object": "chat.completion",
            "created": 0,
            "model": req.model,
            "choices": texts.iter().enumerate().map(|(i, t)| json!({
                "index": i,
                "message": {"role": "assistant", "content": t},
                "finish_reason": "stop",
            })).collect::<Vec<_>>(),
            "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output},
        }),
        Wire::Anthropic => {
            let thinking = anthropic_thinking(req);
            let thought = thinking
                .as_ref()
                .map_or(0, |t| estimated_tokens(t.to_string().len()));
            let block = anthropic_block(req, texts.first().cloned().unwrap_or_default());
            let content: Vec<serde_json::Value> = thinking.into_iter().chain([block]).collect();
            json!({
                "id": format!("msg_fake_{}", req.seq),
                "type": "message",
                "role": "assistant",
                "model": req.model,
                "content": content,
                "stop_reason": if req.params.forced_tool.is_some() { "tool_use" } else { "end_turn" },
                "stop_sequence": null,
                // Thinking is billed as output; `input_tokens` leaves out what the cache read or wrote.
                "usage": {
                    "input_tokens": input.saturating_sub(req.params.cache_read + req.params.cache_write),
                    "cache_read_input_tokens": req.params.cache_read,
                    "cache_creation_input_tokens": req.params.cache_write,
                    "output_tokens": output + thought,
                },
            })
        }
        Wire::Gemini => json!({
            "candidates": texts.iter().enumerate().map(|(i, t)| json!({
                "content": {"parts": [{"text": t}], "role": "model"},
                "finishReason": "STOP",
                "index": i,
            })).collect::<Vec<_>>(),
            "usageMetadata": {"promptTokenCount": input, "candidatesTokenCount": output,
                              "totalTokenCount": input + output},
            "modelVersion": req.model,
        }),
    };
    Response::json(200, body)
}

/// The wire's error body for `status`.
pub(crate) fn error(wire: Wire, status: u16, message: &str) -> Response {
    let body = match wire {
        Wire::OpenAi => json!({"error": {
            "message": message, "type": openai_error_type(status), "param": null,
            "code": if status == 429 { json!("rate_limit_exceeded") } else { json!(null) },
        }}),
        Wire::Anthropic => json!({"type": "error", "error": {
            "type": anthropic_error_type(status), "message": message,
        }}),
        Wire::Gemini => json!({"error": {
            "code": status, "message": message, "status": gemini_status(status),
        }}),
    };
    Response::json(status, body)
}

fn openai_error_type(status: u16) -> &'static str {
    match status {
        429 => "requests",
        401 | 403 => "authentication_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

fn anthropic_error_type(status: u16) -> &'static str {
    match status {
        429 => "rate_limit_error",
        401 => "authentication_error",
        402 => "billing_error",
        413 => "request_too_large",
        504 => "timeout_error",
        403 => "permission_error",
        404 => "not_found_error",
        529 => "overloaded_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

fn gemini_status(status: u16) -> &'static str {
    match status {
        429 => "RESOURCE_EXHAUSTED",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        409 => "ABORTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        400..=499 => "INVALID_ARGUMENT",
        _ => "INTERNAL",
    }
}

/// The response a fault produces, for faults that produce one.
pub(crate) fn fault_response(req: &ReceivedRequest, fault: &Fault) -> Option<Response> {
    let wire = req.wire;
    Some(match fault {
        Fault::RateLimit {
            retry_after,
            retry_after_ms,
        } => {
            let mut r = error(wire, 429, "Rate limit reached for requests (fake server)");
            if let Some(v) = retry_after {
                r.headers.push(("retry-after".into(), v.clone()));
            }
            if let Some(ms) = retry_after_ms {
                r.headers.push(("retry-after-ms".into(), ms.to_string()));
            }
            r
        }
        Fault::Status(code) => error(wire, *code, &format!("fake server fault: status {code}")),
        Fault::ContextLength => error(wire, 400, context_message(wire)),
        Fault::Malformed => Response {
            status: 200,
            headers: Vec::new(),
            body: "{\"choices\": [{\"message\": {\"content\": \"trunc".into(),
        },
        Fault::Empty => Response::json(200, empty_body(req)),
        Fault::Refusal => Response::json(200, refusal_body(req)),
        Fault::Exhausted => Response::json(200, exhausted_body(req)),
        Fault::RetryInfo(secs) => retry_info(wire, secs),
        Fault::Quota => quota(wire),
        Fault::NoRetry(code) => {
            let mut r = error(
                wire,
                *code,
                &format!("fake server fault: status {code}, not to be retried"),
            );
            r.headers.push(("x-should-retry".into(), "false".into()));
            r
        }
        Fault::Reset | Fault::Slow(_) | Fault::Hang | Fault::Hostile(_) => return None,
    })
}

/// A 429 whose wait is in the body: Gemini's error model puts a `google.rpc.RetryInfo` in `error.details`
/// (`{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "31s"}`, a `google.protobuf.Duration`)
/// and sends no Retry-After header. The other wires have no such detail: a plain 429.
fn retry_info(wire: Wire, secs: &str) -> Response {
    if wire != Wire::Gemini {
        return error(wire, 429, "Rate limit reached for requests (fake server)");
    }
    Response::json(
        429,
        json!({"error": {
            "code": 429,
            "message": "You exceeded your current quota, please check your plan and billing details. Please retry in 31s.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                    "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                    "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": format!("{secs}s")},
            ],
        }}),
    )
}

/// The account's quota used up, in each provider's words: OpenAI's 429 with code `insufficient_quota` ("You
/// exceeded your current quota, please check your plan and billing details"); Anthropic's 402 `billing_error`
/// (its errors page: "There is an issue with your account's billing or payment information"); Gemini's 429
/// `RESOURCE_EXHAUSTED` whose `google.rpc.QuotaFailure` names a daily quota
/// (`GenerateRequestsPerDayPerProjectPerModel`).
fn quota(wire: Wire) -> Response {
    let body = match wire {
        Wire::OpenAi => json!({"error": {
            "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.",
            "type": "insufficient_quota", "param": null, "code": "insufficient_quota",
        }}),
        Wire::Anthropic => json!({"type": "error", "error": {
            "type": "billing_error",
            "message": "There is an issue with your account's billing or payment information.",
        }}),
        Wire::Gemini => json!({"error": {
            "code": 429,
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                    "quotaMetric": "generativelanguage.googleapis.com/generate_requests_per_model_per_day",
                    "quotaId": "GenerateRequestsPerDayPerProjectPerModel"}]},
                {"@type": "type.googleapis.com/google.rpc.Help", "links": [{
                    "description": "Learn more about Gemini API quotas",
                    "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
            ],
        }}),
    };
    let status = if wire == Wire::Anthropic { 402 } else { 429 };
    Response::json(status, body)
}

/// A model that used every output token thinking: what each wire answers (see [`Fault::Exhausted`]).
fn exhausted_body(req: &ReceivedRequest) -> serde_json::Value {
    let limit = req.params.max_tokens.unwrap_or(1024);
    let (input, _) = usage(req, &[]);
    let thinking =
        "The lesion pattern suggests several possibilities; weighing each in turn".to_string();
    match req.wire {
        Wire::OpenAi => {
            json!({"id": "chatcmpl-exhausted", "object": "chat.completion", "model": req.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "reasoning_content": thinking},
                         "finish_reason": "length"}],
            "usage": {"prompt_tokens": input, "completion_tokens": limit, "total_tokens": input + limit,
                      "completion_tokens_details": {"reasoning_tokens": limit}}})
        }
        Wire::Anthropic => {
            let signature = super::anthropic::thinking_signature(&thinking);
            json!({"id": "msg_exhausted", "type": "message", "role": "assistant", "model": req.model,
                "content": [{"type": "thinking", "thinking": thinking, "signature": signature}],
                "stop_reason": "max_tokens", "stop_sequence": null,
                "usage": {"input_tokens": input, "output_tokens": limit}})
        }
        Wire::Gemini => json!({
            "candidates": [{"content": {"role": "model"}, "finishReason": "MAX_TOKENS", "index": 0}],
            "usageMetadata": {"promptTokenCount": input, "thoughtsTokenCount": limit.saturating_sub(1),
                              "totalTokenCount": input + limit.saturating_sub(1)},
            "modelVersion": req.model,
        }),
    }
}

fn context_message(wire: Wire) -> &'static str {
    match wire {
        Wire::OpenAi => "This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.",
        Wire::Anthropic => "prompt is too long: 215000 tokens > 200000 maximum",
        Wire::Gemini => "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
    }
}

fn empty_body(req: &ReceivedRequest) -> serde_json::Value {
    match req.wire {
        Wire::OpenAi => {
            json!({"id": "chatcmpl-empty", "object": "chat.completion", "model": req.model,
            "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}})
        }
        Wire::Anthropic => json!({"id": "msg_empty", "type": "message", "role": "assistant",
            "model": req.model, "content": [], "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 0}}),
        Wire::Gemini => json!({"candidates": [],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 0, "totalTokenCount": 1}}),
    }
}

fn refusal_body(req: &ReceivedRequest) -> serde_json::Value {
    match req.wire {
        Wire::OpenAi => {
            json!({"id": "chatcmpl-filtered", "object": "chat.completion", "model": req.model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null},
                         "finish_reason": "content_filter"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1}})
        }
        Wire::Anthropic => json!({"id": "msg_refusal", "type": "message", "role": "assistant",
            "model": req.model, "content": [], "stop_reason": "refusal",
            "usage": {"input_tokens": 1, "output_tokens": 0}}),
        Wire::Gemini => json!({"promptFeedback": {"blockReason": "SAFETY"},
            "usageMetadata": {"promptTokenCount": 1, "totalTokenCount": 1}}),
    }
}
