//! Imported runs: the backend of `imported:MODEL`, whose answers another program already got from the model and
//! wrote to a file (NeuroVLM-Bench's `run_async.py` JSONL, read by `nmb import`). The model is never asked.
//!
//! An imported run is an ordinary run, as a human baseline is: the evaluation loop plans the suite and sends
//! each task's conversation to this backend, which finds the task the conversation opens with and answers with
//! what the file recorded for it, its tokens included. So the run is scored, reported, compared and shown like
//! any other. A line the other program recorded as an error is an errored sample of class `other` and a task the
//! file has no line for one of class `no_answer`: both are kept apart from wrong answers.
//!
//! The answers travel with the invocation ([`crate::Invocation::replay`]), never through the network or a key;
//! without them `imported:MODEL` cannot be connected (a worker or `nmb eval` refuses it). The run's model
//! identity records the SHA-256 of the answers ([`ANSWERS_KEY`]) with what the file says of the model, so the
//! same file imported again is the same configuration and resumes the same run, and a changed file is a new
//! run, never mixed with the old one's answers.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use nmb_chat::{messages_hash, Role};
use nmb_plan::PlanOptions;
use nmb_requests::{
    Backend, BackendKind, BoxFuture, CallError, ChatRequest, Choice, Completion, ErrorClass,
    ModelSpec, Usage,
};
use nmb_store::Store;
use nmb_suite::Suite;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::connect::ConnectedModel;
use crate::human::{human_plan, opening};

pub mod neurovlm_run;

/// The key in an imported run's model identity: the SHA-256 of its answers ([`answers_sha256`]).
pub const ANSWERS_KEY: &str = "imported_answers_sha256";

/// One task's answer as the other program recorded it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayAnswer {
    pub task_id: String,
    /// The answer's text, or the error the program recorded instead of an answer.
    pub outcome: Result<String, String>,
    pub usage: Usage,
    pub latency: Duration,
    /// Where the answer came from (file, line and what the line says of the call): the call's raw body.
    pub raw: String,
}

/// One model's answers from a file, with what the file says of the model beyond its name.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    pub answers: Vec<ReplayAnswer>,
    /// Goes into the run's model identity, with [`ANSWERS_KEY`] added (e.g. the prompt's name, the parameters
    /// the program recorded): only what comes from the file's content, so a renamed file is the same run.
    pub identity: Map<String, Value>,
}

impl Replay {
    /// The run's model identity: `identity` with the answers' SHA-256.
    pub fn model_identity(&self) -> Map<String, Value> {
        let mut identity = self.identity.clone();
        let hash = answers_sha256(&self.answers);
        identity.insert(ANSWERS_KEY.into(), Value::String(hash));
        identity
    }
}

/// Why an imported model cannot be connected.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{spec} is not an imported model (expected imported:MODEL)")]
    NotImported { spec: String },
    #[error("{spec}: an imported model's answers come from the file it was imported from (nmb import FILE); it cannot be asked, so this run cannot be resumed or worked on here")]
    NoAnswers { spec: String },
    #[error("{spec}: one answer per task (--samples 1), not {samples}")]
    Samples { spec: String, samples: u32 },
    #[error("cannot plan the suite")]
    Plan(#[from] nmb_plan::PlanError),
}

/// Answers chat requests with the answers a file recorded.
pub struct ReplayBackend {
    spec: ModelSpec,
    /// The hash of each task's opening messages to the tasks that open so (as [`crate::HumanBackend`]).
    tasks_by_opening: HashMap<String, Vec<String>>,
    answers: HashMap<String, ReplayAnswer>,
}

impl std::fmt::Debug for ReplayBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplayBackend")
            .field("spec", &self.spec)
            .field("tasks", &self.tasks_by_opening.len())
            .field("answers", &self.answers.len())
            .finish()
    }
}

impl ReplayBackend {
    /// The answer a request asks for: its task from its opening messages. Imports are single-turn.
    fn answer_for(&self, request: &ChatRequest) -> Result<&ReplayAnswer, CallError> {
        if request.messages.iter().any(|m| m.role == Role::Assistant) {
            let message = format!(
                "{}: an imported run holds one answer per task; a later turn cannot be replayed",
                self.spec
            );
            return Err(CallError::new(ErrorClass::ClientError, message));
        }
        let Some(tasks) = self.tasks_by_opening.get(&messages_hash(&request.messages)) else {
            let message = format!(
                "{}: the conversation does not open like any task of the suite planned for this import",
                self.spec
            );
            return Err(CallError::new(ErrorClass::ClientError, message));
        };
        tasks
            .iter()
            .find_map(|t| self.answers.get(t))
            .ok_or_else(|| {
                let message = format!(
                    "{}: the imported file has no answer to task {}",
                    self.spec,
                    tasks.join(", ")
                );
                CallError::new(ErrorClass::NoAnswer, message)
            })
    }
}

impl Backend for ReplayBackend {
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

/// The recorded answer as a completion, or the recorded error as a failed call (class `other`, never retried).
fn completion(answer: &ReplayAnswer) -> Result<Completion, CallError> {
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

/// Builds the backend of `imported:MODEL` for `suite` from the answers the invocation brought. Plans the suite
/// once to learn each task's opening messages, as the evaluation will plan it.
pub fn connect_replay(
    spec: &ModelSpec,
    replay: Option<&Replay>,
    store: Arc<Store>,
    suite: &Suite,
    options: &PlanOptions,
) -> Result<ConnectedModel, ReplayError> {
    let shown = || spec.to_string();
    if spec.backend != BackendKind::Imported {
        return Err(ReplayError::NotImported { spec: shown() });
    }
    let replay = replay.ok_or_else(|| ReplayError::NoAnswers { spec: shown() })?;
    let plan = human_plan(store, suite, options)?;
    if plan.samples() != 1 {
        let samples = plan.samples();
        return Err(ReplayError::Samples {
            spec: shown(),
            samples,
        });
    }
    let mut tasks_by_opening: HashMap<String, Vec<String>> = HashMap::new();
    // A task that cannot be planned fails in the evaluation too, with its reason.
    for planned in plan.filter_map(Result::ok) {
        if let Ok(messages) = opening(&planned) {
            let key = messages_hash(&messages);
            tasks_by_opening
                .entry(key)
                .or_default()
                .push(planned.task_id);
        }
    }
    let answers = replay
        .answers
        .iter()
        .map(|a| (a.task_id.clone(), a.clone()))
        .collect();
    let backend = ReplayBackend {
        spec: spec.clone(),
        tasks_by_opening,
        answers,
    };
    Ok(ConnectedModel {
        spec: spec.clone(),
        backend: Arc::new(backend),
        identity: replay.model_identity(),
    })
}

/// The SHA-256 of a file's bytes, lower-case hex (a prompt file, as `sha256sum` prints it); the file is
/// streamed through the hash, never read whole.
pub fn file_sha256(path: &std::path::Path) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok(hex::encode(hasher.finalize()))
}

/// The SHA-256 of a set of answers (task, answer or error, tokens), independent of their order.
pub fn answers_sha256(answers: &[ReplayAnswer]) -> String {
    let sorted: BTreeMap<&str, &ReplayAnswer> =
        answers.iter().map(|a| (a.task_id.as_str(), a)).collect();
    let mut h = Sha256::new();
    for (task, a) in sorted {
        let (kind, text): (&[u8], &str) = match &a.outcome {
            Ok(t) => (b"answer", t),
            Err(e) => (b"error", e),
        };
        let tokens = [a.usage.input_tokens, a.usage.output_tokens];
        let tokens: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
        for field in [task.as_bytes(), kind, text.as_bytes(), &tokens] {
            h.update((field.len() as u64).to_le_bytes());
            h.update(field);
        }
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmb_chat::{GenParams, Message};

    fn answer(task: &str, outcome: Result<&str, &str>) -> ReplayAnswer {
        ReplayAnswer {
            task_id: task.into(),
            outcome: outcome.map(String::from).map_err(String::from),
            usage: Usage {
                input_tokens: 10,
                output_tokens: 3,
                ..Usage::default()
            },
            latency: Duration::ZERO,
            raw: "{\"line\": 1}".into(),
        }
    }

    fn opening_of(question: &str) -> Vec<Message> {
        vec![
            Message::text(Role::System, "Read the image."),
            Message::text(Role::User, question),
        ]
    }

    fn backend() -> ReplayBackend {
        let mut tasks_by_opening = HashMap::new();
        for (task, q) in [("t1", "one"), ("t2", "two"), ("t3", "three")] {
            tasks_by_opening.insert(messages_hash(&opening_of(q)), vec![task.to_string()]);
        }
        let answers = [answer("t1", Ok("{\"a\": 1}")), answer("t2", Err("timeout"))];
        ReplayBackend {
            spec: ModelSpec::parse("imported:openai/gpt-4o").unwrap(),
            tasks_by_opening,
            answers: answers
                .into_iter()
                .map(|a| (a.task_id.clone(), a))
                .collect(),
        }
    }

    fn ask(b: &ReplayBackend, messages: Vec<Message>) -> Result<Completion, CallError> {
        let request = ChatRequest::new(messages, GenParams::default());
        futures::executor::block_on(b.complete(&request))
    }

    #[test]
    fn answers_errors_and_missing_lines_are_told_apart() {
        let b = backend();
        let c = ask(&b, opening_of("one")).unwrap();
        assert_eq!(c.choices[0].text, "{\"a\": 1}");
        assert_eq!(c.usage.input_tokens, 10);
        assert_eq!(c.raw, "{\"line\": 1}");
        let e = ask(&b, opening_of("two")).unwrap_err();
        assert_eq!(e.class, ErrorClass::Other);
        assert!(e.message.contains("timeout"), "{}", e.message);
        let e = ask(&b, opening_of("three")).unwrap_err();
        assert_eq!(e.class, ErrorClass::NoAnswer);
        let e = ask(&b, opening_of("four")).unwrap_err();
        assert_eq!(e.class, ErrorClass::ClientError);
    }

    #[test]
    fn the_answers_hash_follows_content_not_order() {
        let a = [answer("t1", Ok("x")), answer("t2", Err("y"))];
        let b = [answer("t2", Err("y")), answer("t1", Ok("x"))];
        assert_eq!(answers_sha256(&a), answers_sha256(&b));
        // An answer and an error of the same text differ.
        let c = [answer("t1", Ok("x")), answer("t2", Ok("y"))];
        assert_ne!(answers_sha256(&a), answers_sha256(&c));
        let mut d = a.clone();
        d[0].usage.output_tokens = 4;
        assert_ne!(answers_sha256(&a), answers_sha256(&d));
    }
}
