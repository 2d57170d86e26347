//! Gemini's batch mode (<https://ai.google.dev/gemini-api/docs/batch-mode>), with inlined requests: `POST
//! /v1beta/models/{model}:batchGenerateContent` with `{"batch": {"displayName", "inputConfig": {"requests":
//! {"requests": [{"request", "metadata": {"key"}}]}}}}` returns an operation named `batches/{id}`; poll `GET
//! /v1beta/batches/{id}` until `metadata.state` is `BATCH_STATE_SUCCEEDED`, `_FAILED`, `_CANCELLED` or
//! `_EXPIRED`. The inlined responses "will be in the same order as the input requests"; each holds a
//! `response` or an `error` (a google.rpc.Status). They come inside the operation, which is read as it arrives,
//! each response under its own cap; a batch that succeeded without a response to read is a malformed answer.

use serde_json::{json, Value};

use super::stream::output_cap;
use super::{field, text_field, Line, Progress};
use crate::error::{grpc_http_status, CallError, ErrorClass};
use crate::http::{HttpBackend, Wire};

pub(super) fn entry(custom_id: &str, body: Value) -> Value {
    json!({"request": body, "metadata": {"key": custom_id}})
}

pub(super) async fn submit<W: Wire>(
    b: &HttpBackend<W>,
    tag: &str,
    entries: &[Value],
) -> Result<String, CallError> {
    let model = b.spec.model.trim_start_matches("models/");
    let url = b.batch_url(&format!("/v1beta/models/{model}:batchGenerateContent"));
    let body = json!({"batch": {
        "displayName": tag,
        "inputConfig": {"requests": {"requests": entries}},
    }});
    let operation = b.post_json(&url, &body).await?;
    text_field(&operation, "/name")
}

pub(super) async fn find<W: Wire>(
    b: &HttpBackend<W>,
    tag: &str,
) -> Result<Option<String>, CallError> {
    let list = b
        .get_json(&b.batch_url("/v1beta/batches?pageSize=100"))
        .await?;
    let operations = list
        .get("operations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Ok(operations
        .iter()
        .find(|o| o.pointer("/metadata/displayName").and_then(Value::as_str) == Some(tag))
        .and_then(|o| o.get("name")?.as_str().map(str::to_string)))
}

pub(super) async fn poll<W: Wire>(
    b: &HttpBackend<W>,
    name: &str,
    custom_ids: &[String],
    line_cap: u64,
) -> Result<Progress, CallError> {
    let url = b.batch_url(&format!("/v1beta/{name}"));
    let cap = output_cap(custom_ids.len(), line_cap).max(super::CONTROL_BYTES);
    let body = b.batch_open(b.transport.client.get(url), cap).await?;
    let what = format!("the operation of batch {name}");
    let read = super::stream::operation(body, what, line_cap, custom_ids.len(), cap).await?;
    let operation = read.head;
    let state = text_field(&operation, "/metadata/state")?;
    match state.as_str() {
        "BATCH_STATE_SUCCEEDED" | "BATCH_STATE_CANCELLED" | "BATCH_STATE_EXPIRED" => {}
        "BATCH_STATE_FAILED" => {
            let error = operation.get("error").cloned().unwrap_or(Value::Null);
            let code = error.get("code").and_then(Value::as_u64).unwrap_or(2);
            let said = error
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("no reason given");
            // RESOURCE_EXHAUSTED (a batch quota) clears as other batches finish: sent again later, smaller.
            let class = if http_status(code) == 429 {
                ErrorClass::RateLimit
            } else {
                ErrorClass::ClientError
            };
            let e = CallError::new(class, format!("Gemini failed batch {name}: {said}"));
            return Ok(Progress::Failed(e.with_raw(error.to_string())));
        }
        _ => return Ok(Progress::Running),
    }
    if state == "BATCH_STATE_SUCCEEDED" && read.responses.is_empty() && !custom_ids.is_empty() {
        return Err(CallError::new(
            ErrorClass::MalformedResponse,
            format!("Gemini reports batch {name} succeeded but holds no inlined responses"),
        )
        .with_raw(super::stream::head(&operation)));
    }
    if read.extra > 0 {
        tracing::warn!(
            batch = name,
            extra = read.extra,
            "Gemini answered more responses than the batch has requests; the rest were left out"
        );
    }
    let mut lines = Vec::new();
    for (i, r) in read.responses.iter().enumerate() {
        let key = r.pointer("/metadata/key").and_then(Value::as_str);
        let Some(custom_id) = key
            .map(str::to_string)
            .or_else(|| custom_ids.get(i).cloned())
        else {
            continue;
        };
        let line = if let Some(response) = r.get("response") {
            Line::Answer(custom_id, Ok(response.to_string()))
        } else {
            let error = field(r, "/error")?;
            let code = error.get("code").and_then(Value::as_u64).unwrap_or(2);
            let status = http_status(code);
            // The body as a single call's error would carry it, so that the class is read from the same words.
            let body = json!({ "error": error }).to_string();
            Line::Answer(custom_id, Err(b.line_error(status, &body)))
        };
        lines.push(line);
    }
    Ok(Progress::Ended(lines))
}

/// The HTTP status of an inline error's `code`: a `google.rpc.Status` carries a gRPC code (3 INVALID_ARGUMENT, 8
/// RESOURCE_EXHAUSTED, 13 INTERNAL, 14 UNAVAILABLE, ...), mapped as `google.rpc.Code` documents; a number that
/// can only be an HTTP status (100 and up) is read as one.
fn http_status(code: u64) -> u16 {
    match u16::try_from(code) {
        Ok(status) if (100..600).contains(&status) => status,
        _ => grpc_http_status(code),
    }
}

#[cfg(test)]
mod tests {
    use super::http_status;
    use crate::error::{classify_status, ErrorClass};

    #[test]
    fn inline_error_codes_are_grpc_codes() {
        let class = |code| classify_status(http_status(code), "");
        assert_eq!(class(3), ErrorClass::ClientError);
        assert_eq!(class(8), ErrorClass::RateLimit);
        assert_eq!(class(13), ErrorClass::ServerError);
        assert_eq!(class(14), ErrorClass::ServerError);
        assert_eq!(class(429), ErrorClass::RateLimit);
        assert_eq!(class(u64::MAX), ErrorClass::ServerError);
    }
}
