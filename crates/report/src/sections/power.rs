//! What the paired comparisons can conclude: their p-values adjusted for the number of comparisons in the
//! table (`nmb_results::multiplicity`), and per comparison the smallest difference the suite detects
//! (`nmb_results::power`).

use nmb_results::multiplicity::{adjust, Multiplicity, DEFAULT_ALPHA};
use nmb_results::power::{paired_power, PowerAnalysis, PowerOptions};
use nmb_results::Comparison;

use crate::input::RunData;

/// The adjusted p-values of the paired table at `alpha`; an `alpha` outside (0, 1) falls back to the default
/// with a note (the command line refuses one before it gets here).
pub fn multiplicity(paired: &[Comparison], alpha: f64, notes: &mut Vec<String>) -> Multiplicity {
    match adjust(paired, alpha) {
        Ok(m) => m,
        Err(e) => {
            notes.push(format!(
                "multiple comparisons: {e}; adjusted at α = {DEFAULT_ALPHA}"
            ));
            adjust(paired, DEFAULT_ALPHA).unwrap_or(Multiplicity {
                alpha: DEFAULT_ALPHA,
                comparisons: paired.len(),
                bootstrap_family: 0,
                mcnemar_family: 0,
                family: String::new(),
                rows: Vec::new(),
            })
        }
    }
}

/// Per paired comparison, the power analysis of its two runs at `alpha` and 80% power; a comparison whose
/// variance cannot be measured (fewer than two cases) has none.
pub fn build(runs: &[RunData], paired: &[Comparison], alpha: f64) -> Vec<PowerAnalysis> {
    let scores = |id: &str| {
        runs.iter()
            .find(|r| r.info.run_id == id)
            .and_then(|r| r.scores.as_ref())
    };
    let opts = PowerOptions {
        alpha,
        ..PowerOptions::default()
    };
    paired
        .iter()
        .filter_map(|c| paired_power(scores(&c.run_a)?, scores(&c.run_b)?, &opts).ok())
        .collect()
}

/// The sentences under the paired table, one per comparison: "runs A and B: with N cases ...".
pub fn sentences(power: &[PowerAnalysis]) -> Vec<String> {
    power
        .iter()
        .filter_map(|p| {
            let s = p.sentence()?;
            Some(match &p.run_b {
                Some(b) => format!("{} and {b}: {s}", p.run_a),
                None => format!("{}: {s}", p.run_a),
            })
        })
        .collect()
}
