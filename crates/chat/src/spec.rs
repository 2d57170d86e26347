//! Model specs: `BACKEND:MODEL[@BASE_URL[,BASE_URL...]]`, for example `openai:gpt-4o`,
//! `openai:qwen2-vl@http://127.0.0.1:8000/v1`, `anthropic:claude-sonnet-4-5`, `gemini:gemini-2.5-pro`,
//! `local:/models/SmolLM2.gguf`, `human:lee` (a clinician's stored answers: NAME letters, digits and `._-`).
//!
//! Several comma-separated base URLs are replicas: servers that serve the same model
//! (`openai:qwen2-vl@http://a:8000/v1,http://b:8000/v1`). Calls are spread over them (see `nmb_requests::replicas`),
//! and the first one names the model: [`ModelSpec::identity`] is the spec with that URL alone, so a run, its
//! configuration hash and its cached answers are the same whichever replicas serve it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::secrets::{public_url, url_secrets};

/// Which wire protocol (or in-process engine) a model is reached through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    OpenAi,
    Anthropic,
    Gemini,
    Local,
    /// A clinician's answers, stored in the run store (`nmb import`, `nmb review answer`): a human baseline.
    Human,
    /// Answers another program already got from a model, read from its output file by `nmb import` (e.g. the
    /// JSONL of NeuroVLM-Bench's `run_async.py`): the model is never asked again.
    Imported,
}

impl BackendKind {
    pub const ALL: [BackendKind; 6] = [
        BackendKind::OpenAi,
        BackendKind::Anthropic,
        BackendKind::Gemini,
        BackendKind::Local,
        BackendKind::Human,
        BackendKind::Imported,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::OpenAi => "openai",
            BackendKind::Anthropic => "anthropic",
            BackendKind::Gemini => "gemini",
            BackendKind::Local => "local",
            BackendKind::Human => "human",
            BackendKind::Imported => "imported",
        }
    }

    /// The environment variable the API key is read from (`None` for `local`, `human` and `imported`).
    pub fn key_env(self) -> Option<&'static str> {
        match self {
            BackendKind::OpenAi => Some("OPENAI_API_KEY"),
            BackendKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            BackendKind::Gemini => Some("GEMINI_API_KEY"),
            BackendKind::Local | BackendKind::Human | BackendKind::Imported => None,
        }
    }

    /// The public endpoint used when the spec names no base URL.
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            BackendKind::OpenAi => Some("https://api.openai.com/v1"),
            BackendKind::Anthropic => Some("https://api.anthropic.com"),
            BackendKind::Gemini => Some("https://generativelanguage.googleapis.com"),
            BackendKind::Local | BackendKind::Human | BackendKind::Imported => None,
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A parsed `BACKEND:MODEL[@BASE_URL[,BASE_URL...]]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ModelSpec {
    pub backend: BackendKind,
    /// The model name sent to the API, the GGUF path (or `hf://REPO/FILE`) for `local`, the person's name for
    /// `human`.
    pub model: String,
    /// The base URLs of the servers that serve the model, in order, without trailing slashes; empty means the
    /// backend's public endpoint. More than one are replicas of the same model; the first names it. A plain
    /// list, so that a run file can fill it as well as the spec's `@URL,URL` form. Credentials in a URL
    /// (`user:password@`, a key in the query) are sent, but the spec never shows, records or serialises them
    /// ([`public_url`]).
    #[serde(serialize_with = "public_urls")]
    pub base_urls: Vec<String>,
}

fn public_urls<S: serde::Serializer>(urls: &[String], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(urls.iter().map(|u| public_url(u)))
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error(
        "model spec {spec:?} has no backend: expected BACKEND:MODEL[@BASE_URL], e.g. openai:gpt-4o"
    )]
    MissingBackend { spec: String },
    #[error("model spec {spec:?}: unknown backend {backend:?}; expected one of openai, anthropic, gemini, local, human, imported")]
    UnknownBackend { spec: String, backend: String },
    #[error("model spec {spec:?} has an empty model name after {backend:?}:")]
    EmptyModel { spec: String, backend: String },
    #[error("model spec {spec:?}: base URL {url:?} has no host after the scheme")]
    BadUrl { spec: String, url: String },
    #[error("model spec {spec:?}: base URL {url:?} is not an http:// or https:// URL (replicas are separated by commas: @URL,URL)")]
    NotAUrl { spec: String, url: String },
    #[error("model spec {spec:?}: base URL {url:?} is listed twice")]
    DuplicateUrl { spec: String, url: String },
    #[error(
        "model spec {spec:?}: a local model is a file path (local:PATH) and takes no base URL"
    )]
    LocalWithUrl { spec: String },
    #[error("model spec {spec:?}: a human's answers come from the run store (human:NAME) and take no base URL")]
    HumanWithUrl { spec: String },
    #[error("model spec {spec:?}: an imported model's answers come from the run store (imported:MODEL) and take no base URL")]
    ImportedWithUrl { spec: String },
    #[error("model spec {spec:?}: the name {name:?} may hold only ASCII letters, digits, '.', '_' and '-' (e.g. human:dr.lee)")]
    BadHumanName { spec: String, name: String },
}

impl ModelSpec {
    pub fn parse(spec: &str) -> Result<ModelSpec, SpecError> {
        let raw = spec.trim();
        // Errors quote the spec without the credentials in its URLs.
        let shown = shown(raw);
        let spec = shown.as_str();
        let (_, raw_rest) = raw.split_once(':').unwrap_or((raw, ""));
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
        let (model, _) = split_base_url(rest);
        let (_, url) = split_base_url(raw_rest);
        if model.is_empty() {
            return Err(SpecError::EmptyModel {
                spec: spec.into(),
                backend: backend.into(),
            });
        }
        let base_urls = match url {
            None => Vec::new(),
            Some(_) if kind == BackendKind::Local => {
                return Err(SpecError::LocalWithUrl { spec: spec.into() })
            }
            Some(_) if kind == BackendKind::Human => {
                return Err(SpecError::HumanWithUrl { spec: spec.into() })
            }
            Some(_) if kind == BackendKind::Imported => {
                return Err(SpecError::ImportedWithUrl { spec: spec.into() })
            }
            Some(list) => check_urls(spec, list)?,
        };
        if kind == BackendKind::Human && !is_human_name(model) {
            return Err(SpecError::BadHumanName {
                spec: spec.into(),
                name: model.into(),
            });
        }
        Ok(ModelSpec {
            backend: kind,
            model: model.to_string(),
            base_urls,
        })
    }

    /// The credentials written into the spec's URLs, to redact from whatever quotes a whole URL.
    pub fn url_secrets(&self) -> Vec<String> {
        self.base_urls.iter().flat_map(|u| url_secrets(u)).collect()
    }

    /// The base URL that names the model: the spec's first, else the backend's public one.
    pub fn effective_base_url(&self) -> Option<&str> {
        self.base_urls
            .first()
            .map(String::as_str)
            .or_else(|| self.backend.default_base_url())
    }

    /// Every base URL requests may go to, in order: the spec's own (its replicas), else the backend's public
    /// one; empty for `local`.
    pub fn effective_base_urls(&self) -> Vec<&str> {
        if self.base_urls.is_empty() {
            self.backend.default_base_url().into_iter().collect()
        } else {
            self.base_urls.iter().map(String::as_str).collect()
        }
    }

    /// Whether requests go somewhere other than the vendor's public endpoint (a key may then be absent).
    pub fn has_custom_base_url(&self) -> bool {
        !self.base_urls.is_empty()
    }

    /// Whether several servers (replicas) serve the model.
    pub fn is_replicated(&self) -> bool {
        self.base_urls.len() > 1
    }

    /// What names the model in manifests, configuration hashes, cache keys and call records
    /// ([`ModelIdentity`]): `BACKEND:MODEL[@FIRST_BASE_URL]`. Replicas serve the same model, so the others are
    /// left out; a spec with one base URL or none is its own identity, exactly as written by [`fmt::Display`].
    pub fn identity(&self) -> ModelIdentity {
        ModelIdentity(match self.base_urls.first() {
            Some(u) => format!("{}:{}@{}", self.backend, self.model, public_url(u)),
            None => format!("{}:{}", self.backend, self.model),
        })
    }
}

/// A person's name in `human:NAME`: ASCII letters, digits, `.`, `_` and `-` (as reviewer names), so it is safe
/// in URLs, file names and report labels alike.
fn is_human_name(name: &str) -> bool {
    name.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// How a replica is named where calls are recorded: its base URL without credentials, query string or fragment
/// (`https://user:secret@host/v1?key=K` -> `https://host/v1`), so that nothing secret a URL might carry is stored.
pub fn replica_name(base_url: &str) -> String {
    let cut = base_url.find(['?', '#']).unwrap_or(base_url.len());
    let url = &base_url[..cut];
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.trim_end_matches('/').to_string();
    };
    let host_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(host_end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    format!("{scheme}://{host}{path}")
        .trim_end_matches('/')
        .to_string()
}

/// A spec's text with every URL in it without its credentials ([`public_url`]).
fn shown(spec: &str) -> String {
    let Some((backend, rest)) = spec.split_once(':') else {
        return spec.to_string();
    };
    match split_base_url(rest) {
        (model, Some(list)) => {
            let urls: Vec<String> = list.split(',').map(public_url).collect();
            format!("{backend}:{model}@{}", urls.join(","))
        }
        (_, None) => spec.to_string(),
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

/// The comma-separated base URLs after `@`: each one an http(s) URL with a host, none listed twice.
fn check_urls(spec: &str, list: &str) -> Result<Vec<String>, SpecError> {
    let mut urls: Vec<String> = Vec::new();
    for url in list.split(',') {
        let url = url.trim();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(SpecError::NotAUrl {
                spec: spec.into(),
                url: public_url(url),
            });
        }
        let url = check_url(spec, url)?;
        if urls.contains(&url) {
            return Err(SpecError::DuplicateUrl {
                spec: spec.into(),
                url: public_url(&url),
            });
        }
        urls.push(url);
    }
    Ok(urls)
}

fn check_url(spec: &str, url: &str) -> Result<String, SpecError> {
    let after_scheme = url.split_once("://").map(|(_, r)| r).unwrap_or("");
    let host = after_scheme.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || url.contains(char::is_whitespace) {
        return Err(SpecError::BadUrl {
            spec: spec.into(),
            url: public_url(url),
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

/// What names a model in manifests, configuration hashes, cache keys and call records: its spec with the first
/// base URL alone ([`ModelSpec::identity`]), so that a run has the same configuration hash and cached answers
/// whichever replicas serve it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ModelIdentity(String);

impl ModelIdentity {
    /// The identity of a spec given as text (one read from a store). Text that is not a spec with several base
    /// URLs is its own identity, unchanged (not even normalised), so that the identity of every single-URL spec
    /// stays the exact string it always was.
    pub fn of_text(spec: &str) -> ModelIdentity {
        match ModelSpec::parse(spec) {
            Ok(s) if s.is_replicated() => s.identity(),
            _ => ModelIdentity(spec.to_string()),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ModelIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for ModelIdentity {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for ModelIdentity {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for ModelIdentity {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.backend, self.model)?;
        let urls: Vec<String> = self.base_urls.iter().map(|u| public_url(u)).collect();
        if !urls.is_empty() {
            write!(f, "@{}", urls.join(","))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_variables_secrets_reads_are_the_backends_own() {
        let named: Vec<&str> = BackendKind::ALL
            .into_iter()
            .filter_map(BackendKind::key_env)
            .collect();
        assert_eq!(named, crate::secrets::API_KEY_VARS);
    }

    #[test]
    fn credentials_in_urls_are_sent_but_never_shown_recorded_or_serialised() {
        let text = "openai:m@http://user:pw-9x@host:8000/v1?api_key=KEY-123456&v=2";
        let spec = ModelSpec::parse(text).unwrap();
        assert_eq!(
            spec.base_urls,
            ["http://user:pw-9x@host:8000/v1?api_key=KEY-123456&v=2"]
        );
        assert_eq!(spec.to_string(), "openai:m@http://host:8000/v1?v=2");
        assert_eq!(spec.identity(), "openai:m@http://host:8000/v1?v=2");
        let json = serde_json::to_string(&spec).unwrap();
        assert!(
            !json.contains("pw-9x") && !json.contains("KEY-123456"),
            "{json}"
        );
        assert_eq!(spec.url_secrets(), ["user", "pw-9x", "KEY-123456"]);
        let bad =
            ModelSpec::parse("openai:m@http://u:pw-9x@host/v1,http://u:pw-9x@host/v1").unwrap_err();
        assert!(!bad.to_string().contains("pw-9x"), "{bad}");
        let bad = ModelSpec::parse("nope:m@http://u:pw-9x@host/v1").unwrap_err();
        assert!(!bad.to_string().contains("pw-9x"), "{bad}");
    }

    #[test]
    fn parses_each_backend() {
        let s = ModelSpec::parse("openai:gpt-4o").unwrap();
        assert_eq!(s.backend, BackendKind::OpenAi);
        assert_eq!(s.model, "gpt-4o");
        assert!(s.base_urls.is_empty());
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
    fn an_imported_model_keeps_its_name_and_takes_no_key_or_url() {
        // OpenRouter names, a colon included, are kept as the runner wrote them.
        for name in ["openai/gpt-4o", "bedrock/us.amazon.nova-pro-v1:0"] {
            let s = ModelSpec::parse(&format!("imported:{name}")).unwrap();
            assert_eq!(s.backend, BackendKind::Imported);
            assert_eq!(s.model, name);
            assert_eq!(s.to_string(), format!("imported:{name}"));
            assert_eq!(s.effective_base_url(), None);
        }
        assert_eq!(BackendKind::Imported.key_env(), None);
        assert!(matches!(
            ModelSpec::parse("imported:openai/gpt-4o@http://127.0.0.1:1").unwrap_err(),
            SpecError::ImportedWithUrl { .. }
        ));
    }

    #[test]
    fn a_human_is_a_name_without_key_or_url() {
        let h = ModelSpec::parse("human:dr.lee_2-b").unwrap();
        assert_eq!(h.backend, BackendKind::Human);
        assert_eq!(h.model, "dr.lee_2-b");
        assert_eq!(h.to_string(), "human:dr.lee_2-b");
        assert_eq!(h.identity(), "human:dr.lee_2-b");
        assert_eq!(BackendKind::Human.key_env(), None);
        assert_eq!(h.effective_base_url(), None);
        assert!(h.effective_base_urls().is_empty());
        assert_eq!(
            ModelSpec::parse("Human:lee").unwrap().backend,
            BackendKind::Human
        );
        let e = ModelSpec::parse("human:dr lee").unwrap_err();
        assert!(
            matches!(&e, SpecError::BadHumanName { name, .. } if name == "dr lee"),
            "{e:?}"
        );
        assert!(e.to_string().contains("letters, digits"), "{e}");
        for bad in ["human:lee/x", "human:lée", "human:a:b", "human:x?y"] {
            assert!(
                matches!(ModelSpec::parse(bad), Err(SpecError::BadHumanName { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            ModelSpec::parse("human:lee@http://127.0.0.1:1").unwrap_err(),
            SpecError::HumanWithUrl { .. }
        ));
        assert!(matches!(
            ModelSpec::parse("human:").unwrap_err(),
            SpecError::EmptyModel { .. }
        ));
        let e = ModelSpec::parse("robot:x").unwrap_err();
        assert!(e.to_string().contains("human"), "{e}");
    }

    #[test]
    fn splits_base_url_only_before_a_scheme() {
        let s = ModelSpec::parse("openai:org/model@v2@http://127.0.0.1:8000/v1/").unwrap();
        assert_eq!(s.model, "org/model@v2");
        assert_eq!(s.base_urls, ["http://127.0.0.1:8000/v1"]);
        assert_eq!(
            s.to_string(),
            "openai:org/model@v2@http://127.0.0.1:8000/v1"
        );
        let s = ModelSpec::parse("openai:model@2024").unwrap();
        assert_eq!(s.model, "model@2024");
        assert!(s.base_urls.is_empty());
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

    #[test]
    fn several_base_urls_are_replicas_named_by_the_first() {
        for backend in ["openai", "anthropic", "gemini"] {
            let text =
                format!("{backend}:org/m@v2@http://a:8000/v1/, https://b.example/v1,http://c:1");
            let s = ModelSpec::parse(&text).unwrap();
            assert_eq!(s.model, "org/m@v2");
            assert_eq!(
                s.base_urls,
                ["http://a:8000/v1", "https://b.example/v1", "http://c:1"]
            );
            assert!(s.is_replicated() && s.has_custom_base_url());
            assert_eq!(s.effective_base_url(), Some("http://a:8000/v1"));
            assert_eq!(s.effective_base_urls().len(), 3);
            assert_eq!(
                s.to_string(),
                format!("{backend}:org/m@v2@http://a:8000/v1,https://b.example/v1,http://c:1")
            );
            assert_eq!(ModelSpec::parse(&s.to_string()).unwrap(), s);
            // the identity is the spec with its first URL alone: the same as a run against that URL only
            let single = ModelSpec::parse(&format!("{backend}:org/m@v2@http://a:8000/v1")).unwrap();
            assert_eq!(s.identity(), single.to_string());
            assert_eq!(single.identity(), single.to_string());
            assert_eq!(ModelIdentity::of_text(&text), single.to_string());
        }
        // one URL or none: the text is its own identity, byte for byte (not even normalised)
        for text in [
            "openai:m@http://a/v1/",
            "OpenAI:m",
            "local:/x.gguf",
            "not a spec",
        ] {
            assert_eq!(ModelIdentity::of_text(text), text);
        }
        let default = ModelSpec::parse("anthropic:claude").unwrap();
        assert_eq!(default.effective_base_urls(), ["https://api.anthropic.com"]);
        assert!(!default.is_replicated());
        assert!(ModelSpec::parse("local:/x.gguf")
            .unwrap()
            .effective_base_urls()
            .is_empty());
    }

    #[test]
    fn a_bad_replica_url_is_named() {
        let e = ModelSpec::parse("openai:m@http://a/v1,b:8000").unwrap_err();
        assert!(
            matches!(&e, SpecError::NotAUrl { url, .. } if url == "b:8000"),
            "{e:?}"
        );
        assert!(e.to_string().contains("\"b:8000\""), "{e}");
        let e = ModelSpec::parse("openai:m@http://a/v1,").unwrap_err();
        assert!(
            matches!(&e, SpecError::NotAUrl { url, .. } if url.is_empty()),
            "{e:?}"
        );
        let e = ModelSpec::parse("openai:m@http://a/v1,https:///v1").unwrap_err();
        assert!(
            matches!(&e, SpecError::BadUrl { url, .. } if url == "https:///v1"),
            "{e:?}"
        );
        let e = ModelSpec::parse("gemini:m@http://a/,http://a").unwrap_err();
        assert!(
            matches!(&e, SpecError::DuplicateUrl { url, .. } if url == "http://a"),
            "{e:?}"
        );
        assert!(matches!(
            ModelSpec::parse("local:m.gguf@http://a,http://b").unwrap_err(),
            SpecError::LocalWithUrl { .. }
        ));
    }

    #[test]
    fn replica_names_carry_no_credentials_or_query() {
        assert_eq!(
            replica_name("http://127.0.0.1:8000/v1"),
            "http://127.0.0.1:8000/v1"
        );
        assert_eq!(
            replica_name("https://user:secret@host.example:8443/v1?key=K#frag"),
            "https://host.example:8443/v1"
        );
        assert_eq!(replica_name("https://host/?x=1"), "https://host");
        assert_eq!(replica_name("https://u@host"), "https://host");
    }
}
