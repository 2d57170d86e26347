//! Human baselines: `human:NAME`, whose answers are a clinician's, stored in the run store's `human_answers`
//! table (by `nmb import` or by the answer pages) rather than generated, and answered by the [`StoredBackend`]
//! with the newest stored answer to each task and turn.
//!
//! Answers can be changed (the newest row wins), and a run must never keep an old answer under a new one: the
//! run's model identity records the SHA-256 of the answers it began with ([`connect_human`]). Answers added
//! since keep that identity, so the same run is resumed and its `no_answer` samples are answered; an answer
//! that differs from one the newest run recorded starts a new identity, hence a new run whose every answer
//! comes from the store afresh (never from the response cache of the old one).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use nmb_plan::{PlanError, PlanOptions};
use nmb_requests::{ModelSpec, Usage};
use nmb_store::{HumanAnswer, Store, StoreError};
use nmb_suite::Suite;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use super::{answer_plan, latest_run, openings, StoredAnswer, StoredBackend};
use crate::connect::ConnectedModel;

/// The key in a human run's model identity: the SHA-256 of the answers the run began with.
pub const ANSWERS_KEY: &str = "human_answers_sha256";

/// Why a human baseline cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum HumanError {
    #[error("{spec}: a person answers each task once; plan with one sample per task (--samples 1), not {samples}")]
    Samples { spec: String, samples: u32 },
    #[error("{spec} is not a human (expected human:NAME)")]
    NotHuman { spec: String },
    #[error("cannot plan the suite")]
    PlanSuite(#[source] PlanError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Suite(#[from] nmb_suite::SuiteError),
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
    let plan = answer_plan(store.clone(), suite, options)?;
    if plan.samples() != 1 {
        return Err(HumanError::Samples {
            spec: spec.to_string(),
            samples: plan.samples(),
        });
    }
    let openings = openings(plan);
    let suite_hash = nmb_suite::suite_hash(suite)?;
    let answers = store.human_answers(&spec.model, &suite_hash)?;
    let identity = identity(&store, spec, &suite_hash, &answers)?;
    tracing::info!(human = %spec, answers = answers.len(), tasks = openings.len(), "human answers loaded");
    let answers = answers.iter().map(|a| stored_answer(spec, a));
    let backend = StoredBackend::new(spec.clone(), openings, answers);
    Ok(ConnectedModel {
        spec: spec.clone(),
        backend: Arc::new(backend),
        identity,
    })
}

/// The newest run's identity while every answer it recorded is still the newest answer; else a new one, from
/// the answers as they are now.
fn identity(
    store: &Store,
    spec: &ModelSpec,
    suite_hash: &str,
    answers: &[HumanAnswer],
) -> Result<Map<String, Value>, StoreError> {
    if let Some(run) = latest_run(store, spec, suite_hash)? {
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

/// A person's stored answer as the backend gives it: no tokens, no time, and a raw body naming the row it came
/// from.
fn stored_answer(spec: &ModelSpec, answer: &HumanAnswer) -> StoredAnswer {
    let raw = json!({
        "human": spec.model,
        "task_id": answer.task_id,
        "turn_index": answer.turn_index,
        "created_ms": answer.created_ms,
        "source": answer.source,
    });
    StoredAnswer {
        task_id: answer.task_id.clone(),
        turn: answer.turn_index,
        outcome: Ok(answer.text.clone()),
        usage: Usage::default(),
        latency: Duration::ZERO,
        raw: raw.to_string(),
    }
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

    fn answer(task: &str, turn: u32, text: &str) -> HumanAnswer {
        HumanAnswer {
            task_id: task.into(),
            turn_index: turn,
            created_ms: 1,
            source: "test.jsonl".into(),
            text: text.into(),
        }
    }

    #[test]
    fn a_stored_answer_names_the_row_it_came_from() {
        let spec = ModelSpec::parse("human:lee").unwrap();
        let a = stored_answer(&spec, &answer("consult", 1, "Multiple sclerosis"));
        assert_eq!(a.outcome.as_deref(), Ok("Multiple sclerosis"));
        assert_eq!((a.task_id.as_str(), a.turn), ("consult", 1));
        assert_eq!(a.usage, Usage::default());
        let raw: Value = serde_json::from_str(&a.raw).unwrap();
        assert_eq!(raw["human"], "lee");
        assert_eq!(raw["task_id"], "consult");
        assert_eq!(raw["turn_index"], 1);
        assert_eq!(raw["source"], "test.jsonl");
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
