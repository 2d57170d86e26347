//! The few-shot gain: per model and suite, a run asked with few-shot examples (`nmb eval --few-shot`) against a
//! run asked without, paired on (task, sample) as `nmb compare` pairs them: few-shot minus zero-shot accuracy
//! with the paired case-clustered bootstrap interval and p-value. Shown when the report holds such a pair.

use nmb_stats::Estimate;
use serde::Serialize;

use super::analysis::Analysis;
use super::TableSection;
use crate::input::RunData;
use crate::table::{number, Cell, Table};

/// One few-shot run against one zero-shot run of the same model on the same suite.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FewShotGain {
    pub model: String,
    pub few_shot_run: String,
    pub zero_shot_run: String,
    /// Paired (task, sample) items.
    pub items: usize,
    pub few_shot_accuracy: f64,
    pub zero_shot_accuracy: f64,
    /// Few-shot minus zero-shot, with the paired bootstrap interval.
    pub gain: Estimate,
    pub p_value: f64,
}

/// Whether the run was asked with few-shot examples (its recorded configuration names them).
fn few_shot(run: &RunData) -> bool {
    run.manifest
        .eval_config
        .as_ref()
        .is_some_and(|c| !c["few_shot"].is_null())
}

/// Every (few-shot, zero-shot) pair of scored runs of one model on one suite.
pub(crate) fn rows(runs: &[RunData], analysis: &Analysis) -> Vec<FewShotGain> {
    let mut out = Vec::new();
    for few in runs.iter().filter(|r| few_shot(r)) {
        let zero_shot = runs.iter().filter(|r| {
            !few_shot(r)
                && r.model() == few.model()
                && r.manifest.suite_hash == few.manifest.suite_hash
        });
        for zero in zero_shot {
            let (Some(a), Some(b)) = (&few.scores, &zero.scores) else {
                continue;
            };
            let Ok(c) = nmb_results::compare::compare(a, b, &analysis.bootstrap) else {
                continue;
            };
            let Some(group) = c.groups.first() else {
                continue;
            };
            let Some(p) = &group.paired else { continue };
            out.push(FewShotGain {
                model: few.name(),
                few_shot_run: few.info.run_id.clone(),
                zero_shot_run: zero.info.run_id.clone(),
                items: group.items,
                few_shot_accuracy: p.mean_a,
                zero_shot_accuracy: p.mean_b,
                gain: p.diff.clone(),
                p_value: p.p_value,
            });
        }
    }
    out
}

/// The section, or `None` without a few-shot run and a zero-shot run of one model on one suite.
pub(crate) fn section(runs: &[RunData], analysis: &Analysis) -> Option<TableSection> {
    let rows = rows(runs, analysis);
    if rows.is_empty() {
        return None;
    }
    let mut table = Table::new(
        "",
        &[
            ("model", false),
            ("few-shot run", false),
            ("zero-shot run", false),
            ("items", true),
            ("few-shot", true),
            ("zero-shot", true),
            ("few-shot gain [95% CI]", true),
            ("bootstrap p", true),
        ],
    );
    table.footnote = "Few-shot minus zero-shot accuracy of one model on one suite, over the (task, sample) items \
                      both runs answered and scored, with a paired bootstrap 95% CI that resamples whole cases \
                      (the numbers of nmb compare)."
        .into();
    for r in &rows {
        table.push(vec![
            Cell::new(&r.model),
            Cell::new(&r.few_shot_run),
            Cell::new(&r.zero_shot_run),
            Cell::new(r.items.to_string()),
            Cell::new(format!("{:.1}%", 100.0 * r.few_shot_accuracy)),
            Cell::new(format!("{:.1}%", 100.0 * r.zero_shot_accuracy)),
            number(Some(&r.gain), 100.0, 1, " pp"),
            Cell::new(format!("{:.3}", r.p_value)),
        ]);
    }
    Some(TableSection {
        id: "few-shot-gain",
        title: "Few-shot gain",
        table,
        json: serde_json::to_value(&rows).unwrap_or_default(),
    })
}
