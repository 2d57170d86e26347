//! Reading runs back: summaries for `nmb runs show`, and the per-sample view that scoring and reports use.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::db::{args, scalar, Db, DbResult, Row};
use crate::error::Result;
use crate::keys::format_utc_ms;
use crate::records::{opt_u64, SampleStatus};
use crate::runs::RunStatus;
use crate::Store;

/// Counts for one run. `errors_by_class` counts errored samples by their final error class, so it sums to
/// `samples_errored`; `call_errors_by_class` counts every failed call, including ones retried successfully later.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub run_id: String,
    pub status: RunStatus,
    pub created_at: String,
    pub updated_at: String,
    pub config_hash: String,
    pub samples_total: u64,
    pub samples_ok: u64,
    pub samples_errored: u64,
    pub samples_pending: u64,
    /// HTTP requests (or local generations) this run actually made: every attempt of every call, retries included.
    pub requests_sent: u64,
    /// API calls this run made (a call groups its retries and may answer several samples).
    pub calls: u64,
    pub calls_errored: u64,
    /// Sample turns answered from stored responses instead of a new request.
    pub cache_hits: u64,
    pub errors_by_class: BTreeMap<String, u64>,
    pub call_errors_by_class: BTreeMap<String, u64>,
    /// Usage of the calls this run made (cache hits spend nothing and add nothing).
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Of `tokens_out`, the reasoning tokens the APIs reported; of `tokens_in`, those read from the provider's
    /// cache and those written to it (zero where no call reported them).
    pub tokens_reasoning: u64,
    pub tokens_cached_in: u64,
    pub tokens_cache_write: u64,
    /// Of the above, what calls answered through a provider batch used (billed at the batch discount).
    pub batch: BatchUsage,
    /// Latency of this run's successful calls.
    pub latency_ms: LatencyStats,
}

/// The calls a run had answered through provider batches, and their tokens counted as [`RunSummary`] counts
/// them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct BatchUsage {
    pub calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    pub tokens_reasoning: u64,
    pub tokens_cached_in: u64,
    pub tokens_cache_write: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LatencyStats {
    pub count: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

impl LatencyStats {
    fn from_values(mut v: Vec<u64>) -> LatencyStats {
        if v.is_empty() {
            return LatencyStats::default();
        }
        v.sort_unstable();
        // Nearest-rank percentile: the smallest value with at least p% of values at or below it.
        let rank = |p: f64| v[((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        LatencyStats {
            count: v.len() as u64,
            mean: v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64,
            p50: rank(50.0),
            p90: rank(90.0),
            p99: rank(99.0),
            max: v[v.len() - 1],
        }
    }
}

/// One API call as stored, without its raw body (see [`Store::raw_response`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallInfo {
    pub call_id: i64,
    pub run_id: String,
    pub task_id: String,
    pub turn_index: u32,
    pub prompt_hash: String,
    pub model: String,
    pub params: String,
    pub template_id: String,
    pub template_hash: String,
    pub n_choices: u32,
    pub ok: bool,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    pub attempts: u32,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    pub latency_ms: Option<u64>,
    pub started_ms: i64,
    pub finished_ms: i64,
    /// The replica (base URL) the call went to; `None` for calls stored before schema v5 or without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// Reasoning and prompt-cache tokens (stored from schema v11 on).
    #[serde(skip_serializing_if = "crate::records::TokenDetail::is_empty")]
    pub tokens: crate::records::TokenDetail,
}

/// What one sample got at one turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnRecord {
    pub turn_index: u32,
    pub ok: bool,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    pub text: Option<String>,
    /// A reasoning model's thinking before the answer in `text` (stored from schema v11 on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// Why the answer ended, as the API said it (stored from schema v16 on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Reused from a stored response; `call` is then the call that produced it (maybe in another run).
    pub cached: bool,
    pub cache_key: String,
    pub choice_index: u32,
    pub call: CallInfo,
}

/// One sample with its turns, in turn order.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SampleRecord {
    pub task_id: String,
    pub sample_index: u32,
    pub status: SampleStatus,
    pub turns_done: u32,
    pub error_class: Option<String>,
    pub error_message: Option<String>,
    /// The last turn's answer, only for samples whose status is `ok`: an errored sample has no answer.
    pub final_text: Option<String>,
    pub turns: Vec<TurnRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredImage {
    pub sha256: String,
    pub mime: String,
    pub bytes: Vec<u8>,
}

const CALL_COLUMNS: &str = "c.id, c.run_id, c.task_id, c.turn_index, p.prompt_hash, x.model, x.params, \
     x.template_id, x.template_hash, c.n_choices, c.status, c.error_class, c.error_message, c.attempts, \
     c.tokens_in, c.tokens_out, c.latency_ms, c.started_ms, c.finished_ms, c.replica, c.tokens_reasoning, \
     c.tokens_cached_in, c.tokens_cache_write";

/// The columns [`Store::fold_samples`] reads, over `samples s` joined by [`SAMPLE_JOINS`].
pub(crate) fn sample_columns() -> String {
    format!(
        "s.task_id, s.sample_index, s.status, s.turns_done, s.error_class, s.error_message,
         t.turn_index, t.status, t.error_class, t.error_message, t.text, t.cached, t.cache_key,
         t.choice_index, {CALL_COLUMNS}, t.thinking, t.finish_reason"
    )
}

/// Each sample's turns, with their calls, contexts and prompts.
pub(crate) const SAMPLE_JOINS: &str = "
     LEFT JOIN turns t ON t.run_id = s.run_id AND t.task_id = s.task_id AND t.sample_index = s.sample_index
     LEFT JOIN calls c ON c.id = t.call_id
     LEFT JOIN contexts x ON x.id = c.context_id
     LEFT JOIN prompts p ON p.id = c.prompt_id";

impl Store {
    /// Counts, usage and latency for one run.
    pub fn summary(&self, run_id: &str) -> Result<RunSummary> {
        let run = self.run(run_id)?;
        let (samples, sample_errors, call_errors, totals, batched, cache_hits, latencies) =
            self.read("summarise a run", |db| {
                let samples = count_by(
                    db,
                    "SELECT status, count(*) FROM samples WHERE run_id = ?1 GROUP BY status",
                    run_id,
                )?;
                let errors = count_by(
                    db,
                    "SELECT error_class, count(*) FROM samples WHERE run_id = ?1 AND status = 'errored'
                     GROUP BY error_class",
                    run_id,
                )?;
                let call_errors = count_by(
                    db,
                    "SELECT error_class, count(*) FROM calls WHERE run_id = ?1 AND status = 'errored'
                     GROUP BY error_class",
                    run_id,
                )?;
                let t = call_totals(db, run_id, "")?;
                let batched = call_totals(db, run_id, "AND batch_id IS NOT NULL")?;
                let hits: i64 = scalar(
                    db,
                    "SELECT count(*) FROM turns WHERE run_id = ?1 AND cached = 1",
                    args![run_id],
                )?;
                let lat = db
                    .query(
                        "SELECT latency_ms FROM calls WHERE run_id = ?1 AND status = 'ok'
                         AND latency_ms IS NOT NULL",
                        args![run_id],
                    )?
                    .iter()
                    .map(|r| r.get::<i64>(0))
                    .collect::<DbResult<Vec<_>>>()?;
                Ok((samples, errors, call_errors, t, batched, hits, lat))
            })?;
        let get = |m: &BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
        Ok(RunSummary {
            samples_total: samples.values().sum(),
            samples_ok: get(&samples, "ok"),
            samples_errored: get(&samples, "errored"),
            samples_pending: get(&samples, "pending"),
            requests_sent: totals[1],
            calls: totals[0],
            calls_errored: call_errors.values().sum(),
            cache_hits: nonneg(cache_hits),
            errors_by_class: sample_errors,
            call_errors_by_class: call_errors,
            tokens_in: totals[2],
            tokens_out: totals[3],
            tokens_reasoning: totals[4],
            tokens_cached_in: totals[5],
            tokens_cache_write: totals[6],
            batch: BatchUsage {
                calls: batched[0],
                tokens_in: batched[2],
                tokens_out: batched[3],
                tokens_reasoning: batched[4],
                tokens_cached_in: batched[5],
                tokens_cache_write: batched[6],
            },
            latency_ms: LatencyStats::from_values(latencies.into_iter().map(nonneg).collect()),
            created_at: format_utc_ms(run.created_ms),
            updated_at: format_utc_ms(run.updated_ms),
            run_id: run.run_id,
            status: run.status,
            config_hash: run.config_hash,
        })
    }

    /// Every sample of a run with its turns and per-call usage, ordered by task id and sample index.
    pub fn run_samples(&self, run_id: &str) -> Result<Vec<SampleRecord>> {
        self.run(run_id)?;
        let sql = format!(
            "SELECT {} FROM samples s {SAMPLE_JOINS}
             WHERE s.run_id = ?1
             ORDER BY s.task_id, s.sample_index, t.turn_index",
            sample_columns()
        );
        let op = "read a run's samples";
        let rows = self.read(op, |db| Ok(db.query(&sql, args![run_id])?))?;
        self.fold_samples(op, &rows)
    }

    /// Rows of [`sample_columns`], ordered by task, sample and turn, folded into one record per sample.
    pub(crate) fn fold_samples(&self, op: &'static str, rows: &[Row]) -> Result<Vec<SampleRecord>> {
        let mut out: Vec<SampleRecord> = Vec::new();
        for row in rows {
            let (head, turn) = sample_row(row).map_err(|e| self.err(op, e))?;
            let same = out
                .last()
                .is_some_and(|s| s.task_id == head.task_id && s.sample_index == head.sample_index);
            if !same {
                out.push(SampleRecord {
                    status: self.sample_status(&head.status)?,
                    task_id: head.task_id,
                    sample_index: head.sample_index,
                    turns_done: head.turns_done,
                    error_class: head.error_class,
                    error_message: head.error_message,
                    final_text: None,
                    turns: Vec::new(),
                });
            }
            if let (Some(turn), Some(sample)) = (turn, out.last_mut()) {
                sample.turns.push(turn);
            }
        }
        for s in &mut out {
            if s.status == SampleStatus::Ok {
                s.final_text = s.turns.last().and_then(|t| t.text.clone());
            }
        }
        Ok(out)
    }

    /// Every call a run made, in order, with usage (not the raw bodies).
    pub fn run_calls(&self, run_id: &str) -> Result<Vec<CallInfo>> {
        let sql = format!(
            "SELECT {CALL_COLUMNS} FROM calls c JOIN contexts x ON x.id = c.context_id
             JOIN prompts p ON p.id = c.prompt_id
             WHERE c.run_id = ?1 ORDER BY c.id"
        );
        self.read("read a run's calls", |db| {
            let rows = db.query(&sql, args![run_id])?;
            Ok(rows
                .iter()
                .map(|r| call_info(r, 0))
                .collect::<DbResult<Vec<_>>>()?)
        })
    }

    /// The raw response body of a call, as the backend sent it.
    pub fn raw_response(&self, call_id: i64) -> Result<Option<String>> {
        self.read("read a raw response", |db| {
            match db.query_opt("SELECT raw FROM calls WHERE id = ?1", args![call_id])? {
                Some(r) => Ok(r.unpacked(0)?),
                None => Ok(None),
            }
        })
    }

    /// The stored body of a rendered prompt (JSON text).
    pub fn prompt_body(&self, prompt_hash: &str) -> Result<Option<String>> {
        self.read("read a prompt", |db| {
            match db.query_opt(
                "SELECT body FROM prompts WHERE prompt_hash = ?1",
                args![prompt_hash],
            )? {
                Some(r) => Ok(r.unpacked(0)?),
                None => Ok(None),
            }
        })
    }

    pub fn image(&self, sha256: &str) -> Result<Option<StoredImage>> {
        self.read("read an image", |db| {
            let Some(r) = db.query_opt(
                "SELECT mime, bytes FROM images WHERE sha256 = ?1",
                args![sha256],
            )?
            else {
                return Ok(None);
            };
            Ok(Some(StoredImage {
                sha256: sha256.to_string(),
                mime: r.get(0)?,
                bytes: r.get(1)?,
            }))
        })
    }

    /// Rows in the images table (each distinct image once).
    pub fn image_count(&self) -> Result<u64> {
        self.count("count images", "SELECT count(*) FROM images")
    }

    /// Rows in the prompts table (each distinct rendered prompt once).
    pub fn prompt_count(&self) -> Result<u64> {
        self.count("count prompts", "SELECT count(*) FROM prompts")
    }

    pub(crate) fn count(&self, op: &'static str, sql: &str) -> Result<u64> {
        self.read(op, |db| Ok(scalar::<i64>(db, sql, &[])?))
            .map(nonneg)
    }
}

struct SampleHead {
    task_id: String,
    sample_index: u32,
    status: String,
    turns_done: u32,
    error_class: Option<String>,
    error_message: Option<String>,
}

fn sample_row(r: &Row) -> DbResult<(SampleHead, Option<TurnRecord>)> {
    let head = SampleHead {
        task_id: r.get(0)?,
        sample_index: r.get(1)?,
        status: r.get(2)?,
        turns_done: r.get(3)?,
        error_class: r.get(4)?,
        error_message: r.get(5)?,
    };
    let Some(turn_index) = r.get::<Option<u32>>(6)? else {
        return Ok((head, None));
    };
    let turn = TurnRecord {
        turn_index,
        ok: r.get::<String>(7)? == "ok",
        error_class: r.get(8)?,
        error_message: r.get(9)?,
        text: r.get(10)?,
        cached: r.get(11)?,
        cache_key: hex::encode(r.get::<Vec<u8>>(12)?),
        choice_index: r.get(13)?,
        call: call_info(r, 14)?,
        thinking: r.get(14 + CALL_COLUMN_COUNT)?,
        finish_reason: r.get(15 + CALL_COLUMN_COUNT)?,
    };
    Ok((head, Some(turn)))
}

fn call_info(r: &Row, at: usize) -> DbResult<CallInfo> {
    Ok(CallInfo {
        call_id: r.get(at)?,
        run_id: r.get(at + 1)?,
        task_id: r.get(at + 2)?,
        turn_index: r.get(at + 3)?,
        prompt_hash: r.get(at + 4)?,
        model: r.get(at + 5)?,
        params: r.get(at + 6)?,
        template_id: r.get(at + 7)?,
        template_hash: r.get(at + 8)?,
        n_choices: r.get(at + 9)?,
        ok: r.get::<String>(at + 10)? == "ok",
        error_class: r.get(at + 11)?,
        error_message: r.get(at + 12)?,
        attempts: r.get(at + 13)?,
        tokens_in: opt_u64(r.get(at + 14)?),
        tokens_out: opt_u64(r.get(at + 15)?),
        latency_ms: opt_u64(r.get(at + 16)?),
        started_ms: r.get(at + 17)?,
        finished_ms: r.get(at + 18)?,
        replica: r.get(at + 19)?,
        tokens: crate::records::TokenDetail {
            reasoning: opt_u64(r.get(at + 20)?),
            cached_in: opt_u64(r.get(at + 21)?),
            cache_write: opt_u64(r.get(at + 22)?),
        },
    })
}

/// How many columns [`call_info`] reads.
const CALL_COLUMN_COUNT: usize = 23;

/// `SELECT key, count(*) ... GROUP BY key` into a map; a NULL key counts under "unknown".
fn count_by(db: &mut dyn Db, sql: &str, run_id: &str) -> DbResult<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for r in db.query(sql, args![run_id])? {
        let key = r
            .get::<Option<String>>(0)?
            .unwrap_or_else(|| "unknown".into());
        *out.entry(key).or_insert(0) += nonneg(r.get(1)?);
    }
    Ok(out)
}

pub(crate) fn nonneg(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Calls, attempts and token sums of a run's calls (`filter`: more conditions on `calls`), each clamped into
/// `u64`.
///
/// A plain `sum()` overflows on a store holding a count near 2^63 (SQLite fails with "integer overflow", and
/// PostgreSQL's cast of its numeric sum back to BIGINT fails), and one bad row would then break every summary of
/// its run. So each column's values are summed as their high and low halves (`v / 2^32` and `v % 2^32`, both
/// engines truncating toward zero), which no run of fewer than 2^31 calls can overflow, and the halves are
/// combined exactly in 128 bits.
fn call_totals(db: &mut dyn Db, run_id: &str, filter: &str) -> DbResult<[u64; 7]> {
    const COLUMNS: [&str; 6] = [
        "attempts",
        "tokens_in",
        "tokens_out",
        "tokens_reasoning",
        "tokens_cached_in",
        "tokens_cache_write",
    ];
    let halves: Vec<String> = COLUMNS
        .iter()
        .map(|c| {
            format!(
                "CAST(coalesce(sum({c} / {HALF}), 0) AS BIGINT), CAST(coalesce(sum({c} % {HALF}), 0) AS BIGINT)"
            )
        })
        .collect();
    let row = db.query_opt(
        &format!(
            "SELECT count(*), {} FROM calls WHERE run_id = ?1 {filter}",
            halves.join(", ")
        ),
        args![run_id],
    )?;
    let mut t = [0; 7];
    if let Some(r) = row {
        t[0] = nonneg(r.get(0)?);
        for (i, v) in t.iter_mut().enumerate().skip(1) {
            let high = i128::from(r.get::<i64>(2 * i - 1)?);
            let low = i128::from(r.get::<i64>(2 * i)?);
            let sum = high * i128::from(HALF) + low;
            *v = u64::try_from(sum.max(0)).unwrap_or(u64::MAX);
        }
    }
    Ok(t)
}

/// 2^32: where [`call_totals`] splits each value.
const HALF: i64 = 1 << 32;
