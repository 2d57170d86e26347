//! From a model name on the command line to a backend: `BACKEND:MODEL[@BASE_URL]`, `local:PATH.gguf` included.
//! `human:NAME` and `imported:MODEL` answer with stored answers, which need the store and the suite (and an
//! import's answers): the evaluation connects them through [`crate::stored`], and [`connect_model`] refuses them.

use std::path::PathBuf;
use std::sync::Arc;

use nmb_local::{LocalBackend, LocalError, LocalModel, Projector};
use nmb_requests::{
    BackendKind, BackendOptions, HttpOptions, ModelSpec, Transport, TransportError,
};
use serde_json::{json, Map, Value};

/// How to build a backend. The defaults read API keys from the environment.
#[derive(Debug, Clone, Default)]
pub struct ConnectOptions {
    /// Share one HTTP client (connection pool, image cache) between several models, e.g. a model and its judge.
    /// `None` builds one from `http`.
    pub transport: Option<Transport>,
    pub http: HttpOptions,
    pub backend: BackendOptions,
    /// A `local:` model decodes without grammar: a request's JSON schema no longer constrains its answer.
    /// With grammar (the default) the model identity records `"grammar"`, so runs and cached answers made with
    /// and without it never mix; without, the identity is what nmb recorded before it had grammar, so runs made
    /// then resume only with `--no-grammar`.
    pub no_grammar: bool,
    /// A vision projector (`mmproj` GGUF) for a `local:` model: its requests' images are seen rather than
    /// dropped, and the identity records the projector (`mmproj_id`, `mmproj_type`), so runs with another
    /// projector or none never mix. Refused for any other backend.
    pub mmproj: Option<PathBuf>,
}

/// A model ready to be asked, and what identifies it beyond its spec.
pub struct ConnectedModel {
    pub spec: ModelSpec,
    pub backend: Arc<dyn nmb_requests::Backend>,
    /// Goes into the run's model identity (`EvalSettings::model_identity`): for `local:` the model's content
    /// hash ([`LocalModel::model_id`]), chat template hash and context window, so a changed file never reuses
    /// stored answers; empty for API models, whose spec is their identity.
    pub identity: Map<String, Value>,
}

impl std::fmt::Debug for ConnectedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectedModel")
            .field("spec", &self.spec)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(transparent)]
    Http(#[from] nmb_requests::ConnectError),
    #[error(transparent)]
    Transport(#[from] TransportError),
    #[error("cannot load local model {spec}: {source}")]
    Local {
        spec: String,
        #[source]
        source: LocalError,
    },
    #[error("{spec}: a human's answers are read from the run store together with the suite (nmb eval, nmb import, nmb review answer); it cannot be used here (e.g. as a judge)")]
    NeedsStore { spec: String },
    #[error("{spec}: an imported model's answers come from the file it was imported from (nmb import FILE); it cannot be asked, so this run cannot be resumed or worked on here")]
    NoAnswers { spec: String },
    #[error("{spec}: --mmproj (a vision projector) is for `local:` models; an API model sees images itself")]
    MmprojNotLocal { spec: String },
    #[error("cannot load projector {path} for local model {spec}: {source}")]
    Projector {
        spec: String,
        path: PathBuf,
        #[source]
        source: Box<LocalError>,
    },
    #[error("connecting stopped unexpectedly: {0}")]
    Stopped(String),
}

/// Builds the backend for `spec` (`openai:`, `anthropic:`, `gemini:` or `local:`). A `local:` model is loaded
/// here (it takes a moment and blocks: call it before starting work, or from `spawn_blocking`); an
/// `hf://OWNER/NAME/FILE.gguf` path downloads through the Hugging Face Hub, which needs network access.
pub fn connect_model(
    spec: &ModelSpec,
    options: &ConnectOptions,
) -> Result<ConnectedModel, ConnectError> {
    let spec = spec.clone();
    if spec.backend == BackendKind::Local {
        return connect_local(spec, options.no_grammar, options.mmproj.as_deref());
    }
    if options.mmproj.is_some() {
        let spec = spec.to_string();
        return Err(ConnectError::MmprojNotLocal { spec });
    }
    if spec.backend == BackendKind::Human {
        let spec = spec.to_string();
        return Err(ConnectError::NeedsStore { spec });
    }
    if spec.backend == BackendKind::Imported {
        let spec = spec.to_string();
        return Err(ConnectError::NoAnswers { spec });
    }
    let transport = match &options.transport {
        Some(t) => t.clone(),
        None => Transport::new(&options.http)?,
    };
    let backend = nmb_requests::connect(&spec, &transport, &options.backend)?;
    Ok(ConnectedModel {
        spec,
        backend,
        identity: Map::new(),
    })
}

fn connect_local(
    spec: ModelSpec,
    no_grammar: bool,
    mmproj: Option<&std::path::Path>,
) -> Result<ConnectedModel, ConnectError> {
    let mut model = LocalModel::open(&spec.model).map_err(|source| ConnectError::Local {
        spec: spec.to_string(),
        source,
    })?;
    if no_grammar {
        model = model.without_grammar();
    }
    if let Some(path) = mmproj {
        let failed = |source| ConnectError::Projector {
            spec: spec.to_string(),
            path: path.to_path_buf(),
            source: Box::new(source),
        };
        let projector = Projector::load(path).map_err(failed)?;
        model = model.with_projector(projector).map_err(failed)?;
    }
    let info = model.info();
    tracing::info!(model = %info.model_id, load_ms = model.load_time().as_millis() as u64, "local model loaded");
    let identity = json!({
        "local_model_id": info.model_id,
        "architecture": info.architecture,
        "context_length": info.context_length,
        "chat_template_sha256": info.chat_template_sha256,
        "weights": info.weights,
    });
    let mut identity = match identity {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    if model.grammar() {
        identity.insert("grammar".into(), json!(nmb_local::GRAMMAR_IDENTITY));
    }
    if let Some(p) = model.projector() {
        let file = p.path().file_name().unwrap_or_default().to_string_lossy();
        identity.insert("mmproj_id".into(), json!(format!("{file}@{}", p.hash())));
        identity.insert("mmproj_type".into(), json!(p.kind().name()));
    }
    let backend = Arc::new(LocalBackend::new(spec.clone(), Arc::new(model)));
    Ok(ConnectedModel {
        spec,
        backend,
        identity,
    })
}
