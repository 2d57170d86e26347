//! How steady each judge is when asked again (`--judge-repeats K`): per item the spread of its repeats, per
//! judge and quantity (each rubric dimension, the overall grade, the yes/no of a match) the test–retest ICC and
//! Fleiss' kappa between its repeats, the items whose repeats disagree, and what the repeats cost.
//!
//! The judge's own answer is the median of its repeats ([`crate::jury::Repeated`]); this module only measures
//! them. The statistics are `nmb-stats`' ([`nmb_stats::retest_icc`], [`nmb_stats::retest_kappa`]).

use nmb_stats::{retest_icc, retest_kappa, BootstrapConfig, Design, Estimate};
use serde::{Deserialize, Serialize};

use crate::results::{JudgeInfo, RepeatRun, SampleScore};

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

/// Each repeat's yes/no per question and judge (`[question][judge][repeat]`).
pub type EquivalenceRepeats = Vec<Vec<Vec<Option<bool>>>>;

/// The stability section, from the scored samples (their rubric verdicts carry every repeat), each match
/// question's repeats, and the judges' runs.
pub fn stability_report(
    samples: &[SampleScore],
    dimensions: &[String],
    equivalence: &EquivalenceRepeats,
    judges: &[JudgeInfo],
    seeds: Vec<u64>,
    cfg: &BootstrapConfig,
) -> StabilityReport {
    let repeats = seeds.len() as u32;
    let mut measures = Vec::new();
    let mut unstable = Vec::new();
    for (j, judge) in judges.iter().enumerate() {
        let graded: Vec<&SampleScore> = samples
            .iter()
            .filter(|s| s.rubric.as_ref().is_some_and(|r| r.judges.len() > j))
            .collect();
        let mut quantities: Vec<String> = dimensions.to_vec();
        quantities.push("overall".into());
        for q in &quantities {
            let rows: Vec<Vec<Option<f64>>> =
                graded.iter().map(|s| repeat_scores(s, j, q)).collect();
            let cases: Vec<&str> = graded.iter().map(|s| s.case_id.as_str()).collect();
            if !graded.is_empty() {
                measures.push(measure(
                    &judge.spec,
                    &format!("rubric:{q}"),
                    &rows,
                    &cases,
                    true,
                    cfg,
                ));
            }
        }
        unstable.extend(
            graded
                .iter()
                .filter_map(|s| unstable_item(s, j, &judge.spec, dimensions)),
        );
        let rows: Vec<Vec<Option<f64>>> = equivalence
            .iter()
            .filter_map(|q| q.get(j))
            .map(|r| {
                r.iter()
                    .map(|v| v.map(|b| f64::from(u8::from(b))))
                    .collect()
            })
            .collect();
        if !rows.is_empty() {
            let units: Vec<String> = (0..rows.len()).map(|i| i.to_string()).collect();
            let units: Vec<&str> = units.iter().map(String::as_str).collect();
            measures.push(measure(
                &judge.spec,
                "equivalence",
                &rows,
                &units,
                false,
                cfg,
            ));
        }
    }
    StabilityReport {
        repeats,
        seeds,
        unstable_spread: UNSTABLE_SPREAD,
        measures,
        unstable,
        added: judges.iter().map(added_cost).collect(),
    }
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
fn repeat_scores(s: &SampleScore, j: usize, q: &str) -> Vec<Option<f64>> {
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

/// ICC (for scores) and kappa on the items every repeat answered, clustered by `clusters` (the case).
fn measure(
    judge: &str,
    quantity: &str,
    rows: &[Vec<Option<f64>>],
    clusters: &[&str],
    scores: bool,
    cfg: &BootstrapConfig,
) -> JudgeStability {
    let (complete, kept): (Vec<Vec<f64>>, Vec<&str>) = rows
        .iter()
        .zip(clusters)
        .filter_map(|(r, c)| Some((r.iter().copied().collect::<Option<Vec<f64>>>()?, *c)))
        .unzip();
    let spreads: Vec<f64> = rows.iter().filter_map(|r| spread(r)).collect();
    let unstable_items = spreads
        .iter()
        .filter(|d| {
            if scores {
                **d >= UNSTABLE_SPREAD
            } else {
                **d > 0.0
            }
        })
        .count();
    let mut notes = Vec::new();
    let icc = if scores {
        retest_icc(&complete, cfg.level)
            .map_err(|e| notes.push(format!("ICC: {e}")))
            .ok()
    } else {
        None
    };
    let codes: Vec<Vec<i64>> = complete
        .iter()
        .map(|r| r.iter().map(|v| *v as i64).collect())
        .collect();
    let design = Design::clusters_by(&kept);
    let kappa = if complete.is_empty() {
        notes.push("kappa: no item answered validly by every repeat".into());
        None
    } else {
        retest_kappa(&codes, &design, cfg)
            .map_err(|e| notes.push(format!("kappa: {e}")))
            .ok()
    };
    JudgeStability {
        judge: judge.to_string(),
        quantity: quantity.to_string(),
        items: complete.len(),
        icc,
        kappa,
        mean_spread: (!spreads.is_empty())
            .then(|| spreads.iter().sum::<f64>() / spreads.len() as f64),
        unstable_items,
        notes,
    }
}

fn added_cost(j: &JudgeInfo) -> RepeatCost {
    // Saturating: a store may hold counts near 2^64 from before they were range-checked.
    let total = |f: fn(&RepeatRun) -> u64| {
        j.repeat_runs
            .iter()
            .fold(0u64, |a, r| a.saturating_add(f(r)))
    };
    RepeatCost {
        judge: j.spec.clone(),
        calls: total(|r| r.calls),
        tokens_in: total(|r| r.tokens_in),
        tokens_out: total(|r| r.tokens_out),
        first_calls: j.calls,
        first_tokens_in: j.tokens_in,
        first_tokens_out: j.tokens_out,
    }
}
