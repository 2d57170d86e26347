//! Model specs: `BACKEND:MODEL[@BASE_URL]`, for example `openai:gpt-4o`, `openai:qwen2-vl@http://127.0.0.1:8000/v1`,
//! `anthropic:claude-sonnet-4-5`, `gemini:gemini-2.5-pro`, `local:/models/SmolLM2.gguf`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Which wire protocol (or in-process engine) a model is reached through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    OpenAi,
    Anthropic,
    Gemini,
    Local,
}

impl BackendKind {
    pub const ALL: [BackendKind; 4] = [
        BackendKind::OpenAi,
        BackendKind::Anthropic,
        BackendKind::Gemini,
        BackendKind::Local,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::OpenAi => "openai",
            BackendKind::Anthropic => "anthropic",
            BackendKind::Gemini => "gemini",
            BackendKind::Local => "local",
        }
    }

    /// The environment variable the API key is read from (`None` for `local`).
    pub fn key_env(self) -> Option<&'static str> {
        match self {
            BackendKind::OpenAi => Some("OPENAI_API_KEY"),
            BackendKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            BackendKind::Gemini => Some("GEMINI_API_KEY"),
            BackendKind::Local => None,
        }
    }

    /// The public endpoint used when the spec names no base URL.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            BackendKind::OpenAi => Some("https://api.openai.com/v1"),
            BackendKind::Anthropic => Some("https://api.anthropic.com"),
            BackendKind::Gemini => Some("https://generativelanguage.googleapis.com"),
            BackendKind::Local => None,
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed `BACKEND:MODEL[@BASE_URL]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelSpec {
    pub backend: BackendKind,
    /// The model name sent to the API, or the GGUF path (or `hf://REPO/FILE`) for `local`.
    pub model: String,
    /// Base URL without a trailing slash; `None` means the backend's public endpoint.
    pub base_url: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error(
        "model spec {spec:?} has no backend: expected BACKEND:MODEL[@BASE_URL], e.g. openai:gpt-4o"
    )]
    MissingBackend { spec: String },
    #[error("model spec {spec:?}: unknown backend {backend:?}; expected one of openai, anthropic, gemini, local")]
    UnknownBackend { spec: String, backend: String },
    #[error("model spec {spec:?} has an empty model name after {backend:?}:")]
    EmptyModel { spec: String, backend: String },
    #[error("model spec {spec:?}: base URL {url:?} has no host after the scheme")]
    BadUrl { spec: String, url: String },
    #[error(
        "model spec {spec:?}: a local model is a file path (local:PATH) and takes no base URL"
    )]
    LocalWithUrl { spec: String },
}

impl ModelSpec {
    pub fn parse(spec: &str) -> Result<ModelSpec, SpecError> {
        let spec = spec.trim();
        let Some((backend, rest)) = spec.split_once(':') else {
            return Err(SpecError::MissingBackend { spec: spec.into() });
        };
        let kind = BackendKind::ALL
            .into_iter()
            .find(|k| k.as_str().eq_ignore_ascii_case(backend))
            .ok_or_else(|| SpecError::UnknownBackend {
                spec: spec.into(),
                backend: backend.into(),
            })?;
        let (model, url) = split_base_url(rest);
        if model.is_empty() {
            return Err(SpecError::EmptyModel {
                spec: spec.into(),
                backend: backend.into(),
            });
        }
        let base_url = match url {
            None => None,
            Some(_) if kind == BackendKind::Local => {
                return Err(SpecError::LocalWithUrl { spec: spec.into() })
            }
            Some(u) => Some(check_url(spec, u)?),
        };
        Ok(ModelSpec {
            backend: kind,
            model: model.to_string(),
            base_url,
        })
    }

    /// The base URL requests go to: the spec's own, else the backend's public one.
    pub fn effective_base_url(&self) -> Option<&str> {
        self.base_url
            .as_deref()
            .or_else(|| self.backend.default_base_url())
    }

    /// Whether requests go somewhere other than the vendor's public endpoint (a key may then be absent).
    pub fn has_custom_base_url(&self) -> bool {
        self.base_url.is_some()
    }
}

/// Splits at the first '@' followed by a URL scheme, so model names that contain '@' (e.g. `model@2024`) survive.
fn split_base_url(rest: &str) -> (&str, Option<&str>) {
    let mut from = 0;
    while let Some(pos) = rest[from..].find('@') {
        let at = from + pos;
        let tail = &rest[at + 1..];
        if tail.starts_with("http://") || tail.starts_with("https://") {
            return (&rest[..at], Some(tail));
        }
        from = at + 1;
    }
    (rest, None)
}

fn check_url(spec: &str, url: &str) -> Result<String, SpecError> {
    let after_scheme = url.split_once("://").map(|(_, r)| r).unwrap_or("");
    let host = after_scheme.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || url.contains(char::is_whitespace) {
        return Err(SpecError::BadUrl {
            spec: spec.into(),
            url: url.into(),
        });
    }
    Ok(url.trim_end_matches('/').to_string())
}

impl FromStr for ModelSpec {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ModelSpec::parse(s)
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.backend, self.model)?;
        if let Some(u) = &self.base_url {
            write!(f, "@{u}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_backend() {
        let s = ModelSpec::parse("openai:gpt-4o").unwrap();
        assert_eq!(s.backend, BackendKind::OpenAi);
        assert_eq!(s.model, "gpt-4o");
        assert_eq!(s.base_url, None);
        assert_eq!(s.effective_base_url(), Some("https://api.openai.com/v1"));
        assert_eq!(
            ModelSpec::parse("anthropic:claude-sonnet-4-5")
                .unwrap()
                .backend,
            BackendKind::Anthropic
        );
        assert_eq!(
            ModelSpec::parse("Gemini:gemini-2.5-pro").unwrap().backend,
            BackendKind::Gemini
        );
        let l = ModelSpec::parse("local:/m/SmolLM2.Q4_1.gguf").unwrap();
        assert_eq!(l.backend, BackendKind::Local);
        assert_eq!(l.model, "/m/SmolLM2.Q4_1.gguf");
    }

    #[test]
    fn splits_base_url_only_before_a_scheme() {
        let s = ModelSpec::parse("openai:org/model@v2@http://127.0.0.1:8000/v1/").unwrap();
        assert_eq!(s.model, "org/model@v2");
        assert_eq!(s.base_url.as_deref(), Some("http://127.0.0.1:8000/v1"));
        assert_eq!(
            s.to_string(),
            "openai:org/model@v2@http://127.0.0.1:8000/v1"
        );
        let s = ModelSpec::parse("openai:model@2024").unwrap();
        assert_eq!(s.model, "model@2024");
        assert!(s.base_url.is_none());
        assert_eq!(ModelSpec::parse(&s.to_string()).unwrap(), s);
        // local paths keep a colon (Windows drive letters, hf:// URLs)
        let s = ModelSpec::parse("local:hf://org/repo/file.gguf").unwrap();
        assert_eq!(s.model, "hf://org/repo/file.gguf");
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        let e = ModelSpec::parse("gpt-4o").unwrap_err();
        assert!(e.to_string().contains("BACKEND:MODEL"), "{e}");
        let e = ModelSpec::parse("mistral:large").unwrap_err();
        assert!(e.to_string().contains("unknown backend \"mistral\""), "{e}");
        assert!(matches!(
            ModelSpec::parse("openai:").unwrap_err(),
            SpecError::EmptyModel { .. }
        ));
        assert!(matches!(
            ModelSpec::parse("openai:@http://x").unwrap_err(),
            SpecError::EmptyModel { .. }
        ));
        assert!(matches!(
            ModelSpec::parse("openai:m@http://").unwrap_err(),
            SpecError::BadUrl { .. }
        ));
        assert!(matches!(
            ModelSpec::parse("local:m.gguf@http://x").unwrap_err(),
            SpecError::LocalWithUrl { .. }
        ));
    }
}
