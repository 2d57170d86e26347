//! Finding a score report's thinking probe in the store: the other scoring of the same run that differs from it
//! only in `--judge-sees-thinking`, found by recomputing the configuration hash with the flag flipped, and the
//! answers that have thinking to compare ([`crate::thinking_probe`] pairs the two).

use std::collections::BTreeSet;

use nmb_results::thinking_probe::{thinking_probe, ThinkingProbe};
use nmb_results::ScoreReport;
use nmb_stats::BootstrapConfig;
use nmb_store::Store;

use crate::ScoreError;

/// The probe of `report`'s run, when the store holds the scoring that differs from it only in whether the judges
/// saw the thinking; `None` otherwise (never scored the other way, or `report` came from a version whose
/// configuration hash this one does not reproduce).
pub fn stored_probe(
    store: &Store,
    report: &ScoreReport,
    pass_at: f64,
    cfg: &BootstrapConfig,
) -> Result<Option<ThinkingProbe>, ScoreError> {
    if crate::scorer::config_hash(&report.config) != report.config.config_hash {
        return Ok(None);
    }
    let mut other = report.config.clone();
    other.judge_sees_thinking = !other.judge_sees_thinking;
    let hash = crate::scorer::config_hash(&other);
    let Some(sibling) = nmb_results::stored::load(store, &report.run_id, &hash)? else {
        return Ok(None);
    };
    let thinking: BTreeSet<(String, u32)> = store
        .run_samples(&report.run_id)?
        .iter()
        .filter(|r| crate::scorer::turn_answers(r, true) != crate::scorer::turn_answers(r, false))
        .map(|r| (r.task_id.clone(), r.sample_index))
        .collect();
    let (hidden, shown) = if report.config.judge_sees_thinking {
        (&sibling, report)
    } else {
        (report, &sibling)
    };
    Ok(Some(thinking_probe(hidden, shown, &thinking, pass_at, cfg)))
}
