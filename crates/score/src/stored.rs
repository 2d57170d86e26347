//! Score reports in the store (tables `score_reports` and `sample_scores`, schema version 2).
//!
//! A report is keyed by (run, scoring config hash): scoring the same run with the same configuration again
//! replaces it (idempotent), a different configuration (another judge, rubric, seed) adds one. Reports read the
//! newest with [`latest`], or a specific one with [`load`].

use nmb_store::{now_ms, Store};
use rusqlite::{params, OptionalExtension};

use crate::results::{ScoreReport, SCHEMA_VERSION};
use crate::ScoreError;

/// Writes `report` (and its per-sample rows) in one transaction, replacing a report with the same config hash.
pub fn save(store: &Store, report: &ScoreReport) -> Result<(), ScoreError> {
    let json = serde_json::to_string(report).map_err(|e| ScoreError::StoredReport {
        run_id: report.run_id.clone(),
        message: e.to_string(),
    })?;
    let run_id = report.run_id.as_str();
    let hash = report.config.config_hash.as_str();
    store.with_conn("store a score report", |c| {
        let tx = c.transaction()?;
        let now = now_ms();
        tx.execute(
            "INSERT INTO score_reports (run_id, config_hash, created_ms, updated_ms, schema_version, report)
             VALUES (?1, ?2, ?3, ?3, ?4, ?5)
             ON CONFLICT (run_id, config_hash) DO UPDATE SET
                 updated_ms = excluded.updated_ms, schema_version = excluded.schema_version,
                 report = excluded.report",
            params![run_id, hash, now, SCHEMA_VERSION, json],
        )?;
        tx.execute(
            "DELETE FROM sample_scores WHERE run_id = ?1 AND config_hash = ?2",
            params![run_id, hash],
        )?;
        {
            let mut stmt = tx.prepare(
                "INSERT INTO sample_scores (run_id, config_hash, task_id, sample_index, case_id, family, level,
                     status, correct, matched_rank, match_method, rubric_overall, bertscore_f, error_category,
                     error_source)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
            )?;
            for s in &report.samples {
                let text = |v: serde_json::Value| v.as_str().map(str::to_string);
                let diag = s.diagnosis.as_ref();
                let tax = s.taxonomy.as_ref();
                stmt.execute(params![
                    run_id,
                    hash,
                    s.task_id,
                    s.sample_index,
                    s.case_id,
                    s.family.as_str(),
                    s.level.as_str(),
                    text(serde_json::json!(s.status)),
                    s.correct,
                    diag.and_then(|d| d.matched_rank),
                    diag.and_then(|d| d.method).and_then(|m| text(serde_json::json!(m))),
                    s.rubric.as_ref().and_then(|r| r.overall),
                    s.bertscore.as_ref().map(|b| b.f).filter(|f| f.is_finite()),
                    tax.and_then(|t| t.category).map(|c| c.as_str()),
                    tax.and_then(|t| t.source).and_then(|x| text(serde_json::json!(x))),
                ])?;
            }
        }
        tx.commit()
    })?;
    Ok(())
}

/// The most recently written report of `run_id`, if it was ever scored.
pub fn latest(store: &Store, run_id: &str) -> Result<Option<ScoreReport>, ScoreError> {
    read(
        store,
        run_id,
        "SELECT report FROM score_reports WHERE run_id = ?1 ORDER BY updated_ms DESC, config_hash LIMIT 1",
        params![run_id],
    )
}

/// The report of `run_id` scored with configuration `config_hash`.
pub fn load(
    store: &Store,
    run_id: &str,
    config_hash: &str,
) -> Result<Option<ScoreReport>, ScoreError> {
    read(
        store,
        run_id,
        "SELECT report FROM score_reports WHERE run_id = ?1 AND config_hash = ?2",
        params![run_id, config_hash],
    )
}

fn read(
    store: &Store,
    run_id: &str,
    sql: &str,
    p: impl rusqlite::Params,
) -> Result<Option<ScoreReport>, ScoreError> {
    let text: Option<String> = store.with_conn("read a score report", |c| {
        c.query_row(sql, p, |r| r.get(0)).optional()
    })?;
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| ScoreError::StoredReport {
            run_id: run_id.to_string(),
            message: e.to_string(),
        })
    })
    .transpose()
}
