//! The three wire formats: parsing real request JSON into a [`ReceivedRequest`] and writing real response JSON.

mod anthropic;
mod gemini;
mod openai;
mod refusals;
mod responses;

use std::sync::Arc;

use base64::Engine;
use nmb_chat::{ImagePart, Message, Part, Role};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use anthropic::parse_anthropic;
use gemini::parse_gemini;
use openai::parse_openai;
pub use refusals::is_reasoning_model;
pub(crate) use refusals::refusal;
pub(crate) use responses::{error, fault_response, success};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Wire {
    OpenAi,
    Anthropic,
    Gemini,
}

/// The characters an image counts as in the rough token estimate ([`estimated_tokens`]): about 85 tokens.
pub(crate) const IMAGE_CHARS: usize = 340;

/// The rough token count of `chars` characters (4 a token) that usage fields and the prompt cache's sizes give,
/// so that they are plausible and depend on the input.
pub(crate) fn estimated_tokens(chars: usize) -> u64 {
    (chars / 4) as u64
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
        /// Dimensions of the decoded image (`None` when image hashing is off).
        width: Option<u32>,
        height: Option<u32>,
        /// The image's bytes, for responders that look at the pixels (the simulated vision model); `None`
        /// when image hashing is off. Never logged.
        #[serde(skip)]
        data: Option<Arc<[u8]>>,
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
    /// The tool a request forced (Anthropic `tool_choice: {type: tool, name}`): the answer comes back as that
    /// tool's input.
    pub forced_tool: Option<String>,
    /// How hard a reasoning model was asked to think, as sent: OpenAI's `reasoning_effort` (a string) or
    /// Gemini's `thinkingConfig` (an object).
    pub reasoning: Option<serde_json::Value>,
    /// Anthropic extended thinking's `budget_tokens` (`thinking: {type: enabled, budget_tokens}`).
    pub thinking_budget: Option<u64>,
    /// Thinking blocks that came back in assistant turns, each with the signature this server gave it
    /// (a wrong one is refused).
    pub thinking_blocks_back: u32,
    /// Anthropic's prompt cache: the SHA-256 and estimated tokens of the prefix up to the request's last
    /// `cache_control` mark, and what the server's cache made of it: the tokens read from it (a prefix seen
    /// before) or written to it (the first time).
    pub cache_prefix: Option<(String, u64)>,
    pub cache_read: u64,
    pub cache_write: u64,
    /// The body's other top-level fields, as sent (OpenAI wire only).
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub other: std::collections::BTreeMap<String, serde_json::Value>,
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
    /// `nmb_chat::messages_hash` of the conversation as received.
    pub conversation_sha256: String,
    pub body_bytes: usize,
    /// The body as sent, where the server keeps bodies ([`crate::Config::keep_bodies`]).
    #[serde(skip)]
    pub body: Option<Arc<str>>,
    /// The custom id it had in a batch; `None` for a request sent alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<String>,
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
        body: None,
        batch: None,
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
            as_parts: false,
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
    nmb_chat::messages_hash(&msgs)
}

fn image_part(mime: &str, data: &str, hash_images: bool) -> Result<ReceivedPart, String> {
    if !hash_images {
        return Ok(ReceivedPart::Image {
            mime: mime.to_string(),
            sha256: String::new(),
            bytes: data.len() / 4 * 3,
            width: None,
            height: None,
            data: None,
        });
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data.as_bytes())
        .map_err(|e| format!("image data is not valid base64: {e}"))?;
    // A real API refuses an image that does not decode, or whose bytes are not the declared type.
    let format = nmb_imaging::verify(&bytes).map_err(|e| format!("image does not decode: {e}"))?;
    if format.mime() != mime {
        return Err(format!(
            "image declared {mime} but its bytes are {}",
            format.mime()
        ));
    }
    let info = nmb_imaging::inspect(&bytes).map_err(|e| format!("image does not decode: {e}"))?;
    Ok(ReceivedPart::Image {
        mime: mime.to_string(),
        sha256: info.sha256,
        bytes: bytes.len(),
        width: info.width,
        height: info.height,
        data: Some(bytes.into()),
    })
}

fn json_err(wire: &str, e: serde_json::Error) -> String {
    format!("{wire} request body does not match the wire format: {e}")
}

type Parsed = (String, Vec<ReceivedMessage>, ReceivedParams);
