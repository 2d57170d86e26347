//! Provider batch APIs: many requests submitted as one job and answered within hours, at half the price of
//! calls sent one at a time.
//!
//! This module speaks the three protocols: OpenAI's Batch API (a JSONL file uploaded to `/files`, a job on
//! `/batches`, output and error files), Anthropic's Message Batches, and Gemini's batch mode with inlined
//! requests. Each request of a batch is the body a single call would send, wrapped with its custom id; each
//! answer is read by the same [`Wire::parse`] a single call's answer is. Outputs are read as they arrive
//! (`stream`): each line or inlined response under the cap of one answer, the whole under the most its
//! requests' answers can take. It does not decide which requests go together, record batches, or wait for them:
//! `nmb-record`'s batcher does.
//!
//! What a caller sees of a batch API, [`BatchApi`] and its types, is declared beside [`crate::Backend`], which
//! hands it out, and re-exported here; this module implements it for [`HttpBackend`].

mod anthropic;
mod gemini;
mod openai;
mod stream;

pub use crate::backend::{BatchApi, BatchItem, BatchLimits, BatchProtocol, Polled};

use std::time::Duration;

use serde_json::Value;

use crate::backend::{finish, BoxFuture, ChatRequest, Completion};
use crate::body::Body;
use crate::error::{CallError, ErrorClass};
use crate::http::{endpoint, HttpBackend, Wire};
use crate::transport::{open, send};

/// The most bytes a batch API answer that is not an output may take (a created batch, a page of batches, an
/// uploaded file's record).
pub const CONTROL_BYTES: u64 = 64 << 20;

/// A batch line's answer before it is parsed: its custom id and the response body, or why it has none.
pub(crate) enum Line {
    Answer(String, Result<String, CallError>),
    /// Expired or cancelled before it was answered.
    Unanswered,
}

impl<W: Wire> HttpBackend<W> {
    fn protocol(&self) -> BatchProtocol {
        self.wire.batch_protocol().unwrap_or(BatchProtocol::OpenAi)
    }

    /// The URL of `path` on the first replica (a batch lives on one server).
    pub(crate) fn batch_url(&self, path: &str) -> String {
        let bases = self.spec.effective_base_urls();
        endpoint(bases.first().copied().unwrap_or(""), path)
    }

    /// Sends a batch API request with the key and returns its 2xx body (at most [`CONTROL_BYTES`]); errors are
    /// classified and redacted.
    pub(crate) async fn batch_send(
        &self,
        http: reqwest::RequestBuilder,
    ) -> Result<String, CallError> {
        let secret = self.key.as_ref().map(|k| k.expose());
        let classify = |status: u16, body: &str| self.wire.classify(status, body);
        let limits = self.transport.limits(CONTROL_BYTES);
        let reply = send(self.authorised(http), secret, classify, limits).await;
        Ok(reply.map_err(|e| self.redact_urls(self.hinted(e)))?.body)
    }

    /// Sends a batch API request with the key and returns its 2xx body unread, to be read as it arrives (at
    /// most `max_bytes` of it, by the transport's deadline).
    pub(crate) async fn batch_open(
        &self,
        http: reqwest::RequestBuilder,
        max_bytes: u64,
    ) -> Result<Body, CallError> {
        let secret = self.key.as_ref().map(|k| k.expose());
        let classify = |status: u16, body: &str| self.wire.classify(status, body);
        let limits = self.transport.limits(max_bytes);
        let body = open(self.authorised(http), secret, classify, limits).await;
        body.map_err(|e| self.redact_urls(self.hinted(e)))
    }

    fn redact_urls(&self, mut e: CallError) -> CallError {
        for s in &self.url_secrets {
            e = e.redacted(Some(s));
        }
        e
    }

    pub(crate) async fn get_json(&self, url: &str) -> Result<Value, CallError> {
        let body = self.batch_send(self.transport.client.get(url)).await?;
        json(&body)
    }

    pub(crate) async fn post_json(&self, url: &str, body: &Value) -> Result<Value, CallError> {
        let http = self
            .transport
            .client
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string());
        json(&self.batch_send(http).await?)
    }

    /// The body a single call would send, as JSON.
    pub(crate) fn body_json(&self, req: &ChatRequest) -> Result<Value, CallError> {
        crate::backend::check_n(self, req)?;
        self.warn_once(req);
        self.body_value(req)
    }

    /// A response body of a batch line read as a single call's answer would be.
    fn answer(&self, raw: String) -> Result<Completion, CallError> {
        let parsed = self
            .wire
            .parse(&raw)
            .and_then(|a| finish(a.choices, raw, a.usage, Duration::ZERO));
        self.redact_all(parsed)
    }

    /// The class of a failed line, from the status its provider gives it (or an equivalent) and its body.
    pub(crate) fn line_error(&self, status: u16, body: &str) -> CallError {
        let class = self.wire.classify(status, body);
        let message = format!("batch request failed (status {status}): {body}");
        // The body goes with it, as with a single call's error, so that a refused parameter is recognised; both
        // are cut to what a single call's error keeps once the keys are out of them.
        let error = CallError::new(class, message).with_raw(body.to_string());
        self.redact_all(Err(error))
            .map_err(|mut e| {
                e.message = crate::error::snippet(&e.message, 400);
                e.raw = (e.raw)
                    .map(|r| crate::error::snippet(&r, crate::body::ERROR_BODY_BYTES as usize));
                e
            })
            .err()
            .unwrap_or_else(|| CallError::new(class, "batch request failed"))
    }

    fn items(&self, lines: Vec<Line>) -> Vec<BatchItem> {
        lines
            .into_iter()
            .filter_map(|l| match l {
                Line::Answer(custom_id, raw) => Some(BatchItem {
                    custom_id,
                    result: raw.and_then(|r| self.answer(r)),
                }),
                Line::Unanswered => None,
            })
            .collect()
    }
}

impl<W: Wire> BatchApi for HttpBackend<W> {
    fn protocol(&self) -> BatchProtocol {
        HttpBackend::protocol(self)
    }

    fn body(&self, req: &ChatRequest) -> Result<Value, CallError> {
        self.body_json(req)
    }

    fn response_cap(&self, req: &ChatRequest) -> u64 {
        self.transport.response_cap(req)
    }

    fn entry(&self, custom_id: &str, body: Value) -> Value {
        match self.protocol() {
            BatchProtocol::OpenAi => openai::entry(custom_id, body),
            BatchProtocol::Anthropic => anthropic::entry(custom_id, body),
            BatchProtocol::Gemini => gemini::entry(custom_id, body),
        }
    }

    fn submit<'a>(
        &'a self,
        tag: &'a str,
        entries: &'a [Value],
    ) -> BoxFuture<'a, Result<String, CallError>> {
        Box::pin(async move {
            match self.protocol() {
                BatchProtocol::OpenAi => openai::submit(self, tag, entries).await,
                BatchProtocol::Anthropic => anthropic::submit(self, entries).await,
                BatchProtocol::Gemini => gemini::submit(self, tag, entries).await,
            }
        })
    }

    fn find<'a>(
        &'a self,
        tag: &'a str,
        since: &'a str,
        requests: u64,
    ) -> BoxFuture<'a, Result<Option<String>, CallError>> {
        Box::pin(async move {
            match self.protocol() {
                BatchProtocol::OpenAi => openai::find(self, tag).await,
                BatchProtocol::Anthropic => anthropic::find(self, since, requests).await,
                BatchProtocol::Gemini => gemini::find(self, tag).await,
            }
        })
    }

    fn poll<'a>(
        &'a self,
        id: &'a str,
        custom_ids: &'a [String],
        line_cap: u64,
    ) -> BoxFuture<'a, Result<Polled, CallError>> {
        Box::pin(async move {
            let state = match self.protocol() {
                BatchProtocol::OpenAi => openai::poll(self, id, custom_ids, line_cap).await?,
                BatchProtocol::Anthropic => anthropic::poll(self, id, custom_ids, line_cap).await?,
                BatchProtocol::Gemini => gemini::poll(self, id, custom_ids, line_cap).await?,
            };
            Ok(match state {
                Progress::Running => Polled::Running,
                Progress::Failed(e) => {
                    Polled::Failed(self.redact_all(Err(e)).err().unwrap_or_else(|| {
                        CallError::new(ErrorClass::ClientError, "the batch failed")
                    }))
                }
                Progress::Ended(lines) => Polled::Ended(self.items(lines)),
            })
        })
    }
}

/// [`Polled`] before the answers are parsed.
pub(crate) enum Progress {
    Running,
    Ended(Vec<Line>),
    Failed(CallError),
}

pub(crate) fn json(body: &str) -> Result<Value, CallError> {
    serde_json::from_str(body).map_err(|e| {
        CallError::new(
            ErrorClass::MalformedResponse,
            format!("batch API answered something that is not JSON: {e}"),
        )
        .with_raw(crate::error::snippet(body, 4096))
    })
}

/// A field the protocol requires, or the malformed-response error naming it.
pub(crate) fn field<'a>(v: &'a Value, pointer: &str) -> Result<&'a Value, CallError> {
    v.pointer(pointer).filter(|f| !f.is_null()).ok_or_else(|| {
        CallError::new(
            ErrorClass::MalformedResponse,
            format!("batch API answer has no {pointer}"),
        )
        .with_raw(stream::head(v))
    })
}

pub(crate) fn text_field(v: &Value, pointer: &str) -> Result<String, CallError> {
    field(v, pointer)?
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| {
            CallError::new(
                ErrorClass::MalformedResponse,
                format!("batch API answer's {pointer} is not text"),
            )
        })
}

/// Reads a JSONL output line by line, handing `read` the line of each request the batch holds (the first one
/// for it); a line too long to read, or not JSON, is its request's error where its first bytes name the request,
/// and is left out where they do not (the request is then unanswered, and sent again).
pub(crate) async fn read_jsonl(
    body: Body,
    what: String,
    line_cap: u64,
    wanted: &mut stream::Wanted,
    mut read: impl FnMut(&Value) -> Result<Line, CallError>,
) -> Result<Vec<Line>, CallError> {
    let mut lines = Vec::new();
    let mut reader = stream::Lines::new(body, what.clone(), line_cap);
    while let Some(raw) = reader.next().await? {
        let id = match &raw {
            stream::RawLine::Json(v) => v
                .get("custom_id")
                .and_then(Value::as_str)
                .map(str::to_string),
            _ => raw.head_custom_id(),
        };
        let Some(id) = id else {
            tracing::warn!("{what}: a line that names no request was left out");
            continue;
        };
        if !wanted.take(&id) {
            continue;
        }
        lines.push(match raw {
            stream::RawLine::Json(v) => read(&v)?,
            stream::RawLine::TooLong { bytes, .. } => {
                Line::Answer(id, Err(stream::line_too_large(&what, bytes, line_cap)))
            }
            stream::RawLine::NotJson { error, .. } => {
                Line::Answer(id, Err(stream::line_not_json(&what, &error)))
            }
        });
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::BatchProtocol;

    #[test]
    fn byte_limits_are_counted_as_the_providers_count_them() {
        assert_eq!(BatchProtocol::OpenAi.limits().max_bytes, 200_000_000);
        assert_eq!(BatchProtocol::Anthropic.limits().max_bytes, 256_000_000);
        assert_eq!(BatchProtocol::Gemini.limits().max_bytes, 20_000_000);
    }
}
