//! Models whose answers are already stored: a person's (`human:NAME`, [`human`]: a clinician's answers in the
//! run store's `human_answers` table, from `nmb import` or `nmb review answer`) and a model's run that another
//! program made (`imported:MODEL`, [`replay`]: the answers of a file `nmb import` read, brought by the
//! invocation). Neither is asked anything.
//!
//! Both are one backend, [`StoredBackend`], and their runs are ordinary runs: the evaluation loop plans the suite
//! and sends each turn's conversation to it; it finds the task the conversation opens with (the hash of its
//! messages before the first answer, [`opening`]) and the turn (the answers already in it), and answers with the
//! stored answer to that task and turn, its tokens and raw record included. So such a run is scored, reported,
//! compared and shown like any other. An error another program recorded instead of an answer is an errored
//! sample of class `other`, a task without an answer one of class `no_answer`: both are kept apart from wrong
//! answers, and a resumed run asks again for what is missing. Each kind records the SHA-256 of its answers in the
//! run's model identity, so changed answers are a new run, never mixed with the old one's.
//!
//! The answer pages show each task's opening turn as the backend's runs plan it ([`questions`]).

pub mod human;
pub mod questions;
pub mod replay;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nmb_chat::{messages_hash, Message, Role};
use nmb_plan::{conversation_for_turn, ImageCache, Plan, PlanError, PlanOptions, PlannedTask};
use nmb_requests::{
    Backend, BackendKind, BoxFuture, CallError, ChatRequest, Choice, Completion, ErrorClass,
    ModelSpec, Usage,
};
use nmb_store::{RunInfo, RunKind, Store, StoreError};
use nmb_suite::Suite;

use crate::renders::StoreRenders;

pub use human::{connect_human, HumanError};
pub use replay::{connect_replay, Replay, ReplayError};

/// Why a stored-answer model cannot be set up for an evaluation.
#[derive(Debug, thiserror::Error)]
pub enum StoredError {
    #[error(transparent)]
    Human(#[from] HumanError),
    #[error(transparent)]
    Replay(#[from] ReplayError),
}

/// One stored answer to a task's turn.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredAnswer {
    pub task_id: String,
    /// 0 is the opening question; an import holds turn 0 only.
    pub turn: u32,
    /// The answer's text, or the error another program recorded instead of an answer.
    pub outcome: Result<String, String>,
    pub usage: Usage,
    pub latency: Duration,
    /// Where the answer came from (the stored row, or the file's line and what it says of the call): the call's
    /// raw body.
    pub raw: String,
}

/// Answers chat requests with stored answers.
pub struct StoredBackend {
    spec: ModelSpec,
    /// Whose answers: the wording of what the backend cannot answer.
    holder: Holder,
    /// The hash of each task's opening messages (system and first user message) to the tasks that open so;
    /// almost always one. Tasks with the same opening are the same question, as the response cache treats them.
    tasks_by_opening: HashMap<String, Vec<String>>,
    answers: HashMap<(String, u32), StoredAnswer>,
}

/// A person's answers (any turn of a consult) or an import's (one per task).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    Person,
    Import,
}

impl std::fmt::Debug for StoredBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoredBackend")
            .field("spec", &self.spec)
            .field("tasks", &self.tasks_by_opening.len())
            .field("answers", &self.answers.len())
            .finish()
    }
}

impl StoredBackend {
    /// A backend answering with `answers` (the last one given per task and turn wins), for tasks that open with
    /// the given messages: `(task_id, opening)`, the opening being turn 0's conversation ([`opening`]). A
    /// `human:` spec answers any turn; any other answers turn 0 only, as an import holds.
    pub fn new(
        spec: ModelSpec,
        openings: impl IntoIterator<Item = (String, Vec<Message>)>,
        answers: impl IntoIterator<Item = StoredAnswer>,
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
            .map(|a| ((a.task_id.clone(), a.turn), a))
            .collect();
        let holder = match spec.backend {
            BackendKind::Human => Holder::Person,
            _ => Holder::Import,
        };
        StoredBackend {
            spec,
            holder,
            tasks_by_opening,
            answers,
        }
    }

    /// The stored answer a request asks for: its task from the opening messages, its turn from the number of
    /// answers already in the conversation.
    pub fn answer_for(&self, request: &ChatRequest) -> Result<&StoredAnswer, CallError> {
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
        if turn > 0 && self.holder == Holder::Import {
            let message = format!(
                "{}: an imported run holds one answer per task; a later turn cannot be replayed",
                self.spec
            );
            return Err(CallError::new(ErrorClass::ClientError, message));
        }
        let key = messages_hash(&request.messages[..first_answer]);
        let Some(tasks) = self.tasks_by_opening.get(&key) else {
            return Err(CallError::new(ErrorClass::ClientError, self.stranger()));
        };
        tasks
            .iter()
            .find_map(|t| self.answers.get(&(t.clone(), turn)))
            .ok_or_else(|| CallError::new(ErrorClass::NoAnswer, self.unanswered(tasks, turn)))
    }

    /// What to say of a conversation that opens like no task planned.
    fn stranger(&self) -> String {
        let spec = &self.spec;
        match self.holder {
            Holder::Person => format!(
                "{spec}: the conversation does not open like any task of the suite planned for this person \
                 (another template or input mode?)"
            ),
            Holder::Import => format!(
                "{spec}: the conversation does not open like any task of the suite planned for this import"
            ),
        }
    }

    /// What to say of a task's turn without an answer.
    fn unanswered(&self, tasks: &[String], turn: u32) -> String {
        let (spec, tasks) = (&self.spec, tasks.join(", "));
        match self.holder {
            Holder::Person => format!(
                "{spec} has no answer to task {tasks} turn {turn} yet (add it with nmb import or nmb review \
                 answer, then resume the run)"
            ),
            Holder::Import => format!("{spec}: the imported file has no answer to task {tasks}"),
        }
    }
}

impl Backend for StoredBackend {
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
        let result = self.answer_for(request).and_then(completion);
        Box::pin(async move { result })
    }
}

/// The stored answer as a completion, or the recorded error as a failed call (class `other`, never retried).
fn completion(answer: &StoredAnswer) -> Result<Completion, CallError> {
    match &answer.outcome {
        Ok(text) => Ok(Completion {
            choices: vec![Choice::new(text.clone(), String::new(), false)],
            raw: answer.raw.clone(),
            usage: answer.usage,
            latency: answer.latency,
            batch: None,
        }),
        Err(error) => Err(CallError::new(
            ErrorClass::Other,
            format!("the imported run recorded an error instead of an answer: {error}"),
        )
        .with_raw(answer.raw.clone())),
    }
}

/// Turn 0's conversation of a planned task (system message and opening user message): what identifies the task
/// in every request of it.
pub fn opening(planned: &PlannedTask) -> Result<Vec<Message>, PlanError> {
    conversation_for_turn(planned, 0, &[])
}

/// The plan a stored-answer run is made from: the suite planned as the evaluation plans it for this backend
/// (views of volumes from the store's render cache, no image size limit), so the pages a person answers on show
/// exactly the images the run's requests carry.
pub fn answer_plan<'a>(
    store: Arc<Store>,
    suite: &'a Suite,
    options: &PlanOptions,
) -> Result<Plan<'a>, PlanError> {
    let cache = ImageCache::default()
        .with_render_cache(Arc::new(StoreRenders(store)))
        .with_max_side(None);
    Plan::new(suite, options, Arc::new(cache))
}

/// Each planned task's opening. A task that cannot be planned fails in the evaluation too, with its reason; it
/// needs no key here.
fn openings(plan: Plan<'_>) -> Vec<(String, Vec<Message>)> {
    plan.filter_map(Result::ok)
        .filter_map(|p| Some((p.task_id.clone(), opening(&p).ok()?)))
        .collect()
}

/// The newest model run of `spec` (`human:NAME`, `imported:MODEL`) on the suite with this hash, whatever its
/// status or configuration.
pub fn latest_run(
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

#[cfg(test)]
mod tests {
    use super::*;
    use nmb_chat::GenParams;

    fn answer(task: &str, turn: u32, outcome: Result<&str, &str>) -> StoredAnswer {
        StoredAnswer {
            task_id: task.into(),
            turn,
            outcome: outcome.map(String::from).map_err(String::from),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 3,
                ..Usage::default()
            },
            latency: Duration::ZERO,
            raw: format!("{{\"task\": \"{task}\"}}"),
        }
    }

    fn opening_of(question: &str) -> Vec<Message> {
        vec![
            Message::text(Role::System, "You are a neurologist."),
            Message::text(Role::User, question),
        ]
    }

    fn backend(spec: &str) -> StoredBackend {
        StoredBackend::new(
            ModelSpec::parse(spec).unwrap(),
            [
                ("t1".to_string(), opening_of("Where is the lesion?")),
                ("t2".to_string(), opening_of("What is the diagnosis?")),
                ("t3".to_string(), opening_of("Which artery?")),
                ("consult".to_string(), opening_of("First look: what now?")),
            ],
            [
                answer("t1", 0, Ok("Left frontal")),
                answer("t3", 0, Err("timeout")),
                answer("consult", 0, Ok("Get an MRI")),
                answer("consult", 1, Ok("Multiple sclerosis")),
            ],
        )
    }

    fn ask(b: &StoredBackend, messages: Vec<Message>) -> Result<Completion, CallError> {
        let request = ChatRequest::new(messages, GenParams::default());
        futures::executor::block_on(b.complete(&request))
    }

    /// Turn 1 of the consult: the opening, the first answer, the next user message.
    fn consult_turn_1() -> Vec<Message> {
        let mut consult = opening_of("First look: what now?");
        consult.push(Message::text(Role::Assistant, "Get an MRI"));
        consult.push(Message::text(
            Role::User,
            "The MRI shows plaques. Diagnosis?",
        ));
        consult
    }

    #[test]
    fn a_request_maps_to_its_task_and_turn() {
        let b = backend("human:lee");
        let c = ask(&b, opening_of("Where is the lesion?")).unwrap();
        assert_eq!(c.choices.len(), 1);
        assert_eq!(c.choices[0].text, "Left frontal");
        assert_eq!(c.usage.input_tokens, 10);
        assert_eq!(c.raw, "{\"task\": \"t1\"}");
        let mut consult = consult_turn_1();
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
    fn answers_errors_missing_tasks_and_strangers_are_told_apart() {
        for spec in ["human:lee", "imported:openai/gpt-4o"] {
            let b = backend(spec);
            let e = ask(&b, opening_of("Which artery?")).unwrap_err();
            assert_eq!(e.class, ErrorClass::Other, "{spec}");
            assert!(e.message.contains("timeout"), "{}", e.message);
            assert_eq!(e.raw.as_deref(), Some("{\"task\": \"t3\"}"));
            let e = ask(&b, opening_of("What is the diagnosis?")).unwrap_err();
            assert_eq!(e.class, ErrorClass::NoAnswer, "{spec}");
            assert!(e.message.contains("task t2"), "{}", e.message);
            let e = ask(&b, opening_of("Something else entirely")).unwrap_err();
            assert_eq!(e.class, ErrorClass::ClientError, "{spec}");
            // The system message is part of the opening: another template is another conversation.
            let other = vec![Message::text(Role::User, "Where is the lesion?")];
            assert_eq!(ask(&b, other).unwrap_err().class, ErrorClass::ClientError);
        }
    }

    #[test]
    fn each_holder_says_what_it_lacks_in_its_own_words() {
        let person = backend("human:lee");
        let e = ask(&person, opening_of("What is the diagnosis?")).unwrap_err();
        assert!(
            e.message
                .contains("human:lee has no answer to task t2 turn 0 yet"),
            "{}",
            e.message
        );
        let e = ask(&person, opening_of("Something else")).unwrap_err();
        assert!(
            e.message.contains("planned for this person"),
            "{}",
            e.message
        );
        let import = backend("imported:openai/gpt-4o");
        let e = ask(&import, opening_of("What is the diagnosis?")).unwrap_err();
        assert_eq!(
            e.message,
            "imported:openai/gpt-4o: the imported file has no answer to task t2"
        );
        let e = ask(&import, opening_of("Something else")).unwrap_err();
        assert!(
            e.message.contains("planned for this import"),
            "{}",
            e.message
        );
        // An import holds no later turn, even where an answer to one was given.
        let e = ask(&import, consult_turn_1()).unwrap_err();
        assert_eq!(e.class, ErrorClass::ClientError);
        assert!(
            e.message.contains("a later turn cannot be replayed"),
            "{}",
            e.message
        );
    }
}
