//! Backend-neutral chat messages: what a prompt is once rendered, before any wire format.
//!
//! This leaf crate owns the conversation types every other crate speaks ([`Message`], [`Part`], [`Role`]),
//! the decoding parameters ([`GenParams`]) and output shape ([`OutputFormat`]) of a request, the conversation
//! hash that keys the response cache ([`messages_hash`]), and the form in which the run store keeps a
//! conversation ([`StoredConversation`]), written by evaluation and judge runs and read by reports. It also owns
//! how a model is named ([`ModelSpec`], `BACKEND:MODEL[@BASE_URL[,BASE_URL...]]`) and the API keys that must never
//! leave the process ([`ApiKey`], [`Secrets`]), so that crates which never call a model (reports, the viewer) can
//! name one without depending on the HTTP backends.
//!
//! It does not render prompts (`nmb-plan`), speak any wire format (`nmb-requests`), or store anything
//! (`nmb-store`). It depends on nothing of nmb's, so the backends need neither suites nor templates.
//!
//! ```
//! use nmb_chat::{messages_hash, Message, Role, StoredConversation};
//!
//! let messages = vec![Message::text(Role::User, "Where is the lesion?")];
//! let body = StoredConversation::from_messages(&messages).to_json();
//! assert_eq!(body, r#"{"messages":[{"parts":[{"text":"Where is the lesion?"}],"role":"user"}]}"#);
//! let back = StoredConversation::parse(&body).unwrap();
//! assert_eq!(back.user_text(), "Where is the lesion?");
//! assert_eq!(messages_hash(&messages).len(), 64);
//! ```

pub mod secrets;
pub mod spec;
mod stored;
pub mod thinking;

pub use secrets::{public_url, redact, url_secrets, ApiKey, Secrets};
pub use spec::{replica_name, BackendKind, ModelIdentity, ModelSpec, SpecError};
pub use stored::{StoredConversation, StoredMessage, StoredPart};
pub use thinking::{split_thinking, stopped_at_token_limit, Thought};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

/// An image inside a message. The bytes are shared, never copied per request; `sha256` identifies them in the
/// store so an image is kept once however many requests use it.
#[derive(Clone, PartialEq, Eq)]
pub struct ImagePart {
    pub sha256: String,
    /// MIME type of `bytes`, from the sniffed format (always a web format: PNG, JPEG, GIF or WebP).
    pub mime: String,
    pub bytes: Arc<[u8]>,
}

impl std::fmt::Debug for ImagePart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ImagePart({}, {}, {} bytes)",
            self.mime,
            &self.sha256[..12.min(self.sha256.len())],
            self.bytes.len()
        )
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Text(String),
    Image(ImagePart),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub role: Role,
    pub parts: Vec<Part>,
    /// Send the content as a list of parts even when it is a single text, as NeuroVLM-Bench's runner does
    /// (OpenAI's wire otherwise sends a lone text as a plain string; the API reads both alike). Not part of
    /// [`messages_hash`] or the stored conversation: the model is asked the same either way.
    pub as_parts: bool,
}

impl Message {
    pub fn text(role: Role, text: impl Into<String>) -> Self {
        Message {
            role,
            parts: vec![Part::Text(text.into())],
            as_parts: false,
        }
    }

    /// All text parts joined by blank lines (for text-only backends and token estimates).
    pub fn joined_text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Text(t) => Some(t.as_str()),
                Part::Image(_) => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    pub fn image_count(&self) -> usize {
        self.parts
            .iter()
            .filter(|p| matches!(p, Part::Image(_)))
            .count()
    }
}

/// Decoding parameters. Recorded with every request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenParams {
    pub temperature: f64,
    pub top_p: f64,
    pub max_tokens: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// How hard a reasoning model thinks (`--reasoning-effort`); absent unless asked, so that parameters
    /// recorded before it existed read and hash the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Tokens a model may think before answering (`--thinking-budget`: Anthropic's extended thinking
    /// `budget_tokens`, Gemini's `thinkingBudget`); absent unless asked, as for `reasoning_effort`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Sampling parameters left out of every request (`--temperature none`, `--top-p none`), so that the
    /// server's own defaults apply; absent unless some are, as for `reasoning_effort`.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub unsent: BTreeSet<SamplingParam>,
    /// Fields added to the top level of every request body (`--extra-body`: vLLM's `chat_template_kwargs`,
    /// `top_k`, `min_p`), replacing a field of the same name; absent unless given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extra_body: Option<BTreeMap<String, serde_json::Value>>,
}

/// A sampling parameter a request can go without.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplingParam {
    Temperature,
    TopP,
}

impl GenParams {
    /// Whether requests carry a temperature.
    pub fn sends_temperature(&self) -> bool {
        !self.unsent.contains(&SamplingParam::Temperature)
    }

    /// Whether requests carry a `top_p`.
    pub fn sends_top_p(&self) -> bool {
        !self.unsent.contains(&SamplingParam::TopP)
    }
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams {
            temperature: 0.7,
            top_p: 0.95,
            max_tokens: 1024,
            seed: None,
            reasoning_effort: None,
            thinking_budget: None,
            unsent: BTreeSet::new(),
            extra_body: None,
        }
    }
}

/// A reasoning model's effort, as OpenAI names the levels (`reasoning_effort`); each wire says it its own way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    /// No thinking where the model can go without (GPT-5.1's `none`, Gemini 2.5's budget 0).
    None,
    Minimal,
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    pub const ALL: [ReasoningEffort; 5] = [
        ReasoningEffort::None,
        ReasoningEffort::Minimal,
        ReasoningEffort::Low,
        ReasoningEffort::Medium,
        ReasoningEffort::High,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::None => "none",
            ReasoningEffort::Minimal => "minimal",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

impl std::fmt::Display for ReasoningEffort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reasoning effort that is not one of the levels.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown reasoning effort {0:?}; expected none, minimal, low, medium or high")]
pub struct ReasoningEffortError(pub String);

impl std::str::FromStr for ReasoningEffort {
    type Err = ReasoningEffortError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        ReasoningEffort::ALL
            .into_iter()
            .find(|e| e.as_str() == lower)
            .ok_or_else(|| ReasoningEffortError(s.to_string()))
    }
}

/// What output shape to ask the backend for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum OutputFormat {
    Text,
    /// JSON, optionally constrained by a JSON schema where the backend supports one.
    Json {
        schema: Option<serde_json::Value>,
    },
}

/// A stable hash of a conversation: roles, texts and image content hashes (not image bytes).
pub fn messages_hash(messages: &[Message]) -> String {
    let mut h = Sha256::new();
    for m in messages {
        h.update(format!("{:?}\u{1}", m.role).as_bytes());
        for p in &m.parts {
            match p {
                Part::Text(t) => {
                    h.update(b"T");
                    h.update((t.len() as u64).to_le_bytes());
                    h.update(t.as_bytes());
                }
                Part::Image(i) => {
                    h.update(b"I");
                    h.update(i.sha256.as_bytes());
                }
            }
        }
        h.update(b"\x02");
    }
    hex::encode(h.finalize())
}
