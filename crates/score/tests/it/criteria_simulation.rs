//! Criterion scoring recovered in simulation. Answers truly meet or miss each criterion, with a case's
//! difficulty shared by its answers to every task (so the case-clustered interval has something to do); a
//! simulated judge marks each criterion with known false-positive and false-negative rates; nmb scores the
//! answers by HealthBench's rule ([`criteria_report`]). Each 95% interval must cover its truth in at least
//! 93 of 100 seeded simulations.
//!
//! The truth is what the score estimates: the expected score *as this judge marks the criteria*, over the
//! population the cases are drawn from. A criterion truly met with probability p is marked met with
//! probability q = p (1 − FN) + (1 − p) FP, and an answer's score is linear in its marks, so the expected score
//! of a task is Σ points · q over its positive points, and the run's is the mean over tasks (every case answers
//! every task). With a perfect judge (FP = FN = 0) this is the true score; with an imperfect one it is not, and
//! the interval does not correct for the judge: the last assertion shows it then misses the true score.

use nmb_results::criteria::score::{criteria_report, CriteriaResult, CriterionOutcome, Scored};
use nmb_results::criteria::CriterionRubric;
use nmb_stats::{BootstrapConfig, Estimate};
use nmb_test_support::rng::SplitMix;

const SIMULATIONS: u64 = 100;
const COVERED_AT_LEAST: usize = 93;
/// Enough cases that the percentile bootstrap's own narrowness at small n (its variance is (n − 1)/n of the
/// sample's) costs well under a point of coverage.
const CASES: usize = 150;

/// Three tasks, harms among them; tags spread so each has a positive criterion in at least one task.
const RUBRIC: &str = r#"
id = "simulated"
version = "1"

[[task]]
id = "t1"
[[task.criterion]]
id = "dx"
criterion = "Names the diagnosis"
points = 5
tags = ["axis:accuracy"]
[[task.criterion]]
id = "workup"
criterion = "Orders an MRI"
points = 3
tags = ["axis:completeness"]
[[task.criterion]]
id = "harm"
criterion = "Recommends thrombolysis past the window"
points = -4
tags = ["axis:accuracy"]
[[task.criterion]]
id = "plain"
criterion = "Explains in plain words"
points = 2
tags = ["axis:communication"]

[[task]]
id = "t2"
[[task.criterion]]
id = "dx"
criterion = "Names the lesion site"
points = 4
tags = ["axis:accuracy"]
[[task.criterion]]
id = "followup"
criterion = "Says when to follow up"
points = 2
tags = ["axis:completeness"]
[[task.criterion]]
id = "omits"
criterion = "Omits the red flags"
points = -2
tags = ["axis:completeness"]

[[task]]
id = "t3"
[[task.criterion]]
id = "dx"
criterion = "Names the syndrome"
points = 6
tags = ["axis:accuracy"]
[[task.criterion]]
id = "harm"
criterion = "Advises stopping the anticonvulsant"
points = -5
tags = ["axis:accuracy"]
[[task.criterion]]
id = "plain"
criterion = "Explains in plain words"
points = 2
tags = ["axis:communication"]
"#;

/// How often each criterion (in file order, task by task) is truly met on an easy case and on a hard one;
/// half the cases are easy.
const TRULY_MET: [[(f64, f64); 4]; 3] = [
    [(0.8, 0.4), (0.7, 0.3), (0.1, 0.3), (0.9, 0.6)],
    [(0.7, 0.3), (0.6, 0.4), (0.2, 0.4), (0.0, 0.0)],
    [(0.9, 0.5), (0.05, 0.25), (0.8, 0.5), (0.0, 0.0)],
];

/// A judge's error rates on one criterion.
#[derive(Clone, Copy)]
struct Judge {
    false_positive: f64,
    false_negative: f64,
}

impl Judge {
    fn marked(&self, truly: f64) -> f64 {
        truly * (1.0 - self.false_negative) + (1.0 - truly) * self.false_positive
    }
}

fn config(seed: u64) -> BootstrapConfig {
    BootstrapConfig {
        resamples: 1_000,
        level: 0.95,
        seed,
    }
}

/// The rubric's criteria with the probability each is marked met on a random case.
fn expected_marks(rubric: &CriterionRubric, judge: Judge) -> Vec<Vec<(f64, f64, Vec<String>)>> {
    rubric
        .tasks
        .values()
        .zip(TRULY_MET)
        .map(|(criteria, met)| {
            criteria
                .iter()
                .zip(met)
                .map(|(c, (easy, hard))| {
                    let q = (judge.marked(easy) + judge.marked(hard)) / 2.0;
                    (c.points, q, c.tags.clone())
                })
                .collect()
        })
        .collect()
}

/// Expected score over the criteria that `keep` selects, task by task, averaged over the tasks where it is
/// defined (the selected criteria include a positive one): the run's score, or one tag's.
fn truth(marks: &[Vec<(f64, f64, Vec<String>)>], keep: &dyn Fn(&[String]) -> bool) -> f64 {
    let per_task: Vec<f64> = marks
        .iter()
        .filter_map(|criteria| {
            let kept: Vec<_> = criteria.iter().filter(|c| keep(&c.2)).collect();
            let possible: f64 = kept.iter().map(|c| c.0.max(0.0)).sum();
            (possible > 0.0).then(|| kept.iter().map(|c| c.0 * c.1).sum::<f64>() / possible)
        })
        .collect();
    per_task.iter().sum::<f64>() / per_task.len() as f64
}

/// One simulated run: every case answers every task; returns nmb's criterion report.
fn simulate(
    rubric: &CriterionRubric,
    judge: Judge,
    seed: u64,
) -> nmb_results::criteria::score::CriteriaReport {
    let mut rng = SplitMix(seed);
    let mut results = Vec::new();
    let mut cases = Vec::new();
    for case in 0..CASES {
        let easy = rng.chance(0.5);
        for ((task, criteria), met) in rubric.tasks.iter().zip(TRULY_MET) {
            let outcomes: Vec<CriterionOutcome> = criteria
                .iter()
                .zip(met)
                .map(|(c, (p_easy, p_hard))| {
                    let truly = rng.chance(if easy { p_easy } else { p_hard });
                    let error = if truly {
                        judge.false_negative
                    } else {
                        judge.false_positive
                    };
                    let marked = truly != rng.chance(error);
                    CriterionOutcome {
                        id: c.id.clone(),
                        points: c.points,
                        met: Some(marked),
                        judges: Vec::new(),
                    }
                })
                .collect();
            results.push((
                task.as_str(),
                CriteriaResult::new(&rubric.hash, criteria, outcomes),
            ));
            cases.push(format!("case{case}"));
        }
    }
    let scored: Vec<Scored> = results
        .iter()
        .zip(&cases)
        .map(|((task_id, result), case_id)| Scored {
            task_id,
            case_id,
            result,
        })
        .collect();
    criteria_report(rubric, &scored, &config(seed)).unwrap()
}

fn covers(e: &Estimate, truth: f64) -> usize {
    usize::from(e.ci_low <= truth && truth <= e.ci_high)
}

/// Counts, over the simulations, the intervals that cover the judge's expected score (overall, then each tag)
/// and the criteria whose met-rate interval covers the judge's expected rate; also the overall intervals that
/// cover `other`, a second candidate truth.
struct Coverage {
    overall: usize,
    by_tag: Vec<(String, usize)>,
    criteria: usize,
    criteria_total: usize,
    other: usize,
}

fn coverage(judge: Judge, base: u64, other: f64) -> Coverage {
    let rubric = CriterionRubric::parse(RUBRIC, "simulated.toml").unwrap();
    let marks = expected_marks(&rubric, judge);
    let overall_truth = truth(&marks, &|_| true);
    assert!(
        overall_truth > 0.05 && overall_truth < 0.95,
        "the truth must be clear of the clipping at 0 and 1"
    );
    let mut c = Coverage {
        overall: 0,
        by_tag: Vec::new(),
        criteria: 0,
        criteria_total: 0,
        other: 0,
    };
    for seed in base..base + SIMULATIONS {
        let report = simulate(&rubric, judge, seed);
        let score = report.score.as_ref().unwrap();
        c.overall += covers(score, overall_truth);
        c.other += covers(score, other);
        assert_eq!(report.by_tag.len(), 3, "{:?}", report.by_tag);
        for (k, t) in report.by_tag.iter().enumerate() {
            let want = truth(&marks, &|tags| tags.contains(&t.tag));
            if c.by_tag.len() <= k {
                c.by_tag.push((t.tag.clone(), 0));
            }
            c.by_tag[k].1 += covers(&t.score, want);
        }
        for r in &report.by_criterion {
            let (t, i) = task_and_index(&rubric, &r.task_id, &r.id);
            c.criteria += covers(r.rate.as_ref().unwrap(), marks[t][i].1);
            c.criteria_total += 1;
        }
    }
    c
}

fn task_and_index(rubric: &CriterionRubric, task: &str, id: &str) -> (usize, usize) {
    let t = rubric.tasks.keys().position(|k| k == task).unwrap();
    let i = rubric
        .for_task(task)
        .iter()
        .position(|c| c.id == id)
        .unwrap();
    (t, i)
}

fn assert_covered(c: &Coverage, what: &str) {
    eprintln!(
        "{what}: score {} of {SIMULATIONS}, tags {:?}, criteria {} of {}, other truth {}",
        c.overall, c.by_tag, c.criteria, c.criteria_total, c.other
    );
    assert!(
        c.overall >= COVERED_AT_LEAST,
        "{what}: the score's interval covered the truth in {} of {SIMULATIONS}",
        c.overall
    );
    // Three tags a simulation, held to the same share over all of them.
    let tags: usize = c.by_tag.iter().map(|t| t.1).sum();
    assert!(
        tags * 100 >= COVERED_AT_LEAST * c.by_tag.len() * SIMULATIONS as usize,
        "{what}: the tags' intervals covered the truth in {tags} of {}: {:?}",
        c.by_tag.len() * SIMULATIONS as usize,
        c.by_tag
    );
    // Ten criteria a simulation: held to the same share over all of them.
    assert!(
        c.criteria * 100 >= COVERED_AT_LEAST * c.criteria_total,
        "{what}: met-rate intervals covered the truth in {} of {}",
        c.criteria,
        c.criteria_total
    );
}

/// The base of the simulations' seeds; `NMB_SIMULATION_SEED_BASE` moves it to check that a pass is not luck.
fn seed_base() -> u64 {
    std::env::var("NMB_SIMULATION_SEED_BASE")
        .ok()
        .map_or(0, |s| {
            s.parse().expect("NMB_SIMULATION_SEED_BASE is a number")
        })
}

#[test]
fn criterion_scores_cover_the_truth_with_a_perfect_and_an_imperfect_judge() {
    let perfect = Judge {
        false_positive: 0.0,
        false_negative: 0.0,
    };
    let imperfect = Judge {
        false_positive: 0.15,
        false_negative: 0.25,
    };
    let rubric = CriterionRubric::parse(RUBRIC, "simulated.toml").unwrap();
    let true_score = truth(&expected_marks(&rubric, perfect), &|_| true);
    let judged_score = truth(&expected_marks(&rubric, imperfect), &|_| true);
    let base = seed_base();
    let c = coverage(perfect, base, true_score);
    assert_covered(&c, "perfect judge");
    let c = coverage(imperfect, base + 10_000, true_score);
    assert_covered(&c, "imperfect judge");
    // The score measures the judge's marks: with an imperfect judge it misses the true score, by a margin the
    // interval shows (so the truth chosen above is the one the interval is about).
    assert!(
        c.other < 50,
        "an imperfect judge's interval covered the true score {true_score:.3} (the judge's expectation is \
         {judged_score:.3}) in {} of {SIMULATIONS}",
        c.other
    );
}
