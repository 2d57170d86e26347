//! Score reports in the store (tables `score_reports` and `sample_scores`, through `nmb-store`).
//!
//! A report is keyed by (run, scoring config hash): scoring the same run with the same configuration again
//! replaces it (idempotent), a different configuration (another judge, rubric, seed) adds one. Reports read the
//! newest with [`latest`], or a specific one with [`load`].

use nmb_store::{SampleScoreRow, ScoreReportRecord, Store};

use crate::results::{SampleScore, ScoreReport, SCHEMA_VERSION};
use crate::ScoreError;

/// Writes `report` (and its per-sample rows) in one transaction, replacing a report with the same config hash.
pub fn save(store: &Store, report: &ScoreReport) -> Result<(), ScoreError> {
    let json = serde_json::to_string(report).map_err(|e| ScoreError::StoredReport {
        run_id: report.run_id.clone(),
        message: e.to_string(),
    })?;
    let rows: Vec<SampleScoreRow> = report.samples.iter().map(row).collect();
    store.save_score_report(&ScoreReportRecord {
        run_id: &report.run_id,
        config_hash: &report.config.config_hash,
        schema_version: i64::from(SCHEMA_VERSION),
        report_json: &json,
        samples: &rows,
    })?;
    Ok(())
}

fn row(s: &SampleScore) -> SampleScoreRow {
    let text = |v: serde_json::Value| v.as_str().map(str::to_string);
    let diag = s.diagnosis.as_ref();
    let tax = s.taxonomy.as_ref();
    SampleScoreRow {
        task_id: s.task_id.clone(),
        sample_index: s.sample_index,
        case_id: s.case_id.clone(),
        family: s.family.as_str().to_string(),
        level: s.level.as_str().to_string(),
        status: text(serde_json::json!(s.status)).unwrap_or_default(),
        correct: s.correct,
        matched_rank: diag.and_then(|d| d.matched_rank),
        match_method: diag
            .and_then(|d| d.method)
            .and_then(|m| text(serde_json::json!(m))),
        rubric_overall: s.rubric.as_ref().and_then(|r| r.overall),
        bertscore_f: s.bertscore.as_ref().map(|b| b.f).filter(|f| f.is_finite()),
        error_category: tax.and_then(|t| t.category).map(|c| c.as_str().to_string()),
        error_source: tax
            .and_then(|t| t.source)
            .and_then(|x| text(serde_json::json!(x))),
    }
}

/// The most recently written report of `run_id`, if it was ever scored.
pub fn latest(store: &Store, run_id: &str) -> Result<Option<ScoreReport>, ScoreError> {
    parse(run_id, store.latest_score_report(run_id)?)
}

/// The report of `run_id` scored with configuration `config_hash`.
pub fn load(
    store: &Store,
    run_id: &str,
    config_hash: &str,
) -> Result<Option<ScoreReport>, ScoreError> {
    parse(run_id, store.score_report(run_id, config_hash)?)
}

fn parse(run_id: &str, text: Option<String>) -> Result<Option<ScoreReport>, ScoreError> {
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| ScoreError::StoredReport {
            run_id: run_id.to_string(),
            message: e.to_string(),
        })
    })
    .transpose()
}
