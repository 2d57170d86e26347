//! The stored form of a conversation: `{"messages": [{"parts": [{"text"} | {"image", "mime"}], "role"}]}`.
//!
//! Texts are kept verbatim and images by content hash only (the store keeps their bytes once, apart). Fields are
//! declared in key order, so the JSON is the same bytes a `serde_json::json!` map of the same keys gives, which is
//! what stores written before this type existed hold.

use serde::{Deserialize, Serialize};

use crate::{Message, Part, Role};

/// A conversation as the run store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredConversation {
    pub messages: Vec<StoredMessage>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredMessage {
    pub parts: Vec<StoredPart>,
    pub role: Role,
}

/// A text, or an image named by the SHA-256 of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StoredPart {
    Image { image: String, mime: String },
    Text { text: String },
}

impl StoredConversation {
    pub fn from_messages(messages: &[Message]) -> Self {
        let messages = messages
            .iter()
            .map(|m| StoredMessage {
                parts: m.parts.iter().map(stored_part).collect(),
                role: m.role,
            })
            .collect();
        StoredConversation { messages }
    }

    /// The JSON text the store keeps.
    pub fn to_json(&self) -> String {
        // Plain strings and enums only: serialising cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }

    pub fn parse(body: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(body)
    }

    /// The user messages, in order.
    pub fn user_messages(&self) -> impl Iterator<Item = &StoredMessage> {
        self.messages.iter().filter(|m| m.role == Role::User)
    }

    /// Every user message's text parts, joined by blank lines (a test and debugging aid).
    pub fn user_text(&self) -> String {
        self.user_messages()
            .map(StoredMessage::text)
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

impl StoredMessage {
    /// The text parts joined by blank lines.
    pub fn text(&self) -> String {
        self.parts
            .iter()
            .filter_map(|p| match p {
                StoredPart::Text { text } => Some(text.as_str()),
                StoredPart::Image { .. } => None,
            })
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    /// Content hashes of the images, in order.
    pub fn images(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            StoredPart::Image { image, .. } => Some(image.as_str()),
            StoredPart::Text { .. } => None,
        })
    }
}

fn stored_part(p: &Part) -> StoredPart {
    match p {
        Part::Text(t) => StoredPart::Text { text: t.clone() },
        Part::Image(i) => StoredPart::Image {
            image: i.sha256.clone(),
            mime: i.mime.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ImagePart;

    fn conversation() -> Vec<Message> {
        vec![
            Message::text(Role::System, "You are an experienced neurology expert."),
            Message {
                role: Role::User,
                as_parts: false,
                parts: vec![
                    Part::Text("Case: \"quoted\" <b>".into()),
                    Part::Image(ImagePart {
                        sha256: "ab".repeat(32),
                        mime: "image/png".into(),
                        bytes: Arc::from(&b"png"[..]),
                    }),
                    Part::Text("Question?".into()),
                ],
            },
            Message::text(Role::Assistant, "1. Stroke"),
            Message::text(Role::User, "New evidence."),
        ]
    }

    /// The bytes stores already hold: what `json!` made before this type existed.
    fn legacy_body(messages: &[Message]) -> String {
        let messages: Vec<serde_json::Value> = messages
            .iter()
            .map(|m| {
                let parts: Vec<serde_json::Value> = m
                    .parts
                    .iter()
                    .map(|p| match p {
                        Part::Text(t) => serde_json::json!({"text": t}),
                        Part::Image(i) => serde_json::json!({"image": i.sha256, "mime": i.mime}),
                    })
                    .collect();
                serde_json::json!({"role": m.role, "parts": parts})
            })
            .collect();
        serde_json::json!({ "messages": messages }).to_string()
    }

    #[test]
    fn writes_the_bytes_older_stores_hold() {
        let messages = conversation();
        let body = StoredConversation::from_messages(&messages).to_json();
        assert_eq!(body, legacy_body(&messages));
    }

    #[test]
    fn reads_back_what_it_wrote() {
        let stored = StoredConversation::from_messages(&conversation());
        let back = StoredConversation::parse(&stored.to_json()).unwrap();
        assert_eq!(back, stored);
        let users: Vec<&StoredMessage> = back.user_messages().collect();
        assert_eq!(users.len(), 2);
        assert_eq!(users[0].text(), "Case: \"quoted\" <b>\n\nQuestion?");
        assert_eq!(users[0].images().collect::<Vec<_>>(), ["ab".repeat(32)]);
    }

    #[test]
    fn refuses_what_is_not_a_conversation() {
        assert!(StoredConversation::parse("{}").is_err());
        assert!(
            StoredConversation::parse(r#"{"messages":[{"role":"user","parts":[{"x":1}]}]}"#)
                .is_err()
        );
    }
}
