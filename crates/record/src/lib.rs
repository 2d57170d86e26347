//! Recording model calls: the one path every model call takes, for evaluations and judges alike. Store the
//! prompt once, answer from the response cache when it can, else call through the scheduler and record the call,
//! its raw body and each sample's answer before anyone counts it as done. API keys are redacted from everything
//! stored.
//!
//! It lives apart from the evaluation loop (`nmb-run`) so that what asks models without evaluating a suite
//! (scoring's judges, `nmb-score`) records its calls the same way without depending on the loop or on the
//! backends it can connect (`nmb-local`).
//!
//! It owns [`Recorder`], what one call is made of ([`Prompt`], [`CallSpec`], [`CallResult`]), and [`Batcher`],
//! the backend that sends calls through a provider's batch API and records each batch before submitting it. It does not
//! decide which samples need a call or how a run is resumed (`nmb-run`), speak any wire format, schedule or
//! retry (`nmb-requests`), or lay out rows on disk (`nmb-store`).

mod batch;

pub use batch::{BatchOptions, Batcher, NoBatchApi, BATCH_IN_FLIGHT};

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use nmb_chat::{messages_hash, GenParams, Message, OutputFormat, Part, StoredConversation};
use nmb_requests::{
    CallError, ChatRequest, Completion, ErrorClass, Lane, ModelIdentity, Outcome, Scheduler,
    Secrets, Usage,
};
use nmb_store::{
    cache_key, limits, now_ms, CachedResponse, CallRecord, ChoiceRecord, ErrorInfo, ImageInput,
    Store, StoreError, TokenDetail,
};

/// Why a choice of a successful call holds no answer.
const REFUSED: &str = "the provider refused or filtered this answer";

/// A rendered conversation and its hash.
#[derive(Debug, Clone)]
pub struct Prompt {
    pub messages: Vec<Message>,
    pub hash: String,
}

/// What one call (or cache hit) gave one sample: its answer, or the class of the failure.
pub type SampleResult = (u32, Result<String, String>);

/// One call to record: which task, turn and samples it answers, and everything that identifies its answers.
#[derive(Debug, Clone, Copy)]
pub struct CallSpec<'a> {
    pub task_id: &'a str,
    pub turn: u32,
    pub prompt: &'a Prompt,
    /// The samples the call answers, in choice order (`n` = their number).
    pub samples: &'a [u32],
    pub params: &'a GenParams,
    pub output: &'a OutputFormat,
    /// Parameters as they enter cache keys and call records (see [`Recorder::lookup`]).
    pub params_json: &'a str,
    pub template_id: &'a str,
    pub template_hash: &'a str,
    /// This turn is the task's last: an answer completes the sample.
    pub final_turn: bool,
    /// What each earlier answer of the conversation sends back ([`ChatRequest::replay`]).
    pub replay: &'a [Option<serde_json::Value>],
}

/// What came of a recorded call.
#[derive(Debug)]
pub struct CallResult {
    /// Per answered sample; samples past the choices the server returned are left out, so they can be asked again.
    pub samples: Vec<SampleResult>,
    /// Token usage of a successful call.
    pub usage: Option<Usage>,
    /// The call's failure, when it failed as a whole.
    pub error: Option<CallError>,
    /// What each answered sample's answer sends back in a later turn, in the order of `samples`.
    pub replays: Vec<Option<serde_json::Value>>,
}

/// Records the calls of one run (a model run or a judge run) to one model.
pub struct Recorder {
    store: Arc<Store>,
    scheduler: Scheduler,
    lane: Lane,
    run_id: String,
    /// As it enters cache keys and call records.
    model: ModelIdentity,
    secrets: Secrets,
    /// Prompts already stored by this recorder, so shared prompts are written once.
    stored_prompts: Mutex<HashSet<String>>,
}

impl Recorder {
    /// A recorder writing into `run_id`. Known API keys ([`Secrets::from_env`]) are redacted from what it stores.
    /// `model` is the model's identity (the first base URL alone when several replicas serve it); each call
    /// records the replica that answered it.
    pub fn new(
        store: Arc<Store>,
        scheduler: Scheduler,
        lane: Lane,
        run_id: impl Into<String>,
        model: ModelIdentity,
    ) -> Self {
        Recorder {
            store,
            scheduler,
            lane,
            run_id: run_id.into(),
            model,
            secrets: Secrets::from_env(),
            stored_prompts: Mutex::new(HashSet::new()),
        }
    }

    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Hashes `messages` and makes sure the conversation and its images are stored.
    pub fn prompt(&self, messages: Vec<Message>) -> Result<Prompt, StoreError> {
        let hash = messages_hash(&messages);
        let prompt = Prompt { messages, hash };
        let mut stored = self
            .stored_prompts
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if !stored.contains(&prompt.hash) {
            let body = StoredConversation::from_messages(&prompt.messages).to_json();
            let body = self.secrets.redact(&body);
            self.store
                .put_prompt(&prompt.hash, &body, &images(&prompt.messages))?;
            stored.insert(prompt.hash.clone());
        }
        Ok(prompt)
    }

    /// A stored successful answer to this prompt for this sample, from any run.
    pub fn lookup(
        &self,
        params_json: &str,
        prompt: &Prompt,
        sample: u32,
    ) -> Result<Option<CachedResponse>, StoreError> {
        let key = cache_key(self.model.as_str(), params_json, &prompt.hash, sample);
        self.store.lookup_cache(&key)
    }

    /// Records that `hit` answered this turn of `sample`.
    pub fn record_hit(
        &self,
        task_id: &str,
        sample: u32,
        turn: u32,
        hit: &CachedResponse,
        final_turn: bool,
    ) -> Result<(), StoreError> {
        self.store
            .record_cache_hit(&self.run_id, task_id, sample, turn, hit, final_turn)?;
        Ok(())
    }

    /// Sends one call for `spec.samples` and records it. Only store failures are errors: a failed call is
    /// recorded, and its samples come back with the failure's class.
    pub async fn call(&self, spec: CallSpec<'_>) -> Result<CallResult, StoreError> {
        let request = ChatRequest {
            messages: spec.prompt.messages.clone(),
            params: spec.params.clone(),
            n: spec.samples.len() as u32,
            output: spec.output.clone(),
            replay: spec.replay.to_vec(),
            samples: spec.samples.to_vec(),
        };
        let started_ms = now_ms();
        let outcome = in_range(self.scheduler.run(&self.lane, &request).await);
        let finished_ms = now_ms();
        // Answers are redacted before anyone sees them, so that a later turn's prompt, built from them, is the
        // same whether the answer came from this call or, after a resume, from the store.
        let samples: Vec<SampleResult> = match &outcome.result {
            Ok(c) => answered(spec.samples, c)
                .into_iter()
                .map(|(i, r)| (i, r.map(|t| self.secrets.redact(&t))))
                .collect(),
            Err(e) => spec
                .samples
                .iter()
                .map(|i| (*i, Err(e.class.as_str().to_string())))
                .collect(),
        };
        self.record(&spec, &outcome, &samples, started_ms, finished_ms)?;
        let replays = match &outcome.result {
            Ok(c) => (c.choices.iter().take(samples.len()))
                .map(|choice| choice.replay.clone())
                .collect(),
            Err(_) => Vec::new(),
        };
        Ok(CallResult {
            samples,
            usage: outcome.result.as_ref().ok().map(|c| c.usage),
            error: outcome.result.err(),
            replays,
        })
    }

    /// What a stored answer sends back in a later turn, read again from its call's raw response.
    pub fn replay_of(&self, hit: &CachedResponse) -> Result<Option<serde_json::Value>, StoreError> {
        let Some(raw) = self.store.raw_response(hit.call_id)? else {
            return Ok(None);
        };
        Ok(self
            .lane
            .backend()
            .replay_of(&raw, hit.choice_index as usize))
    }

    fn record(
        &self,
        spec: &CallSpec<'_>,
        outcome: &Outcome,
        samples: &[SampleResult],
        started_ms: i64,
        finished_ms: i64,
    ) -> Result<(), StoreError> {
        let completion = outcome.result.as_ref().ok();
        let failure = outcome.result.as_ref().err();
        let message = failure.map(|e| self.secrets.redact(&e.message));
        let raw = match &outcome.result {
            Ok(c) => Some(c.raw.as_str()),
            Err(e) => e.raw.as_deref(),
        }
        .map(|r| self.secrets.redact(r));
        let refused = ErrorInfo {
            class: "refusal",
            message: REFUSED,
        };
        // The thinking, redacted like the answers; stored apart from them, never in a later turn's prompt.
        let thinking: Vec<Option<String>> = (0..samples.len())
            .map(|j| {
                let choice = completion.and_then(|c| c.choices.get(j));
                let thinking = choice.and_then(|c| c.thinking.as_deref());
                thinking.map(|t| self.secrets.redact(t))
            })
            .collect();
        let choices: Vec<ChoiceRecord> = samples
            .iter()
            .enumerate()
            .map(|(j, (i, r))| ChoiceRecord {
                sample_index: *i,
                choice_index: j as u32,
                text: r.as_ref().ok().map(String::as_str),
                thinking: r.as_ref().ok().and(thinking[j].as_deref()),
                finish_reason: r.as_ref().ok().and(
                    completion
                        .and_then(|c| c.choices.get(j))
                        .map(|c| c.finish_reason.as_str())
                        .filter(|f| !f.is_empty()),
                ),
                error: match r {
                    Err(class) if class == "refusal" && completion.is_some() => Some(refused),
                    _ => None,
                },
                final_turn: spec.final_turn,
            })
            .collect();
        let record = CallRecord {
            run_id: &self.run_id,
            task_id: spec.task_id,
            turn_index: spec.turn,
            prompt_hash: &spec.prompt.hash,
            model: self.model.as_str(),
            params_json: spec.params_json,
            template_id: spec.template_id,
            template_hash: spec.template_hash,
            error: failure.map(|e| ErrorInfo {
                class: e.class.as_str(),
                message: message.as_deref().unwrap_or(""),
            }),
            attempts: outcome.attempts,
            raw: raw.as_deref(),
            tokens_in: completion.map(|c| c.usage.input_tokens),
            tokens_out: completion.map(|c| c.usage.output_tokens),
            tokens: completion.map_or_else(TokenDetail::default, |c| token_detail(&c.usage)),
            latency_ms: Some(outcome.response_latency().as_millis() as u64),
            started_ms,
            finished_ms,
            batch_id: completion.and_then(|c| c.batch.as_deref()),
        };
        let replica = outcome.replica.as_deref().map(|r| self.secrets.redact(r));
        self.store
            .record_call_from(&record, &choices, replica.as_deref())?;
        Ok(())
    }
}

/// The reasoning and prompt-cache counts of a call's usage, as stored (a count the API did not report is 0 in
/// `Usage` and stored as absent).
fn token_detail(u: &Usage) -> TokenDetail {
    let some = |n: u64| (n > 0).then_some(n);
    TokenDetail {
        reasoning: some(u.reasoning_tokens),
        cached_in: some(u.cached_input_tokens),
        cache_write: some(u.cache_write_tokens),
    }
}

/// A success whose numbers are out of range ([`nmb_store::limits`]) becomes a failure of its call
/// (`malformed_response`, naming the field and the value, its raw body kept), so no such number is stored.
fn in_range(mut outcome: Outcome) -> Outcome {
    let Ok(c) = &outcome.result else {
        return outcome;
    };
    let u = &c.usage;
    let tokens = [
        ("usage.input_tokens", u.input_tokens),
        ("usage.output_tokens", u.output_tokens),
        ("usage.reasoning_tokens", u.reasoning_tokens),
        ("usage.cached_input_tokens", u.cached_input_tokens),
        ("usage.cache_write_tokens", u.cache_write_tokens),
    ];
    let latency = u64::try_from(c.latency.as_millis()).unwrap_or(u64::MAX);
    let checked = (tokens.into_iter())
        .try_for_each(|(field, v)| limits::check_tokens(field, v))
        .and_then(|()| limits::check_latency_ms("latency_ms", latency));
    if let Err(e) = checked {
        let mut error = CallError::new(ErrorClass::MalformedResponse, format!("the answer's {e}"));
        error.raw = Some(c.raw.clone());
        outcome.result = Err(error);
    }
    outcome
}

/// Maps the completion's choices onto the samples in order; refused choices become errors.
fn answered(samples: &[u32], completion: &Completion) -> Vec<SampleResult> {
    samples
        .iter()
        .zip(&completion.choices)
        .map(|(i, choice)| {
            if choice.refused {
                (*i, Err("refusal".to_string()))
            } else {
                (*i, Ok(choice.text.clone()))
            }
        })
        .collect()
}

/// The distinct images of a conversation, for the store.
fn images(messages: &[Message]) -> Vec<ImageInput<'_>> {
    let mut out: Vec<ImageInput> = Vec::new();
    for part in messages.iter().flat_map(|m| &m.parts) {
        if let Part::Image(img) = part {
            if !out.iter().any(|i| i.sha256 == img.sha256) {
                out.push(ImageInput {
                    sha256: &img.sha256,
                    mime: &img.mime,
                    bytes: &img.bytes,
                });
            }
        }
    }
    out
}
