//! How many more reviews a run needs for its calibrated pass rates to reach a target interval width, and which
//! items to review first: what `nmb review plan` prints.
//!
//! The reviews needed come from each judge's learning curve ([`nmb_stats::reviews_for_width`]: the width taken
//! to shrink as one over the square root of the reviews). The items to review first are the unreviewed ones
//! where the judges disagree on the verdict dimension or a judge is unstable across its repeats (the report's
//! rule, [`nmb_results::stability::unstable_item`]), most disagreement first, then widest repeat spread, then
//! those whose calibrated chance of passing is nearest one half: where a clinician's verdict teaches the map
//! most.

use std::collections::BTreeMap;

use nmb_calibration::AgreementOptions;
use nmb_stats::{isotonic, reviews_for_width, Isotonic};
use nmb_store::Store;
use serde::Serialize;

use crate::calibration::{review_options, run_calibrations};
use crate::ratings::{item_key, ratings_of, VERDICT_DIMENSION};
use crate::ReviewError;

/// What a run's reviews would need to reach a target width.
#[derive(Debug, Clone, Serialize)]
pub struct ReviewPlan {
    pub run_id: String,
    /// The interval width asked for (0.05: five points from end to end).
    pub target_width: f64,
    pub judges: Vec<JudgePlan>,
    /// Unreviewed items (`run/task#sample`), the most telling first.
    pub review_first: Vec<String>,
}

/// One judge's calibrated rate on one dimension of one review set.
#[derive(Debug, Clone, Serialize)]
pub struct JudgePlan {
    pub set_id: String,
    pub dimension: String,
    pub judge: String,
    pub reviewed: usize,
    /// The interval's width now.
    pub width: f64,
    /// Reviews in all for the target width; `None` where the interval has no width to extrapolate from.
    pub needed: Option<usize>,
    /// What this says, in one sentence.
    pub sentence: String,
}

/// The plan for `run_id` to reach intervals `target_width` wide, with the `first` most telling unreviewed items.
pub fn review_plan(
    store: &Store,
    run_id: &str,
    target_width: f64,
    first: usize,
    options: &AgreementOptions,
) -> Result<ReviewPlan, ReviewError> {
    if !(target_width.is_finite() && target_width > 0.0 && target_width < 1.0) {
        return Err(ReviewError::Invalid(format!(
            "--target-ci {target_width}: expected an interval width between 0 and 1, e.g. 0.05"
        )));
    }
    let calibrations = run_calibrations(store, run_id, None, options)?;
    if calibrations.is_empty() {
        return Err(ReviewError::Invalid(format!(
            "no review set with graded items covers run {run_id}; make one with `nmb review create --runs {run_id}` \
             and have clinicians grade some of it first"
        )));
    }
    let mut judges = Vec::new();
    for c in &calibrations {
        for d in &c.report.dimensions {
            for rate in d.calibrated_rates.iter().filter(|r| r.result.is_some()) {
                judges.push(judge_plan(&c.set_id, &d.dimension, rate, target_width));
            }
        }
    }
    let review_first = most_telling(store, run_id, first, options)?;
    Ok(ReviewPlan {
        run_id: run_id.to_string(),
        target_width,
        judges,
        review_first,
    })
}

fn judge_plan(
    set_id: &str,
    dimension: &str,
    rate: &nmb_calibration::CalibratedPassRate,
    target: f64,
) -> JudgePlan {
    let width = rate
        .curve
        .last()
        .map_or(f64::NAN, nmb_stats::CurvePoint::width);
    let needed = reviews_for_width(&rate.curve, target);
    let sentence = match needed {
        Some(n) if n <= rate.reviewed => format!(
            "{}'s calibrated rate on {dimension} is {:.3} wide with {} reviews: within the target {target}.",
            rate.judge, width, rate.reviewed
        ),
        Some(n) => format!(
            "{}'s calibrated rate on {dimension} is {:.3} wide with {} reviews; about {} more ({n} in all) would \
             bring it to {target}.",
            rate.judge,
            width,
            rate.reviewed,
            n - rate.reviewed
        ),
        None => format!(
            "{}'s calibrated rate on {dimension} has no interval width to extrapolate from.",
            rate.judge
        ),
    };
    JudgePlan {
        set_id: set_id.to_string(),
        dimension: dimension.to_string(),
        judge: rate.judge.clone(),
        reviewed: rate.reviewed,
        width,
        needed,
        sentence,
    }
}

/// The unreviewed items of the newest set covering the run, ranked as [`rank`] says.
fn most_telling(
    store: &Store,
    run_id: &str,
    first: usize,
    options: &AgreementOptions,
) -> Result<Vec<String>, ReviewError> {
    let options = review_options(options.clone());
    let mut sets = store.list_review_sets()?;
    sets.retain(|s| !s.pairwise && s.runs.iter().any(|r| r == run_id));
    let Some(set) = sets.first() else {
        return Ok(Vec::new());
    };
    let report = nmb_results::stored::latest(store, run_id)?;
    let ratings = ratings_of(store, set, Some(run_id), &[(run_id, report.as_ref())])?;
    // item -> (judge -> score), and item -> clinicians' scores, on the verdict dimension.
    let mut judged: BTreeMap<&str, BTreeMap<&str, f64>> = BTreeMap::new();
    let mut graded: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in ratings
        .ratings
        .rows
        .iter()
        .filter(|r| r.dimension == VERDICT_DIMENSION)
    {
        if options.is_judge(&r.annotator) {
            judged
                .entry(&r.item)
                .or_default()
                .insert(&r.annotator, r.score);
        } else {
            graded.entry(&r.item).or_default().push(r.score);
        }
    }
    let pass = options
        .threshold_for(VERDICT_DIMENSION)
        .unwrap_or(f64::INFINITY);
    let unstable = unstable_items(run_id, report.as_ref());
    Ok(rank(&judged, &graded, &unstable, pass, first))
}

/// Items (`run/task#sample`) some judge is unstable on across its repeats, with the widest such spread.
fn unstable_items(
    run_id: &str,
    report: Option<&nmb_results::ScoreReport>,
) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    let listed = report.and_then(|r| r.stability.as_ref());
    for u in listed.map(|s| s.unstable.as_slice()).unwrap_or_default() {
        let widest = out
            .entry(item_key(run_id, &u.task_id, u.sample_index))
            .or_insert(0.0);
        *widest = widest.max(u.spread);
    }
    out
}

/// Unreviewed items: first those the judges disagree on or some judge is unstable on (`unstable`: the widest
/// repeat spread), by the judges' disagreement (the spread of their scores), then by the repeat spread; then by
/// how near one half the judges' calibrated chance of passing comes; then by name.
fn rank(
    judged: &BTreeMap<&str, BTreeMap<&str, f64>>,
    graded: &BTreeMap<&str, Vec<f64>>,
    unstable: &BTreeMap<String, f64>,
    pass: f64,
    first: usize,
) -> Vec<String> {
    let maps = judge_maps(judged, graded, pass);
    let mut ranked: Vec<(bool, f64, f64, f64, &str)> = judged
        .iter()
        .filter(|(item, _)| !graded.contains_key(*item))
        .map(|(item, scores)| {
            let (lo, hi) = scores
                .values()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), s| {
                    (lo.min(*s), hi.max(*s))
                });
            let near_half = scores
                .iter()
                .filter_map(|(j, s)| Some((maps.get(*j)?.predict(*s) - 0.5).abs()))
                .fold(0.5f64, f64::min);
            let repeat_spread = unstable.get(*item).copied().unwrap_or(0.0);
            let contested = hi > lo || repeat_spread > 0.0;
            (contested, hi - lo, repeat_spread, near_half, *item)
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then(b.1.total_cmp(&a.1))
            .then(b.2.total_cmp(&a.2))
            .then(a.3.total_cmp(&b.3))
            .then(a.4.cmp(b.4))
    });
    ranked
        .into_iter()
        .take(first)
        .map(|(.., item)| item.to_string())
        .collect()
}

/// Each judge's isotonic map from its verdict score to the clinicians' pass on the reviewed items.
fn judge_maps<'a>(
    judged: &BTreeMap<&str, BTreeMap<&'a str, f64>>,
    graded: &BTreeMap<&str, Vec<f64>>,
    pass: f64,
) -> BTreeMap<&'a str, Isotonic> {
    let mut points: BTreeMap<&'a str, (Vec<f64>, Vec<f64>)> = BTreeMap::new();
    for (item, scores) in judged {
        let Some(g) = graded.get(item) else { continue };
        let consensus = g.iter().sum::<f64>() / g.len() as f64;
        for (judge, s) in scores {
            let p = points.entry(*judge).or_default();
            p.0.push(*s);
            p.1.push(f64::from(u8::from(consensus >= pass)));
        }
    }
    points
        .into_iter()
        .filter_map(|(j, (x, y))| Some((j, isotonic(&x, &y, None).ok()?)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disagreement_comes_first_then_uncertainty() {
        // Reviewed: score 0 failed twice, 2 passed twice, 1 passed once and failed once.
        let mut judged: BTreeMap<&str, BTreeMap<&str, f64>> = BTreeMap::new();
        let mut graded: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
        let reviewed = [
            ("r1", 0.0, 0.0),
            ("r2", 0.0, 0.0),
            ("r3", 2.0, 2.0),
            ("r4", 2.0, 2.0),
            ("r5", 1.0, 2.0),
            ("r6", 1.0, 0.0),
        ];
        for (item, score, clinician) in reviewed {
            judged
                .entry(item)
                .or_default()
                .extend([("a", score), ("b", score)]);
            graded.insert(item, vec![clinician]);
        }
        // Unreviewed: the judges disagree on u_split; agree at 1 (a coin flip) on u_unsure; agree at 2 on u_sure.
        judged.insert("u_sure", [("a", 2.0), ("b", 2.0)].into());
        judged.insert("u_unsure", [("a", 1.0), ("b", 1.0)].into());
        judged.insert("u_split", [("a", 0.0), ("b", 2.0)].into());
        let none = BTreeMap::new();
        assert_eq!(
            rank(&judged, &graded, &none, 2.0, 10),
            ["u_split", "u_unsure", "u_sure"]
        );
        assert_eq!(rank(&judged, &graded, &none, 2.0, 1), ["u_split"]);
        // A judge unstable on u_sure across its repeats: after the disagreement, before the coin flip.
        let unstable = BTreeMap::from([("u_sure".to_string(), 3.0)]);
        assert_eq!(
            rank(&judged, &graded, &unstable, 2.0, 10),
            ["u_split", "u_sure", "u_unsure"]
        );
    }
}
