//! Judges against clinicians in the report: the tables `nmb-review` builds for each review set over a run
//! (the same ones `nmb serve` shows on a run page), the clinician-corrected accuracy beside the headline's, and
//! how the judges lean when shown the model's thinking (which needs no review: the section opens for it alone).

use nmb_review::tables::{self as review_tables, CalibrationTables};

use crate::input::RunData;

/// Every run's review tables, in run order.
pub(crate) fn tables(runs: &[RunData]) -> Vec<CalibrationTables> {
    runs.iter()
        .flat_map(|r| {
            r.calibrations
                .iter()
                .map(move |c| review_tables::tables(&r.name(), c))
        })
        .collect()
}

/// The run's accuracy corrected against the newest review set that measured the scoring's own decisions.
pub(crate) fn corrected_accuracy(run: &RunData) -> Option<(&str, &nmb_stats::Estimate)> {
    run.calibrations.iter().rev().find_map(|c| {
        let d = c
            .report
            .dimensions
            .iter()
            .find(|d| d.dimension == nmb_review::VERDICT_DIMENSION)?;
        let rate = d
            .corrected_pass_rates
            .iter()
            .find(|r| r.judge == nmb_review::GRADER)?;
        Some((c.set_id.as_str(), &rate.result.as_ref()?.corrected))
    })
}

/// The headline's accuracy cell suffix: the corrected rate, when a review measured the grader.
pub(crate) fn corrected_note(run: &RunData) -> Option<String> {
    corrected_accuracy(run).map(|(set, e)| {
        format!(
            "clinician-corrected {:.1}% [{:.1}–{:.1}] (review {set})",
            e.value * 100.0,
            e.ci_low * 100.0,
            e.ci_high * 100.0
        )
    })
}

/// Each run with a thinking probe: its name and the probe's sentences.
pub(crate) fn thinking(runs: &[RunData]) -> Vec<(String, &[String])> {
    runs.iter()
        .filter_map(|r| {
            let p = r.thinking_probe.as_ref()?;
            Some((r.name(), p.sentences.as_slice()))
        })
        .collect()
}
