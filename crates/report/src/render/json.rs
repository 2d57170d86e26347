//! The JSON report: every run's manifest, summary, cost, scores and stored answers, and the cross-run analysis.

use crate::input::RunData;
use crate::sections::analysis::Analysis;
use crate::sections::{preference, TableSection};

/// The full results as one JSON document: every run's manifest, summary, cost, scores and stored answers, and
/// the cross-run analysis.
pub fn json_report(runs: &[RunData], analysis: &Analysis) -> String {
    document(
        runs,
        analysis,
        &crate::sections::under_headline(runs, analysis),
    )
}

/// [`json_report`] with the table sections already built; each is `sections.ID`, present only when shown.
pub(crate) fn document(runs: &[RunData], analysis: &Analysis, tables: &[TableSection]) -> String {
    let preference_rankings = preference::rankings(runs);
    let runs: Vec<serde_json::Value> = runs
        .iter()
        .zip(&analysis.costs)
        .map(|(r, cost)| {
            serde_json::json!({
                "run_id": r.info.run_id,
                "status": r.info.status,
                "created_at": nmb_store::format_utc_ms(r.info.created_ms),
                "manifest": r.info.manifest,
                "summary": r.summary,
                "cost": cost,
                "scores": r.scores,
                "prompts": r.prompts,
                "samples": r.samples,
                "review_calibrations": r.calibrations,
                "thinking_probe": r.thinking_probe,
            })
        })
        .collect();
    let mut doc = serde_json::json!({
        "nmb_version": env!("CARGO_PKG_VERSION"),
        "runs": runs,
        "analysis": analysis,
        "pairwise_rankings": preference_rankings,
    });
    if !tables.is_empty() {
        let sections: serde_json::Map<String, serde_json::Value> = tables
            .iter()
            .map(|s| (s.id.to_string(), s.json.clone()))
            .collect();
        doc["sections"] = serde_json::Value::Object(sections);
    }
    serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
