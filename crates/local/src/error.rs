//! The one error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong loading or running a local model.
///
/// Every variant names the file (or spec) and, where it applies, the metadata key and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("cannot read model file {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a readable GGUF file: {message}")]
    Gguf { path: PathBuf, message: String },
    #[error("{path}: GGUF metadata `{key}`: expected {expected}")]
    Metadata {
        path: PathBuf,
        key: String,
        expected: String,
    },
    #[error("{path}: architecture `{arch}` is not supported; the local engine runs {supported}")]
    UnsupportedArchitecture {
        path: PathBuf,
        arch: String,
        /// The architectures it runs, comma-separated.
        supported: String,
    },
    #[error(
        "{path}: tensor type {type_name} (GGML type {id}) is not supported; the local engine reads {supported}"
    )]
    UnsupportedType {
        path: PathBuf,
        type_name: String,
        id: u32,
        supported: String,
    },
    #[error("{path}: {message}; put a `tokenizer.json` for this model next to the GGUF to use it instead")]
    UnsupportedTokenizer { path: PathBuf, message: String },
    #[error("tokenizer for {path}: {message}")]
    Tokenizer { path: PathBuf, message: String },
    #[error("chat template of {path}: {message}")]
    Template { path: PathBuf, message: String },
    /// The rendered prompt does not fit the model's context window. Maps to the `context_length` error class.
    #[error(
        "prompt is {prompt_tokens} tokens but the model's context window is {context_length} tokens \
         (at least one token must be left to generate)"
    )]
    ContextTooLong {
        prompt_tokens: usize,
        context_length: usize,
    },
    #[error("invalid generation parameter `{field}`: {message}")]
    InvalidParams {
        field: &'static str,
        message: String,
    },
    /// An image of a request the model cannot take (bytes that do not decode, a layout not wired). Maps to the
    /// `client_error` class: asking again would fail the same way.
    #[error("image {index} of the request: {message}")]
    Image { index: usize, message: String },
    /// A vision projector that does not fit the text model it is given to.
    #[error("projector {projector} cannot be used with {model}: {message}")]
    Projector {
        model: PathBuf,
        projector: PathBuf,
        message: String,
    },
    #[error("inference failed in {path}: {message}")]
    Inference { path: PathBuf, message: String },
    #[error("invalid local model spec `{spec}`: {message}")]
    Spec { spec: String, message: String },
    #[error(
        "cannot download `{spec}` from the Hugging Face Hub: {message}. \
         hf:// downloads need network access to huggingface.co; without it, put the GGUF on disk and use local:PATH"
    )]
    Download { spec: String, message: String },
    #[error("`{spec}` needs the Hugging Face Hub download, but nmb-local was built without its `hf` feature")]
    HfDisabled { spec: String },
}

impl LocalError {
    /// True when the prompt did not fit the context window (the `context_length` error class).
    pub fn is_context_length(&self) -> bool {
        matches!(self, LocalError::ContextTooLong { .. })
    }
}
