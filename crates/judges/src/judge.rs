//! LLM judges: asking one model or a jury questions whose answers must be strict JSON, through the same
//! backends, scheduler and store as evaluation runs.
//!
//! # How judge calls are stored
//!
//! Each judge gets one **judge run** per scored run: a row in `runs` whose manifest has `"kind": "judge"`,
//! `scored_run_id`, the judge spec and its decoding parameters (the standard manifest fields are filled too, so
//! run listings can show it). Its configuration hash covers exactly those, so rescoring the same run with the same
//! judge finds the same judge run again. Inside it, every question is one sample: `task_id` is the question's
//! stable id (`equiv:<hash>`, `rubric:<task>#<sample>`, `taxonomy:<task>#<sample>`), `sample_index` 0, and every
//! attempt is one turn: turn 0 is the question, turn k the k-th re-ask after an invalid answer (the conversation
//! carries the invalid answer and what was wrong with it). So prompts, calls (raw bodies, usage, latency, error
//! classes) and answers land in the usual tables.
//!
//! Before each call the response cache is consulted with the usual key (judge spec, parameters with the output
//! schema, prompt hash, sample 0). Rescoring therefore sends nothing that was answered before, a killed scoring
//! resumes where it stopped, identical questions (the same pair of diagnoses in two samples) are paid once, and
//! the same stored answers give the same verdicts, byte for byte. Failed calls are recorded as errored turns,
//! never as answers, and are retried on the next scoring.
//!
//! # Self-grading
//!
//! A judge is flagged as self-grading when it comes from the same model family as the graded model (`gpt`,
//! `claude`, `gemini`, `gemma`, `llama`, `qwen`, ...; see [`nmb_results::family::model_family`]) or from the same vendor API at its
//! public endpoint. The flag is on the judge ([`JudgeInfo`]) and on each of its verdicts.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use futures::stream::{self, StreamExt};
use nmb_chat::{GenParams, ImagePart, Message, OutputFormat, Part, Role};
use nmb_record::{BatchOptions, Batcher, CallSpec, Recorder, BATCH_IN_FLIGHT};
use nmb_requests::{Adjustment, Backend, ModelIdentity, ModelSpec, Scheduler, Secrets};
use nmb_results::family::{model_family, self_grading};
use nmb_results::{JudgeInfo, RepeatRun};
use nmb_store::{canonical_json, Manifest, RunInfo, RunKind, Store};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::error::JudgeError;

/// A judge model, connected.
#[derive(Clone)]
pub struct JudgeModel {
    /// The judge as recorded (the first base URL alone when several replicas serve it).
    pub spec: ModelIdentity,
    pub backend: Arc<dyn Backend>,
    /// What identifies the model beyond its spec (a local model's content hash, as whoever connected it knows
    /// it); it enters the judge run's identity and every cache key, so a changed model file never reuses stored
    /// verdicts. Empty for API models.
    pub identity: serde_json::Map<String, Value>,
}

impl JudgeModel {
    /// An API judge named by its spec's text.
    pub fn new(spec: &str, backend: Arc<dyn Backend>) -> Self {
        JudgeModel {
            spec: ModelIdentity::of_text(spec),
            backend,
            identity: serde_json::Map::new(),
        }
    }
}

/// Decoding parameters for judges: deterministic where the API allows it.
pub fn default_judge_params() -> GenParams {
    GenParams {
        temperature: 0.0,
        top_p: 1.0,
        max_tokens: 1024,
        seed: Some(0),
        reasoning_effort: None,
        thinking_budget: None,
        unsent: Default::default(),
        extra_body: None,
    }
}

/// One question for every judge of the panel.
#[derive(Debug, Clone)]
pub struct Question {
    /// Stable id within a judge run (becomes the `task_id` of its sample).
    pub item_id: String,
    /// Prompt template id and hash (recorded with every call).
    pub template_id: &'static str,
    pub template_hash: String,
    pub system: String,
    pub user: String,
    /// JSON schema of the answer (sent to backends that enforce schemas; validated here in any case).
    pub schema: Value,
    /// Images sent after the text, each after a line with its number and caption (empty: text only).
    pub images: Vec<JudgeImage>,
}

/// An image a judge is shown with a question: bytes the graded model received, with their caption.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgeImage {
    pub caption: Option<String>,
    pub part: ImagePart,
}

impl Question {
    /// The question's user message: its text, then each image after a line naming it.
    fn user_message(&self) -> Message {
        let mut parts = vec![Part::Text(self.user.clone())];
        for (n, image) in self.images.iter().enumerate() {
            let line = match &image.caption {
                Some(c) => format!("Image {}: {c}", n + 1),
                None => format!("Image {}", n + 1),
            };
            parts.push(Part::Text(line));
            parts.push(Part::Image(image.part.clone()));
        }
        Message {
            role: Role::User,
            parts,
            as_parts: false,
        }
    }
}

/// How one judge's repeats of a question become its one answer: the median. With an even number of valid
/// repeats the lower of the two middle values counts (a tie between "yes" and "no" is "no", as in the jury).
pub trait Repeated: Sized {
    /// The median of `values` (at least one).
    fn median(values: &[&Self]) -> Self;
}

/// One judge's answer to one question, validated. Asked more than once (`--judge-repeats`), it is the median of
/// the repeats ([`Repeated`]) and `repeats` holds each repeat's own answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer<T> {
    pub value: Option<T>,
    /// Calls it took (1 + re-asks), over all repeats.
    pub attempts: u32,
    /// The last validation error, or the error class of a failed call.
    pub failure: Option<String>,
    /// Each repeat's answer in repeat order (`None` where that repeat gave none); empty when asked once.
    pub repeats: Vec<Option<T>>,
}

impl<T> Answer<T> {
    fn single(value: Option<T>, attempts: u32, failure: Option<String>) -> Self {
        Answer {
            value,
            attempts,
            failure,
            repeats: Vec::new(),
        }
    }
}

/// A (question, judge, repeat) and what came of it.
type Tagged<T> = ((usize, usize, usize), Result<Answer<T>, JudgeError>);

/// One repeat of a judge: its decoding parameters (the seed differs from repeat to repeat) and the recorder of
/// its own judge run.
struct Repeat {
    params: GenParams,
    recorder: Recorder,
}

struct Slot {
    spec: String,
    /// What asks it: its adjustments to the parameters ([`nmb_requests::rules`], what a server refused) are
    /// recorded with its judge runs.
    backend: Arc<dyn Backend>,
    identity: Value,
    /// Records this judge's calls, one judge run per repeat (repeat 0 is the judge run of a single asking).
    repeats: Vec<Repeat>,
    self_grading: Option<String>,
    family: String,
    provider: String,
    /// Its server answered `unsupported_input` to a question with images: no more are sent to it.
    blind: AtomicBool,
}

/// How a panel asks its judges.
#[derive(Debug, Clone)]
pub struct Asking {
    pub params: GenParams,
    /// Re-asks after an invalid answer.
    pub max_reasks: u32,
    /// Calls in flight per judge.
    pub concurrency: usize,
    /// Through the judges' batch APIs.
    pub batch: Option<BatchOptions>,
    /// Times each judge is asked each question, with seeds `seed, seed + 1, ...` (at least 1 is used).
    pub repeats: u32,
    /// The questions carry the model's images (`--judge-images same`): the judges' runs are others than those
    /// of text-only questions, and their manifests say the images were sent.
    pub images: bool,
}

/// The decoding parameters of repeat `r`: the seed moved on by `r`, so that each repeat is a distinct call with
/// its own cache key and judge run, and repeat 0 is exactly the single asking.
pub fn repeat_params(params: &GenParams, r: u32) -> GenParams {
    let mut p = params.clone();
    if r > 0 {
        p.seed = Some(params.seed.unwrap_or(0).wrapping_add(u64::from(r)));
    }
    p
}

/// What a panel's judge runs are about: a stored run they score, or a subject of their own (`rubric-lint`:
/// questions about a rubric, not about any run's answers).
#[derive(Debug, Clone, Copy)]
pub enum JudgeRunOf<'a> {
    Run(&'a RunInfo),
    Subject(&'a str),
}

/// The judges of one scoring, with their judge runs.
pub struct Panel {
    store: Arc<Store>,
    slots: Vec<Slot>,
    params: GenParams,
    max_reasks: u32,
    concurrency: usize,
    sent: AtomicU64,
    reused: AtomicU64,
}

impl Panel {
    /// Opens (or finds again) one judge run per judge for `scored` and prepares its lane.
    pub fn open(
        store: Arc<Store>,
        scheduler: Scheduler,
        judges: &[JudgeModel],
        scored: &RunInfo,
        asking: Asking,
    ) -> Result<Panel, JudgeError> {
        Panel::open_for(store, scheduler, judges, JudgeRunOf::Run(scored), asking)
    }

    /// Opens (or finds again) one judge run per judge (and repeat) for `of`, and prepares its lane.
    pub fn open_for(
        store: Arc<Store>,
        scheduler: Scheduler,
        judges: &[JudgeModel],
        of: JudgeRunOf<'_>,
        asking: Asking,
    ) -> Result<Panel, JudgeError> {
        let Asking {
            params,
            max_reasks,
            concurrency,
            batch,
            repeats,
            images,
        } = asking;
        // A call waiting for its batch puts no load on a server: as many wait as a round of batches holds.
        let concurrency = if batch.is_some() {
            concurrency.max(BATCH_IN_FLIGHT)
        } else {
            concurrency
        };
        let graded = match of {
            JudgeRunOf::Run(scored) => scored.manifest.model.clone(),
            JudgeRunOf::Subject(_) => String::new(),
        };
        let mut slots = Vec::new();
        for j in judges {
            let identity = Value::Object(j.identity.clone());
            let backend = match batch {
                Some(options) => batched(j, &store, options)?,
                None => j.backend.clone(),
            };
            // One lane per judge: its repeats share the judge's concurrency.
            let lane = scheduler.lane(backend.clone(), concurrency.max(1));
            let mut runs = Vec::new();
            for r in 0..repeats.max(1) {
                let params = repeat_params(&params, r);
                let run_id = judge_run(&store, of, j.spec.as_str(), &identity, &params, images)?;
                if images {
                    refuse_if_refused_images(&store, &run_id, j.spec.as_str())?;
                }
                // A judge run asked again starts with what it recorded, so a server is not refused twice.
                backend.adopt_adjustments(&recorded_adjustments(&store.run(&run_id)?.manifest));
                let recorder = Recorder::new(
                    store.clone(),
                    scheduler.clone(),
                    lane.clone(),
                    run_id,
                    j.spec.clone(),
                );
                runs.push(Repeat { params, recorder });
            }
            slots.push(Slot {
                self_grading: self_grading(j.spec.as_str(), &graded),
                family: model_family(j.spec.as_str()),
                provider: provider(j.spec.as_str()),
                spec: j.spec.to_string(),
                backend,
                identity,
                repeats: runs,
                blind: AtomicBool::new(false),
            });
        }
        Ok(Panel {
            store,
            slots,
            params,
            max_reasks,
            concurrency: concurrency.max(1),
            sent: AtomicU64::new(0),
            reused: AtomicU64::new(0),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn specs(&self) -> Vec<String> {
        self.slots.iter().map(|s| s.spec.clone()).collect()
    }

    pub fn self_grading(&self, judge: usize) -> bool {
        self.slots[judge].self_grading.is_some()
    }

    pub fn params(&self) -> &GenParams {
        &self.params
    }

    /// Calls sent and answers reused from the store by this panel so far (for progress output, not reports).
    pub fn counts(&self) -> (u64, u64) {
        (
            self.sent.load(Ordering::Relaxed),
            self.reused.load(Ordering::Relaxed),
        )
    }

    /// Times each judge is asked each question.
    pub fn repeats(&self) -> usize {
        self.slots.first().map_or(1, |s| s.repeats.len())
    }

    /// The seed of each repeat, in repeat order.
    pub fn repeat_seeds(&self) -> Vec<u64> {
        let repeats = self
            .slots
            .first()
            .map(|s| s.repeats.as_slice())
            .unwrap_or_default();
        repeats.iter().map(|r| r.params.seed.unwrap_or(0)).collect()
    }

    /// Asks every judge every question (each repeat); `result[q][j]` is judge `j`'s answer to question `q`, the
    /// median of its repeats. Only store failures are errors; a judge that fails or never answers validly gives
    /// an [`Answer`] without a value.
    pub async fn ask<T, V>(
        &self,
        questions: &[Question],
        validate: V,
    ) -> Result<Vec<Vec<Answer<T>>>, JudgeError>
    where
        T: Repeated,
        V: Fn(&str) -> Result<T, String>,
    {
        let k = self.repeats();
        let jobs: Vec<(usize, usize, usize)> = (0..questions.len())
            .flat_map(|q| (0..self.slots.len()).flat_map(move |j| (0..k).map(move |r| (q, j, r))))
            .collect();
        let validate = &validate;
        let answers: Vec<Tagged<T>> = stream::iter(jobs)
            .map(|(q, j, r)| async move {
                let repeat = &self.slots[j].repeats[r];
                let a = self
                    .ask_one(&self.slots[j], repeat, &questions[q], validate)
                    .await;
                ((q, j, r), a)
            })
            .buffer_unordered(self.concurrency * self.slots.len().max(1))
            .collect()
            .await;
        let mut out: Vec<Vec<Vec<Option<Answer<T>>>>> = questions
            .iter()
            .map(|_| {
                (0..self.slots.len())
                    .map(|_| (0..k).map(|_| None).collect())
                    .collect()
            })
            .collect();
        for ((q, j, r), a) in answers {
            out[q][j][r] = Some(a?);
        }
        Ok(out
            .into_iter()
            .map(|row| {
                row.into_iter()
                    .map(|reps| combine(reps.into_iter().flatten().collect()))
                    .collect()
            })
            .collect())
    }

    async fn ask_one<T, V>(
        &self,
        slot: &Slot,
        repeat: &Repeat,
        q: &Question,
        validate: &V,
    ) -> Result<Answer<T>, JudgeError>
    where
        V: Fn(&str) -> Result<T, String>,
    {
        let mut messages = vec![
            Message::text(Role::System, q.system.clone()),
            q.user_message(),
        ];
        let mut failure = String::new();
        let images = !q.images.is_empty();
        for attempt in 0..=self.max_reasks {
            if images && slot.blind.load(Ordering::Relaxed) {
                return Err(cannot_see(&slot.spec));
            }
            let text = match self.turn(slot, repeat, q, attempt, &messages).await? {
                Ok(text) => text,
                Err(class) if images && class == UNSUPPORTED_INPUT => {
                    slot.blind.store(true, Ordering::Relaxed);
                    return Err(cannot_see(&slot.spec));
                }
                Err(class) => {
                    return Ok(Answer::single(
                        None,
                        attempt + 1,
                        Some(format!("call failed: {class}")),
                    ))
                }
            };
            match validate(&text) {
                Ok(v) => return Ok(Answer::single(Some(v), attempt + 1, None)),
                Err(why) => {
                    messages.push(Message::text(Role::Assistant, text));
                    messages.push(Message::text(Role::User, reask(&why)));
                    failure = why;
                }
            }
        }
        Ok(Answer::single(
            None,
            self.max_reasks + 1,
            Some(format!(
                "no valid answer after {} attempts: {failure}",
                self.max_reasks + 1
            )),
        ))
    }

    /// One attempt: the stored answer for this conversation if there is one, else a call, recorded.
    /// `Ok(Err(class))` is a failed call.
    async fn turn(
        &self,
        slot: &Slot,
        repeat: &Repeat,
        q: &Question,
        attempt: u32,
        messages: &[Message],
    ) -> Result<Result<String, String>, JudgeError> {
        let recorder = &repeat.recorder;
        let prompt = recorder.prompt(messages.to_vec())?;
        let output = OutputFormat::Json {
            schema: Some(q.schema.clone()),
        };
        let params_json = canonical_json(&json!({
            "params": repeat.params,
            "output": output,
            "model_identity": slot.identity,
        }));
        if let Some(hit) = recorder.lookup(&params_json, &prompt, 0)? {
            recorder.record_hit(&q.item_id, 0, attempt, &hit, true)?;
            self.reused.fetch_add(1, Ordering::Relaxed);
            return Ok(Ok(hit.text));
        }
        let spec = CallSpec {
            task_id: &q.item_id,
            turn: attempt,
            prompt: &prompt,
            samples: &[0],
            params: &repeat.params,
            output: &output,
            params_json: &params_json,
            template_id: q.template_id,
            template_hash: &q.template_hash,
            final_turn: true,
            replay: &[],
        };
        let result = recorder.call(spec).await?;
        self.sent.fetch_add(1, Ordering::Relaxed);
        let answer = result.samples.into_iter().next().map(|(_, r)| r);
        Ok(answer.unwrap_or_else(|| Err("malformed_response".into())))
    }

    /// Marks the judge runs finished and describes each judge with its run's totals.
    pub fn finish(&self, failed_items: &[u64]) -> Result<Vec<JudgeInfo>, JudgeError> {
        let mut out = Vec::new();
        for (j, slot) in self.slots.iter().enumerate() {
            let mut runs = Vec::new();
            let mut adjusted = BTreeMap::new();
            for repeat in &slot.repeats {
                let run_id = repeat.recorder.run_id();
                adjusted.extend(self.note_adjustments(run_id, &slot.backend)?);
                self.store
                    .set_status(run_id, nmb_store::RunStatus::Finished)?;
                let summary = self.store.summary(run_id)?;
                runs.push(RepeatRun {
                    seed: repeat.params.seed.unwrap_or(0),
                    judge_run_id: run_id.to_string(),
                    calls: summary.calls,
                    tokens_in: summary.tokens_in,
                    tokens_out: summary.tokens_out,
                });
            }
            let first = runs.remove(0);
            out.push(JudgeInfo {
                spec: slot.spec.clone(),
                provider: slot.provider.clone(),
                family: slot.family.clone(),
                self_grading: slot.self_grading.is_some(),
                self_grading_reason: slot.self_grading.clone(),
                judge_run_id: first.judge_run_id,
                calls: first.calls,
                tokens_in: first.tokens_in,
                tokens_out: first.tokens_out,
                failed_items: failed_items.get(j).copied().unwrap_or(0),
                repeat_runs: runs,
                params_adjusted: adjusted,
            });
        }
        Ok(out)
    }

    /// Records in a judge run's manifest what the judge's backend changed in the parameters it was given (as a
    /// model run's manifest records it, reasons redacted), and gives everything the manifest now records: what
    /// earlier scorings recorded included, so that a scoring answered from the store reports the same.
    fn note_adjustments(
        &self,
        run_id: &str,
        backend: &Arc<dyn Backend>,
    ) -> Result<BTreeMap<String, String>, JudgeError> {
        let mut manifest = self.store.run(run_id)?.manifest;
        let mut recorded = manifest.params_adjusted.clone().unwrap_or_default();
        let secrets = Secrets::from_env();
        let mut changed = false;
        for (a, why) in backend.adjustments() {
            if let std::collections::btree_map::Entry::Vacant(slot) = recorded.entry(a.to_string())
            {
                slot.insert(secrets.redact(&why));
                changed = true;
            }
        }
        if changed {
            manifest.params_adjusted = Some(recorded.clone());
            self.store.update_manifest(run_id, &manifest)?;
        }
        Ok(recorded)
    }
}

/// The adjustments a judge run's manifest records (names this version does not know are left out).
fn recorded_adjustments(manifest: &Manifest) -> BTreeMap<Adjustment, String> {
    let recorded = manifest.params_adjusted.iter().flatten();
    recorded
        .filter_map(|(name, why)| Some((Adjustment::parse(name)?, why.clone())))
        .collect()
}

/// One judge's repeats of one question as one answer: the median of the valid repeats, with every repeat kept.
fn combine<T: Repeated>(repeats: Vec<Answer<T>>) -> Answer<T> {
    if repeats.len() == 1 {
        return repeats.into_iter().next().expect("one repeat");
    }
    let attempts = repeats.iter().map(|a| a.attempts).sum();
    let valid: Vec<&T> = repeats.iter().filter_map(|a| a.value.as_ref()).collect();
    let value = (!valid.is_empty()).then(|| T::median(&valid));
    let failure = match value {
        Some(_) => None,
        None => repeats.iter().find_map(|a| a.failure.clone()),
    };
    Answer {
        value,
        attempts,
        failure,
        repeats: repeats.into_iter().map(|a| a.value).collect(),
    }
}

/// The error class of a server refusing an input it cannot take (images sent to a text-only model).
const UNSUPPORTED_INPUT: &str = "unsupported_input";

fn cannot_see(judge: &str) -> JudgeError {
    JudgeError::CannotSeeImages {
        judge: judge.to_string(),
        why: format!("its server answered {UNSUPPORTED_INPUT} to a question with images"),
    }
}

/// Refuses, before anything is sent, a judge whose server already answered `unsupported_input` to a question
/// with images in this judge run (an earlier scoring stopped on it).
fn refuse_if_refused_images(store: &Store, run_id: &str, judge: &str) -> Result<(), JudgeError> {
    let refused = store.run_samples(run_id)?.iter().any(|s| {
        s.error_class.as_deref() == Some(UNSUPPORTED_INPUT)
            || s.turns
                .iter()
                .any(|t| t.error_class.as_deref() == Some(UNSUPPORTED_INPUT))
    });
    match refused {
        true => Err(JudgeError::CannotSeeImages {
            judge: judge.to_string(),
            why: format!("its server answered {UNSUPPORTED_INPUT} to images in an earlier scoring"),
        }),
        false => Ok(()),
    }
}

fn reask(why: &str) -> String {
    format!(
        "Your answer could not be used: {why}. Reply again with only the JSON object described above: no \
         code fences, no text before or after it, every required field present and valid."
    )
}

/// Finds the judge run of `judge` for `of`, or creates it.
fn judge_run(
    store: &Store,
    of: JudgeRunOf<'_>,
    judge: &str,
    model_identity: &Value,
    params: &GenParams,
    images: bool,
) -> Result<String, JudgeError> {
    let scored = match of {
        JudgeRunOf::Run(scored) => scored,
        JudgeRunOf::Subject(subject) => {
            return subject_run(store, subject, judge, model_identity, params)
        }
    };
    let mut identity = json!({
        "kind": "judge",
        "scored_run_id": scored.run_id,
        "judge": judge,
        "model_identity": model_identity,
        "params": params,
    });
    // Only when sent, so that judge runs of text-only questions are found again as before.
    if images {
        identity["images"] = json!("same");
    }
    let config_hash = hex::encode(Sha256::digest(canonical_json(&identity).as_bytes()));
    if let Some(run_id) = store.first_run_with_config(&config_hash)? {
        store.set_status(&run_id, nmb_store::RunStatus::Running)?;
        return Ok(run_id);
    }
    let manifest = Manifest {
        nmb_version: env!("CARGO_PKG_VERSION").into(),
        kind: RunKind::Judge,
        scored_run_id: Some(scored.run_id.clone()),
        suite_id: scored.manifest.suite_id.clone(),
        suite_hash: scored.manifest.suite_hash.clone(),
        template_id: "judge".into(),
        model: judge.into(),
        model_identity: Some(model_identity.as_object().cloned().unwrap_or_default()),
        params: serde_json::to_value(params).unwrap_or(Value::Null),
        input_mode: match images {
            true => nmb_store::InputMode::Full,
            false => nmb_store::InputMode::Text,
        },
        samples: 1,
        dropped_inputs: match images {
            true => Vec::new(),
            false => vec!["images (judges read text only)".into()],
        },
        ..Manifest::default()
    };
    Ok(store.create_run(&config_hash, &manifest)?.run_id)
}

/// Finds the judge run of `judge` for questions about `subject` rather than a run, or creates it.
fn subject_run(
    store: &Store,
    subject: &str,
    judge: &str,
    model_identity: &Value,
    params: &GenParams,
) -> Result<String, JudgeError> {
    let identity = json!({
        "kind": "judge",
        "subject": subject,
        "judge": judge,
        "model_identity": model_identity,
        "params": params,
    });
    let config_hash = hex::encode(Sha256::digest(canonical_json(&identity).as_bytes()));
    if let Some(run_id) = store.first_run_with_config(&config_hash)? {
        store.set_status(&run_id, nmb_store::RunStatus::Running)?;
        return Ok(run_id);
    }
    let manifest = Manifest {
        nmb_version: env!("CARGO_PKG_VERSION").into(),
        kind: RunKind::Judge,
        suite_id: subject.into(),
        template_id: "judge".into(),
        model: judge.into(),
        model_identity: Some(model_identity.as_object().cloned().unwrap_or_default()),
        params: serde_json::to_value(params).unwrap_or(Value::Null),
        input_mode: nmb_store::InputMode::Text,
        samples: 1,
        ..Manifest::default()
    };
    Ok(store.create_run(&config_hash, &manifest)?.run_id)
}

fn provider(spec: &str) -> String {
    ModelSpec::parse(spec)
        .map(|s| s.backend.as_str().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// A judge's backend sending through its provider's batch API.
fn batched(
    j: &JudgeModel,
    store: &Arc<Store>,
    options: BatchOptions,
) -> Result<Arc<dyn Backend>, JudgeError> {
    let batcher = Batcher::new(j.backend.clone(), store.clone(), j.spec.as_str(), options);
    let batcher = batcher.map_err(|e| JudgeError::Batch(e.to_string()))?;
    Ok(Arc::new(batcher))
}
