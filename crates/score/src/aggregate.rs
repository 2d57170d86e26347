//! From per-sample verdicts to per-task rows and group aggregates with bootstrap CIs.
//!
//! Units and clusters:
//! - accuracy, pass@k reading (b), rubric, BERTScore, lesion and breadth figures average over *samples*;
//! - pass@k reading (a) averages the per-task estimator over *tasks*;
//! - every interval resamples whole *cases* (all tasks and samples of a case together), because answers about
//!   one case are not independent.
//!
//! Only samples that count ([`SampleStatus::is_scored`]) enter any mean; errored, pending and no-reference
//! samples are counted on their own.

use std::collections::{BTreeMap, BTreeSet};

use nmb_results::{
    BertScoreAggregate, BreadthAggregate, Breakdown, CategoryShare, DimensionMean, ErrorCategory,
    GroupAggregate, LabelSource, LesionAggregate, MatchOutcome, PassAtK, RubricAggregate,
    SampleScore, SampleStatus, TaskScore, TaxonomyDistribution, KS,
};
use nmb_stats::{bootstrap, bootstrap_mean, pass_at_k, BootstrapConfig, Design, Estimate};
use nmb_suite::Family;

use crate::ScoreError;

/// Per-task rows, in the order the samples come (by task id).
pub fn task_scores(samples: &[SampleScore]) -> Result<Vec<TaskScore>, ScoreError> {
    let mut by_task: BTreeMap<&str, Vec<&SampleScore>> = BTreeMap::new();
    for s in samples {
        by_task.entry(&s.task_id).or_default().push(s);
    }
    by_task
        .into_values()
        .map(|group| task_score(&group))
        .collect()
}

fn task_score(samples: &[&SampleScore]) -> Result<TaskScore, ScoreError> {
    let first = samples[0];
    let count = |st: SampleStatus| samples.iter().filter(|s| s.status == st).count();
    let scored: Vec<&&SampleScore> = samples.iter().filter(|s| s.status.is_scored()).collect();
    let n = scored.len();
    let c = scored.iter().filter(|s| s.correct == Some(true)).count();
    let mut unbiased = BTreeMap::new();
    let mut top_k = BTreeMap::new();
    for k in KS {
        let a = if n >= k {
            Some(pass_at_k(n, c, k)?)
        } else {
            None
        };
        unbiased.insert(format!("pass_at_{k}"), a);
        let hits: Vec<f64> = scored
            .iter()
            .filter(|s| has_ranked_answer(s.family))
            .map(|s| f64::from(u8::from(top_k_hit(s, k))))
            .collect();
        let b = (!hits.is_empty()).then(|| hits.iter().sum::<f64>() / hits.len() as f64);
        top_k.insert(format!("pass_at_{k}"), b);
    }
    Ok(TaskScore {
        task_id: first.task_id.clone(),
        case_id: first.case_id.clone(),
        family: first.family,
        level: first.level,
        disease_group: first.disease_group.clone(),
        modality: first.modality.clone(),
        samples: samples.len(),
        n,
        c,
        errored: count(SampleStatus::Errored),
        pending: count(SampleStatus::Pending),
        parse_failed: count(SampleStatus::ParseFailed),
        no_reference: count(SampleStatus::NoReference),
        unresolved: scored.iter().filter(|s| s.unresolved).count(),
        pass_at_k_unbiased: unbiased,
        pass_at_k_top_k: top_k,
    })
}

/// Families whose answers carry a ranked diagnosis list (reading (b) applies).
pub fn has_ranked_answer(f: Family) -> bool {
    matches!(f, Family::Differential | Family::Rationale)
}

fn top_k_hit(s: &SampleScore, k: usize) -> bool {
    let rank = s.diagnosis.as_ref().and_then(|d| d.matched_rank);
    nmb_stats::top_k_hit(rank.map(|r| r as usize - 1), k)
}

/// Identifies a group for [`aggregate`].
#[derive(Debug, Clone, Default)]
pub struct GroupKey {
    pub by: Option<Breakdown>,
    pub level: Option<nmb_suite::Level>,
    pub family: Option<Family>,
    pub disease_group: Option<String>,
    pub modality: Option<String>,
}

/// Aggregates the tasks (and their samples) of one group.
pub fn aggregate(
    key: GroupKey,
    tasks: &[&TaskScore],
    samples: &[&SampleScore],
    cfg: &BootstrapConfig,
) -> Result<GroupAggregate, ScoreError> {
    let scored: Vec<&SampleScore> = samples
        .iter()
        .copied()
        .filter(|s| s.status.is_scored())
        .collect();
    let count = |st: SampleStatus| samples.iter().filter(|s| s.status == st).count();
    let cases: BTreeSet<&str> = tasks.iter().map(|t| t.case_id.as_str()).collect();
    let accuracy = mean_ci(
        &scored,
        |s| Some(f64::from(u8::from(s.correct == Some(true)))),
        cfg,
    )?;
    Ok(GroupAggregate {
        by: key.by.unwrap_or(Breakdown::Overall),
        level: key.level,
        family: key.family,
        disease_group: key.disease_group,
        modality: key.modality,
        tasks: tasks.len(),
        cases: cases.len(),
        samples: samples.len(),
        n: scored.len(),
        correct: scored.iter().filter(|s| s.correct == Some(true)).count(),
        errored: count(SampleStatus::Errored),
        pending: count(SampleStatus::Pending),
        no_reference: count(SampleStatus::NoReference),
        parse_failed: count(SampleStatus::ParseFailed),
        parse_failed_at_limit: samples
            .iter()
            .filter(|s| s.status == SampleStatus::ParseFailed && s.facts.at_token_limit)
            .count(),
        unresolved: scored.iter().filter(|s| s.unresolved).count(),
        accuracy,
        pass_at_1: pass_at(1, tasks, &scored, cfg)?,
        pass_at_5: pass_at(5, tasks, &scored, cfg)?,
        lesion: lesion(&scored, cfg)?,
        rubric: rubric(&scored, cfg)?,
        bertscore: bertscore(&scored, cfg)?,
        taxonomy: taxonomy(&scored, cfg)?,
        breadth: breadth(&scored, cfg)?,
        answer_words: answer_words(samples, cfg)?,
    })
}

/// Median words per answer over the samples with an answer, with a bootstrap CI resampling cases; `None` when
/// no sample has one.
fn answer_words(
    samples: &[&SampleScore],
    cfg: &BootstrapConfig,
) -> Result<Option<Estimate>, ScoreError> {
    let (cases, words): (Vec<&str>, Vec<f64>) = samples
        .iter()
        .filter_map(|s| Some((s.case_id.as_str(), s.facts.answer_words? as f64)))
        .unzip();
    if words.is_empty() {
        return Ok(None);
    }
    let median = |idx: &[usize]| {
        let mut v: Vec<f64> = idx.iter().map(|&i| words[i]).collect();
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        match v.len() {
            0 => None,
            n if n % 2 == 1 => Some(v[mid]),
            _ => Some((v[mid - 1] + v[mid]) / 2.0),
        }
    };
    Ok(Some(bootstrap(&Design::clusters_by(&cases), cfg, median)?))
}

fn pass_at(
    k: usize,
    tasks: &[&TaskScore],
    scored: &[&SampleScore],
    cfg: &BootstrapConfig,
) -> Result<PassAtK, ScoreError> {
    let key = format!("pass_at_{k}");
    let with_answers: Vec<&&TaskScore> = tasks.iter().filter(|t| t.n > 0).collect();
    let eligible: Vec<(&str, f64)> = with_answers
        .iter()
        .filter_map(|t| {
            t.pass_at_k_unbiased
                .get(&key)
                .copied()
                .flatten()
                .map(|v| (t.case_id.as_str(), v))
        })
        .collect();
    let left_out = with_answers.len() - eligible.len();
    let unbiased = estimate(&eligible, cfg)?;
    let unbiased_note = if with_answers.is_empty() {
        Some("no task has an answered sample".to_string())
    } else if left_out > 0 {
        let max_n = with_answers.iter().map(|t| t.n).max().unwrap_or(0);
        Some(format!(
            "{left_out} of {} tasks left out: fewer than {k} answered samples (at most {max_n}); run with \
             --samples {k} or more for reading (a)",
            with_answers.len()
        ))
    } else {
        None
    };
    let ranked: Vec<(&str, f64)> = scored
        .iter()
        .filter(|s| has_ranked_answer(s.family))
        .map(|s| (s.case_id.as_str(), f64::from(u8::from(top_k_hit(s, k)))))
        .collect();
    let top_k_note = if ranked.is_empty() {
        Some("no answer in this group has a ranked differential (differential and rationale tasks do)".into())
    } else if ranked.len() < scored.len() {
        Some(format!(
            "over the {} differential and rationale answers only ({} other answers have no ranked list)",
            ranked.len(),
            scored.len() - ranked.len()
        ))
    } else {
        None
    };
    Ok(PassAtK {
        k,
        unbiased_estimator: unbiased,
        unbiased_tasks: eligible.len(),
        unbiased_note,
        top_k_in_answer: estimate(&ranked, cfg)?,
        top_k_samples: ranked.len(),
        top_k_note,
    })
}

fn lesion(
    scored: &[&SampleScore],
    cfg: &BootstrapConfig,
) -> Result<Option<LesionAggregate>, ScoreError> {
    let lesions: Vec<&SampleScore> = scored
        .iter()
        .copied()
        .filter(|s| s.family == Family::Lesion)
        .collect();
    if lesions.is_empty() {
        return Ok(None);
    }
    let hit = |m: Option<&nmb_results::FieldMatch>| {
        Some(f64::from(u8::from(
            m.is_some_and(|m| m.outcome == MatchOutcome::Match),
        )))
    };
    Ok(Some(LesionAggregate {
        type_accuracy: mean_ci(
            &lesions,
            |s| hit(s.lesion.as_ref().and_then(|l| l.type_match.as_ref())),
            cfg,
        )?,
        location_accuracy: mean_ci(
            &lesions,
            |s| hit(s.lesion.as_ref().and_then(|l| l.location_match.as_ref())),
            cfg,
        )?,
    }))
}

fn rubric(
    scored: &[&SampleScore],
    cfg: &BootstrapConfig,
) -> Result<Option<RubricAggregate>, ScoreError> {
    let graded: Vec<&SampleScore> = scored
        .iter()
        .copied()
        .filter(|s| s.rubric.is_some())
        .collect();
    let Some(first) = graded.first().and_then(|s| s.rubric.as_ref()) else {
        return Ok(None);
    };
    let mut dimensions = Vec::new();
    for (i, d) in first.scores.iter().enumerate() {
        let mean = mean_ci(
            &graded,
            |s| {
                s.rubric
                    .as_ref()
                    .and_then(|r| r.scores.get(i))
                    .and_then(|x| x.score)
            },
            cfg,
        )?;
        dimensions.push(DimensionMean {
            dimension: d.dimension.clone(),
            mean,
        });
    }
    Ok(Some(RubricAggregate {
        rubric_id: first.rubric_id.clone(),
        rubric_version: first.rubric_version.clone(),
        n: graded
            .iter()
            .filter(|s| s.rubric.as_ref().is_some_and(|r| r.overall.is_some()))
            .count(),
        dimensions,
        overall: mean_ci(&graded, |s| s.rubric.as_ref().and_then(|r| r.overall), cfg)?,
    }))
}

fn bertscore(
    scored: &[&SampleScore],
    cfg: &BootstrapConfig,
) -> Result<Option<BertScoreAggregate>, ScoreError> {
    let with: Vec<&SampleScore> = scored
        .iter()
        .copied()
        .filter(|s| s.bertscore.is_some())
        .collect();
    if with.is_empty() {
        return Ok(None);
    }
    let get = |f: fn(&nmb_results::BertScoreResult) -> f64| {
        move |s: &SampleScore| s.bertscore.as_ref().map(f).filter(|v| v.is_finite())
    };
    Ok(Some(BertScoreAggregate {
        n: with.len(),
        p: mean_ci(&with, get(|b| b.p), cfg)?,
        r: mean_ci(&with, get(|b| b.r), cfg)?,
        f: mean_ci(&with, get(|b| b.f), cfg)?,
    }))
}

fn taxonomy(
    scored: &[&SampleScore],
    cfg: &BootstrapConfig,
) -> Result<Option<TaxonomyDistribution>, ScoreError> {
    let wrong: Vec<&SampleScore> = scored
        .iter()
        .copied()
        .filter(|s| s.correct == Some(false))
        .collect();
    if wrong.is_empty() || wrong.iter().all(|s| s.taxonomy.is_none()) {
        return Ok(None);
    }
    let labelled: Vec<&SampleScore> = wrong
        .iter()
        .copied()
        .filter(|s| s.taxonomy.as_ref().is_some_and(|t| t.category.is_some()))
        .collect();
    let source = |want: LabelSource| {
        labelled
            .iter()
            .filter(|s| s.taxonomy.as_ref().and_then(|t| t.source) == Some(want))
            .count()
    };
    let category = |s: &SampleScore| s.taxonomy.as_ref().and_then(|t| t.category);
    let mut classes = Vec::new();
    for c in ErrorCategory::ALL {
        classes.push(CategoryShare {
            category: c,
            count: labelled.iter().filter(|s| category(s) == Some(c)).count(),
            share: mean_ci(
                &labelled,
                |s| Some(f64::from(u8::from(category(s) == Some(c)))),
                cfg,
            )?,
        });
    }
    Ok(Some(TaxonomyDistribution {
        wrong: wrong.len(),
        labelled: labelled.len(),
        from_judges: source(LabelSource::Judge),
        from_humans: source(LabelSource::Human),
        classes,
    }))
}

fn breadth(
    scored: &[&SampleScore],
    cfg: &BootstrapConfig,
) -> Result<Option<BreadthAggregate>, ScoreError> {
    let items: Vec<&SampleScore> = scored
        .iter()
        .copied()
        .filter(|s| s.family.is_breadth())
        .collect();
    if items.is_empty() {
        return Ok(None);
    }
    Ok(Some(BreadthAggregate {
        n: items.len(),
        accuracy: mean_ci(
            &items,
            |s| Some(f64::from(u8::from(s.correct == Some(true)))),
            cfg,
        )?,
        token_recall: mean_ci(
            &items,
            |s| s.breadth.as_ref().and_then(|b| b.token_recall),
            cfg,
        )?,
        exact_match: mean_ci(
            &items,
            |s| {
                s.breadth
                    .as_ref()
                    .and_then(|b| b.exact_match)
                    .map(|e| f64::from(u8::from(e)))
            },
            cfg,
        )?,
        extraction_failures: items
            .iter()
            .filter(|s| s.breadth.as_ref().is_some_and(|b| b.extraction_failed))
            .count(),
    }))
}

/// Mean of `value` over the samples that have one, with a case-clustered bootstrap CI; `None` when none has.
fn mean_ci(
    samples: &[&SampleScore],
    value: impl Fn(&SampleScore) -> Option<f64>,
    cfg: &BootstrapConfig,
) -> Result<Option<Estimate>, ScoreError> {
    let pairs: Vec<(&str, f64)> = samples
        .iter()
        .filter_map(|s| value(s).map(|v| (s.case_id.as_str(), v)))
        .collect();
    estimate(&pairs, cfg)
}

/// Mean of the values with a bootstrap CI resampling the clusters named by the first element.
pub fn estimate(
    pairs: &[(&str, f64)],
    cfg: &BootstrapConfig,
) -> Result<Option<Estimate>, ScoreError> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let labels: Vec<&str> = pairs.iter().map(|p| p.0).collect();
    let values: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    Ok(Some(bootstrap_mean(
        &values,
        &Design::clusters_by(&labels),
        cfg,
    )?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmb_results::{DiagnosisScore, SampleScore};
    use nmb_suite::Level;

    fn sample(
        task: &str,
        i: u32,
        status: SampleStatus,
        correct: bool,
        rank: Option<u32>,
    ) -> SampleScore {
        SampleScore {
            modality: "MRI".into(),
            status,
            correct: status.is_scored().then_some(correct),
            diagnosis: Some(DiagnosisScore {
                reference: "x".into(),
                matched_rank: rank,
                method: None,
                top_1: rank == Some(1),
                top_5: rank.is_some_and(|r| r <= 5),
                candidates: Vec::new(),
            }),
            ..SampleScore::new(
                task,
                i,
                task.split('/').next().unwrap(),
                Family::Differential,
                Level::Direct,
            )
        }
    }

    /// Share of the k-subsets of `n` samples (`c` of them correct) that hold a correct one, by enumeration.
    fn enumerated(n: usize, c: usize, k: usize) -> f64 {
        let (mut hit, mut total) = (0u32, 0u32);
        for subset in 0u32..(1 << n) {
            if subset.count_ones() as usize == k {
                total += 1;
                hit += u32::from(subset & ((1 << c) - 1) != 0);
            }
        }
        f64::from(hit) / f64::from(total)
    }

    #[test]
    fn per_task_pass_at_k_matches_enumeration_and_skips_errored_samples() {
        for n in 1..=8usize {
            for c in 0..=n {
                // n answered samples (the first c correct) plus two errored ones that must not count.
                let mut samples: Vec<SampleScore> = (0..n)
                    .map(|i| {
                        sample(
                            "a/dx",
                            i as u32,
                            SampleStatus::Ok,
                            i < c,
                            (i < c).then_some(1),
                        )
                    })
                    .collect();
                for e in 0..2 {
                    samples.push(sample(
                        "a/dx",
                        (n + e) as u32,
                        SampleStatus::Errored,
                        true,
                        Some(1),
                    ));
                }
                let t = &task_scores(&samples).unwrap()[0];
                assert_eq!((t.n, t.c, t.errored), (n, c, 2));
                for k in KS {
                    let got = t.pass_at_k_unbiased[&format!("pass_at_{k}")];
                    if n < k {
                        assert_eq!(got, None);
                    } else {
                        let want = enumerated(n, c, k);
                        assert!(
                            (got.unwrap() - want).abs() < 1e-12,
                            "n={n} c={c} k={k}: {got:?} vs {want}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn top_k_reading_counts_ranks_within_k_and_parse_failures_as_misses() {
        let samples = vec![
            sample("a/dx", 0, SampleStatus::Ok, true, Some(1)),
            sample("a/dx", 1, SampleStatus::Ok, false, Some(3)),
            sample("a/dx", 2, SampleStatus::Ok, false, Some(6)),
            sample("a/dx", 3, SampleStatus::ParseFailed, false, None),
        ];
        let t = &task_scores(&samples).unwrap()[0];
        assert_eq!(t.pass_at_k_top_k["pass_at_1"], Some(0.25));
        assert_eq!(t.pass_at_k_top_k["pass_at_5"], Some(0.5));
    }
}
