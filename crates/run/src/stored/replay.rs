//! Imported runs: `imported:MODEL`, whose answers another program already got from the model and wrote to a file
//! (NeuroVLM-Bench's `run_async.py` JSONL, read by `nmb import`). The model is
//! never asked: the [`StoredBackend`] answers each task with what the file recorded for it, its tokens included.
//! A line the other program recorded as an error is an errored sample of class `other` and a task the file has no
//! line for one of class `no_answer`.
//!
//! The answers travel with the invocation (`Invocation::replay`), never through the network or a key;
//! without them `imported:MODEL` cannot be connected (a worker or `nmb eval` refuses it). The run's model
//! identity records the SHA-256 of the answers ([`ANSWERS_KEY`]) with what the file says of the model, so the
//! same file imported again is the same configuration and resumes the same run, and a changed file is a new
//! run, never mixed with the old one's answers.

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_plan::PlanOptions;
use nmb_requests::{BackendKind, ModelSpec};
use nmb_store::Store;
use nmb_suite::Suite;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::{answer_plan, openings, StoredAnswer, StoredBackend};
use crate::connect::ConnectedModel;

/// The key in an imported run's model identity: the SHA-256 of its answers ([`answers_sha256`]).
pub const ANSWERS_KEY: &str = "imported_answers_sha256";

/// One model's answers from a file, with what the file says of the model beyond its name.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// One per task, turn 0.
    pub answers: Vec<StoredAnswer>,
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
    #[error("{spec}: one answer per task (--samples 1), not {samples}")]
    Samples { spec: String, samples: u32 },
    #[error("cannot plan the suite")]
    Plan(#[from] nmb_plan::PlanError),
}

/// Builds the backend of `imported:MODEL` for `suite` from the answers the invocation brought (without them,
/// [`crate::connect_model`] refuses the model). Plans the suite once to learn each task's opening messages, as
/// the evaluation will plan it.
pub fn connect_replay(
    spec: &ModelSpec,
    replay: &Replay,
    store: Arc<Store>,
    suite: &Suite,
    options: &PlanOptions,
) -> Result<ConnectedModel, ReplayError> {
    let shown = || spec.to_string();
    if spec.backend != BackendKind::Imported {
        return Err(ReplayError::NotImported { spec: shown() });
    }
    let plan = answer_plan(store, suite, options)?;
    if plan.samples() != 1 {
        let samples = plan.samples();
        return Err(ReplayError::Samples {
            spec: shown(),
            samples,
        });
    }
    let backend = StoredBackend::new(spec.clone(), openings(plan), replay.answers.clone());
    Ok(ConnectedModel {
        spec: spec.clone(),
        backend: Arc::new(backend),
        identity: replay.model_identity(),
    })
}

/// The SHA-256 of a set of answers (task, answer or error, tokens), independent of their order.
pub fn answers_sha256(answers: &[StoredAnswer]) -> String {
    let sorted: BTreeMap<&str, &StoredAnswer> =
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
    use nmb_requests::Usage;
    use std::time::Duration;

    fn answer(task: &str, outcome: Result<&str, &str>) -> StoredAnswer {
        StoredAnswer {
            task_id: task.into(),
            turn: 0,
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
