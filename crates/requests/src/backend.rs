//! The backend trait every model implements, the request/answer types it speaks, and the provider batch API a
//! backend may hand out ([`BatchApi`], implemented by the batch module over HTTP), which speaks the same types.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use nmb_chat::{GenParams, Message, OutputFormat};
use serde::{Deserialize, Serialize};

use crate::adjust::Adjustment;
use crate::error::{CallError, ErrorClass};
use crate::spec::ModelSpec;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One call to a model: a conversation, decoding parameters, how many samples, and the output shape.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    pub params: GenParams,
    /// Samples wanted from this one call. Only send `n > 1` to a backend whose `supports_n()` is true.
    pub n: u32,
    pub output: OutputFormat,
    /// What the provider wants back with each earlier answer of the conversation, in the order of the
    /// assistant messages ([`Choice::replay`]): Anthropic's thinking blocks, which must return unchanged with
    /// their signatures. Not part of the conversation nmb hashes; empty for a first turn.
    pub replay: Vec<Option<serde_json::Value>>,
    /// The samples of the task this call answers (`n` of them, in choice order), where the caller numbers them:
    /// what tells apart calls whose bodies are the same (a batch's custom ids). Never sent; empty where unknown.
    pub samples: Vec<u32>,
}

impl ChatRequest {
    pub fn new(messages: Vec<Message>, params: GenParams) -> Self {
        ChatRequest {
            messages,
            params,
            n: 1,
            output: OutputFormat::Text,
            replay: Vec::new(),
            samples: Vec::new(),
        }
    }
}

/// Why a backend takes no `--thinking-budget`.
pub const NO_THINKING_BUDGET: &str =
    "its API takes no thinking budget (Anthropic's extended thinking and Gemini's thinkingBudget do); \
     use --reasoning-effort where the API takes one";

/// One sampled answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    pub text: String,
    /// The finish reason exactly as the API reported it (`stop`, `length`, `end_turn`, `STOP`, ...); empty when
    /// the API gave none.
    pub finish_reason: String,
    /// The provider filtered or refused this choice. Store it as errored with class `refusal`, never as an
    /// (empty) answer. A call where every choice is refused comes back as a [`CallError`] instead.
    pub refused: bool,
    /// What a reasoning model thought before answering, apart from `text`: `reasoning_content` or `reasoning`
    /// (vLLM's and llama.cpp's reasoning parsers), Anthropic thinking blocks, Gemini thought parts, or a leading
    /// `<think>...</think>` block taken out of the text ([`Choice::split_thinking`]). Never parsed as the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// What must go back with this answer when a later turn of the conversation is asked
    /// ([`ChatRequest::replay`]): Anthropic's thinking and redacted-thinking blocks, verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<serde_json::Value>,
}

impl Choice {
    /// An answer as the API gave it, with no thinking of its own.
    pub fn new(text: String, finish_reason: String, refused: bool) -> Choice {
        Choice {
            text,
            finish_reason,
            refused,
            thinking: None,
            replay: None,
        }
    }

    /// Whether the answer was cut off at the token limit before any text: what a thinking model out of tokens
    /// while thinking gives on every wire (no text, and the API's finish reason for the limit: `length`,
    /// Anthropic's `max_tokens`, Gemini's `MAX_TOKENS`). It is an answer (empty, so wrong), never an error.
    pub fn cut_off(&self) -> bool {
        self.text.trim().is_empty()
            && !self.refused
            && nmb_chat::stopped_at_token_limit(&self.finish_reason)
    }

    /// Takes a leading `<think>...</think>` block out of the text into `thinking` (after any thinking the API
    /// gave apart). A block still open at the end leaves the answer empty; the finish reason says it was cut off.
    pub fn split_thinking(mut self) -> Choice {
        let split = nmb_chat::split_thinking(&self.text);
        let Some(inline) = split.thinking else {
            return self;
        };
        let inline = inline.to_string();
        self.text = split.answer.to_string();
        self.thinking = Some(match self.thinking.take() {
            Some(apart) if !apart.is_empty() => format!("{apart}\n\n{inline}"),
            _ => inline,
        });
        self
    }
}

/// What a call used, the same way on every wire: `input_tokens` counts every input token, those read from or
/// written to a prompt cache included, and `output_tokens` every generated one, reasoning included, so that
/// pricing input and output prices what was billed (reasoning is billed as output).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Of `output_tokens`, the hidden reasoning: OpenAI `completion_tokens_details.reasoning_tokens`, Gemini
    /// `thoughtsTokenCount` (Anthropic counts thinking in `output_tokens` without a split).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// Of `input_tokens`, those read from a prompt cache: OpenAI `prompt_tokens_details.cached_tokens`, Anthropic
    /// `cache_read_input_tokens`, Gemini `cachedContentTokenCount`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// Of `input_tokens`, those written to a prompt cache: Anthropic `cache_creation_input_tokens`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Token counts from the two optional fields an API reports them in (a missing one counts 0).
    pub(crate) fn from_counts(input: Option<u64>, output: Option<u64>) -> Usage {
        Usage {
            input_tokens: input.unwrap_or(0),
            output_tokens: output.unwrap_or(0),
            ..Usage::default()
        }
    }
}

/// A successful call. `choices` is never empty. It may hold fewer than `n` choices when an OpenAI-compatible
/// server ignores `n`: send the missing samples as separate calls.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub choices: Vec<Choice>,
    /// The raw response body (untrusted model output included), for the store.
    pub raw: String,
    pub usage: Usage,
    /// Time from sending the request to the last byte of the response.
    pub latency: Duration,
    /// The provider batch that answered it (nmb's id of the batch); `None` for a call sent on its own.
    pub batch: Option<String>,
}

impl Completion {
    /// Replaces every occurrence of `secret` in the raw body and the answers (a server may echo a key back in a
    /// successful response too).
    pub fn redacted(mut self, secret: Option<&str>) -> Self {
        if let Some(s) = secret {
            self.raw = crate::error::redact(&self.raw, s);
            for c in &mut self.choices {
                c.text = crate::error::redact(&c.text, s);
                c.thinking = c.thinking.as_deref().map(|t| crate::error::redact(t, s));
            }
        }
        self
    }
}

/// A model that answers chat requests. Object safe: the CLI holds an `Arc<dyn Backend>`.
///
/// An in-process backend (e.g. a candle model) implements `complete` by running its synchronous generation in
/// `tokio::task::spawn_blocking` and mapping its errors to a [`CallError`] (usually class `other`).
pub trait Backend: Send + Sync {
    fn spec(&self) -> &ModelSpec;
    /// Whether one call can return several samples (`n`, `candidateCount`).
    fn supports_n(&self) -> bool;
    /// Whether image parts are sent; a text-only backend drops them and the run manifest must say so.
    fn supports_images(&self) -> bool;
    /// The longest image side this API uses without shrinking it itself (`None`: no limit of its own). Volumes
    /// are rendered no larger than this, so the size recorded is the size the model actually sees.
    fn max_image_side(&self) -> Option<u32> {
        None
    }
    /// How this backend makes an answer follow a JSON schema, for the run manifest; `None` when it cannot (the
    /// schema is then only described in the prompt).
    fn constrained_output(&self) -> Option<&'static str> {
        None
    }
    /// How this backend sends a reasoning effort (`GenParams::reasoning_effort`); `None` when it cannot.
    fn reasoning_parameters(&self) -> Option<&'static str> {
        None
    }
    /// What choice `choice` of a stored raw response must send back in a later turn ([`Choice::replay`]), so
    /// that a resumed conversation sends what an uninterrupted one does. `None` for most backends.
    fn replay_of(&self, raw: &str, choice: usize) -> Option<serde_json::Value> {
        let _ = (raw, choice);
        None
    }
    /// How this backend sends a thinking budget (`GenParams::thinking_budget`) with these parameters, or why
    /// it cannot, checked before anything is sent.
    fn thinking_budget(&self, params: &GenParams) -> Result<&'static str, String> {
        let _ = params;
        Err(NO_THINKING_BUDGET.into())
    }
    /// How this backend's requests differ from their parameters because the model refuses them, each with why
    /// (the server's words, or the model's family), for the run manifest. Empty for most backends.
    fn adjustments(&self) -> BTreeMap<Adjustment, String> {
        BTreeMap::new()
    }
    /// Starts with the adjustments a run recorded earlier, so a resumed run is not refused again.
    fn adopt_adjustments(&self, recorded: &BTreeMap<Adjustment, String>) {
        let _ = recorded;
    }
    /// The most calls this backend can usefully run at once (`None`: no limit of its own). An in-process model
    /// that generates one answer at a time says 1, so the scheduler never queues calls inside it where they
    /// would wait out their timeout.
    fn max_in_flight(&self) -> Option<usize> {
        None
    }
    /// After a call failed with `err`: whether this backend now builds its requests without the parameter the
    /// server refused ([`crate::adjust`]), so that the call is worth sending again. The HTTP backend does so for
    /// its own calls; whoever sends its requests another way (a batch) asks here.
    fn adjust_after(&self, err: &CallError) -> bool {
        let _ = err;
        false
    }
    /// The provider's batch API, where it has one.
    fn batch(&self) -> Option<&dyn BatchApi> {
        None
    }
    /// How long one attempt may take, where this backend's own answers take longer than the scheduler's
    /// per-attempt timeout allows (a batch is answered within a day).
    fn attempt_timeout(&self) -> Option<Duration> {
        None
    }
    fn complete<'a>(&'a self, req: &'a ChatRequest)
        -> BoxFuture<'a, Result<Completion, CallError>>;
    /// The servers this backend sends to, one per replica, as calls record them ([`crate::spec::replica_name`]:
    /// the base URL without credentials or query string). Empty for a backend that sends nowhere (in-process).
    fn replicas(&self) -> &[String] {
        &[]
    }
    /// Sends `req` to replica `replica` (an index into [`Backend::replicas`]); the scheduler picks which. A
    /// backend without replicas ignores the index.
    fn complete_on<'a>(
        &'a self,
        replica: usize,
        req: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, CallError>> {
        let _ = replica;
        self.complete(req)
    }
}

/// Which provider's batch protocol a wire speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchProtocol {
    OpenAi,
    Anthropic,
    Gemini,
}

impl BatchProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            BatchProtocol::OpenAi => "openai",
            BatchProtocol::Anthropic => "anthropic",
            BatchProtocol::Gemini => "gemini",
        }
    }

    /// The most requests and bytes one batch may hold, as each provider documents them, in bytes as the
    /// providers count them (a megabyte is 1,000,000 bytes): OpenAI "up to 50,000 requests" in an input file "up
    /// to 200 MB" (the Files API refuses an upload over 200,000,000 bytes); Anthropic "100,000 Message requests
    /// or 256 MB in size, whichever is reached first"; Gemini's inlined requests "under 20MB" in all.
    pub fn limits(self) -> BatchLimits {
        const MB: usize = 1_000_000;
        match self {
            BatchProtocol::OpenAi => BatchLimits {
                max_requests: 50_000,
                max_bytes: 200 * MB,
            },
            BatchProtocol::Anthropic => BatchLimits {
                max_requests: 100_000,
                max_bytes: 256 * MB,
            },
            BatchProtocol::Gemini => BatchLimits {
                max_requests: 50_000,
                max_bytes: 20 * MB,
            },
        }
    }
}

/// How much one batch may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    pub max_requests: usize,
    /// Of the encoded requests, each counted as its JSON line plus a newline.
    pub max_bytes: usize,
}

/// One request's outcome in an ended batch.
#[derive(Debug)]
pub struct BatchItem {
    pub custom_id: String,
    pub result: Result<Completion, CallError>,
}

/// Where a submitted batch stands.
#[derive(Debug)]
pub enum Polled {
    /// Still being worked on.
    Running,
    /// Done (or expired, or cancelled): the outcome of every request that has one. A request left out (expired,
    /// cancelled) has no answer and must be sent again.
    Ended(Vec<BatchItem>),
    /// The provider refused the batch as a whole: every request fails so. Class `rate_limit` when it refused it
    /// for a limit that clears as other batches finish (OpenAI's `token_limit_exceeded`, Gemini's
    /// `RESOURCE_EXHAUSTED`), so that its requests can go again later in smaller batches; otherwise the
    /// provider's own message (a file that failed validation).
    Failed(CallError),
}

/// A provider's batch API for one model. Object safe, like [`Backend`], which hands it out.
pub trait BatchApi: Send + Sync {
    fn protocol(&self) -> BatchProtocol;
    /// The body a single call would send for `req`.
    fn body(&self, req: &ChatRequest) -> Result<serde_json::Value, CallError>;
    /// A request's `body` as it goes into a batch, wrapped with its custom id.
    fn entry(&self, custom_id: &str, body: serde_json::Value) -> serde_json::Value;
    /// The most bytes the answer to `req` may take, in a batch's output as in a single call.
    fn response_cap(&self, req: &ChatRequest) -> u64;
    /// Submits `entries` as one batch, telling the provider `tag` where it keeps one; returns the provider's id.
    fn submit<'a>(
        &'a self,
        tag: &'a str,
        entries: &'a [serde_json::Value],
    ) -> BoxFuture<'a, Result<String, CallError>>;
    /// The provider's id of a batch this process may have submitted before it was stopped: the one tagged
    /// `tag` (OpenAI's metadata, Gemini's display name), or for Anthropic, which keeps no tag, the one batch of
    /// `requests` requests created since `since` (RFC 3339, UTC). `None`: it never reached the provider.
    fn find<'a>(
        &'a self,
        tag: &'a str,
        since: &'a str,
        requests: u64,
    ) -> BoxFuture<'a, Result<Option<String>, CallError>>;
    /// Where batch `id` stands; `custom_ids` are its requests in submission order (Gemini answers by position).
    /// Its output is read line by line, each line at most `line_cap` bytes ([`BatchApi::response_cap`] of its
    /// requests), the whole at most one line cap per request and one more.
    fn poll<'a>(
        &'a self,
        id: &'a str,
        custom_ids: &'a [String],
        line_cap: u64,
    ) -> BoxFuture<'a, Result<Polled, CallError>>;
}

/// Refuses `n > 1` for backends without a native `n`, so samples are never silently lost. For every backend,
/// in-process ones included.
pub fn check_n(backend: &dyn Backend, req: &ChatRequest) -> Result<(), CallError> {
    if req.n == 0 {
        return Err(CallError::new(
            ErrorClass::ClientError,
            "request asks for n = 0 samples; expected at least 1",
        ));
    }
    if req.n > 1 && !backend.supports_n() {
        return Err(CallError::new(
            ErrorClass::ClientError,
            format!(
                "backend {} has no native n; send {} separate requests with n = 1",
                backend.spec().backend,
                req.n
            ),
        ));
    }
    Ok(())
}

/// Turns parsed choices into a completion, or into the error they amount to (none at all, or all refused).
pub(crate) fn finish(
    choices: Vec<Choice>,
    raw: String,
    usage: Usage,
    latency: Duration,
) -> Result<Completion, CallError> {
    let choices: Vec<Choice> = choices.into_iter().map(Choice::split_thinking).collect();
    if choices.is_empty() {
        return Err(
            CallError::new(ErrorClass::MalformedResponse, "response has no choices").with_raw(raw),
        );
    }
    if choices.iter().all(|c| c.refused) {
        let reason = choices[0].finish_reason.clone();
        return Err(CallError::new(
            ErrorClass::Refusal,
            format!("provider refused or filtered the answer (finish reason {reason:?})"),
        )
        .with_raw(raw));
    }
    Ok(Completion {
        choices,
        raw,
        usage,
        latency,
        batch: None,
    })
}
