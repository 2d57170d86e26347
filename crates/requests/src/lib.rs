//! Asking models over HTTP.
//!
//! This crate owns the [`Backend`] trait, the one HTTP backend ([`HttpBackend`]) and the three API wire formats
//! it speaks, the classification of every failure into an [`ErrorClass`], and the [`Scheduler`] (concurrency limits, adaptive back-off on rate limits, retries,
//! timeouts, and the choice of replica when several servers serve one model). It does not render prompts
//! (`nmb-plan`), store anything (`nmb-store`), or run local models (`nmb-local`; its backend plugs in through
//! the same trait).
//!
//! [`HttpBackend`] does what every API call shares, once: a URL and a recorded name per replica, the API key in
//! its header and redacted from every error and answer, refusing `n > 1` where the API has no `n`, sending,
//! sending again without a parameter the server refused where the wire can do without it ([`adjust`]), and
//! making a [`Completion`] of what the response held. What differs between APIs is a [`Wire`]:
//! [`OpenAiWire`] (chat completions, which also serves vLLM, llama.cpp and other compatible servers),
//! [`AnthropicWire`] (Messages) and [`GeminiWire`] (generateContent), each in its own module with the request
//! and response types of its format. A new API is one more `Wire` (plus its spec prefix in `nmb_chat::spec`).
//!
//! What each provider documents for its model families (which sampling parameters go together, which thinking
//! levels and budgets a model takes, how many tokens a model that thinks by default needs) is one table,
//! [`rules`], which the wires apply when they build a request (`docs/providers.md` prints it).
//!
//! API keys come only from `OPENAI_API_KEY`, `ANTHROPIC_API_KEY` and `GEMINI_API_KEY`; they are redacted from
//! every error this crate produces.

pub mod adjust;
pub mod anthropic;
pub mod backend;
pub mod batch;
pub mod body;
pub mod error;
pub mod gemini;
pub mod http;
pub mod openai;
pub mod replicas;
pub mod rules;
pub mod scheduler;
pub mod transport;

/// Model specs and API-key handling live in `nmb-chat`, so that crates which never call a model can name one.
pub use nmb_chat::{secrets, spec};

use std::sync::Arc;

pub use adjust::{refused_parameter, Adjustment};
pub use anthropic::{AnthropicOptions, AnthropicWire};
pub use backend::{
    check_n, Backend, BatchApi, BatchItem, BatchLimits, BatchProtocol, BoxFuture, ChatRequest,
    Choice, Completion, Polled, Usage,
};
pub use body::response_cap;
pub use error::{rejects_n, CallError, ErrorClass};
pub use gemini::GeminiWire;
pub use http::{Answer, HttpBackend, KeyHeader, Wire};
pub use openai::{MaxTokensField, OpenAiOptions, OpenAiWire};
pub use replicas::ReplicaPolicy;
pub use rules::is_openai_reasoning_model;
pub use scheduler::{
    AimdConfig, Counters, CountersSnapshot, Fleet, FleetSlot, Lane, Outcome, RetryPolicy,
    Scheduler, SchedulerConfig,
};
pub use secrets::Secrets;
pub use spec::{replica_name, BackendKind, ModelIdentity, ModelSpec, SpecError};
pub use transport::{ApiKey, Base64Cache, HttpOptions, Transport, TransportError};

/// A model behind an OpenAI-compatible server.
pub type OpenAiBackend = HttpBackend<OpenAiWire>;
/// A model behind Anthropic's Messages API.
pub type AnthropicBackend = HttpBackend<AnthropicWire>;
/// A model behind Gemini's generateContent API.
pub type GeminiBackend = HttpBackend<GeminiWire>;

/// Per-backend options for [`connect`].
#[derive(Debug, Clone, Default)]
pub struct BackendOptions {
    pub openai: OpenAiOptions,
    pub anthropic: AnthropicOptions,
    /// Use this key instead of the environment variable (tests; never from a command-line flag).
    pub key: Option<ApiKey>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("{var} is not set; {spec} needs an API key (a key may only be absent with a custom base URL, e.g. {backend}:{model}@http://127.0.0.1:8000)")]
    MissingKey {
        var: &'static str,
        spec: String,
        backend: BackendKind,
        model: String,
    },
    #[error("{spec}: local models run in-process and are built by nmb-local, not by nmb-requests")]
    LocalBackend { spec: String },
    #[error("{spec}: a human's answers come from the run store (nmb-run's human backend), not over HTTP")]
    HumanBackend { spec: String },
    #[error("{spec}: an imported model's answers were read from another program's output (nmb import); it is never asked")]
    ImportedBackend { spec: String },
}

/// Builds the HTTP backend for `spec`, reading its key from the environment (or `options.key`).
pub fn connect(
    spec: &ModelSpec,
    transport: &Transport,
    options: &BackendOptions,
) -> Result<Arc<dyn Backend>, ConnectError> {
    let Some(var) = spec.backend.key_env() else {
        return Err(not_http(spec));
    };
    let key = options.key.clone().or_else(|| ApiKey::from_env(var));
    if key.is_none() && !spec.has_custom_base_url() {
        return Err(ConnectError::MissingKey {
            var,
            spec: spec.to_string(),
            backend: spec.backend,
            model: spec.model.clone(),
        });
    }
    let model = spec.model.clone();
    Ok(match spec.backend {
        BackendKind::OpenAi => {
            let mut options = options.openai.clone();
            if options.reasoning.is_none()
                && !spec.has_custom_base_url()
                && is_openai_reasoning_model(&model)
            {
                options.reasoning = Some(format!("{model} is an OpenAI reasoning model"));
            }
            http(spec, key, transport, OpenAiWire::new(model, options))
        }
        BackendKind::Anthropic => {
            let options = options.anthropic.clone();
            http(spec, key, transport, AnthropicWire::new(model, options))
        }
        BackendKind::Gemini => http(spec, key, transport, GeminiWire::new(model)),
        BackendKind::Local | BackendKind::Human | BackendKind::Imported => {
            return Err(not_http(spec))
        }
    })
}

fn http<W: Wire>(
    spec: &ModelSpec,
    key: Option<ApiKey>,
    transport: &Transport,
    wire: W,
) -> Arc<dyn Backend> {
    Arc::new(HttpBackend::new(spec.clone(), key, transport.clone(), wire))
}

/// Why a backend that sends nothing over HTTP is not built here.
fn not_http(spec: &ModelSpec) -> ConnectError {
    let spec_text = spec.to_string();
    match spec.backend {
        BackendKind::Human => ConnectError::HumanBackend { spec: spec_text },
        BackendKind::Imported => ConnectError::ImportedBackend { spec: spec_text },
        _ => ConnectError::LocalBackend { spec: spec_text },
    }
}
