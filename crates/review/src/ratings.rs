//! A review set's grades, beside the automatic grading of the same runs, as ratings `nmb-calibration` reads.
//!
//! Clinicians rate on each rubric dimension they scored, `overall`, and [`VERDICT_DIMENSION`]. Each judge
//! contributes its rubric scores (annotator `judge:SPEC`) from the run's newest score report, when that report
//! used the set's rubric; the scoring's correctness decision (rules, with the judges settling what the rules
//! could not) is annotator [`GRADER`] on the verdict dimension. Judges' ratings cover every scored sample of
//! the runs, not only the reviewed ones, so a judge's observed pass rate is the run's and the reviewed items
//! measure its sensitivity and specificity.
//!
//! In a set with a criterion rubric, each clinician's criterion marks of a graded item are ratings on
//! `criterion:<task>/<id>` (met 1, not met 0), and so are each judge's, from a score report made with the same
//! criterion rubric; `nmb-calibration` compares them as balanced F1.

use std::collections::BTreeMap;
use std::path::PathBuf;

use nmb_calibration::criteria::CRITERION_PREFIX;
use nmb_calibration::{Rating, Ratings};
use nmb_results::{SampleStatus, ScoreReport};
use nmb_store::{ReviewItem, ReviewSet, Store};
use sha2::{Digest, Sha256};

use crate::ReviewError;

/// The dimension a verdict is rated on: correct 2, partly correct 1, incorrect 0.
pub const VERDICT_DIMENSION: &str = "verdict";

/// The verdict score that passes: only "correct".
pub const VERDICT_PASS: f64 = 2.0;

/// The annotator that stands for the scoring's own correctness decision.
pub const GRADER: &str = "judge:grader";

/// Ratings of one review set, and what could not be included.
#[derive(Debug, Clone)]
pub struct ReviewRatings {
    pub ratings: Ratings,
    /// Runs whose score report took part.
    pub scored_runs: Vec<String>,
    /// Why something is missing (an unscored run, a report graded with another rubric).
    pub notes: Vec<String>,
}

impl ReviewRatings {
    /// The ratings as the `annotator,item,dimension,score` CSV (header first) that `nmb agreement` reads.
    pub fn csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        for r in &self.ratings.rows {
            w.write_record([&r.annotator, &r.item, &r.dimension, &r.score.to_string()])
                .expect("writing CSV into memory cannot fail");
        }
        let rows = w.into_inner().expect("writing CSV into memory cannot fail");
        let mut text = String::from("annotator,item,dimension,score\n");
        text.push_str(&String::from_utf8_lossy(&rows));
        text
    }
}

/// The item id of a sample in ratings: `RUN/TASK#SAMPLE`.
pub fn item_key(run_id: &str, task_id: &str, sample_index: u32) -> String {
    format!("{run_id}/{task_id}#{sample_index}")
}

/// Every reviewer's newest complete grade (a verdict other than skip) and the runs' automatic grading, limited
/// to `only_run` when given.
pub fn review_ratings(
    store: &Store,
    set_id: &str,
    only_run: Option<&str>,
) -> Result<ReviewRatings, ReviewError> {
    let set = stored_set(store, set_id)?;
    let mut reports = Vec::new();
    for run_id in set.runs.iter().filter(|r| only_run.is_none_or(|o| o == *r)) {
        reports.push((run_id.as_str(), nmb_results::stored::latest(store, run_id)?));
    }
    let reports: Vec<(&str, Option<&ScoreReport>)> =
        reports.iter().map(|(run, r)| (*run, r.as_ref())).collect();
    ratings_of(store, &set, only_run, &reports)
}

/// A review set by id, or an error naming it.
pub(crate) fn stored_set(store: &Store, set_id: &str) -> Result<ReviewSet, ReviewError> {
    store
        .review_set(set_id)?
        .ok_or_else(|| ReviewError::Invalid(format!("no review set {set_id:?} in the store")))
}

/// [`review_ratings`] with each run's score report (`None`: unscored) given, for callers that hold them.
pub(crate) fn ratings_of(
    store: &Store,
    set: &ReviewSet,
    only_run: Option<&str>,
    reports: &[(&str, Option<&ScoreReport>)],
) -> Result<ReviewRatings, ReviewError> {
    let items: BTreeMap<u32, ReviewItem> = store
        .review_items(&set.set_id)?
        .into_iter()
        .filter(|i| only_run.is_none_or(|r| r == i.run_id))
        .map(|i| (i.item_no, i))
        .collect();
    let mut rows = clinician_rows(store, &set.set_id, &items)?;
    let criteria_hash = set
        .criteria
        .as_ref()
        .map(|c| hex::encode(Sha256::digest(c.text.as_bytes())));
    let mut out = ReviewRatings {
        ratings: Ratings::default(),
        scored_runs: Vec::new(),
        notes: Vec::new(),
    };
    for (run_id, report) in reports {
        match report {
            None => out.notes.push(format!(
                "run {run_id} has no score report; score it (nmb score {run_id}) to compare its judges"
            )),
            Some(report) => {
                judge_rows(report, &set.rubric_hash, &mut rows, &mut out.notes);
                judge_criterion_rows(report, criteria_hash.as_deref(), &mut rows);
                out.scored_runs.push(run_id.to_string());
            }
        }
    }
    out.ratings = Ratings {
        source: PathBuf::from(format!("review set {}", set.set_id)),
        rows,
    };
    Ok(out)
}

fn verdict_score(verdict: &str) -> Option<f64> {
    match verdict {
        "correct" => Some(2.0),
        "partly" => Some(1.0),
        "incorrect" => Some(0.0),
        _ => None,
    }
}

fn clinician_rows(
    store: &Store,
    set_id: &str,
    items: &BTreeMap<u32, ReviewItem>,
) -> Result<Vec<Rating>, ReviewError> {
    let mut rows = Vec::new();
    for g in store.latest_grades(set_id)? {
        let (Some(item), Some(verdict)) = (
            items.get(&g.item_no),
            g.grade.verdict.as_deref().and_then(verdict_score),
        ) else {
            continue;
        };
        let key = item_key(&item.run_id, &item.task_id, item.sample_index);
        let mut push = |dimension: &str, score: f64| {
            rows.push(Rating {
                annotator: g.reviewer.clone(),
                item: key.clone(),
                dimension: dimension.to_string(),
                score,
            })
        };
        push(VERDICT_DIMENSION, verdict);
        for (dimension, score) in &g.grade.scores {
            push(dimension, f64::from(*score));
        }
        for (id, met) in &g.grade.criteria {
            push(
                &criterion_dimension(&item.task_id, id),
                f64::from(u8::from(*met)),
            );
        }
    }
    Ok(rows)
}

/// The ratings dimension of one criterion of one task: criterion marks are compared per task's criterion.
fn criterion_dimension(task_id: &str, id: &str) -> String {
    format!("{CRITERION_PREFIX}{task_id}/{id}")
}

/// Each judge's criterion marks, when the run was scored with the set's criterion rubric.
fn judge_criterion_rows(report: &ScoreReport, criteria_hash: Option<&str>, rows: &mut Vec<Rating>) {
    let same = report
        .config
        .criteria
        .as_ref()
        .is_some_and(|c| Some(c.hash.as_str()) == criteria_hash);
    if !same {
        return;
    }
    for s in &report.samples {
        let Some(result) = &s.criteria else {
            continue;
        };
        let key = item_key(&report.run_id, &s.task_id, s.sample_index);
        for outcome in &result.criteria {
            for v in &outcome.judges {
                let Some(met) = v.met else {
                    continue;
                };
                rows.push(Rating {
                    annotator: format!("judge:{}", v.judge),
                    item: key.clone(),
                    dimension: criterion_dimension(&s.task_id, &outcome.id),
                    score: f64::from(u8::from(met)),
                });
            }
        }
    }
}

fn judge_rows(
    report: &ScoreReport,
    rubric_hash: &str,
    rows: &mut Vec<Rating>,
    notes: &mut Vec<String>,
) {
    let same_rubric = report
        .config
        .rubric
        .as_ref()
        .is_some_and(|r| r.hash == rubric_hash);
    if !same_rubric && report.config.rubric.is_some() {
        notes.push(format!(
            "run {}'s judges graded with another rubric (sha256 {}); only its correctness decisions are compared",
            report.run_id,
            report.config.rubric.as_ref().map_or("", |r| r.hash.as_str())
        ));
    }
    for s in &report.samples {
        let key = item_key(&report.run_id, &s.task_id, s.sample_index);
        let scored = matches!(s.status, SampleStatus::Ok | SampleStatus::ParseFailed);
        if let (true, Some(correct)) = (scored, s.correct) {
            rows.push(Rating {
                annotator: GRADER.into(),
                item: key.clone(),
                dimension: VERDICT_DIMENSION.into(),
                score: if correct { VERDICT_PASS } else { 0.0 },
            });
        }
        let Some(rubric) = s.rubric.as_ref().filter(|_| same_rubric) else {
            continue;
        };
        for v in rubric.judges.iter().filter(|v| v.failure.is_none()) {
            let annotator = format!("judge:{}", v.judge);
            let scores = v.scores.iter().map(|(d, x)| (d.as_str(), *x));
            for (dimension, score) in scores.chain(v.overall.map(|o| ("overall", o))) {
                rows.push(Rating {
                    annotator: annotator.clone(),
                    item: key.clone(),
                    dimension: dimension.to_string(),
                    score: f64::from(score),
                });
            }
        }
    }
}
