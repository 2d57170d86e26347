//! The three wire formats: parsing real request JSON into a [`ReceivedRequest`] and writing real response JSON.

use std::borrow::Cow;
use std::sync::Arc;

use base64::Engine;
use nmb_plan::chat::{ImagePart, Message, Part, Role};
use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::fault::Fault;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Wire {
    OpenAi,
    Anthropic,
    Gemini,
}

impl Wire {
    /// Which wire a POST path belongs to, and the model named in the path (Gemini only).
    pub fn route(path: &str) -> Option<(Wire, Option<String>)> {
        let path = path.split('?').next().unwrap_or("");
        if path.ends_with("/chat/completions") {
            return Some((Wire::OpenAi, None));
        }
        if path.ends_with("/v1/messages") {
            return Some((Wire::Anthropic, None));
        }
        let rest = path.split_once("/models/")?.1;
        let model = rest.strip_suffix(":generateContent")?;
        Some((Wire::Gemini, Some(model.to_string())))
    }
}

/// One part of a received message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ReceivedPart {
    Text {
        text: String,
    },
    /// An inline (base64) image: the SHA-256 and length of the decoded bytes (hash empty when image hashing
    /// is off).
    Image {
        mime: String,
        sha256: String,
        bytes: usize,
    },
    /// An image given by URL rather than inline data.
    ImageUrl {
        url: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReceivedMessage {
    /// `system`, `user` or `assistant`, whatever the wire called it (Gemini `model` is `assistant`).
    pub role: String,
    pub parts: Vec<ReceivedPart>,
}

impl ReceivedMessage {
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                ReceivedPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    pub fn image_hashes(&self) -> Vec<&str> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                ReceivedPart::Image { sha256, .. } => Some(sha256.as_str()),
                _ => None,
            })
            .collect()
    }
}

/// Decoding parameters as sent, whatever the wire named them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ReceivedParams {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    /// `max_tokens`, `max_completion_tokens` or `maxOutputTokens`.
    pub max_tokens: Option<u64>,
    /// Which field carried `max_tokens`.
    pub max_tokens_field: Option<String>,
    pub seed: Option<u64>,
    /// `n` or `candidateCount`.
    pub n: Option<u64>,
    /// JSON output was requested (`response_format`, `responseMimeType: application/json`).
    pub json: bool,
    /// A JSON schema came with it.
    pub json_schema: Option<serde_json::Value>,
}

/// An authentication header as it arrived. Kept out of logs; tests read it to check the key's route.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthSeen {
    pub header: String,
    pub value: String,
}

impl std::fmt::Debug for AuthSeen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AuthSeen({}: [REDACTED])", self.header)
    }
}

/// Everything the server learned from one request.
#[derive(Debug, Clone, Serialize)]
pub struct ReceivedRequest {
    /// Arrival order, from 0.
    pub seq: u64,
    pub wire: Wire,
    pub path: String,
    /// The query string, with any `key=` value replaced by `[REDACTED]`.
    pub query: String,
    /// The query string carried a `key` parameter (Gemini keys must travel in a header instead).
    pub key_in_query: bool,
    pub model: String,
    /// The conversation in order; a top-level system prompt (Anthropic, Gemini) comes first as role `system`.
    pub messages: Vec<ReceivedMessage>,
    pub params: ReceivedParams,
    /// Header names and values, with authentication values replaced by `[REDACTED]`.
    pub headers: Vec<(String, String)>,
    #[serde(skip)]
    pub auth: Option<AuthSeen>,
    /// SHA-256 (hex) of the authentication header value, so logs can match keys without holding them.
    pub auth_sha256: Option<String>,
    /// `nmb_plan::chat::messages_hash` of the conversation as received.
    pub conversation_sha256: String,
    pub body_bytes: usize,
}

impl ReceivedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// All text of all messages, joined (where `FAULT:` markers are looked for).
    pub fn all_text(&self) -> String {
        self.messages
            .iter()
            .map(ReceivedMessage::text)
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub fn image_count(&self) -> usize {
        self.messages
            .iter()
            .flat_map(|m| m.parts.iter())
            .filter(|p| {
                matches!(
                    p,
                    ReceivedPart::Image { .. } | ReceivedPart::ImageUrl { .. }
                )
            })
            .count()
    }

    pub fn samples(&self) -> u64 {
        self.params.n.unwrap_or(1).max(1)
    }
}

const AUTH_HEADERS: [&str; 4] = ["authorization", "x-api-key", "x-goog-api-key", "api-key"];

pub(crate) struct Head<'a> {
    pub path: &'a str,
    pub headers: Vec<(String, String)>,
}

/// Parses a request body of the given wire. Errors are plain messages for a 400 reply.
pub(crate) fn parse_request(
    wire: Wire,
    path_model: Option<String>,
    head: Head<'_>,
    body: &[u8],
    hash_images: bool,
) -> Result<ReceivedRequest, String> {
    let (model, messages, params) = match wire {
        Wire::OpenAi => parse_openai(body, hash_images)?,
        Wire::Anthropic => parse_anthropic(body, hash_images)?,
        Wire::Gemini => {
            let (m, p) = parse_gemini(body, hash_images)?;
            (path_model.unwrap_or_default(), m, p)
        }
    };
    let (path, query) = head.path.split_once('?').unwrap_or((head.path, ""));
    let key_in_query = query
        .split('&')
        .any(|kv| kv.split('=').next() == Some("key"));
    let query = redact_query(query);
    let mut auth = None;
    let headers = head
        .headers
        .into_iter()
        .map(|(n, v)| {
            if AUTH_HEADERS.contains(&n.to_ascii_lowercase().as_str()) {
                auth = Some(AuthSeen {
                    header: n.to_ascii_lowercase(),
                    value: v,
                });
                (n, "[REDACTED]".to_string())
            } else {
                (n, v)
            }
        })
        .collect();
    let auth_sha256 = auth
        .as_ref()
        .map(|a: &AuthSeen| hex::encode(Sha256::digest(a.value.as_bytes())));
    Ok(ReceivedRequest {
        seq: 0,
        wire,
        path: path.to_string(),
        query,
        key_in_query,
        model,
        conversation_sha256: conversation_hash(&messages),
        messages,
        params,
        headers,
        auth,
        auth_sha256,
        body_bytes: body.len(),
    })
}

fn redact_query(q: &str) -> String {
    q.split('&')
        .map(|kv| match kv.split_once('=') {
            Some(("key", _)) => "key=[REDACTED]".to_string(),
            _ => kv.to_string(),
        })
        .collect::<Vec<_>>()
        .join("&")
}

/// The same hash nmb computes for a rendered conversation, so logs can be matched to cache keys.
fn conversation_hash(messages: &[ReceivedMessage]) -> String {
    let empty: Arc<[u8]> = Arc::from(Vec::new());
    let msgs: Vec<Message> = messages
        .iter()
        .map(|m| Message {
            role: match m.role.as_str() {
                "system" => Role::System,
                "assistant" => Role::Assistant,
                _ => Role::User,
            },
            parts: m
                .parts
                .iter()
                .map(|p| match p {
                    ReceivedPart::Text { text } => Part::Text(text.clone()),
                    ReceivedPart::Image { mime, sha256, .. } => Part::Image(ImagePart {
                        sha256: sha256.clone(),
                        mime: mime.clone(),
                        bytes: empty.clone(),
                    }),
                    ReceivedPart::ImageUrl { url } => Part::Text(format!("<image {url}>")),
                })
                .collect(),
        })
        .collect();
    nmb_plan::chat::messages_hash(&msgs)
}

fn image_part(mime: &str, data: &str, hash_images: bool) -> Result<ReceivedPart, String> {
    if !hash_images {
        return Ok(ReceivedPart::Image {
            mime: mime.to_string(),
            sha256: String::new(),
            bytes: data.len() / 4 * 3,
        });
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.as_bytes())
        .map_err(|e| format!("image data is not valid base64: {e}"))?;
    Ok(ReceivedPart::Image {
        mime: mime.to_string(),
        sha256: hex::encode(Sha256::digest(&bytes)),
        bytes: bytes.len(),
    })
}

fn json_err(wire: &str, e: serde_json::Error) -> String {
    format!("{wire} request body does not match the wire format: {e}")
}

// ---- OpenAI ----

#[derive(Deserialize)]
struct OaRequest<'a> {
    #[serde(borrow)]
    model: Cow<'a, str>,
    #[serde(borrow)]
    messages: Vec<OaMessage<'a>>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    max_tokens: Option<u64>,
    max_completion_tokens: Option<u64>,
    seed: Option<u64>,
    n: Option<u64>,
    response_format: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct OaMessage<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(borrow)]
    content: Option<OaContent<'a>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OaContent<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Parts(#[serde(borrow)] Vec<OaPart<'a>>),
}

#[derive(Deserialize)]
struct OaPart<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    image_url: Option<OaImageUrl<'a>>,
}

#[derive(Deserialize)]
struct OaImageUrl<'a> {
    #[serde(borrow)]
    url: Cow<'a, str>,
}

type Parsed = (String, Vec<ReceivedMessage>, ReceivedParams);

fn parse_openai(body: &[u8], hash_images: bool) -> Result<Parsed, String> {
    let r: OaRequest = serde_json::from_slice(body).map_err(|e| json_err("OpenAI", e))?;
    let mut messages = Vec::with_capacity(r.messages.len());
    for m in &r.messages {
        let parts = match &m.content {
            None => Vec::new(),
            Some(OaContent::Text(t)) => vec![ReceivedPart::Text {
                text: t.to_string(),
            }],
            Some(OaContent::Parts(ps)) => ps
                .iter()
                .map(|p| openai_part(p, hash_images))
                .collect::<Result<_, _>>()?,
        };
        messages.push(ReceivedMessage {
            role: m.role.to_string(),
            parts,
        });
    }
    let (max_tokens, field) = match (r.max_tokens, r.max_completion_tokens) {
        (Some(t), _) => (Some(t), Some("max_tokens")),
        (None, Some(t)) => (Some(t), Some("max_completion_tokens")),
        _ => (None, None),
    };
    let json_schema = r
        .response_format
        .as_ref()
        .and_then(|f| f.pointer("/json_schema/schema"))
        .cloned();
    let params = ReceivedParams {
        temperature: r.temperature,
        top_p: r.top_p,
        max_tokens,
        max_tokens_field: field.map(str::to_string),
        seed: r.seed,
        n: r.n,
        json: r.response_format.is_some(),
        json_schema,
    };
    Ok((r.model.to_string(), messages, params))
}

fn openai_part(p: &OaPart<'_>, hash_images: bool) -> Result<ReceivedPart, String> {
    match (p.kind.as_ref(), &p.text, &p.image_url) {
        ("text", Some(t), _) => Ok(ReceivedPart::Text {
            text: t.to_string(),
        }),
        ("image_url", _, Some(u)) => match parse_data_url(&u.url) {
            Some((mime, data)) => image_part(mime, data, hash_images),
            None => Ok(ReceivedPart::ImageUrl {
                url: u.url.to_string(),
            }),
        },
        (kind, _, _) => Err(format!(
            "OpenAI content part of type {kind:?} lacks its field"
        )),
    }
}

/// `data:MIME;base64,DATA` -> (MIME, DATA).
fn parse_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let mime = meta.strip_suffix(";base64")?;
    Some((mime, data))
}

// ---- Anthropic ----

#[derive(Deserialize)]
struct AnRequest<'a> {
    #[serde(borrow)]
    model: Cow<'a, str>,
    max_tokens: Option<u64>,
    #[serde(borrow)]
    system: Option<AnContent<'a>>,
    #[serde(borrow)]
    messages: Vec<AnMessage<'a>>,
    temperature: Option<f64>,
    top_p: Option<f64>,
}

#[derive(Deserialize)]
struct AnMessage<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
    #[serde(borrow)]
    content: AnContent<'a>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AnContent<'a> {
    Text(#[serde(borrow)] Cow<'a, str>),
    Blocks(#[serde(borrow)] Vec<AnBlock<'a>>),
}

#[derive(Deserialize)]
struct AnBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    source: Option<AnSource<'a>>,
}

#[derive(Deserialize)]
struct AnSource<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    media_type: Option<Cow<'a, str>>,
    #[serde(borrow)]
    data: Option<Cow<'a, str>>,
    #[serde(borrow)]
    url: Option<Cow<'a, str>>,
}

fn parse_anthropic(body: &[u8], hash_images: bool) -> Result<Parsed, String> {
    let r: AnRequest = serde_json::from_slice(body).map_err(|e| json_err("Anthropic", e))?;
    let mut messages = Vec::with_capacity(r.messages.len() + 1);
    if let Some(system) = &r.system {
        messages.push(ReceivedMessage {
            role: "system".into(),
            parts: anthropic_parts(system, hash_images)?,
        });
    }
    for m in &r.messages {
        if m.role != "user" && m.role != "assistant" {
            return Err(format!(
                "Anthropic message role {:?}: expected user or assistant (system is a top-level field)",
                m.role
            ));
        }
        messages.push(ReceivedMessage {
            role: m.role.to_string(),
            parts: anthropic_parts(&m.content, hash_images)?,
        });
    }
    if r.max_tokens.is_none() {
        return Err("Anthropic request lacks the required max_tokens".into());
    }
    let params = ReceivedParams {
        temperature: r.temperature,
        top_p: r.top_p,
        max_tokens: r.max_tokens,
        max_tokens_field: Some("max_tokens".into()),
        ..ReceivedParams::default()
    };
    Ok((r.model.to_string(), messages, params))
}

fn anthropic_parts(c: &AnContent<'_>, hash_images: bool) -> Result<Vec<ReceivedPart>, String> {
    let blocks = match c {
        AnContent::Text(t) => {
            return Ok(vec![ReceivedPart::Text {
                text: t.to_string(),
            }])
        }
        AnContent::Blocks(b) => b,
    };
    blocks
        .iter()
        .map(|b| match (b.kind.as_ref(), &b.text, &b.source) {
            ("text", Some(t), _) => Ok(ReceivedPart::Text {
                text: t.to_string(),
            }),
            ("image", _, Some(s)) => anthropic_image(s, hash_images),
            (kind, _, _) => Err(format!(
                "Anthropic content block of type {kind:?} lacks its field"
            )),
        })
        .collect()
}

fn anthropic_image(s: &AnSource<'_>, hash_images: bool) -> Result<ReceivedPart, String> {
    match (s.kind.as_ref(), &s.media_type, &s.data, &s.url) {
        ("base64", Some(mime), Some(data), _) => image_part(mime, data, hash_images),
        ("url", _, _, Some(url)) => Ok(ReceivedPart::ImageUrl {
            url: url.to_string(),
        }),
        (kind, ..) => Err(format!(
            "Anthropic image source of type {kind:?} lacks media_type/data"
        )),
    }
}

// ---- Gemini ----

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GmRequest<'a> {
    #[serde(borrow)]
    contents: Vec<GmContent<'a>>,
    #[serde(borrow, alias = "system_instruction")]
    system_instruction: Option<GmContent<'a>>,
    #[serde(alias = "generation_config")]
    generation_config: Option<GmConfig>,
}

#[derive(Deserialize)]
struct GmContent<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    parts: Vec<GmPart<'a>>,
}

#[derive(Deserialize)]
struct GmPart<'a> {
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, alias = "inlineData")]
    inline_data: Option<GmInline<'a>>,
}

#[derive(Deserialize)]
struct GmInline<'a> {
    #[serde(borrow, alias = "mimeType")]
    mime_type: Cow<'a, str>,
    #[serde(borrow)]
    data: Cow<'a, str>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct GmConfig {
    temperature: Option<f64>,
    #[serde(alias = "top_p")]
    top_p: Option<f64>,
    #[serde(alias = "max_output_tokens")]
    max_output_tokens: Option<u64>,
    #[serde(alias = "candidate_count")]
    candidate_count: Option<u64>,
    seed: Option<u64>,
    #[serde(alias = "response_mime_type")]
    response_mime_type: Option<String>,
    #[serde(alias = "response_json_schema")]
    response_json_schema: Option<serde_json::Value>,
    #[serde(alias = "response_schema")]
    response_schema: Option<serde_json::Value>,
}

fn parse_gemini(
    body: &[u8],
    hash_images: bool,
) -> Result<(Vec<ReceivedMessage>, ReceivedParams), String> {
    let r: GmRequest = serde_json::from_slice(body).map_err(|e| json_err("Gemini", e))?;
    let mut messages = Vec::with_capacity(r.contents.len() + 1);
    if let Some(s) = &r.system_instruction {
        messages.push(ReceivedMessage {
            role: "system".into(),
            parts: gemini_parts(s, hash_images)?,
        });
    }
    for c in &r.contents {
        let role = match c.role.as_deref() {
            Some("model") => "assistant",
            Some("user") | None => "user",
            Some(other) => {
                return Err(format!(
                    "Gemini content role {other:?}: expected user or model"
                ))
            }
        };
        messages.push(ReceivedMessage {
            role: role.into(),
            parts: gemini_parts(c, hash_images)?,
        });
    }
    let params = match r.generation_config {
        None => ReceivedParams::default(),
        Some(g) => ReceivedParams {
            temperature: g.temperature,
            top_p: g.top_p,
            max_tokens: g.max_output_tokens,
            max_tokens_field: g.max_output_tokens.map(|_| "maxOutputTokens".into()),
            seed: g.seed,
            n: g.candidate_count,
            json: g.response_mime_type.as_deref() == Some("application/json"),
            json_schema: g.response_json_schema.or(g.response_schema),
        },
    };
    Ok((messages, params))
}

fn gemini_parts(c: &GmContent<'_>, hash_images: bool) -> Result<Vec<ReceivedPart>, String> {
    c.parts
        .iter()
        .map(|p| match (&p.text, &p.inline_data) {
            (Some(t), None) => Ok(ReceivedPart::Text {
                text: t.to_string(),
            }),
            (None, Some(d)) => image_part(&d.mime_type, &d.data, hash_images),
            _ => Err("Gemini part must have exactly one of text or inline_data".into()),
        })
        .collect()
}

// ---- Responses ----

/// An HTTP response ready to write.
pub(crate) struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    fn json(status: u16, body: serde_json::Value) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }
}

/// Rough token counts, so usage fields are plausible and depend on the input.
fn usage(req: &ReceivedRequest, texts: &[String]) -> (u64, u64) {
    let chars: usize = req
        .messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .map(|p| match p {
            ReceivedPart::Text { text } => text.len(),
            _ => 340, // about 85 tokens per image
        })
        .sum();
    let out: usize = texts.iter().map(String::len).sum();
    ((chars / 4 + 1) as u64, (out / 4 + 1) as u64)
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
        Wire::Anthropic => json!({
            "id": format!("msg_fake_{}", req.seq),
            "type": "message",
            "role": "assistant",
            "model": req.model,
            "content": [{"type": "text", "text": texts.first().cloned().unwrap_or_default()}],
            "stop_reason": "end_turn",
            "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": output},
        }),
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
        503 => "UNAVAILABLE",
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
        Fault::Reset | Fault::Slow(_) | Fault::Hang => return None,
    })
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
