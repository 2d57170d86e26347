//! Combining a jury's verdicts, and measuring how much the judges agree.

use std::collections::BTreeMap;

use nmb_results::{
    Aggregation, ErrorCategory, JudgeDecision, JudgeVerdict, JuryAgreement, RepeatGrade,
    RubricVerdict, TaxonomyVerdict,
};
use nmb_stats::{agreement, BootstrapConfig, Measure, StatsError};

use crate::judge::{Answer, Repeated};
use crate::prompts::{Equivalence, TaxonomyLabel};
use crate::rubric::Grade;

/// The lower median of small integers.
fn lower_median(mut values: Vec<u8>) -> Option<u8> {
    values.sort_unstable();
    values.get(values.len().saturating_sub(1) / 2).copied()
}

impl Repeated for Equivalence {
    fn median(values: &[&Self]) -> Self {
        let yes = values.iter().filter(|v| v.equivalent).count();
        let equivalent = 2 * yes > values.len();
        let first = values.iter().find(|v| v.equivalent == equivalent);
        Equivalence {
            equivalent,
            rationale: first.map(|v| v.rationale.clone()).unwrap_or_default(),
        }
    }
}

impl Repeated for Grade {
    /// Per dimension and overall, the median of the repeats that scored it; the rationale of the first repeat
    /// whose overall score is the median.
    fn median(values: &[&Self]) -> Self {
        let mut dims: BTreeMap<&String, Vec<u8>> = BTreeMap::new();
        for v in values {
            for (d, s) in &v.scores {
                dims.entry(d).or_default().push(*s);
            }
        }
        let scores = dims
            .into_iter()
            .filter_map(|(d, s)| Some((d.clone(), lower_median(s)?)))
            .collect();
        let overall = lower_median(values.iter().map(|v| v.overall).collect()).unwrap_or(0);
        let rationale = values
            .iter()
            .find(|v| v.overall == overall)
            .map(|v| v.rationale.clone())
            .unwrap_or_default();
        Grade {
            scores,
            overall,
            rationale,
        }
    }
}

impl Repeated for TaxonomyLabel {
    /// Classes have no median: the most frequent class, ties to the earliest repeat's.
    fn median(values: &[&Self]) -> Self {
        let count = |c: ErrorCategory| values.iter().filter(|v| v.category == c).count();
        let best = values.iter().map(|v| count(v.category)).max().unwrap_or(0);
        let pick = values
            .iter()
            .find(|v| count(v.category) == best)
            .unwrap_or(&values[0]);
        (*pick).clone()
    }
}

impl Repeated for &'static str {
    /// A pairwise choice ("1", "2", "tie") has no median either: the most frequent, ties to the earliest repeat's.
    fn median(values: &[&Self]) -> Self {
        let count = |c: &str| values.iter().filter(|v| **v == &c).count();
        let best = values.iter().map(|v| count(v)).max().unwrap_or(0);
        values
            .iter()
            .find(|v| count(v) == best)
            .map_or("tie", |v| **v)
    }
}

impl Repeated for Vec<crate::criteria::Decision> {
    /// Per criterion, met when more than half of the repeats say so (a tie is "not met", as a yes/no tie is
    /// "no"); the explanation of the first repeat that agrees. Every repeat decides every criterion, in order.
    fn median(values: &[&Self]) -> Self {
        let n = values.iter().map(|v| v.len()).min().unwrap_or(0);
        (0..n)
            .map(|i| {
                let yes = values.iter().filter(|v| v[i].met).count();
                let met = 2 * yes > values.len();
                let first = values.iter().map(|v| &v[i]).find(|d| d.met == met);
                crate::criteria::Decision {
                    met,
                    explanation: first.map(|d| d.explanation.clone()).unwrap_or_default(),
                }
            })
            .collect()
    }
}

/// Who the judges are, in panel order.
pub struct Jury<'a> {
    pub specs: &'a [String],
    pub self_grading: &'a [bool],
    pub aggregation: Aggregation,
}

impl Jury<'_> {
    /// Yes/no: equivalent when more than half of the valid verdicts say yes (so a tie is "no"), under either
    /// aggregation; `None` when no judge answered validly.
    pub fn equivalence(&self, answers: &[Answer<Equivalence>]) -> JudgeDecision {
        let verdicts: Vec<JudgeVerdict> = answers
            .iter()
            .enumerate()
            .map(|(j, a)| JudgeVerdict {
                judge: self.specs[j].clone(),
                equivalent: a.value.as_ref().map(|v| v.equivalent),
                rationale: a.value.as_ref().map(|v| v.rationale.clone()),
                attempts: a.attempts,
                failure: a.failure.clone(),
                self_grading: self.self_grading[j],
                repeats: a
                    .repeats
                    .iter()
                    .map(|r| r.as_ref().map(|v| v.equivalent))
                    .collect(),
            })
            .collect();
        let valid: Vec<bool> = verdicts.iter().filter_map(|v| v.equivalent).collect();
        let yes = valid.iter().filter(|v| **v).count();
        let yes_share = (!valid.is_empty()).then(|| yes as f64 / valid.len() as f64);
        JudgeDecision {
            aggregation: self.aggregation,
            equivalent: yes_share.map(|s| s > 0.5),
            yes_share,
            verdicts,
        }
    }

    pub fn rubric_verdicts(&self, answers: &[Answer<Grade>]) -> Vec<RubricVerdict> {
        answers
            .iter()
            .enumerate()
            .map(|(j, a)| RubricVerdict {
                judge: self.specs[j].clone(),
                scores: a
                    .value
                    .as_ref()
                    .map(|g| g.scores.clone())
                    .unwrap_or_default(),
                overall: a.value.as_ref().map(|g| g.overall),
                rationale: a.value.as_ref().map(|g| g.rationale.clone()),
                attempts: a.attempts,
                failure: a.failure.clone(),
                self_grading: self.self_grading[j],
                repeats: a
                    .repeats
                    .iter()
                    .map(|r| RepeatGrade {
                        scores: r.as_ref().map(|g| g.scores.clone()).unwrap_or_default(),
                        overall: r.as_ref().map(|g| g.overall),
                    })
                    .collect(),
            })
            .collect()
    }

    /// One combined score from the valid judges' scores: their mean, or the most frequent score (ties to the
    /// lower score).
    pub fn combine_scores(&self, scores: &[u8]) -> Option<f64> {
        if scores.is_empty() {
            return None;
        }
        Some(match self.aggregation {
            Aggregation::Mean => {
                scores.iter().map(|&s| f64::from(s)).sum::<f64>() / scores.len() as f64
            }
            Aggregation::Majority => {
                let mut counts: BTreeMap<u8, usize> = BTreeMap::new();
                for &s in scores {
                    *counts.entry(s).or_default() += 1;
                }
                let best = counts.values().copied().max().unwrap_or(0);
                // BTreeMap iterates in ascending order, so the first with the top count is the lowest.
                f64::from(
                    counts
                        .into_iter()
                        .find(|(_, c)| *c == best)
                        .map_or(0, |(s, _)| s),
                )
            }
        })
    }

    pub fn taxonomy_verdicts(&self, answers: &[Answer<TaxonomyLabel>]) -> Vec<TaxonomyVerdict> {
        answers
            .iter()
            .enumerate()
            .map(|(j, a)| TaxonomyVerdict {
                judge: self.specs[j].clone(),
                category: a.value.as_ref().map(|v| v.category),
                justification: a.value.as_ref().map(|v| v.justification.clone()),
                attempts: a.attempts,
                failure: a.failure.clone(),
                self_grading: self.self_grading[j],
            })
            .collect()
    }

    /// The most frequent class among valid verdicts; ties go to the class of the earliest-listed judge among the
    /// tied classes. Returns the index of the judge whose verdict (and justification) stands for the jury.
    pub fn taxonomy_choice(&self, verdicts: &[TaxonomyVerdict]) -> Option<usize> {
        let mut counts: BTreeMap<ErrorCategory, usize> = BTreeMap::new();
        for c in verdicts.iter().filter_map(|v| v.category) {
            *counts.entry(c).or_default() += 1;
        }
        let best = counts.values().copied().max()?;
        verdicts
            .iter()
            .position(|v| v.category.is_some_and(|c| counts[&c] == best))
    }
}

/// Agreement between judges on one quantity. `items[i][j]` is judge `j`'s value for item `i` (`None` where it
/// gave none).
pub fn agreement_rows(
    quantity: &str,
    measures: &[Measure],
    judges: &[String],
    items: &[Vec<Option<f64>>],
    cfg: &BootstrapConfig,
) -> Vec<JuryAgreement> {
    measures
        .iter()
        .filter(|m| !m.is_pairwise() || judges.len() == 2)
        .map(|&measure| {
            let complete = items
                .iter()
                .filter(|row| row.iter().all(Option::is_some))
                .count();
            let (estimate, note) = match agreement(measure, items, cfg) {
                Ok(e) => (Some(e), None),
                Err(e @ (StatsError::Undefined { .. } | StatsError::TooFew { .. })) => {
                    (None, Some(e.to_string()))
                }
                Err(e) => (None, Some(e.to_string())),
            };
            JuryAgreement {
                quantity: quantity.to_string(),
                measure,
                judges: judges.to_vec(),
                items: complete,
                estimate,
                note,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jury(aggregation: Aggregation, n: usize) -> (Vec<String>, Vec<bool>, Aggregation) {
        (
            (0..n)
                .map(|i| format!("openai:j{i}@http://127.0.0.1:1/v1"))
                .collect(),
            vec![false; n],
            aggregation,
        )
    }

    fn eq(v: Option<bool>) -> Answer<Equivalence> {
        Answer {
            value: v.map(|e| Equivalence {
                equivalent: e,
                rationale: "r".into(),
            }),
            attempts: 1,
            failure: v.is_none().then(|| "bad".into()),
            repeats: Vec::new(),
        }
    }

    #[test]
    fn equivalence_needs_a_strict_majority_of_valid_verdicts() {
        let (specs, sg, agg) = jury(Aggregation::Majority, 3);
        let j = Jury {
            specs: &specs,
            self_grading: &sg,
            aggregation: agg,
        };
        assert_eq!(
            j.equivalence(&[eq(Some(true)), eq(Some(true)), eq(Some(false))])
                .equivalent,
            Some(true)
        );
        assert_eq!(
            j.equivalence(&[eq(Some(true)), eq(None), eq(Some(false))])
                .equivalent,
            Some(false)
        );
        assert_eq!(
            j.equivalence(&[eq(None), eq(None), eq(Some(true))])
                .equivalent,
            Some(true)
        );
        assert_eq!(
            j.equivalence(&[eq(None), eq(None), eq(None)]).equivalent,
            None
        );
    }

    #[test]
    fn scores_combine_by_mean_or_mode() {
        let (specs, sg, _) = jury(Aggregation::Mean, 3);
        let mean = Jury {
            specs: &specs,
            self_grading: &sg,
            aggregation: Aggregation::Mean,
        };
        let mode = Jury {
            specs: &specs,
            self_grading: &sg,
            aggregation: Aggregation::Majority,
        };
        assert_eq!(mean.combine_scores(&[2, 3, 5]), Some(10.0 / 3.0));
        assert_eq!(mode.combine_scores(&[5, 3, 5]), Some(5.0));
        // No majority: the lowest of the most frequent.
        assert_eq!(mode.combine_scores(&[4, 2, 3]), Some(2.0));
        assert_eq!(mode.combine_scores(&[]), None);
    }

    #[test]
    fn taxonomy_majority_with_ties_to_the_first_judge() {
        let (specs, sg, agg) = jury(Aggregation::Majority, 3);
        let j = Jury {
            specs: &specs,
            self_grading: &sg,
            aggregation: agg,
        };
        let v = |c: Option<ErrorCategory>| TaxonomyVerdict {
            judge: String::new(),
            category: c,
            justification: None,
            attempts: 1,
            failure: None,
            self_grading: false,
        };
        use ErrorCategory::*;
        assert_eq!(
            j.taxonomy_choice(&[
                v(Some(KnowledgeGap)),
                v(Some(ReasoningFailure)),
                v(Some(ReasoningFailure))
            ]),
            Some(1)
        );
        assert_eq!(
            j.taxonomy_choice(&[v(None), v(Some(GroundingError)), v(Some(PerceptualFailure))]),
            Some(1)
        );
        assert_eq!(j.taxonomy_choice(&[v(None), v(None), v(None)]), None);
    }
}
