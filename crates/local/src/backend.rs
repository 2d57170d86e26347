//! [`LocalModel`] as an `nmb_requests::Backend`, so a `local:` model runs through the same scheduler, store and
//! resume logic as an API model.

use std::collections::VecDeque;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use nmb_requests::{
    check_n, Backend, BoxFuture, CallError, ChatRequest, Choice, Completion, ErrorClass, ModelSpec,
    Usage,
};
use serde_json::json;
use tokio::sync::oneshot;

use crate::{LocalCompletion, LocalError, LocalModel, PromptShape, Request};

/// Requests the scheduler may have in flight here at once; they decode together in one batch.
const MAX_IN_FLIGHT: usize = 8;

/// The default KV-cache memory a batch may reserve (see [`LocalBackend::with_kv_limit`]).
const DEFAULT_KV_LIMIT: usize = 2 << 30;

/// A loaded local model behind the backend trait.
///
/// - One engine thread owns the batch. A request is checked and tokenised on the caller's side, then joins the
///   batch at the next decoding step: its prompt is read in chunks that share the steps of the sequences
///   already decoding, then its samples decode with them ([`Backend::max_in_flight`] is 8). A request joins only while the KV memory the batch may reach stays
///   under the limit; otherwise it waits for running ones to finish.
/// - Native `n`: the n samples of a request are prefilled once and decoded together, each with its own seed.
/// - Prompts read stay in the batch's prompt cache ([`LocalBackend::with_prompt_cache`]): a request skips the
///   start it shares with one read before, where that is exact (see `batch`).
/// - A request whose caller gave up (timed out, dropped) leaves the batch at the next step.
/// - Without a projector images are dropped ([`Backend::supports_images`] is false); the run manifest records
///   that, and each raw record says how many were left out. With one ([`LocalModel::with_projector`]) they are
///   seen: decoded and encoded on a blocking thread before the request joins the batch, and counted in its
///   prompt tokens.
/// - The raw record stored for each call is a small JSON object (`object: "nmb.local.completion"`, the texts,
///   finish reasons, usage, seeds, images dropped, timings).
pub struct LocalBackend {
    spec: ModelSpec,
    model: Arc<LocalModel>,
    queue: Mutex<Option<mpsc::Sender<Submission>>>,
    kv_limit: usize,
    prompt_cache: usize,
    stats: Arc<Mutex<BatchStats>>,
}

/// What the engine thread has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Decoding steps run.
    pub steps: u64,
    /// The most sequences (samples of all requests) one step advanced together.
    pub most_sequences: usize,
    /// Prompt tokens taken from the prompt cache instead of being read again.
    pub prompt_tokens_reused: u64,
}

/// A request on its way to the engine thread, and where its answer goes.
struct Submission {
    request: Request,
    started: Instant,
    reply: oneshot::Sender<Result<Vec<LocalCompletion>, LocalError>>,
}

/// What the batch carries for each request, to answer it when it finishes.
struct Pending {
    shape: PromptShape,
    started: Instant,
    reply: oneshot::Sender<Result<Vec<LocalCompletion>, LocalError>>,
}

impl LocalBackend {
    pub fn new(spec: ModelSpec, model: Arc<LocalModel>) -> LocalBackend {
        LocalBackend {
            spec,
            model,
            queue: Mutex::new(None),
            kv_limit: DEFAULT_KV_LIMIT,
            prompt_cache: crate::batch::PROMPT_CACHE_BYTES,
            stats: Arc::default(),
        }
    }

    /// Caps the KV-cache memory the batch may reserve (default 2 GiB). A request reserves its prompt once plus
    /// `n × max_tokens` positions; one request is always admitted, whatever its size.
    pub fn with_kv_limit(mut self, bytes: usize) -> LocalBackend {
        self.kv_limit = bytes;
        self
    }

    /// Caps the KV memory of the prompt cache (default 1 GiB; 0 turns it off). Answers are the same either
    /// way: a cached prompt start is reused only where it computes exactly as reading it again would.
    pub fn with_prompt_cache(mut self, bytes: usize) -> LocalBackend {
        self.prompt_cache = bytes;
        self
    }

    pub fn model(&self) -> &Arc<LocalModel> {
        &self.model
    }

    /// Steps run and the largest batch so far.
    pub fn stats(&self) -> BatchStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The engine thread's queue, started on first use.
    fn queue(&self) -> Result<mpsc::Sender<Submission>, CallError> {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(q) = queue.as_ref() {
            return Ok(q.clone());
        }
        let (tx, rx) = mpsc::channel();
        let model = self.model.clone();
        let limits = (self.kv_limit, self.prompt_cache);
        let stats = self.stats.clone();
        std::thread::Builder::new()
            .name("nmb-local-batch".into())
            .spawn(move || serve(&model, &rx, limits, &stats))
            .map_err(|e| {
                CallError::new(
                    ErrorClass::Other,
                    format!("cannot start the local model's thread: {e}"),
                )
            })?;
        *queue = Some(tx.clone());
        Ok(tx)
    }

    async fn call(&self, req: &ChatRequest) -> Result<Completion, CallError> {
        check_n(self, req)?;
        let started = Instant::now();
        let request = self.request(req).await.map_err(|e| call_error(&e))?;
        let (reply, answer) = oneshot::channel();
        let gone = || CallError::new(ErrorClass::Other, "the local model's thread stopped");
        self.queue()?
            .send(Submission {
                request,
                started,
                reply,
            })
            .map_err(|_| gone())?;
        match answer.await {
            Ok(Ok(completions)) => Ok(completion(&self.model, completions, started.elapsed())),
            Ok(Err(e)) => Err(call_error(&e)),
            Err(_) => Err(gone()),
        }
    }
}

impl LocalBackend {
    /// The checked request. Encoding images takes a while, so a request with images is built on a blocking
    /// thread rather than on the caller's async one.
    async fn request(&self, req: &ChatRequest) -> Result<Request, LocalError> {
        let n = req.n as usize;
        let seeing =
            self.model.projector().is_some() && req.messages.iter().any(|m| m.image_count() > 0);
        let Some(runtime) = tokio::runtime::Handle::try_current()
            .ok()
            .filter(|_| seeing)
        else {
            return self
                .model
                .request(&req.messages, &req.params, &req.output, n);
        };
        let (model, messages) = (self.model.clone(), req.messages.clone());
        let (params, output) = (req.params.clone(), req.output.clone());
        runtime
            .spawn_blocking(move || model.request(&messages, &params, &output, n))
            .await
            .unwrap_or_else(|e| {
                Err(LocalError::Image {
                    index: 0,
                    message: format!("encoding the request's images stopped: {e}"),
                })
            })
    }
}

/// The engine thread: admits waiting requests while the KV limit allows, advances the batch a step, answers
/// the requests that finished; sleeps when there is nothing to do, ends when the backend is dropped.
fn serve(
    model: &LocalModel,
    rx: &mpsc::Receiver<Submission>,
    (kv_limit, prompt_cache): (usize, usize),
    stats: &Mutex<BatchStats>,
) {
    let mut batch = model.batch::<Pending>().with_prompt_cache(prompt_cache);
    let mut waiting: VecDeque<Submission> = VecDeque::new();
    loop {
        if batch.is_empty() && waiting.is_empty() {
            match rx.recv() {
                Ok(s) => waiting.push_back(s),
                Err(_) => return,
            }
        }
        waiting.extend(rx.try_iter());
        waiting.retain(|s| !s.reply.is_closed());
        while let Some(front) = waiting.front() {
            let need = batch.bytes_for(&front.request.job);
            if !batch.is_empty() && batch.reserved_bytes() + need > kv_limit {
                break;
            }
            let s = waiting.pop_front().expect("front exists");
            let pending = Pending {
                shape: s.request.shape,
                started: s.started,
                reply: s.reply,
            };
            batch.admit(pending, s.request.job);
        }
        batch.retain(|p| !p.reply.is_closed());
        if !batch.is_empty() {
            {
                let mut s = stats.lock().unwrap_or_else(|p| p.into_inner());
                s.steps += 1;
                s.most_sequences = s.most_sequences.max(batch.live_sequences());
            }
            for done in batch.step() {
                stats
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .prompt_tokens_reused += done.reused as u64;
                answer(model, done);
            }
        }
    }
}

fn answer(model: &LocalModel, done: crate::batch::Done<Pending>) {
    let (pending, done) = done.split();
    let result = model.completions(pending.shape, done, pending.started);
    // The caller may have gone (timed out); then nobody wants the answer.
    let _ = pending.reply.send(result);
}

impl Backend for LocalBackend {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }
    fn supports_n(&self) -> bool {
        true
    }
    fn supports_images(&self) -> bool {
        self.model.projector().is_some()
    }
    fn max_in_flight(&self) -> Option<usize> {
        Some(MAX_IN_FLIGHT)
    }
    fn constrained_output(&self) -> Option<&'static str> {
        self.model
            .grammar()
            .then_some("json_schema grammar (llama.cpp GBNF)")
    }
    fn complete<'a>(
        &'a self,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, CallError>> {
        Box::pin(self.call(req))
    }
}

fn completion(model: &LocalModel, cs: Vec<LocalCompletion>, latency: Duration) -> Completion {
    let first = cs.first();
    let tokens_in = first.map_or(0, |c| c.tokens_in);
    let tokens_out: usize = cs.iter().map(|c| c.tokens_out).sum();
    let raw = json!({
        "object": "nmb.local.completion",
        "model_id": model.model_id(),
        "choices": cs.iter().map(|c| json!({
            "text": c.text,
            "finish_reason": c.finish_reason.as_str(),
            "output_tokens": c.tokens_out,
            "seed": c.seed,
        })).collect::<Vec<_>>(),
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
        "images_dropped": first.map_or(0, |c| c.images_dropped),
        "latency_ms": latency.as_millis() as u64,
        "prefill_ms": first.map_or(0, |c| c.prefill.as_millis() as u64),
        "input_tokens_reused": first.map_or(0, |c| c.tokens_in_reused),
    })
    .to_string();
    Completion {
        choices: cs.into_iter().map(choice).collect(),
        raw,
        usage: Usage {
            input_tokens: tokens_in as u64,
            output_tokens: tokens_out as u64,
            ..Usage::default()
        },
        latency,
        batch: None,
    }
}

/// One answer as a choice, a `<think>...</think>` block at its start (or a lone `</think>` where the template
/// opened the block) kept apart as its thinking.
fn choice(c: LocalCompletion) -> Choice {
    Choice::new(c.text, c.finish_reason.as_str().to_string(), false).split_thinking()
}

/// The error class of a local failure: a prompt that does not fit is `context_length`, a parameter the model
/// cannot use is `client_error`, anything else `other` (none of them is worth a retry).
fn call_error(e: &LocalError) -> CallError {
    let class = match e {
        LocalError::ContextTooLong { .. } => ErrorClass::ContextLength,
        LocalError::InvalidParams { .. } | LocalError::Image { .. } => ErrorClass::ClientError,
        _ => ErrorClass::Other,
    };
    CallError::new(class, e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FinishReason;

    fn answer(text: &str) -> Choice {
        choice(LocalCompletion {
            text: text.into(),
            finish_reason: FinishReason::Stop,
            tokens_in: 1,
            tokens_out: 1,
            images_dropped: 0,
            seed: 0,
            latency: Duration::ZERO,
            prefill: Duration::ZERO,
            tokens_in_reused: 0,
        })
    }

    /// What Qwen3 writes with thinking on, with an empty think block, and with the block closed by the template
    /// (`enable_thinking = false`, so the answer has none).
    #[test]
    fn qwen3_thinking_is_kept_apart_from_the_answer() {
        let on = answer("<think>\nThe lesion is periventricular.\n</think>\n\nMultiple sclerosis.");
        assert_eq!(on.text, "Multiple sclerosis.");
        assert_eq!(
            on.thinking.as_deref(),
            Some("The lesion is periventricular.")
        );
        let empty = answer("<think>\n\n</think>\n\nMultiple sclerosis.");
        assert_eq!(empty.text, "Multiple sclerosis.");
        assert_eq!(empty.thinking.as_deref().unwrap_or_default(), "");
        let off = answer("Multiple sclerosis.");
        assert_eq!(
            (off.text.as_str(), off.thinking),
            ("Multiple sclerosis.", None)
        );
        let opened_by_template = answer("Periventricular.\n</think>\n\nMultiple sclerosis.");
        assert_eq!(opened_by_template.text, "Multiple sclerosis.");
        assert_eq!(
            opened_by_template.thinking.as_deref(),
            Some("Periventricular.")
        );
    }
}
