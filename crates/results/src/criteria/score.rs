//! HealthBench's scoring rule (`calculate_score` in openai/simple-evals' `healthbench_eval.py`), and the
//! run's numbers built from it.
//!
//! - One answer: the points of the criteria it meets (negative ones included) over the sum of the positive
//!   points. It is not clipped, so an answer meeting harms can fall below 0; it is undefined for a task without
//!   positive points.
//! - One tag: the same over the criteria carrying the tag, defined only where they include a positive one.
//! - A run (and each tag): the mean of the answers' scores, clipped to [0, 1] after averaging, as HealthBench
//!   does. The interval resamples cases and clips each resample's mean the same way.
//!
//! An answer with a criterion no judge decided has no score and is counted apart (`undecided`), never as 0.

use std::collections::BTreeMap;

use nmb_stats::{bootstrap, wilson, BootstrapConfig, Design, Estimate};
use serde::{Deserialize, Serialize};

use super::{CriteriaInfo, Criterion, CriterionRubric};
use crate::error::ResultsError;

/// HealthBench's score of one answer: `met[i]` says whether `criteria[i]` is met. `None` when no criterion has
/// positive points.
pub fn answer_score(criteria: &[Criterion], met: &[bool]) -> Option<f64> {
    let possible: f64 = criteria.iter().map(|c| c.points).filter(|p| *p > 0.0).sum();
    if possible == 0.0 {
        return None;
    }
    let achieved: f64 = criteria
        .iter()
        .zip(met)
        .filter(|(_, m)| **m)
        .map(|(c, _)| c.points)
        .sum();
    Some(achieved / possible)
}

/// The score of one answer on each tag's criteria, for the tags whose criteria include a positive one.
pub fn tag_scores(criteria: &[Criterion], met: &[bool]) -> BTreeMap<String, f64> {
    let mut by_tag: BTreeMap<&str, (Vec<Criterion>, Vec<bool>)> = BTreeMap::new();
    for (c, m) in criteria.iter().zip(met) {
        for t in &c.tags {
            let slot = by_tag.entry(t.as_str()).or_default();
            slot.0.push(c.clone());
            slot.1.push(*m);
        }
    }
    by_tag
        .into_iter()
        .filter_map(|(t, (cs, ms))| answer_score(&cs, &ms).map(|s| (t.to_string(), s)))
        .collect()
}

/// The mean clipped to [0, 1], HealthBench's aggregate.
pub fn clipped_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    Some((values.iter().sum::<f64>() / values.len() as f64).clamp(0.0, 1.0))
}

/// One judge's decision on one criterion of one answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgeMet {
    pub judge: String,
    /// `None` when the judge gave no valid answer.
    pub met: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
}

/// One criterion of one answer: the jury's decision and each judge's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionOutcome {
    pub id: String,
    pub points: f64,
    /// Met when more than half of the valid verdicts say so (a tie is "not met"); `None` without a valid one.
    pub met: Option<bool>,
    pub judges: Vec<JudgeMet>,
}

/// The criteria of one answer, decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriteriaResult {
    pub rubric_hash: String,
    pub criteria: Vec<CriterionOutcome>,
    /// [`answer_score`]; `None` while a criterion is undecided.
    pub score: Option<f64>,
    /// [`tag_scores`]; empty while a criterion is undecided.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_tag: BTreeMap<String, f64>,
}

impl CriteriaResult {
    /// The result for `criteria` from the jury's decisions (`outcomes` in the same order).
    pub fn new(rubric_hash: &str, criteria: &[Criterion], outcomes: Vec<CriterionOutcome>) -> Self {
        let met: Option<Vec<bool>> = outcomes.iter().map(|o| o.met).collect();
        let (score, by_tag) = match &met {
            Some(m) => (answer_score(criteria, m), tag_scores(criteria, m)),
            None => (None, BTreeMap::new()),
        };
        CriteriaResult {
            rubric_hash: rubric_hash.to_string(),
            criteria: outcomes,
            score,
            by_tag,
        }
    }
}

/// A run's criterion-rubric numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriteriaReport {
    pub rubric: CriteriaInfo,
    /// Answers with a score.
    pub answers: usize,
    /// Answers of tasks with criteria where some criterion stayed undecided (judge failures): left out.
    pub undecided: usize,
    /// Mean answer score clipped to [0, 1], with a case-clustered bootstrap CI.
    pub score: Option<Estimate>,
    pub by_tag: Vec<TagScore>,
    /// How often each criterion was met, with a Wilson interval.
    pub by_criterion: Vec<CriterionRate>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TagScore {
    pub tag: String,
    pub answers: usize,
    pub score: Estimate,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriterionRate {
    pub task_id: String,
    pub id: String,
    /// The criterion's text, as the rubric file writes it (empty in reports stored before it was kept).
    #[serde(default)]
    pub criterion: String,
    pub points: f64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    pub decided: usize,
    pub met: usize,
    pub rate: Option<Estimate>,
}

/// One scored answer as the aggregate sees it.
pub struct Scored<'a> {
    pub task_id: &'a str,
    pub case_id: &'a str,
    pub result: &'a CriteriaResult,
}

/// The run's numbers from its answers' results, decided against `rubric`.
pub fn criteria_report(
    rubric: &CriterionRubric,
    answers: &[Scored<'_>],
    cfg: &BootstrapConfig,
) -> Result<CriteriaReport, ResultsError> {
    let scored: Vec<&Scored> = answers
        .iter()
        .filter(|a| a.result.score.is_some())
        .collect();
    let values: Vec<f64> = scored.iter().filter_map(|a| a.result.score).collect();
    let cases: Vec<&str> = scored.iter().map(|a| a.case_id).collect();
    let score = clipped_estimate(&values, &cases, cfg)?;
    let mut tags: BTreeMap<&str, (Vec<f64>, Vec<&str>)> = BTreeMap::new();
    for a in &scored {
        for (t, v) in &a.result.by_tag {
            let slot = tags.entry(t.as_str()).or_default();
            slot.0.push(*v);
            slot.1.push(a.case_id);
        }
    }
    let mut by_tag = Vec::new();
    for (tag, (vals, cs)) in tags {
        if let Some(score) = clipped_estimate(&vals, &cs, cfg)? {
            by_tag.push(TagScore {
                tag: tag.to_string(),
                answers: vals.len(),
                score,
            });
        }
    }
    Ok(CriteriaReport {
        rubric: rubric.info(),
        answers: scored.len(),
        undecided: answers.len() - scored.len(),
        score,
        by_tag,
        by_criterion: criterion_rates(rubric, answers, cfg)?,
    })
}

fn clipped_estimate(
    values: &[f64],
    cases: &[&str],
    cfg: &BootstrapConfig,
) -> Result<Option<Estimate>, ResultsError> {
    if values.is_empty() {
        return Ok(None);
    }
    let design = Design::clusters_by(cases);
    let est = bootstrap(&design, cfg, |idx| {
        let picked: Vec<f64> = idx.iter().map(|&i| values[i]).collect();
        clipped_mean(&picked)
    })?;
    Ok(Some(est))
}

fn criterion_rates(
    rubric: &CriterionRubric,
    answers: &[Scored<'_>],
    cfg: &BootstrapConfig,
) -> Result<Vec<CriterionRate>, ResultsError> {
    let mut rates: BTreeMap<(&str, &str), CriterionRate> = BTreeMap::new();
    for a in answers {
        for c in &a.result.criteria {
            let r = rates.entry((a.task_id, &c.id)).or_insert_with(|| {
                let written = rubric.for_task(a.task_id).iter().find(|w| w.id == c.id);
                CriterionRate {
                    task_id: a.task_id.to_string(),
                    id: c.id.clone(),
                    criterion: written.map(|w| w.criterion.clone()).unwrap_or_default(),
                    points: c.points,
                    tags: written.map(|w| w.tags.clone()).unwrap_or_default(),
                    decided: 0,
                    met: 0,
                    rate: None,
                }
            });
            if let Some(m) = c.met {
                r.decided += 1;
                r.met += usize::from(m);
            }
        }
    }
    rates
        .into_values()
        .map(|mut r| {
            if r.decided > 0 {
                r.rate = Some(wilson(r.met as u64, r.decided as u64, cfg.level)?);
            }
            Ok(r)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(points: f64, tags: &[&str]) -> Criterion {
        Criterion {
            id: String::new(),
            criterion: "x".into(),
            points,
            tags: tags.iter().map(|t| t.to_string()).collect(),
            line: 1,
        }
    }

    #[test]
    fn healthbench_unit_test_example() {
        // simple-evals' own test: points 7, 5, 10, -6; met, not, met, met.
        let cs = [c(7.0, &[]), c(5.0, &[]), c(10.0, &[]), c(-6.0, &[])];
        let got = answer_score(&cs, &[true, false, true, true]).unwrap();
        assert_eq!(got, (7.0 + 10.0 - 6.0) / (7.0 + 5.0 + 10.0));
    }

    #[test]
    fn harms_can_push_an_answer_below_zero_and_the_mean_is_clipped() {
        let cs = [c(2.0, &["axis:a"]), c(-6.0, &["axis:b"])];
        assert_eq!(answer_score(&cs, &[false, true]), Some(-3.0));
        let tags = tag_scores(&cs, &[false, true]);
        // axis:b has no positive criterion, so no score of its own.
        assert_eq!(tags.keys().collect::<Vec<_>>(), ["axis:a"]);
        assert_eq!(clipped_mean(&[-3.0, 1.0]), Some(0.0));
        assert_eq!(answer_score(&[c(-1.0, &[])], &[true]), None);
    }
}
