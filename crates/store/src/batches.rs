//! Provider batches: a batch is written here with every request's custom id before it is submitted, its
//! provider's id as soon as the provider gives one, and its end once its results are read. A process killed at
//! any point finds its batches here again: it polls a submitted one, asks the provider about one it may have
//! submitted, and submits only what no batch holds.
//!
//! A custom id names a request by its content (the model and the body sent), so the same request always has the
//! same id, in any run and any process.

use crate::db::{args, Db, DbResult, Row};
use crate::error::Result;
use crate::keys::now_ms;
use crate::Store;

/// Where a batch stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BatchState {
    /// Recorded; the submission may or may not have reached the provider.
    Preparing,
    /// The provider took it and gave its id.
    Submitted,
    /// Its results were read (an expired or cancelled batch ends too, with some requests unanswered).
    Ended,
    /// The provider never got it, or refused it: its requests belong to no batch.
    Abandoned,
}

impl BatchState {
    pub fn as_str(self) -> &'static str {
        match self {
            BatchState::Preparing => "preparing",
            BatchState::Submitted => "submitted",
            BatchState::Ended => "ended",
            BatchState::Abandoned => "abandoned",
        }
    }

    fn parse(s: &str) -> BatchState {
        match s {
            "submitted" => BatchState::Submitted,
            "ended" => BatchState::Ended,
            "abandoned" => BatchState::Abandoned,
            _ => BatchState::Preparing,
        }
    }
}

/// One recorded batch.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BatchRecord {
    /// nmb's own id, which the provider is told where it can keep one (metadata, display name).
    pub batch_id: String,
    pub model: String,
    /// `openai`, `anthropic` or `gemini`.
    pub provider: String,
    /// The provider's id, once it gave one.
    pub provider_id: Option<String>,
    pub state: BatchState,
    pub requests: u64,
    pub created_ms: i64,
    /// Why it was submitted again, when its requests were in batches the provider refused (`None` for a first
    /// submission, and for batches stored before schema v17).
    pub resubmission: Option<Resubmission>,
}

/// A batch submitted again: its requests were in batches the provider refused for a queue limit (OpenAI's
/// `token_limit_exceeded`, Gemini's `RESOURCE_EXHAUSTED`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Resubmission {
    /// The refused batches (nmb's ids) whose requests it holds.
    pub replaces: Vec<String>,
    /// The provider's code and message, as the refusal said them.
    pub reason: String,
    /// The most requests one batch held after the refusal (halved at each refusal).
    pub round: u64,
}

const COLUMNS: &str =
    "b.batch_id, b.model, b.provider, b.provider_id, b.state, b.requests, b.created_ms, \
                       b.resubmit_of, b.resubmit_reason, b.resubmit_round";

fn read_record(r: &Row) -> DbResult<BatchRecord> {
    let state: String = r.get(4)?;
    let requests: i64 = r.get(5)?;
    let replaces: Option<String> = r.get(7)?;
    let resubmission = match replaces {
        Some(replaces) => Some(Resubmission {
            replaces: replaces.split_whitespace().map(String::from).collect(),
            reason: r.get::<Option<String>>(8)?.unwrap_or_default(),
            round: u64::try_from(r.get::<Option<i64>>(9)?.unwrap_or(0)).unwrap_or(0),
        }),
        None => None,
    };
    Ok(BatchRecord {
        batch_id: r.get(0)?,
        model: r.get(1)?,
        provider: r.get(2)?,
        provider_id: r.get(3)?,
        state: BatchState::parse(&state),
        requests: u64::try_from(requests).unwrap_or(0),
        created_ms: r.get(6)?,
        resubmission,
    })
}

impl Store {
    /// Records a batch of `custom_ids` for `model` as preparing, in one transaction, before it is submitted; with
    /// why, when it is submitted again after a refusal.
    pub fn create_batch(
        &self,
        batch_id: &str,
        model: &str,
        provider: &str,
        custom_ids: &[String],
        resubmission: Option<&Resubmission>,
    ) -> Result<()> {
        let now = now_ms();
        let of = resubmission.map(|r| r.replaces.join(" "));
        let reason = resubmission.map(|r| r.reason.as_str());
        let round = resubmission.map(|r| i64::try_from(r.round).unwrap_or(i64::MAX));
        self.write("record a batch", |db| {
            db.exec(
                "INSERT INTO batches (batch_id, model, provider, provider_id, state, requests, created_ms,
                                      updated_ms, resubmit_of, resubmit_reason, resubmit_round)
                 VALUES (?1, ?2, ?3, NULL, 'preparing', ?4, ?5, ?5, ?6, ?7, ?8)",
                args![batch_id, model, provider, custom_ids.len() as i64, now, of.as_deref(), reason, round],
            )?;
            for (position, id) in custom_ids.iter().enumerate() {
                db.exec(
                    "INSERT INTO batch_items (batch_id, custom_id, position) VALUES (?1, ?2, ?3)
                     ON CONFLICT DO NOTHING",
                    args![batch_id, id.as_str(), position as i64],
                )?;
            }
            Ok(())
        })
    }

    /// Records the provider's id of a submitted batch.
    pub fn batch_submitted(&self, batch_id: &str, provider_id: &str) -> Result<()> {
        self.write("record a batch's submission", |db| {
            db.exec(
                "UPDATE batches SET provider_id = ?2, state = 'submitted', updated_ms = ?3 WHERE batch_id = ?1",
                args![batch_id, provider_id, now_ms()],
            )?;
            Ok(())
        })
    }

    /// Moves a batch to `state` (ended or abandoned).
    pub fn set_batch_state(&self, batch_id: &str, state: BatchState) -> Result<()> {
        self.write("record a batch's state", |db| {
            db.exec(
                "UPDATE batches SET state = ?2, updated_ms = ?3 WHERE batch_id = ?1",
                args![batch_id, state.as_str(), now_ms()],
            )?;
            Ok(())
        })
    }

    /// The newest batch of `model` holding `custom_id` that is not abandoned.
    pub fn batch_of_item(&self, model: &str, custom_id: &str) -> Result<Option<BatchRecord>> {
        self.read("find a request's batch", |db| {
            batch_of_item(db, model, custom_id)
        })
    }

    /// Every batch recorded, newest first.
    pub fn batches(&self) -> Result<Vec<BatchRecord>> {
        self.read("list batches", |db| {
            let rows = db.query(
                &format!("SELECT {COLUMNS} FROM batches b ORDER BY b.created_ms DESC, b.batch_id"),
                &[],
            )?;
            Ok(rows.iter().map(read_record).collect::<DbResult<Vec<_>>>()?)
        })
    }

    /// The resubmitted batches a run's calls were answered in, and the resubmitted batches those replaced, each
    /// with why: oldest first.
    pub fn run_resubmissions(&self, run_id: &str) -> Result<Vec<BatchRecord>> {
        self.read("list a run's resubmitted batches", |db| {
            let rows = db.query(
                &format!(
                    "SELECT {COLUMNS} FROM batches b
                     WHERE b.resubmit_of IS NOT NULL
                       AND b.batch_id IN (SELECT batch_id FROM calls WHERE run_id = ?1 AND batch_id IS NOT NULL)"
                ),
                args![run_id],
            )?;
            let mut found = rows.iter().map(read_record).collect::<DbResult<Vec<_>>>()?;
            // Follow each one back through the batches it replaced that were themselves resubmitted.
            let mut next = 0;
            while next < found.len() {
                let replaces = (found[next].resubmission.as_ref())
                    .map(|r| r.replaces.clone())
                    .unwrap_or_default();
                next += 1;
                for id in replaces {
                    if found.iter().any(|b| b.batch_id == id) {
                        continue;
                    }
                    let row = db.query_opt(
                        &format!(
                            "SELECT {COLUMNS} FROM batches b
                             WHERE b.batch_id = ?1 AND b.resubmit_of IS NOT NULL"
                        ),
                        args![id.as_str()],
                    )?;
                    if let Some(row) = row {
                        found.push(read_record(&row)?);
                    }
                }
            }
            found.sort_by(|a, b| (a.created_ms, &a.batch_id).cmp(&(b.created_ms, &b.batch_id)));
            Ok(found)
        })
    }

    /// The custom ids a batch holds, in the order they were submitted (Gemini answers by position).
    pub fn batch_items(&self, batch_id: &str) -> Result<Vec<String>> {
        self.read("list a batch's requests", |db| {
            let rows = db.query(
                "SELECT custom_id FROM batch_items WHERE batch_id = ?1 ORDER BY position",
                args![batch_id],
            )?;
            Ok(rows
                .iter()
                .map(|r| r.get(0))
                .collect::<DbResult<Vec<String>>>()?)
        })
    }
}

fn batch_of_item(
    db: &mut dyn Db,
    model: &str,
    custom_id: &str,
) -> std::result::Result<Option<BatchRecord>, crate::WriteError> {
    let row = db.query_opt(
        &format!(
            "SELECT {COLUMNS} FROM batches b JOIN batch_items i ON i.batch_id = b.batch_id
             WHERE i.custom_id = ?1 AND b.model = ?2 AND b.state <> 'abandoned'
             ORDER BY b.created_ms DESC, b.batch_id DESC LIMIT 1"
        ),
        args![custom_id, model],
    )?;
    Ok(row.as_ref().map(read_record).transpose()?)
}
