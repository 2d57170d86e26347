//! API keys: the one type that holds one, and the set a process knows, so that they can be cut out of anything
//! stored or shown.

use std::fmt;

use crate::spec::BackendKind;

/// An API key. Its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }

    /// Reads `var`; an unset or blank variable is `None`.
    pub fn from_env(var: &str) -> Option<ApiKey> {
        std::env::var(var)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .map(ApiKey)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([REDACTED])")
    }
}

/// Removes `secret` from `text`. Short secrets are not searched for: they would match ordinary words.
pub fn redact(text: &str, secret: &str) -> String {
    if secret.len() < 6 || !text.contains(secret) {
        return text.to_string();
    }
    text.replace(secret, "[REDACTED]")
}

/// Known API keys. `Debug` shows only how many there are.
#[derive(Clone, Default)]
pub struct Secrets(Vec<String>);

impl Secrets {
    /// The keys in `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` and `GEMINI_API_KEY` (those set).
    pub fn from_env() -> Self {
        let keys = [
            BackendKind::OpenAi,
            BackendKind::Anthropic,
            BackendKind::Gemini,
        ]
        .into_iter()
        .filter_map(BackendKind::key_env)
        .filter_map(ApiKey::from_env)
        .map(|k| k.expose().to_string())
        .collect();
        Secrets(keys)
    }

    /// These keys and `key`.
    pub fn with(mut self, key: &str) -> Self {
        if !self.0.iter().any(|k| k == key) {
            self.0.push(key.to_string());
        }
        self
    }

    /// `text` with every known key replaced by `[REDACTED]`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for key in &self.0 {
            out = redact(&out, key);
        }
        out
    }
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} keys)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_key_is_cut_and_debug_shows_none() {
        let s = Secrets::default()
            .with("sk-first-123456")
            .with("AIza-second-789");
        let text = "a sk-first-123456 b AIza-second-789 c sk-first-123456";
        assert_eq!(s.redact(text), "a [REDACTED] b [REDACTED] c [REDACTED]");
        assert_eq!(format!("{s:?}"), "Secrets(2 keys)");
        assert_eq!(Secrets::default().redact(text), text);
    }
}
