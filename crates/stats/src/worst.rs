//! Worst-at-k (HealthBench): the expected lowest score among k of a task's samples, the reliability a user
//! asking k times feels. Beside pass@k (the chance that *some* of k samples is right) it says how bad the
//! worst of k answers is expected to be.

use serde::{Deserialize, Serialize};

use crate::bootstrap::bootstrap_many;
use crate::{check_finite, BootstrapConfig, Design, Estimate, Result, StatsError};

/// One task's expected minimum score over a k-subset of its `n` samples drawn uniformly among all C(n, k)
/// subsets: exactly the mean, over every k-subset, of the subset's lowest score (HealthBench's definition).
/// Scores may be 0/1 (then it is the chance that all k samples are right, C(c, k) / C(n, k)) or real-valued
/// (criterion scores, which can be negative).
///
/// Computed from the sorted scores x₍₁₎ ≤ … ≤ x₍ₙ₎ as Σᵢ x₍ᵢ₎·C(n − i, k − 1) / C(n, k) (x₍ᵢ₎ is the minimum of
/// the subsets that hold it and only larger-ranked samples), with the weights formed as running ratios so no
/// binomial coefficient is ever formed. Errors when `k` is 0 or above `n`, or a score is not finite.
pub fn worst_at_k(scores: &[f64], k: usize) -> Result<f64> {
    const WHAT: &str = "worst_at_k";
    check_finite(WHAT, scores)?;
    let n = scores.len();
    if k == 0 || k > n {
        return Err(StatsError::Invalid {
            what: WHAT,
            expected: format!("1 <= k <= n samples, got k={k}, n={n}"),
        });
    }
    let mut sorted = scores.to_vec();
    sorted.sort_by(f64::total_cmp);
    Ok(expected_minimum(&sorted, k))
}

/// Σᵢ x₍ᵢ₎·C(n − i, k − 1) / C(n, k) over ascending `sorted`; the weight of rank 1 is k / n and each next one
/// is the previous times (n − i − k + 1) / (n − i).
fn expected_minimum(sorted: &[f64], k: usize) -> f64 {
    let n = sorted.len();
    let mut weight = k as f64 / n as f64;
    let mut sum = 0.0;
    for (i, &x) in sorted.iter().enumerate().take(n - k + 1) {
        sum += weight * x;
        let rank = i + 1;
        weight *= (n - rank + 1 - k) as f64 / (n - rank) as f64;
    }
    sum
}

/// How the per-task values are averaged over tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Average {
    /// The plain mean (accuracy, and any score that stays in its range).
    #[default]
    Mean,
    /// The mean clipped to [0, 1] after averaging, in the point estimate and in every resample: HealthBench's
    /// aggregate of criterion scores, whose answers can score below 0.
    ClippedToUnit,
}

/// One task's scored samples, for [`worst_at_k_curve`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TaskSamples<'a> {
    /// The case the task belongs to: the bootstrap resamples whole cases.
    pub case: &'a str,
    /// The scores of its samples that were scored (errored and unscored samples left out).
    pub scores: &'a [f64],
}

/// Worst-at-k at one k over the tasks that have at least k scored samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorstAtK {
    pub k: usize,
    /// Tasks behind the value (those with at least `k` scored samples).
    pub tasks: usize,
    /// The mean over those tasks of [`worst_at_k`], with a case-clustered percentile bootstrap interval;
    /// `estimate.n` counts all the tasks given.
    pub estimate: Estimate,
}

/// The worst-at-k curve for k = 1 up to the most samples any task has: at each k, the average over the tasks
/// with at least k scored samples of their [`worst_at_k`], with a bootstrap interval that resamples whole cases
/// (all the tasks of a drawn case come together), every k on the same resamples so the curve's intervals are
/// consistent with one another. At k = 1 it is the mean score. A resample holding no task with k samples is
/// counted in that k's `undefined_resamples`.
///
/// When every task has the same number of samples, each k's estimate is bit for bit what
/// [`crate::bootstrap_mean`] gives on the tasks' worst-at-k values with clusters by case and the same `cfg`
/// (with [`Average::Mean`]). Tasks without any scored sample are skipped. Errors when no task has a scored sample
/// or a score is not finite.
pub fn worst_at_k_curve(
    tasks: &[TaskSamples<'_>],
    average: Average,
    cfg: &BootstrapConfig,
) -> Result<Vec<WorstAtK>> {
    let tasks: Vec<&TaskSamples> = tasks.iter().filter(|t| !t.scores.is_empty()).collect();
    let max_n = tasks
        .iter()
        .map(|t| t.scores.len())
        .max()
        .ok_or(StatsError::TooFew {
            what: "worst_at_k_curve tasks with a scored sample",
            min: 1,
            got: 0,
        })?;
    // values[k - 1][t]: task t's worst-at-k, None when it has fewer than k samples.
    let mut values = vec![vec![None; tasks.len()]; max_n];
    for (t, task) in tasks.iter().enumerate() {
        check_finite("worst_at_k_curve scores", task.scores)?;
        let mut sorted = task.scores.to_vec();
        sorted.sort_by(f64::total_cmp);
        for k in 1..=sorted.len() {
            values[k - 1][t] = Some(expected_minimum(&sorted, k));
        }
    }
    let cases: Vec<&str> = tasks.iter().map(|t| t.case).collect();
    let design = Design::clusters_by(&cases);
    let estimates = bootstrap_many(&design, cfg, max_n, |idx| {
        values
            .iter()
            .map(|at_k| aggregate(idx.iter().filter_map(|&t| at_k[t]), average))
            .collect()
    })?;
    Ok(estimates
        .into_iter()
        .zip(&values)
        .enumerate()
        .map(|(i, (estimate, at_k))| WorstAtK {
            k: i + 1,
            tasks: at_k.iter().flatten().count(),
            estimate,
        })
        .collect())
}

/// The mean of the values in order (the same additions as [`crate::bootstrap_mean`]), clipped if asked;
/// `None` when there are none.
fn aggregate(values: impl Iterator<Item = f64>, average: Average) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    let m = (n > 0).then(|| sum / n as f64)?;
    Some(match average {
        Average::Mean => m,
        Average::ClippedToUnit => m.clamp(0.0, 1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The mean over every k-subset (enumerated as bitmasks) of its minimum.
    fn brute_force(scores: &[f64], k: usize) -> f64 {
        let n = scores.len();
        let (mut sum, mut count) = (0.0, 0u64);
        for mask in 0u32..(1 << n) {
            if mask.count_ones() as usize == k {
                let min = (0..n)
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| scores[i])
                    .fold(f64::INFINITY, f64::min);
                sum += min;
                count += 1;
            }
        }
        sum / count as f64
    }

    #[test]
    fn equals_the_mean_minimum_over_every_k_subset() {
        let sets: [&[f64]; 5] = [
            &[1.0, 0.0, 1.0, 1.0, 0.0],
            &[0.5, -0.25, 0.75, 0.75, 1.0, 0.0, 0.3],
            &[0.2],
            &[1.0; 6],
            &[
                0.9, 0.1, 0.4, 0.4, 0.4, -1.0, 0.8, 0.6, 0.55, 0.7, 0.3, 0.05,
            ],
        ];
        for scores in sets {
            for k in 1..=scores.len() {
                let got = worst_at_k(scores, k).unwrap();
                let want = brute_force(scores, k);
                assert!(
                    (got - want).abs() < 1e-12,
                    "{scores:?} k={k}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn zero_one_scores_give_the_chance_that_all_k_are_right() {
        // With c of n right, worst-at-k = C(c, k) / C(n, k) = 1 - pass@k of the wrong answers.
        for n in 1..=10usize {
            for c in 0..=n {
                let scores: Vec<f64> = (0..n).map(|i| f64::from(u8::from(i < c))).collect();
                for k in 1..=n {
                    let fail = crate::pass_at_k(n, n - c, k).unwrap();
                    let got = worst_at_k(&scores, k).unwrap();
                    assert!(
                        (got - (1.0 - fail)).abs() < 1e-12,
                        "n={n} c={c} k={k}: {got}"
                    );
                }
            }
        }
    }

    #[test]
    fn k_one_is_the_mean_and_k_n_the_minimum() {
        let s = [0.3, 0.9, -0.2, 0.6];
        assert!((worst_at_k(&s, 1).unwrap() - 0.4).abs() < 1e-15);
        assert_eq!(worst_at_k(&s, 4).unwrap(), -0.2);
        assert!(worst_at_k(&s, 0).is_err());
        assert!(worst_at_k(&s, 5).is_err());
        assert!(worst_at_k(&[0.1, f64::NAN], 1).is_err());
    }

    fn cfg() -> BootstrapConfig {
        BootstrapConfig {
            resamples: 500,
            level: 0.95,
            seed: 5,
        }
    }

    #[test]
    fn the_curve_equals_bootstrap_mean_per_k_when_tasks_have_equal_samples() {
        let scores: Vec<Vec<f64>> = (0..30)
            .map(|t| {
                (0..4)
                    .map(|s| f64::from(u8::from((t * 7 + s * 3) % 5 < 3)))
                    .collect()
            })
            .collect();
        let cases: Vec<String> = (0..30).map(|t| format!("case{}", t / 3)).collect();
        let tasks: Vec<TaskSamples> = scores
            .iter()
            .zip(&cases)
            .map(|(s, c)| TaskSamples { case: c, scores: s })
            .collect();
        let curve = worst_at_k_curve(&tasks, Average::Mean, &cfg()).unwrap();
        assert_eq!(curve.len(), 4);
        let labels: Vec<&str> = cases.iter().map(String::as_str).collect();
        for point in &curve {
            let values: Vec<f64> = scores
                .iter()
                .map(|s| worst_at_k(s, point.k).unwrap())
                .collect();
            let alone =
                crate::bootstrap_mean(&values, &Design::clusters_by(&labels), &cfg()).unwrap();
            assert_eq!(point.estimate, alone, "k={}", point.k);
            assert_eq!(point.tasks, 30);
        }
        // Worst-at-k never rises with k.
        assert!(curve
            .windows(2)
            .all(|w| w[1].estimate.value <= w[0].estimate.value));
    }

    #[test]
    fn tasks_with_fewer_samples_leave_the_larger_k_and_clipping_holds_the_mean_in_range() {
        let a = [-0.5, -0.2, 0.1];
        let b = [0.4];
        let tasks = [
            TaskSamples {
                case: "x",
                scores: &a,
            },
            TaskSamples {
                case: "y",
                scores: &b,
            },
            TaskSamples {
                case: "z",
                scores: &[],
            },
        ];
        let curve = worst_at_k_curve(&tasks, Average::Mean, &cfg()).unwrap();
        assert_eq!(
            curve.iter().map(|p| p.tasks).collect::<Vec<_>>(),
            vec![2, 1, 1]
        );
        assert!((curve[0].estimate.value - (-0.2 + 0.4) / 2.0).abs() < 1e-12);
        assert!((curve[2].estimate.value + 0.5).abs() < 1e-12);
        // Resamples that draw case y twice have no task with 3 samples.
        assert!(curve[2].estimate.undefined_resamples > 0);
        let clipped = worst_at_k_curve(&tasks, Average::ClippedToUnit, &cfg()).unwrap();
        assert_eq!(clipped[2].estimate.value, 0.0);
        assert!(clipped
            .iter()
            .all(|p| p.estimate.ci_low >= 0.0 && p.estimate.ci_high <= 1.0));
        assert!(worst_at_k_curve(&tasks[2..], Average::Mean, &cfg()).is_err());
    }
}
