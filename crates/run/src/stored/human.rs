//! Human baselines: the backend of `human:NAME`, whose answers are a clinician's, stored in the run store's
//! `human_answers` table (by `nmb import` or `nmb review answer`) rather than generated.
//!
//! A human run is an ordinary run: the evaluation loop plans the suite and sends each turn's conversation to
//! this backend, which finds the task the conversation opens with and answers with the newest stored answer to
//! that task and turn. So a human baseline is scored, reported and compared exactly like a model. A task the
//! person has not answered yet is a failed call of class `no_answer`: errored, kept apart from wrong answers,
//! and asked again by a resumed run once the answer is stored.
//!
//! Answers can be changed (the newest row wins), and a run must never keep an old answer under a new one: the
//! run's model identity records the SHA-256 of the answers it began with ([`connect_human`]). Answers added
//! since keep that identity, so the same run is resumed and its `no_answer` samples are answered; an answer
//! that differs from one the newest run recorded starts a new identity, hence a new run whose every answer
//! comes from the store afresh (never from the response cache of the old one).
//!
//! The answers come in through [`check_answers`] and [`record_answers`] (a file, `nmb import`) or the answer
//! pages, which show each task's opening turn as the models get it ([`questions`], `nmb review answer`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use nmb_chat::{messages_hash, Message, Role};
use nmb_plan::{conversation_for_turn, ImageCache, Plan, PlanError, PlanOptions, PlannedTask};
use nmb_requests::{
    Backend, BoxFuture, CallError, ChatRequest, Choice, Completion, ErrorClass, ModelSpec, Usage,
};
use nmb_store::{HumanAnswer, RunInfo, RunKind, Store, StoreError};
use nmb_suite::Suite;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::connect::ConnectedModel;
use crate::renders::StoreRenders;

mod import;
mod questions;

pub use import::{
    check_answers, differential_answer, human_spec, record_answers, Checked, CheckedAnswer,
};
pub use questions::{questions, Question, QuestionPart, Questions};

/// The key in a human run's model identity: the SHA-256 of the answers the run began with.
pub const ANSWERS_KEY: &str = "human_answers_sha256";

/// Why a human baseline cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum HumanError {
    #[error("{spec}: a person answers each task once; plan with one sample per task (--samples 1), not {samples}")]
    Samples { spec: String, samples: u32 },
    #[error("{spec}: a human's answers are read from the run store together with the suite (nmb eval, nmb import, nmb review answer); it cannot be used here (e.g. as a judge)")]
    NeedsStore { spec: String },
    #[error("{spec} is not a human (expected human:NAME)")]
    NotHuman { spec: String },
    /// A model spec given for a person ([`human_spec`]) names another kind of model.
    #[error("{text:?} is not a person: expected human:NAME")]
    NotAPerson { text: String },
    /// A file of answers has problems ([`Checked::answers`]); nothing of it may be stored.
    #[error("{} problem(s) in {file}; nothing was stored:\n  {}", problems.len(), problems.join("\n  "))]
    Problems { file: String, problems: Vec<String> },
    #[error("cannot plan the suite")]
    PlanSuite(#[source] PlanError),
    #[error(transparent)]
    Spec(#[from] nmb_requests::SpecError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Suite(#[from] nmb_suite::SuiteError),
}

/// Answers chat requests with a person's stored answers.
pub struct HumanBackend {
    spec: ModelSpec,
    /// The hash of each task's opening messages (system and first user message) to the tasks that open so;
    /// almost always one. Tasks with the same opening are the same question, as the response cache treats them.
    tasks_by_opening: HashMap<String, Vec<String>>,
    answers: HashMap<(String, u32), HumanAnswer>,
}

impl std::fmt::Debug for HumanBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HumanBackend")
            .field("spec", &self.spec)
            .field("tasks", &self.tasks_by_opening.len())
            .field("answers", &self.answers.len())
            .finish()
    }
}

impl HumanBackend {
    /// A backend answering with `answers` (the newest per task and turn), for tasks that open with the given
    /// messages: `(task_id, opening)`, the opening being turn 0's conversation ([`opening`]).
    pub fn new(
        spec: ModelSpec,
        openings: impl IntoIterator<Item = (String, Vec<Message>)>,
        answers: Vec<HumanAnswer>,
    ) -> Self {
        let mut tasks_by_opening: HashMap<String, Vec<String>> = HashMap::new();
        for (task_id, messages) in openings {
            tasks_by_opening
                .entry(messages_hash(&messages))
                .or_default()
                .push(task_id);
        }
        let answers = answers
            .into_iter()
            .map(|a| ((a.task_id.clone(), a.turn_index), a))
            .collect();
        HumanBackend {
            spec,
            tasks_by_opening,
            answers,
        }
    }

    /// The stored answer a request asks for: its task from the opening messages, its turn from the number of
    /// answers already in the conversation.
    pub fn answer_for(&self, request: &ChatRequest) -> Result<&HumanAnswer, CallError> {
        let first_answer = request
            .messages
            .iter()
            .position(|m| m.role == Role::Assistant)
            .unwrap_or(request.messages.len());
        let turn = request
            .messages
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .count() as u32;
        let key = messages_hash(&request.messages[..first_answer]);
        let Some(tasks) = self.tasks_by_opening.get(&key) else {
            return Err(CallError::new(
                ErrorClass::ClientError,
                format!(
                    "{}: the conversation does not open like any task of the suite planned for this person \
                     (another template or input mode?)",
                    self.spec
                ),
            ));
        };
        tasks
            .iter()
            .find_map(|t| self.answers.get(&(t.clone(), turn)))
            .ok_or_else(|| {
                CallError::new(
                    ErrorClass::NoAnswer,
                    format!(
                        "{} has no answer to task {} turn {turn} yet (add it with nmb import or nmb review \
                         answer, then resume the run)",
                        self.spec,
                        tasks.join(", ")
                    ),
                )
            })
    }
}

impl Backend for HumanBackend {
    fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    fn supports_n(&self) -> bool {
        false
    }

    fn supports_images(&self) -> bool {
        true
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<Completion, CallError>> {
        let result = self.answer_for(request).map(|a| completion(&self.spec, a));
        Box::pin(async move { result })
    }
}

/// The stored answer as a completion: no tokens, no time, and a raw body naming the row it came from.
fn completion(spec: &ModelSpec, answer: &HumanAnswer) -> Completion {
    let raw = json!({
        "human": spec.model,
        "task_id": answer.task_id,
        "turn_index": answer.turn_index,
        "created_ms": answer.created_ms,
        "source": answer.source,
    });
    Completion {
        choices: vec![Choice::new(answer.text.clone(), String::new(), false)],
        raw: raw.to_string(),
        usage: Usage::default(),
        latency: Duration::ZERO,
        batch: None,
    }
}

/// Turn 0's conversation of a planned task (system message and opening user message): what identifies the task
/// in every request of it.
pub fn opening(planned: &PlannedTask) -> Result<Vec<Message>, PlanError> {
    conversation_for_turn(planned, 0, &[])
}

/// The plan a human's run is made from: the suite planned as the evaluation plans it for this backend (views of
/// volumes from the store's render cache, no image size limit), so the pages a person answers on show exactly
/// the images the run's requests carry.
pub fn human_plan<'a>(
    store: Arc<Store>,
    suite: &'a Suite,
    options: &PlanOptions,
) -> Result<Plan<'a>, PlanError> {
    let cache = ImageCache::default()
        .with_render_cache(Arc::new(StoreRenders(store)))
        .with_max_side(None);
    Plan::new(suite, options, Arc::new(cache))
}

/// Builds the backend of `human:NAME` for `suite`, with its answers and its model identity (see the module
/// docs) read from `store`. Plans the suite once to learn each task's opening messages.
pub fn connect_human(
    spec: &ModelSpec,
    store: Arc<Store>,
    suite: &Suite,
    options: &PlanOptions,
) -> Result<ConnectedModel, HumanError> {
    if spec.backend != nmb_requests::BackendKind::Human {
        return Err(HumanError::NotHuman {
            spec: spec.to_string(),
        });
    }
    let plan = human_plan(store.clone(), suite, options)?;
    if plan.samples() != 1 {
        return Err(HumanError::Samples {
            spec: spec.to_string(),
            samples: plan.samples(),
        });
    }
    // A task that cannot be planned fails in the evaluation too, with its reason; it needs no key here.
    let openings: Vec<(String, Vec<Message>)> = plan
        .filter_map(Result::ok)
        .filter_map(|p| Some((p.task_id.clone(), opening(&p).ok()?)))
        .collect();
    let suite_hash = nmb_suite::suite_hash(suite)?;
    let answers = store.human_answers(&spec.model, &suite_hash)?;
    let identity = identity(&store, spec, &suite_hash, &answers)?;
    tracing::info!(human = %spec, answers = answers.len(), tasks = openings.len(), "human answers loaded");
    let backend = HumanBackend::new(spec.clone(), openings, answers);
    Ok(ConnectedModel {
        spec: spec.clone(),
        backend: Arc::new(backend),
        identity,
    })
}

/// The newest run of `human:NAME` on the suite with this hash, whatever its status or configuration.
pub fn latest_human_run(
    store: &Store,
    spec: &ModelSpec,
    suite_hash: &str,
) -> Result<Option<RunInfo>, StoreError> {
    let model = spec.identity();
    Ok(store.list_runs()?.into_iter().find(|r| {
        r.manifest.kind == RunKind::Model
            && model == r.manifest.model
            && r.manifest.suite_hash == suite_hash
    }))
}

/// The newest run's identity while every answer it recorded is still the newest answer; else a new one, from
/// the answers as they are now.
fn identity(
    store: &Store,
    spec: &ModelSpec,
    suite_hash: &str,
    answers: &[HumanAnswer],
) -> Result<Map<String, Value>, StoreError> {
    if let Some(run) = latest_human_run(store, spec, suite_hash)? {
        let kept = run
            .manifest
            .model_identity
            .as_ref()
            .filter(|i| i.contains_key(ANSWERS_KEY));
        if let Some(kept) = kept {
            if !changed_since(store, &run.run_id, answers)? {
                return Ok(kept.clone());
            }
        }
    }
    let mut identity = Map::new();
    identity.insert(ANSWERS_KEY.into(), Value::String(answers_sha256(answers)));
    Ok(identity)
}

/// Whether an answer the run recorded is no longer the person's newest answer to its task and turn.
fn changed_since(store: &Store, run_id: &str, answers: &[HumanAnswer]) -> Result<bool, StoreError> {
    let newest: HashMap<(&str, u32), &str> = answers
        .iter()
        .map(|a| ((a.task_id.as_str(), a.turn_index), a.text.as_str()))
        .collect();
    for sample in store.run_samples(run_id)? {
        for turn in sample.turns.iter().filter(|t| t.ok) {
            let Some(text) = turn.text.as_deref() else {
                continue;
            };
            if newest.get(&(sample.task_id.as_str(), turn.turn_index)) != Some(&text) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// The SHA-256 of a set of answers (task, turn and text of each), independent of their order.
pub fn answers_sha256(answers: &[HumanAnswer]) -> String {
    let sorted: BTreeMap<(&str, u32), &str> = answers
        .iter()
        .map(|a| ((a.task_id.as_str(), a.turn_index), a.text.as_str()))
        .collect();
    let mut h = Sha256::new();
    for ((task, turn), text) in sorted {
        for field in [task.as_bytes(), &turn.to_le_bytes(), text.as_bytes()] {
            h.update((field.len() as u64).to_le_bytes());
            h.update(field);
        }
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmb_chat::GenParams;

    fn answer(task: &str, turn: u32, text: &str) -> HumanAnswer {
        HumanAnswer {
            task_id: task.into(),
            turn_index: turn,
            created_ms: 1,
            source: "test.jsonl".into(),
            text: text.into(),
        }
    }

    fn opening_of(question: &str) -> Vec<Message> {
        vec![
            Message::text(Role::System, "You are a neurologist."),
            Message::text(Role::User, question),
        ]
    }

    fn backend() -> HumanBackend {
        HumanBackend::new(
            ModelSpec::parse("human:lee").unwrap(),
            [
                ("t1".to_string(), opening_of("Where is the lesion?")),
                ("t2".to_string(), opening_of("What is the diagnosis?")),
                ("consult".to_string(), opening_of("First look: what now?")),
            ],
            vec![
                answer("t1", 0, "Left frontal"),
                answer("consult", 0, "Get an MRI"),
                answer("consult", 1, "Multiple sclerosis"),
            ],
        )
    }

    fn ask(b: &HumanBackend, messages: Vec<Message>) -> Result<Completion, CallError> {
        let request = ChatRequest::new(messages, GenParams::default());
        futures::executor::block_on(b.complete(&request))
    }

    #[test]
    fn a_request_maps_to_its_task_and_turn() {
        let b = backend();
        let c = ask(&b, opening_of("Where is the lesion?")).unwrap();
        assert_eq!(c.choices.len(), 1);
        assert_eq!(c.choices[0].text, "Left frontal");
        assert_eq!(c.usage, Usage::default());
        let raw: Value = serde_json::from_str(&c.raw).unwrap();
        assert_eq!(raw["task_id"], "t1");
        assert_eq!(raw["turn_index"], 0);
        assert_eq!(raw["source"], "test.jsonl");

        // Turn 1 of the consult: the opening, the first answer, the next user message.
        let mut consult = opening_of("First look: what now?");
        consult.push(Message::text(Role::Assistant, "Get an MRI"));
        consult.push(Message::text(
            Role::User,
            "The MRI shows plaques. Diagnosis?",
        ));
        assert_eq!(
            ask(&b, consult.clone()).unwrap().choices[0].text,
            "Multiple sclerosis"
        );
        // Turn 2 was never answered.
        consult.push(Message::text(Role::Assistant, "Multiple sclerosis"));
        consult.push(Message::text(Role::User, "Treatment?"));
        let e = ask(&b, consult).unwrap_err();
        assert_eq!(e.class, ErrorClass::NoAnswer);
        assert!(e.message.contains("consult turn 2"), "{}", e.message);
    }

    #[test]
    fn an_unanswered_task_is_no_answer_and_a_stranger_is_a_client_error() {
        let b = backend();
        let e = ask(&b, opening_of("What is the diagnosis?")).unwrap_err();
        assert_eq!(e.class, ErrorClass::NoAnswer);
        assert!(
            e.message
                .contains("human:lee has no answer to task t2 turn 0"),
            "{}",
            e.message
        );
        let e = ask(&b, opening_of("Something else entirely")).unwrap_err();
        assert_eq!(e.class, ErrorClass::ClientError);
        // The system message is part of the opening: another template is another conversation.
        let other = vec![Message::text(Role::User, "Where is the lesion?")];
        assert_eq!(ask(&b, other).unwrap_err().class, ErrorClass::ClientError);
    }

    #[test]
    fn the_answers_hash_follows_content_not_order() {
        let a = [answer("t1", 0, "x"), answer("t2", 0, "y")];
        let b = [answer("t2", 0, "y"), answer("t1", 0, "x")];
        assert_eq!(answers_sha256(&a), answers_sha256(&b));
        assert_ne!(answers_sha256(&a), answers_sha256(&a[..1]));
        let edited = [answer("t1", 0, "x"), answer("t2", 0, "z")];
        assert_ne!(answers_sha256(&a), answers_sha256(&edited));
        // Fields are length-prefixed: moving text between fields changes the hash.
        assert_ne!(
            answers_sha256(&[answer("t1", 0, "ab")]),
            answers_sha256(&[answer("t1a", 0, "b")])
        );
    }
}
