//! Anthropic's Message Batches (<https://docs.anthropic.com/en/api/creating-message-batches>): `POST
//! /v1/messages/batches` with `{"requests": [{"custom_id", "params"}]}`, where `params` is a Messages request;
//! poll `GET /v1/messages/batches/{id}` until `processing_status` is `ended`; then read the JSONL at
//! `results_url`, one `{"custom_id", "result": {"type": "succeeded" | "errored" | "canceled" | "expired"}}` per
//! request. A batch keeps no metadata, so a batch submitted by a stopped process is found by its creation time
//! and request count.

use serde_json::{json, Value};

use super::stream::{output_cap, Wanted};
use super::{field, read_jsonl, text_field, Line, Progress};
use crate::error::CallError;
use crate::http::{HttpBackend, Wire};

const PATH: &str = "/v1/messages/batches";

pub(super) fn entry(custom_id: &str, body: Value) -> Value {
    json!({"custom_id": custom_id, "params": body})
}

pub(super) async fn submit<W: Wire>(
    b: &HttpBackend<W>,
    entries: &[Value],
) -> Result<String, CallError> {
    let batch = b
        .post_json(&b.batch_url(PATH), &json!({"requests": entries}))
        .await?;
    text_field(&batch, "/id")
}

pub(super) async fn find<W: Wire>(
    b: &HttpBackend<W>,
    since: &str,
    requests: u64,
) -> Result<Option<String>, CallError> {
    let list = b
        .get_json(&b.batch_url(&format!("{PATH}?limit=100")))
        .await?;
    let data = field(&list, "/data")?
        .as_array()
        .cloned()
        .unwrap_or_default();
    let total = |d: &Value| -> u64 {
        let counts = d.get("request_counts").and_then(Value::as_object);
        counts.map_or(0, |c| c.values().filter_map(Value::as_u64).sum())
    };
    // RFC 3339 times in UTC compare as text.
    let matching: Vec<&Value> = data
        .iter()
        .filter(|d| {
            d.get("created_at")
                .and_then(Value::as_str)
                .is_some_and(|c| c >= since)
        })
        .filter(|d| total(d) == requests)
        .collect();
    Ok(match matching.as_slice() {
        [one] => one.get("id").and_then(Value::as_str).map(str::to_string),
        _ => None,
    })
}

pub(super) async fn poll<W: Wire>(
    b: &HttpBackend<W>,
    id: &str,
    custom_ids: &[String],
    line_cap: u64,
) -> Result<Progress, CallError> {
    let batch = b.get_json(&b.batch_url(&format!("{PATH}/{id}"))).await?;
    if text_field(&batch, "/processing_status")? != "ended" {
        return Ok(Progress::Running);
    }
    let url = text_field(&batch, "/results_url")?;
    if !same_origin(&url, &b.batch_url(PATH)) {
        // The key goes with the request: only to the server the batch was submitted to.
        return Err(CallError::new(
            crate::error::ErrorClass::MalformedResponse,
            "the batch's results_url is not on the server it was submitted to; not sending the API key there",
        ));
    }
    let cap = output_cap(custom_ids.len(), line_cap);
    let body = b.batch_open(b.transport.client.get(url), cap).await?;
    let what = format!("the results of batch {id}");
    let mut wanted = Wanted::new(custom_ids);
    let lines = read_jsonl(body, what, line_cap, &mut wanted, |l| read_line(b, l)).await?;
    Ok(Progress::Ended(lines))
}

/// Whether two URLs share scheme, host and port.
fn same_origin(a: &str, b: &str) -> bool {
    match (reqwest::Url::parse(a), reqwest::Url::parse(b)) {
        (Ok(a), Ok(b)) => a.origin() == b.origin(),
        _ => false,
    }
}

fn read_line<W: Wire>(b: &HttpBackend<W>, line: &Value) -> Result<Line, CallError> {
    let custom_id = text_field(line, "/custom_id")?;
    let result = field(line, "/result")?;
    Ok(match result.get("type").and_then(Value::as_str) {
        Some("succeeded") => Line::Answer(custom_id, Ok(field(result, "/message")?.to_string())),
        Some("errored") => {
            let error = result
                .get("error")
                .map_or_else(String::new, Value::to_string);
            let kind = result
                .pointer("/error/error/type")
                .and_then(Value::as_str)
                .unwrap_or("");
            Line::Answer(custom_id, Err(b.line_error(status_of(kind), &error)))
        }
        _ => Line::Unanswered,
    })
}

/// The HTTP status Anthropic documents for each error type (<https://docs.anthropic.com/en/api/errors>), so that
/// a batch line's error is classed as the same error of a single call is.
fn status_of(kind: &str) -> u16 {
    match kind {
        "invalid_request_error" => 400,
        "authentication_error" => 401,
        "permission_error" => 403,
        "not_found_error" => 404,
        "billing_error" => 402,
        "request_too_large" => 413,
        "rate_limit_error" => 429,
        "timeout_error" => 504,
        "overloaded_error" => 529,
        _ => 500,
    }
}

#[cfg(test)]
mod tests {
    use super::same_origin;

    #[test]
    fn results_are_fetched_only_from_the_batch_server() {
        let base = "https://api.anthropic.com/v1/messages/batches";
        assert!(same_origin(
            "https://api.anthropic.com/v1/messages/batches/msgbatch_1/results",
            base
        ));
        assert!(!same_origin(
            "https://evil.example/v1/messages/batches/msgbatch_1/results",
            base
        ));
        assert!(!same_origin("http://api.anthropic.com/results", base));
        assert!(!same_origin("https://api.anthropic.com:8443/results", base));
        assert!(!same_origin("not a url", base));
    }
}
