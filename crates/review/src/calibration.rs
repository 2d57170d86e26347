//! Judges measured against a review's clinicians, for one run: what `nmb report` and the run page show.

use nmb_calibration::{analyse, AgreementOptions, AgreementReport};
use nmb_results::ScoreReport;
use nmb_store::Store;
use serde::Serialize;

use crate::ratings::{ratings_of, VERDICT_DIMENSION, VERDICT_PASS};
use crate::ReviewError;

/// The rubric score that passes when the caller names none: 3 of 5, "right category, or close" in the bundled
/// rubric's anchors.
pub const DEFAULT_RUBRIC_PASS: f64 = 3.0;

/// One review set's agreement analysis restricted to one run.
#[derive(Debug, Clone, Serialize)]
pub struct RunCalibration {
    pub set_id: String,
    pub run_id: String,
    pub report: AgreementReport,
    pub notes: Vec<String>,
    /// Each judge's length bias and self-preference over all the set's runs (so that own-family answers can
    /// be set against the other models').
    pub bias: Vec<crate::bias::BiasProbe>,
}

/// `options` with the review's thresholds: a verdict passes only when correct, a rubric score at
/// `options.pass_threshold` (default [`DEFAULT_RUBRIC_PASS`]).
pub fn review_options(mut options: AgreementOptions) -> AgreementOptions {
    options.pass_threshold = options.pass_threshold.or(Some(DEFAULT_RUBRIC_PASS));
    options
        .pass_thresholds
        .entry(VERDICT_DIMENSION.to_string())
        .or_insert(VERDICT_PASS);
    options
}

/// The agreement analysis of every review set that holds graded items of `run_id`, oldest set first. A set
/// whose clinicians graded nothing of this run yet is left out. `scores` is the run's newest stored score
/// report when the caller has it already parsed; otherwise it is read once, and only if a set covers the run.
pub fn run_calibrations(
    store: &Store,
    run_id: &str,
    scores: Option<&ScoreReport>,
    options: &AgreementOptions,
) -> Result<Vec<RunCalibration>, ReviewError> {
    let options = review_options(options.clone());
    let mut sets = store.list_review_sets()?;
    sets.reverse();
    // A pairwise set's votes rank models (`run_pairwise`); they grade no answer against the judges.
    sets.retain(|s| !s.pairwise && s.runs.iter().any(|r| r == run_id));
    if sets.is_empty() {
        return Ok(Vec::new());
    }
    let read;
    let report = match scores {
        Some(r) => Some(r),
        None => {
            read = nmb_results::stored::latest(store, run_id)?;
            read.as_ref()
        }
    };
    let mut out = Vec::new();
    for set in &sets {
        let ratings = ratings_of(store, set, Some(run_id), &[(run_id, report)])?;
        let graded = ratings
            .ratings
            .rows
            .iter()
            .any(|r| !options.is_judge(&r.annotator));
        if !graded {
            continue;
        }
        let analysis = analyse(&ratings.ratings, &options).map_err(ReviewError::Invalid)?;
        let bias = set_bias(store, set, run_id, report, &options.bootstrap)?;
        out.push(RunCalibration {
            set_id: set.set_id.clone(),
            run_id: run_id.to_string(),
            report: analysis,
            notes: ratings.notes,
            bias,
        });
    }
    Ok(out)
}

/// The judges' leanings over every run of `set`: `this` is `run_id`'s score report, the others are read.
fn set_bias(
    store: &Store,
    set: &nmb_store::ReviewSet,
    run_id: &str,
    this: Option<&ScoreReport>,
    cfg: &nmb_stats::BootstrapConfig,
) -> Result<Vec<crate::bias::BiasProbe>, ReviewError> {
    let mut read = Vec::new();
    for r in set.runs.iter().filter(|r| *r != run_id) {
        if let Some(report) = nmb_results::stored::latest(store, r)? {
            read.push(report);
        }
    }
    let reports: Vec<&ScoreReport> = this.into_iter().chain(read.iter()).collect();
    let pairs: Vec<(&str, Option<&ScoreReport>)> = reports
        .iter()
        .map(|r| (r.run_id.as_str(), Some(*r)))
        .collect();
    let ratings = ratings_of(store, set, None, &pairs)?;
    let items = crate::bias::bias_items(&ratings.ratings, &reports);
    Ok(crate::bias::bias_probes(&items, cfg))
}
