//! [`LocalModel`] as an `nmb_requests::Backend`, so a `local:` model runs through the same scheduler, store and
//! resume logic as an API model.

use std::sync::Arc;

use nmb_requests::{
    check_n, Backend, BoxFuture, CallError, ChatRequest, Choice, Completion, ErrorClass, ModelSpec,
    Usage,
};
use serde_json::json;
use tokio::sync::Semaphore;

use crate::{LocalCompletion, LocalError, LocalModel};

/// A loaded local model behind the backend trait.
///
/// - Generation runs in `tokio::task::spawn_blocking`, one at a time: a CPU model gains nothing from parallel
///   calls, and [`Backend::max_in_flight`] is 1 so the scheduler does not queue calls here.
/// - Images are dropped ([`Backend::supports_images`] is false); the run manifest records that, and each raw
///   record says how many were left out.
/// - No native `n`: each sample is its own call, with its own seed.
/// - The raw record stored for each call is a small JSON object (`object: "nmb.local.completion"`, the text,
///   finish reason, usage, seed, images dropped, timings).
pub struct LocalBackend {
    spec: ModelSpec,
    model: Arc<LocalModel>,
    gate: Arc<Semaphore>,
}

impl LocalBackend {
    pub fn new(spec: ModelSpec, model: Arc<LocalModel>) -> LocalBackend {
        LocalBackend {
            spec,
            model,
            gate: Arc::new(Semaphore::new(1)),
        }
    }

    pub fn model(&self) -> &Arc<LocalModel> {
        &self.model
    }

    async fn call(&self, req: &ChatRequest) -> Result<Completion, CallError> {
        check_n(self, req)?;
        let permit = self
            .gate
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| CallError::new(ErrorClass::Other, "the local model was shut down"))?;
        let model = self.model.clone();
        let (messages, params, output) =
            (req.messages.clone(), req.params.clone(), req.output.clone());
        // The permit travels into the blocking task: if the caller times out and drops this future, the
        // generation still finishes before the next one starts.
        let joined = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            model.generate(&messages, &params, &output)
        })
        .await;
        match joined {
            Ok(Ok(c)) => Ok(completion(&self.model, c)),
            Ok(Err(e)) => Err(call_error(&e)),
            Err(e) => Err(CallError::new(
                ErrorClass::Other,
                format!("local generation stopped unexpectedly: {e}"),
            )),
        }
    }
}

impl Backend for LocalBackend {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }
    fn supports_n(&self) -> bool {
        false
    }
    fn supports_images(&self) -> bool {
        false
    }
    fn max_in_flight(&self) -> Option<usize> {
        Some(1)
    }
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, CallError>> {
        Box::pin(self.call(req))
    }
}

fn completion(model: &LocalModel, c: LocalCompletion) -> Completion {
    let raw = json!({
        "object": "nmb.local.completion",
        "model_id": model.model_id(),
        "text": c.text,
        "finish_reason": c.finish_reason.as_str(),
        "usage": {"input_tokens": c.tokens_in, "output_tokens": c.tokens_out},
        "seed": c.seed,
        "images_dropped": c.images_dropped,
        "latency_ms": c.latency.as_millis() as u64,
        "prefill_ms": c.prefill.as_millis() as u64,
    })
    .to_string();
    Completion {
        choices: vec![Choice {
            text: c.text,
            finish_reason: c.finish_reason.as_str().to_string(),
            refused: false,
        }],
        raw,
        usage: Usage {
            input_tokens: c.tokens_in as u64,
            output_tokens: c.tokens_out as u64,
        },
        latency: c.latency,
    }
}

/// The error class of a local failure: a prompt that does not fit is `context_length`, a parameter the model
/// cannot use is `client_error`, anything else `other` (none of them is worth a retry).
fn call_error(e: &LocalError) -> CallError {
    let class = match e {
        LocalError::ContextTooLong { .. } => ErrorClass::ContextLength,
        LocalError::InvalidParams { .. } => ErrorClass::ClientError,
        _ => ErrorClass::Other,
    };
    CallError::new(class, e.to_string())
}
