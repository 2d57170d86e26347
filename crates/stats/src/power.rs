//! Power of a paired comparison of two runs on the same cases, the smallest difference it detects, and the
//! number of cases a target difference needs.
//!
//! # The method
//!
//! Two runs answer the same items (a task's sample *j* in run A is paired with sample *j* of the same task in
//! run B); `d = a − b` per item. The estimate compared is the mean difference d̂ over items, and the tests that
//! `nmb compare` reports resample or sum whole **cases**, so what decides power is how much d̂ varies from one
//! draw of cases to the next. With `K` cases, `m_k` items in case `k`, `D_k` the sum of `d` over case `k` and
//! `m̄` the mean of `m_k`,
//!
//! - the *per-case variance* σ²_case = Σ_k (D_k − d̂·m_k)² / ((K − 1)·m̄²), so that Var(d̂) ≈ σ²_case / K (the
//!   linearised variance of a ratio estimator; with equal `m_k` it is the variance of the case means of `d`);
//! - it decomposes as σ²_case = σ²_d · DE / m̄, where σ²_d = σ²_A + σ²_B − 2ρ·σ_A·σ_B is the per-answer
//!   variance of the difference (from the runs' own variances and the correlation ρ between paired answers) and
//!   DE is the *design effect* of answers clustered in cases (1 when a case's answers are independent; up to
//!   `m̄` when they always agree).
//!
//! Power then follows the normal approximation of the test statistic, at two-sided level α with
//! z = Φ⁻¹(1 − α/2), standard error se = sqrt(σ²_case / K) and a true difference δ:
//!
//! - **paired bootstrap** ([`PairedTest::Bootstrap`], the A − B interval and "bootstrap p" of `nmb compare`):
//!   the test rejects when |d̂| / se > z, so power = Φ(|δ|/se − z) + Φ(−|δ|/se − z); the smallest detectable
//!   difference at power π is (z + z_π)·se with z_π = Φ⁻¹(π), and a target δ needs
//!   K = ⌈(z + z_π)² σ²_case / δ²⌉ cases;
//! - **cluster-adjusted McNemar** ([`PairedTest::ClusteredMcNemar`], Durkalski 2003, for 0/1 scores): its
//!   statistic Σ_k D_k / sqrt(Σ_k D_k²) divides by an *uncentred* sum of squares, which grows with the effect
//!   itself, so with r = δ/σ_case and c = mean(m_k²)/m̄² (1 for equal cases), power =
//!   Φ(√K·|r| − z·sqrt(1 + c·r²)) + Φ(−√K·|r| − z·sqrt(1 + c·r²)): slightly below the bootstrap's at the same
//!   δ. The detectable difference and the cases needed solve the same equation for r and for K.
//!
//! # Assumptions and what it ignores
//!
//! - The variance measured on the runs at hand holds for the comparison being planned: the same kind of cases,
//!   the same tasks per case and samples per task, and a difference small enough not to change the variance
//!   (for 0/1 scores the variance p(1 − p) moves with the accuracy itself).
//! - The normal approximation: the bootstrap's resampled distribution and the McNemar χ² are treated as normal
//!   with the variance above. It ignores that the bootstrap's plug-in variance is (K − 1)/K of σ²_case / K and
//!   that σ²_case is itself estimated (a t rather than a normal); both are under a point of power at 100 cases
//!   and grow as K shrinks. It also ignores the Monte Carlo error of a finite number of resamples.
//! - The other tail is dropped in the closed forms for the detectable difference and the cases needed (its
//!   share is below Φ(−2z), about 2·10⁻⁶ at α = 0.05), which is why power must be at least 0.5 there.
//! - Cases are a random sample from a larger population of cases; errored or unpaired answers are left out
//!   before the variance is measured, as `nmb compare` leaves them out.
//! - [`PairedVariance::from_one_run`] has only one run: it takes run B's variance and design effect to be run
//!   A's and the correlation between paired answers from the caller.
//!
//! The variance components (between cases, between tasks of a case, between samples of a task) are estimated
//! by the method of moments, exact in expectation for balanced designs and approximate otherwise; they only
//! serve [`PairedVariance::case_variance_for`], which predicts σ²_case for other numbers of tasks per case or
//! samples per task. The power figures themselves use the measured σ²_case.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::proportion::normal_cdf as phi;
use crate::{check_finite, check_same_len, normal_quantile, Result, StatsError};

/// Which of `nmb compare`'s paired tests a power figure is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairedTest {
    /// The paired bootstrap of the mean difference resampling whole cases ([`crate::paired_bootstrap`] with
    /// clusters by case).
    #[default]
    Bootstrap,
    /// The cluster-adjusted McNemar test with cases as clusters ([`crate::mcnemar_clustered`]); 0/1 scores only.
    ClusteredMcNemar,
}

impl PairedTest {
    /// The test's name, for tables and notes.
    pub fn label(self) -> &'static str {
        match self {
            PairedTest::Bootstrap => "paired bootstrap resampling cases",
            PairedTest::ClusteredMcNemar => "cluster-adjusted McNemar (Durkalski 2003)",
        }
    }
}

/// Variance components of the per-item difference, by the method of moments; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VarianceComponents {
    /// Variance of the case-level part of the difference, held at 0 when the moments make it negative.
    pub between_cases: f64,
    /// Variance between tasks of one case; `None` when no case has two tasks.
    pub between_tasks: Option<f64>,
    /// Variance between samples of one task; `None` when no task has two samples.
    pub within_tasks: Option<f64>,
}

/// What the power of a paired comparison rests on, measured on two runs' paired answers (or on one run with an
/// assumed correlation). Serialisable, for reports and their JSON.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedVariance {
    /// Paired answers.
    pub items: usize,
    pub cases: usize,
    pub tasks: usize,
    /// Mean items per case (`items / cases`).
    pub items_per_case: f64,
    /// Mean tasks per case and samples per task.
    pub tasks_per_case: f64,
    pub samples_per_task: f64,
    /// mean(m_k²) / m̄² over cases: 1 when every case has the same number of items.
    pub case_size_spread: f64,
    pub mean_a: f64,
    pub mean_b: f64,
    /// Per-answer variances of each run's scores (divisor items − 1).
    pub var_a: f64,
    pub var_b: f64,
    /// Pearson correlation between A's and B's scores on the same item; `None` when either run is constant.
    pub correlation: Option<f64>,
    /// Per-answer variance of the difference a − b.
    pub var_diff: f64,
    /// σ²_case: Var(mean difference) ≈ `case_variance / cases`.
    pub case_variance: f64,
    /// `case_variance · items_per_case / var_diff`; `None` when the difference never varies.
    pub design_effect: Option<f64>,
    pub components: VarianceComponents,
}

/// One power analysis, ready for a report: the measured variance, the smallest difference the suite detects at
/// its own number of cases, and the cases a target difference needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerSummary {
    pub test: PairedTest,
    /// Two-sided level.
    pub alpha: f64,
    /// Power asked for, e.g. 0.8.
    pub power: f64,
    pub variance: PairedVariance,
    /// The smallest true difference in the mean score (in score units: 0.05 is 5 points of accuracy) detected
    /// with `power` at `alpha` with the measured number of cases.
    pub detectable_difference: f64,
    /// The target difference, when one was asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<f64>,
    /// Cases needed to detect `target` with `power` at `alpha`, at the measured tasks per case and samples per
    /// task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cases_needed: Option<usize>,
    /// The power the measured number of cases has against `target`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_at_target: Option<f64>,
}

/// The power analysis of `test` from `variance`: see the module documentation for the method.
pub fn power_summary(
    variance: &PairedVariance,
    test: PairedTest,
    alpha: f64,
    power: f64,
    target: Option<f64>,
) -> Result<PowerSummary> {
    let detectable_difference =
        variance.detectable_difference(test, variance.cases, alpha, power)?;
    let (cases_needed, power_at_target) = match target {
        Some(t) => (
            Some(variance.cases_needed(test, t, alpha, power)?),
            Some(variance.power(test, t, variance.cases, alpha)?),
        ),
        None => (None, None),
    };
    Ok(PowerSummary {
        test,
        alpha,
        power,
        variance: variance.clone(),
        detectable_difference,
        target,
        cases_needed,
        power_at_target,
    })
}

impl PairedVariance {
    /// Measures the variance from two runs' paired answers: `a[i]` and `b[i]` score the same item `i` (0/1 for
    /// accuracy, or a real-valued score), which belongs to case `cases[i]` and task `tasks[i]` (task labels are
    /// taken within their case). Needs at least two cases and finite scores.
    pub fn estimate(a: &[f64], b: &[f64], cases: &[&str], tasks: &[&str]) -> Result<Self> {
        const WHAT: &str = "paired variance";
        check_same_len(WHAT, a.len(), b.len())?;
        check_same_len(WHAT, a.len(), cases.len())?;
        check_same_len(WHAT, a.len(), tasks.len())?;
        check_finite("paired variance a", a)?;
        check_finite("paired variance b", b)?;
        let d: Vec<f64> = a.iter().zip(b).map(|(x, y)| x - y).collect();
        let layout = Layout::new(cases, tasks)?;
        let spread = layout.spread(&d);
        let (var_a, var_b) = (variance(a), variance(b));
        let correlation =
            (var_a > 0.0 && var_b > 0.0).then(|| covariance(a, b) / (var_a * var_b).sqrt());
        Ok(layout.summary(mean(a), mean(b), var_a, var_b, correlation, spread))
    }

    /// The variance of a comparison of run A (scores `a`, with their cases and tasks as in
    /// [`PairedVariance::estimate`]) with a run not made yet: run B is assumed to have A's per-answer variance
    /// and design effect, and its answers to correlate with A's by `correlation` (in [−1, 1]; runs of similar
    /// models on the same items typically correlate positively, which shrinks the variance of the difference).
    /// The design effect of a difference can be smaller than a single run's (difficulty both runs share cancels
    /// in it), so this errs on the side of a larger detectable difference.
    pub fn from_one_run(
        a: &[f64],
        cases: &[&str],
        tasks: &[&str],
        correlation: f64,
    ) -> Result<Self> {
        const WHAT: &str = "paired variance from one run";
        check_same_len(WHAT, a.len(), cases.len())?;
        check_same_len(WHAT, a.len(), tasks.len())?;
        check_finite(WHAT, a)?;
        if !(-1.0..=1.0).contains(&correlation) {
            return Err(StatsError::Invalid {
                what: WHAT,
                expected: format!("a correlation in [-1, 1], got {correlation}"),
            });
        }
        let layout = Layout::new(cases, tasks)?;
        let factor = 2.0 * (1.0 - correlation);
        let one = layout.spread(a);
        let spread = Spread {
            item_variance: one.item_variance * factor,
            case_variance: one.case_variance * factor,
            components: VarianceComponents {
                between_cases: one.components.between_cases * factor,
                between_tasks: one.components.between_tasks.map(|v| v * factor),
                within_tasks: one.components.within_tasks.map(|v| v * factor),
            },
        };
        let (m, v) = (mean(a), variance(a));
        Ok(layout.summary(m, m, v, v, Some(correlation), spread))
    }

    /// Standard error of the mean difference over `cases` cases like these.
    pub fn standard_error(&self, cases: usize) -> f64 {
        (self.case_variance / cases as f64).sqrt()
    }

    /// Predicted σ²_case for cases with `tasks_per_case` tasks of `samples_per_task` samples each, from the
    /// variance components: σ²_c + σ²_t / T + σ²_e / (n·T). `None` when the components needed were not
    /// measurable (a number of samples other than the measured one needs tasks with two or more samples; a
    /// number of tasks other than the measured one needs cases with two or more tasks).
    pub fn case_variance_for(&self, tasks_per_case: f64, samples_per_task: f64) -> Option<f64> {
        if !(tasks_per_case >= 1.0 && samples_per_task >= 1.0) {
            return None;
        }
        let c = &self.components;
        let same = |x: f64, y: f64| (x - y).abs() < 1e-9;
        let within = match c.within_tasks {
            Some(v) => v,
            None if same(samples_per_task, self.samples_per_task) => 0.0,
            None => return None,
        };
        let between = match c.between_tasks {
            Some(v) => v,
            None if same(tasks_per_case, self.tasks_per_case) => 0.0,
            None => return None,
        };
        Some(
            c.between_cases
                + between / tasks_per_case
                + within / (samples_per_task * tasks_per_case),
        )
    }

    /// Probability that `test` rejects "no difference" at two-sided level `alpha` with `cases` cases when the
    /// true difference in mean score is `difference`.
    pub fn power(
        &self,
        test: PairedTest,
        difference: f64,
        cases: usize,
        alpha: f64,
    ) -> Result<f64> {
        let z = z_alpha(alpha)?;
        check_cases(cases)?;
        check_difference(difference)?;
        let k = cases as f64;
        if self.case_variance == 0.0 {
            // Every case shows the same difference: any non-zero one is certain, none never rejects.
            return Ok(if difference == 0.0 { 0.0 } else { 1.0 });
        }
        let r = difference.abs() / self.case_variance.sqrt();
        let spread = match test {
            PairedTest::Bootstrap => 1.0,
            PairedTest::ClusteredMcNemar => (1.0 + self.case_size_spread * r * r).sqrt(),
        };
        Ok(phi(k.sqrt() * r - z * spread) + phi(-k.sqrt() * r - z * spread))
    }

    /// The smallest true difference `test` detects with probability `power` (at least 0.5) at two-sided
    /// level `alpha` with `cases` cases. Errors when no difference is detectable that often (the McNemar test with
    /// very few cases).
    pub fn detectable_difference(
        &self,
        test: PairedTest,
        cases: usize,
        alpha: f64,
        power: f64,
    ) -> Result<f64> {
        let (z, zp) = (z_alpha(alpha)?, z_power(power)?);
        check_cases(cases)?;
        let (k, sd) = (cases as f64, self.case_variance.sqrt());
        match test {
            PairedTest::Bootstrap => Ok((z + zp) * sd / k.sqrt()),
            PairedTest::ClusteredMcNemar => {
                // √K·r − z·sqrt(1 + c·r²) = z_π, a quadratic in r.
                let c = self.case_size_spread;
                let denominator = k - c * z * z;
                if denominator <= 0.0 {
                    return Err(StatsError::Undefined {
                        what: "detectable difference",
                        why: "the cluster-adjusted McNemar test cannot reach that power with so few cases",
                    });
                }
                let r = (k.sqrt() * zp + z * (k + c * (zp * zp - z * z)).sqrt()) / denominator;
                Ok(r * sd)
            }
        }
    }

    /// Cases (of the measured tasks per case and samples per task) that `test` needs to detect a true
    /// difference `difference` with probability `power` (at least 0.5) at two-sided level `alpha`; at least 2.
    pub fn cases_needed(
        &self,
        test: PairedTest,
        difference: f64,
        alpha: f64,
        power: f64,
    ) -> Result<usize> {
        let (z, zp) = (z_alpha(alpha)?, z_power(power)?);
        check_difference(difference)?;
        if difference == 0.0 {
            return Err(StatsError::Invalid {
                what: "cases needed",
                expected: "a non-zero target difference".into(),
            });
        }
        let r = difference.abs() / self.case_variance.sqrt();
        let root_k = match test {
            PairedTest::Bootstrap => (z + zp) / r,
            PairedTest::ClusteredMcNemar => {
                (zp + z * (1.0 + self.case_size_spread * r * r).sqrt()) / r
            }
        };
        let k = (root_k * root_k).ceil();
        Ok(if k.is_finite() {
            (k as usize).max(2)
        } else {
            2
        })
    }
}

/// Which items belong to which case and task.
struct Layout {
    /// Per case, its tasks; per task, its items.
    cases: Vec<Vec<Vec<usize>>>,
    items: usize,
}

/// The spread of one per-item quantity over the layout.
struct Spread {
    item_variance: f64,
    case_variance: f64,
    components: VarianceComponents,
}

impl Layout {
    fn new(cases: &[&str], tasks: &[&str]) -> Result<Self> {
        let mut by_case: BTreeMap<&str, BTreeMap<&str, Vec<usize>>> = BTreeMap::new();
        for (i, (c, t)) in cases.iter().zip(tasks).enumerate() {
            by_case.entry(c).or_default().entry(t).or_default().push(i);
        }
        if by_case.len() < 2 {
            return Err(StatsError::TooFew {
                what: "paired variance cases",
                min: 2,
                got: by_case.len(),
            });
        }
        Ok(Layout {
            cases: by_case
                .into_values()
                .map(|t| t.into_values().collect())
                .collect(),
            items: cases.len(),
        })
    }

    fn tasks(&self) -> usize {
        self.cases.iter().map(Vec::len).sum()
    }

    fn spread(&self, x: &[f64]) -> Spread {
        let k = self.cases.len() as f64;
        let m_bar = self.items as f64 / k;
        let total = mean(x);
        let case_variance = self
            .cases
            .iter()
            .map(|tasks| {
                let (sum, m) = tasks
                    .iter()
                    .flatten()
                    .fold((0.0, 0.0), |(s, m), &i| (s + x[i], m + 1.0));
                ((sum - total * m) / m_bar).powi(2)
            })
            .sum::<f64>()
            / (k - 1.0);
        let within = pooled(
            self.cases
                .iter()
                .flatten()
                .map(|items| items.iter().map(|&i| x[i]).collect()),
        );
        let between_means = pooled(self.cases.iter().map(|tasks| {
            tasks
                .iter()
                .map(|items| items.iter().map(|&i| x[i]).sum::<f64>() / items.len() as f64)
                .collect()
        }));
        let inverse_n = self
            .cases
            .iter()
            .flatten()
            .map(|items| 1.0 / items.len() as f64)
            .sum::<f64>()
            / self.tasks() as f64;
        let between_tasks = between_means.map(|v| (v - within.unwrap_or(0.0) * inverse_n).max(0.0));
        let t_bar = self.tasks() as f64 / k;
        let n_bar = self.items as f64 / self.tasks() as f64;
        let between_cases = (case_variance
            - between_tasks.unwrap_or(0.0) / t_bar
            - within.unwrap_or(0.0) / (n_bar * t_bar))
            .max(0.0);
        Spread {
            item_variance: variance(x),
            case_variance,
            components: VarianceComponents {
                between_cases,
                between_tasks,
                within_tasks: within,
            },
        }
    }

    fn summary(
        &self,
        mean_a: f64,
        mean_b: f64,
        var_a: f64,
        var_b: f64,
        correlation: Option<f64>,
        spread: Spread,
    ) -> PairedVariance {
        let (k, tasks) = (self.cases.len(), self.tasks());
        let m_bar = self.items as f64 / k as f64;
        let m_square = self
            .cases
            .iter()
            .map(|t| t.iter().map(Vec::len).sum::<usize>().pow(2) as f64)
            .sum::<f64>()
            / k as f64;
        PairedVariance {
            items: self.items,
            cases: k,
            tasks,
            items_per_case: m_bar,
            tasks_per_case: tasks as f64 / k as f64,
            samples_per_task: self.items as f64 / tasks as f64,
            case_size_spread: m_square / (m_bar * m_bar),
            mean_a,
            mean_b,
            var_a,
            var_b,
            correlation,
            var_diff: spread.item_variance,
            case_variance: spread.case_variance,
            design_effect: (spread.item_variance > 0.0)
                .then(|| spread.case_variance * m_bar / spread.item_variance),
            components: spread.components,
        }
    }
}

/// The pooled within-group variance Σ_g Σ_i (x − x̄_g)² / Σ_g (n_g − 1) over groups of two or more values;
/// `None` when no group has two.
fn pooled(groups: impl Iterator<Item = Vec<f64>>) -> Option<f64> {
    let (mut squares, mut df) = (0.0, 0usize);
    for g in groups.filter(|g| g.len() >= 2) {
        let m = mean(&g);
        squares += g.iter().map(|v| (v - m).powi(2)).sum::<f64>();
        df += g.len() - 1;
    }
    (df > 0).then(|| squares / df as f64)
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

/// Sample variance (divisor n − 1); 0 for fewer than two values.
fn variance(x: &[f64]) -> f64 {
    covariance(x, x)
}

fn covariance(x: &[f64], y: &[f64]) -> f64 {
    if x.len() < 2 {
        return 0.0;
    }
    let (mx, my) = (mean(x), mean(y));
    x.iter()
        .zip(y)
        .map(|(a, b)| (a - mx) * (b - my))
        .sum::<f64>()
        / (x.len() - 1) as f64
}

fn z_alpha(alpha: f64) -> Result<f64> {
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(StatsError::Invalid {
            what: "power analysis alpha",
            expected: format!("a level strictly between 0 and 1, got {alpha}"),
        });
    }
    normal_quantile(1.0 - alpha / 2.0)
}

fn z_power(power: f64) -> Result<f64> {
    if !(0.5..1.0).contains(&power) {
        return Err(StatsError::Invalid {
            what: "power analysis power",
            expected: format!("a power in [0.5, 1), got {power}"),
        });
    }
    normal_quantile(power)
}

fn check_cases(cases: usize) -> Result<()> {
    if cases < 2 {
        return Err(StatsError::TooFew {
            what: "power analysis cases",
            min: 2,
            got: cases,
        });
    }
    Ok(())
}

fn check_difference(difference: f64) -> Result<()> {
    if !difference.is_finite() {
        return Err(StatsError::NonFinite {
            what: "power analysis difference",
            index: 0,
            value: difference,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Draw;

    /// Labels for `cases` cases of `tasks` tasks of `samples` samples, in that nesting order.
    fn layout(cases: usize, tasks: usize, samples: usize) -> (Vec<String>, Vec<String>) {
        let n = cases * tasks * samples;
        (
            (0..n)
                .map(|i| format!("c{}", i / (tasks * samples)))
                .collect(),
            (0..n)
                .map(|i| format!("t{}", i / samples % tasks))
                .collect(),
        )
    }

    fn strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    /// A standard normal from the crate's stream (sum of 12 uniforms, minus 6: close enough for moments).
    fn normal(d: &mut Draw) -> f64 {
        (0..12)
            .map(|_| d.below(1 << 30) as f64 / (1u64 << 30) as f64)
            .sum::<f64>()
            - 6.0
    }

    #[test]
    fn case_variance_is_the_variance_of_case_means_and_the_design_effect_reads_the_clustering() {
        let (c, t) = layout(40, 2, 3);
        let (c, t) = (strs(&c), strs(&t));
        // Every answer of a case is the same: the difference varies only between cases.
        let a: Vec<f64> = (0..240)
            .map(|i| f64::from(u8::from((i / 6) % 3 == 0)))
            .collect();
        let b = vec![0.0; 240];
        let v = PairedVariance::estimate(&a, &b, &c, &t).unwrap();
        let means: Vec<f64> = (0..40).map(|k| a[k * 6]).collect();
        assert!((v.case_variance - variance(&means)).abs() < 1e-12, "{v:?}");
        assert!((v.design_effect.unwrap() - 6.0 * variance(&means) / variance(&a)).abs() < 1e-12);
        assert!(v.design_effect.unwrap() > 5.5, "{v:?}");
        assert_eq!((v.items, v.cases, v.tasks), (240, 40, 80));
        assert_eq!(
            (v.tasks_per_case, v.samples_per_task, v.case_size_spread),
            (2.0, 3.0, 1.0)
        );
        assert_eq!(v.correlation, None);
        // Answers independent of their case: a design effect near 1.
        let mut d = Draw::new(4);
        let a: Vec<f64> = (0..2_400).map(|_| d.below(2) as f64).collect();
        let b: Vec<f64> = (0..2_400).map(|_| d.below(2) as f64).collect();
        let (c, t) = layout(400, 2, 3);
        let v = PairedVariance::estimate(&a, &b, &strs(&c), &strs(&t)).unwrap();
        assert!((v.design_effect.unwrap() - 1.0).abs() < 0.2, "{v:?}");
        assert!(v.correlation.unwrap().abs() < 0.1, "{v:?}");
    }

    #[test]
    fn components_recover_a_balanced_design_and_predict_other_designs() {
        // d = case effect (sd 0.6) + task effect (sd 0.4) + sample noise (sd 0.8).
        let (cases, tasks, samples) = (600, 3, 4);
        let mut d = Draw::new(9);
        let mut diff = Vec::new();
        for _ in 0..cases {
            let c = 0.6 * normal(&mut d);
            for _ in 0..tasks {
                let t = 0.4 * normal(&mut d);
                for _ in 0..samples {
                    diff.push(c + t + 0.8 * normal(&mut d));
                }
            }
        }
        let zeros = vec![0.0; diff.len()];
        let (cl, tl) = layout(cases, tasks, samples);
        let v = PairedVariance::estimate(&diff, &zeros, &strs(&cl), &strs(&tl)).unwrap();
        let c = v.components;
        let near = |got: f64, want: f64| (got / want - 1.0).abs() < 0.2;
        assert!(near(c.between_cases, 0.36), "{c:?}");
        assert!(near(c.between_tasks.unwrap(), 0.16), "{c:?}");
        assert!(near(c.within_tasks.unwrap(), 0.64), "{c:?}");
        // The measured design is reproduced from its components.
        let same = v.case_variance_for(3.0, 4.0).unwrap();
        assert!(
            (same / v.case_variance - 1.0).abs() < 1e-9,
            "{same} vs {}",
            v.case_variance
        );
        let more = v.case_variance_for(3.0, 16.0).unwrap();
        let want =
            c.between_cases + c.between_tasks.unwrap() / 3.0 + c.within_tasks.unwrap() / 48.0;
        assert!((more - want).abs() < 1e-12 && more < same);
    }

    fn example() -> PairedVariance {
        let (c, t) = layout(120, 2, 3);
        let mut d = Draw::new(2);
        let a: Vec<f64> = (0..720)
            .map(|i| f64::from(u8::from(d.below(10) < 6 + (i / 6) % 3)))
            .collect();
        let b: Vec<f64> = (0..720)
            .map(|i| f64::from(u8::from(d.below(10) < 5 + (i / 6) % 3)))
            .collect();
        PairedVariance::estimate(&a, &b, &strs(&c), &strs(&t)).unwrap()
    }

    #[test]
    fn power_detectable_difference_and_cases_needed_agree_with_one_another() {
        let v = example();
        for test in [PairedTest::Bootstrap, PairedTest::ClusteredMcNemar] {
            let at_zero = v.power(test, 0.0, 120, 0.05).unwrap();
            // statrs's erfc is good to about 1e-11 relative here.
            assert!((at_zero - 0.05).abs() < 1e-9, "{test:?}: {at_zero}");
            let mde = v.detectable_difference(test, 120, 0.05, 0.8).unwrap();
            assert!(
                (v.power(test, mde, 120, 0.05).unwrap() - 0.8).abs() < 1e-5,
                "{test:?}"
            );
            assert!((v.power(test, -mde, 120, 0.05).unwrap() - 0.8).abs() < 1e-5);
            let needed = v.cases_needed(test, mde, 0.05, 0.8).unwrap();
            assert!(needed == 120 || needed == 121, "{test:?}: {needed}");
            // Four times the cases halve the detectable difference (exactly for the bootstrap).
            let quarter = v.detectable_difference(test, 480, 0.05, 0.8).unwrap();
            assert!(
                (quarter / mde - 0.5).abs() < 0.02,
                "{test:?}: {quarter} vs {mde}"
            );
            let stricter = v.detectable_difference(test, 120, 0.01, 0.9).unwrap();
            assert!(stricter > mde);
        }
        let boot = v
            .detectable_difference(PairedTest::Bootstrap, 120, 0.05, 0.8)
            .unwrap();
        let want = (1.959_963_984_540_054 + 0.841_621_233_572_914_3) * v.standard_error(120);
        assert!((boot - want).abs() < 1e-12);
        // McNemar's uncentred variance makes it a little less powerful.
        let mcnemar = v
            .detectable_difference(PairedTest::ClusteredMcNemar, 120, 0.05, 0.8)
            .unwrap();
        assert!(
            mcnemar > boot && mcnemar < 1.05 * boot,
            "{mcnemar} vs {boot}"
        );
    }

    #[test]
    fn one_run_with_an_assumed_correlation() {
        let (c, t) = layout(50, 2, 2);
        let a: Vec<f64> = (0..200).map(|i| f64::from(u8::from(i % 3 == 0))).collect();
        let v = PairedVariance::from_one_run(&a, &strs(&c), &strs(&t), 0.5).unwrap();
        assert!((v.var_diff - variance(&a)).abs() < 1e-12);
        assert_eq!((v.mean_a, v.correlation), (v.mean_b, Some(0.5)));
        let independent = PairedVariance::from_one_run(&a, &strs(&c), &strs(&t), 0.0).unwrap();
        assert!((independent.case_variance / v.case_variance - 2.0).abs() < 1e-12);
        assert!(PairedVariance::from_one_run(&a, &strs(&c), &strs(&t), 1.5).is_err());
    }

    #[test]
    fn summary_and_bad_arguments() {
        let v = example();
        let s = power_summary(&v, PairedTest::Bootstrap, 0.05, 0.8, Some(0.05)).unwrap();
        assert_eq!(s.variance, v);
        assert!(s.cases_needed.unwrap() >= 2 && s.power_at_target.unwrap() > 0.05);
        let none = power_summary(&v, PairedTest::Bootstrap, 0.05, 0.8, None).unwrap();
        assert_eq!((none.cases_needed, none.power_at_target), (None, None));
        assert!(v.power(PairedTest::Bootstrap, 0.1, 120, 1.0).is_err());
        assert!(v
            .detectable_difference(PairedTest::Bootstrap, 120, 0.05, 0.3)
            .is_err());
        assert!(v
            .detectable_difference(PairedTest::Bootstrap, 1, 0.05, 0.8)
            .is_err());
        assert!(v
            .detectable_difference(PairedTest::ClusteredMcNemar, 3, 0.05, 0.8)
            .is_err());
        assert!(v
            .cases_needed(PairedTest::Bootstrap, 0.0, 0.05, 0.8)
            .is_err());
        assert!(v.power(PairedTest::Bootstrap, f64::NAN, 120, 0.05).is_err());
        let one_case = PairedVariance::estimate(&[1.0, 0.0], &[0.0, 0.0], &["c", "c"], &["t", "u"]);
        assert!(matches!(one_case, Err(StatsError::TooFew { got: 1, .. })));
        assert!(PairedVariance::estimate(&[1.0], &[0.0, 1.0], &["c"], &["t"]).is_err());
    }
}
