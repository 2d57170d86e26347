//! Score reports in the store (tables `score_reports` and `sample_scores`, through `nmb-store`).
//!
//! A report is keyed by (run, scoring config hash): scoring the same run with the same configuration again
//! replaces it (idempotent), a different configuration (another judge, rubric, seed) adds one. Reports read the
//! newest with [`latest`], or a specific one with [`load`].

use nmb_store::{SampleScoreRow, ScoreReportRecord, Store};

use crate::error::ResultsError;
use crate::report::{ScoreReport, SCHEMA_VERSION};
use crate::sample::SampleScore;

/// Writes `report` (and its per-sample rows) in one transaction, replacing a report with the same config hash.
pub fn save(store: &Store, report: &ScoreReport) -> Result<(), ResultsError> {
    let json = serde_json::to_string(report).map_err(|e| ResultsError::StoredReport {
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
        disease_group: s.disease_group.clone(),
    }
}

/// The most recently written report of `run_id`, if it was ever scored.
pub fn latest(store: &Store, run_id: &str) -> Result<Option<ScoreReport>, ResultsError> {
    parse(run_id, store.latest_score_report(run_id)?)
}

/// The report of `run_id` scored with configuration `config_hash`.
pub fn load(
    store: &Store,
    run_id: &str,
    config_hash: &str,
) -> Result<Option<ScoreReport>, ResultsError> {
    parse(run_id, store.score_report(run_id, config_hash)?)
}

fn parse(run_id: &str, text: Option<String>) -> Result<Option<ScoreReport>, ResultsError> {
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| ResultsError::StoredReport {
            run_id: run_id.to_string(),
            message: e.to_string(),
        })
    })
    .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_keeps_the_samples_disease_group_and_verdict() {
        let sample: SampleScore = serde_json::from_value(serde_json::json!({
            "task_id": "c1/dx", "sample_index": 2, "case_id": "c1", "family": "differential",
            "level": "direct", "disease_group": "vascular", "modality": "MRI", "case_metadata": {},
            "status": "parse_failed", "error_class": null, "parsed": null, "parse_error": "no list",
            "correct": false, "unresolved": false, "diagnosis": null, "lesion": null, "rubric": null,
            "bertscore": null, "taxonomy": {"category": "knowledge_gap", "justification": null,
            "source": null, "annotator": null, "judges": []}, "breadth": null
        }))
        .unwrap();
        let r = row(&sample);
        assert_eq!(r.disease_group.as_deref(), Some("vascular"));
        assert_eq!(
            (r.status.as_str(), r.correct, r.error_category.as_deref()),
            ("parse_failed", Some(false), Some("knowledge_gap"))
        );
        let none = row(&SampleScore {
            disease_group: None,
            ..sample
        });
        assert_eq!(none.disease_group, None);
    }
}
