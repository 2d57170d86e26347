//! The stability section of a score report: how steady each judge is when asked again (`--judge-repeats K`),
//! per judge and quantity (each rubric dimension, the overall grade, the yes/no of a match) the test–retest ICC
//! and Fleiss' kappa between its repeats, the items whose repeats disagree, and what the repeats cost; and the
//! rule that calls an item unstable ([`unstable_item`]), which the report's list and the viewer's marks both
//! follow. The numbers are computed by the scorer (`nmb_score::repeats`).

use nmb_stats::Estimate;
use serde::{Deserialize, Serialize};

use crate::sample::SampleScore;

/// A rubric item is unstable when its repeats' scores on one dimension (or overall) span at least this many
/// points: on a 0–5 scale two points is the difference between a passing and a failing grade.
pub const UNSTABLE_SPREAD: f64 = 2.0;

/// The stability section of a score report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StabilityReport {
    /// Times each judge was asked each question.
    pub repeats: u32,
    /// The seed of each repeat.
    pub seeds: Vec<u64>,
    /// [`UNSTABLE_SPREAD`].
    pub unstable_spread: f64,
    /// Per judge and quantity.
    pub measures: Vec<JudgeStability>,
    /// Rubric items whose repeats span [`UNSTABLE_SPREAD`] points or more, by task, sample and judge.
    pub unstable: Vec<UnstableItem>,
    /// What repeats 2..K added, per judge.
    pub added: Vec<RepeatCost>,
}

/// One judge's test–retest agreement on one quantity.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeStability {
    pub judge: String,
    /// `rubric:DIMENSION`, `rubric:overall` or `equivalence`.
    pub quantity: String,
    /// Items every repeat answered validly (the ones measured).
    pub items: usize,
    /// ICC(2,1) between repeats with McGraw & Wong's interval (scores only, not yes/no).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icc: Option<Estimate>,
    /// Fleiss' kappa between repeats on the verdicts (each score a category; yes/no), with a bootstrap interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kappa: Option<Estimate>,
    /// Mean over items of the repeats' spread (highest minus lowest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_spread: Option<f64>,
    /// Items whose repeats disagree: a different yes/no, or a spread of [`UNSTABLE_SPREAD`] or more.
    pub unstable_items: usize,
    /// Why a statistic is missing (too few items, no variance).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A rubric item on which one judge's repeats disagree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnstableItem {
    pub task_id: String,
    pub sample_index: u32,
    pub judge: String,
    /// `rubric:DIMENSION` or `rubric:overall`: the quantity with the widest spread.
    pub quantity: String,
    /// Each repeat's score on that quantity (`None` where the repeat gave none).
    pub scores: Vec<Option<f64>>,
    pub spread: f64,
}

/// Calls and tokens one judge's repeats beyond the first added.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatCost {
    pub judge: String,
    pub calls: u64,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// The same for the first asking, to compare against.
    pub first_calls: u64,
    pub first_tokens_in: u64,
    pub first_tokens_out: u64,
}

/// Judge `j`'s repeats of sample `s` per rubric quantity: `rubric:DIMENSION` for each of `dimensions` in their
/// order, then `rubric:overall`, each with every repeat's score in seed order (`None` where a repeat gave none).
/// Empty when judge `j` did not grade the sample.
pub fn repeat_rows(
    s: &SampleScore,
    j: usize,
    dimensions: &[String],
) -> Vec<(String, Vec<Option<f64>>)> {
    if s.rubric.as_ref().and_then(|r| r.judges.get(j)).is_none() {
        return Vec::new();
    }
    dimensions
        .iter()
        .map(String::as_str)
        .chain(["overall"])
        .map(|q| (format!("rubric:{q}"), repeat_scores(s, j, q)))
        .collect()
}

/// Sample `s` as an item judge `j` (named `judge`) is unstable on: the quantity whose repeats spread widest,
/// when that spread reaches [`UNSTABLE_SPREAD`]; `None` when it does not, or the judge did not grade it. The one
/// rule the report's list and the viewer's marks both follow.
pub fn unstable_item(
    s: &SampleScore,
    j: usize,
    judge: &str,
    dimensions: &[String],
) -> Option<UnstableItem> {
    widest(s, judge, repeat_rows(s, j, dimensions))
}

/// Judge `j`'s repeat scores of sample `s` on rubric quantity `q` (a dimension id or `overall`); empty when the
/// judge did not grade it.
pub fn repeat_scores(s: &SampleScore, j: usize, q: &str) -> Vec<Option<f64>> {
    let Some(verdict) = s.rubric.as_ref().and_then(|r| r.judges.get(j)) else {
        return Vec::new();
    };
    verdict
        .repeats
        .iter()
        .map(|r| {
            let score = if q == "overall" {
                r.overall
            } else {
                r.scores.get(q).copied()
            };
            score.map(f64::from)
        })
        .collect()
}

/// The highest minus the lowest of a row's valid scores; `None` with fewer than two.
pub fn spread(row: &[Option<f64>]) -> Option<f64> {
    let valid: Vec<f64> = row.iter().flatten().copied().collect();
    if valid.len() < 2 {
        return None;
    }
    let max = valid.iter().copied().fold(f64::MIN, f64::max);
    let min = valid.iter().copied().fold(f64::MAX, f64::min);
    Some(max - min)
}

/// The quantity whose repeats spread widest on this item, when that reaches [`UNSTABLE_SPREAD`].
fn widest(
    s: &SampleScore,
    judge: &str,
    quantities: Vec<(String, Vec<Option<f64>>)>,
) -> Option<UnstableItem> {
    let (quantity, scores, spread) = quantities
        .into_iter()
        .filter_map(|(q, row)| spread(&row).map(|d| (q, row, d)))
        .fold(
            None,
            |best: Option<(String, Vec<Option<f64>>, f64)>, next| match best {
                Some(b) if b.2 >= next.2 => Some(b),
                _ => Some(next),
            },
        )?;
    (spread >= UNSTABLE_SPREAD).then(|| UnstableItem {
        task_id: s.task_id.clone(),
        sample_index: s.sample_index,
        judge: judge.to_string(),
        quantity,
        scores,
        spread,
    })
}
