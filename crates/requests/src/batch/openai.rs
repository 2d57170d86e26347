//! OpenAI's Batch API (<https://platform.openai.com/docs/guides/batch>): "upload a `.jsonl` file with
//! purpose `batch`", each line `{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}`; create
//! the batch with that `input_file_id`, `endpoint` and `completion_window: "24h"`; poll `GET /batches/{id}`
//! until its status is `completed`, `expired`, `cancelled` or `failed`; then read `output_file_id` and
//! `error_file_id`. "Requests that were not completed in time are written to the error file with code
//! `batch_expired`." A batch `completed` that names neither file has nothing to read and cannot be: its poll is a
//! malformed answer (polled again a few times, then given up), never an empty end that would send every request
//! again.

use serde_json::{json, Value};

use super::stream::{output_cap, Wanted};
use super::{field, read_jsonl, text_field, Line, Progress};
use crate::error::{CallError, ErrorClass};
use crate::http::{HttpBackend, Wire};

const ENDPOINT: &str = "/v1/chat/completions";

pub(super) fn entry(custom_id: &str, body: Value) -> Value {
    json!({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body})
}

pub(super) async fn submit<W: Wire>(
    b: &HttpBackend<W>,
    tag: &str,
    entries: &[Value],
) -> Result<String, CallError> {
    let mut file = String::new();
    for e in entries {
        file.push_str(&e.to_string());
        file.push('\n');
    }
    let part = reqwest::multipart::Part::text(file)
        .file_name(format!("{tag}.jsonl"))
        .mime_str("application/jsonl")
        .map_err(|e| {
            CallError::new(
                ErrorClass::Other,
                format!("cannot build the batch file: {e}"),
            )
        })?;
    let form = reqwest::multipart::Form::new()
        .text("purpose", "batch")
        .part("file", part);
    let upload = b
        .transport
        .client
        .post(b.batch_url("/files"))
        .multipart(form);
    let uploaded = super::json(&b.batch_send(upload).await?)?;
    let file_id = text_field(&uploaded, "/id")?;
    let create = json!({
        "input_file_id": file_id,
        "endpoint": ENDPOINT,
        "completion_window": "24h",
        "metadata": {"nmb_batch": tag},
    });
    let batch = b.post_json(&b.batch_url("/batches"), &create).await?;
    text_field(&batch, "/id")
}

pub(super) async fn find<W: Wire>(
    b: &HttpBackend<W>,
    tag: &str,
) -> Result<Option<String>, CallError> {
    let list = b.get_json(&b.batch_url("/batches?limit=100")).await?;
    let data = field(&list, "/data")?
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(data
        .iter()
        .find(|d| d.pointer("/metadata/nmb_batch").and_then(Value::as_str) == Some(tag))
        .and_then(|d| d.get("id")?.as_str().map(str::to_string)))
}

pub(super) async fn poll<W: Wire>(
    b: &HttpBackend<W>,
    id: &str,
    custom_ids: &[String],
    line_cap: u64,
) -> Result<Progress, CallError> {
    let batch = b.get_json(&b.batch_url(&format!("/batches/{id}"))).await?;
    let status = text_field(&batch, "/status")?;
    match status.as_str() {
        "completed" | "expired" | "cancelled" => {}
        "failed" => return Ok(Progress::Failed(failure(id, &batch))),
        // validating, in_progress, finalizing, cancelling
        _ => return Ok(Progress::Running),
    }
    let files: Vec<(&str, &str)> = [("output", "/output_file_id"), ("error", "/error_file_id")]
        .into_iter()
        .filter_map(|(kind, pointer)| Some((kind, batch.pointer(pointer)?.as_str()?)))
        .collect();
    if status == "completed" && files.is_empty() {
        return Err(CallError::new(
            ErrorClass::MalformedResponse,
            format!(
                "OpenAI reports batch {id} completed but names neither an output nor an error file"
            ),
        )
        .with_raw(super::stream::head(&batch)));
    }
    let mut wanted = Wanted::new(custom_ids);
    let mut lines = Vec::new();
    for (kind, file_id) in files {
        let url = b.batch_url(&format!("/files/{file_id}/content"));
        let cap = output_cap(custom_ids.len(), line_cap);
        let body = b.batch_open(b.transport.client.get(url), cap).await?;
        let what = format!("the {kind} file of batch {id}");
        let read = |line: &Value| read_line(b, line);
        lines.extend(read_jsonl(body, what, line_cap, &mut wanted, read).await?);
    }
    Ok(Progress::Ended(lines))
}

/// Why OpenAI failed a batch, from its `errors.data[]` (`{"code", "message", "param", "line"}`). A batch refused
/// for the organisation's enqueued-token limit ("token_limit_exceeded": "Enqueued token limit reached for
/// gpt-4o ... Please try again once some in_progress batches have been completed.") is a rate limit, to be sent
/// again later in smaller batches; any other failure is a client error with OpenAI's messages.
fn failure(id: &str, batch: &Value) -> CallError {
    let errors = batch.pointer("/errors/data").and_then(Value::as_array);
    let errors = errors.map(Vec::as_slice).unwrap_or_default();
    let code = |e: &Value| {
        e.get("code")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let said: Vec<String> = errors
        .iter()
        .map(|e| {
            let message = e.get("message").and_then(Value::as_str).unwrap_or("");
            let line = e.get("line").and_then(Value::as_u64);
            let line = line.map_or_else(String::new, |l| format!(" (line {l})"));
            format!("{}: {message}{line}", code(e))
        })
        .collect();
    let said = if said.is_empty() {
        "no reason given".to_string()
    } else {
        said.join("; ")
    };
    let limited = errors.iter().any(|e| code(e) == "token_limit_exceeded");
    let class = if limited {
        ErrorClass::RateLimit
    } else {
        ErrorClass::ClientError
    };
    CallError::new(class, format!("OpenAI failed batch {id}: {said}")).with_raw(
        batch
            .get("errors")
            .map_or_else(String::new, Value::to_string),
    )
}

fn read_line<W: Wire>(b: &HttpBackend<W>, line: &Value) -> Result<Line, CallError> {
    let custom_id = text_field(line, "/custom_id")?;
    if let Some(response) = line.get("response").filter(|r| !r.is_null()) {
        let status = response
            .get("status_code")
            .and_then(Value::as_u64)
            .and_then(|s| u16::try_from(s).ok())
            .unwrap_or(0);
        let body = response
            .get("body")
            .map_or_else(String::new, Value::to_string);
        let result = if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err(b.line_error(status, &body))
        };
        return Ok(Line::Answer(custom_id, result));
    }
    let code = line
        .pointer("/error/code")
        .and_then(Value::as_str)
        .unwrap_or("");
    if matches!(code, "batch_expired" | "batch_cancelled") {
        return Ok(Line::Unanswered);
    }
    let error = line.get("error").map_or_else(String::new, Value::to_string);
    let e = CallError::new(ErrorClass::Other, format!("batch request failed: {error}"));
    Ok(Line::Answer(custom_id, Err(e)))
}
