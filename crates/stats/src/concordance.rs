//! Prompt sensitivity: how much a model's score moves across prompt variants, and whether the models' ranking
//! survives a change of prompt.
//!
//! The same items (tasks, samples) are answered under every variant, so the intervals here resample *cases*
//! jointly: one draw of cases (with replacement) is applied to every variant, and to every model, at once. A
//! case's items are weighted by how often the case was drawn. This keeps the pairing between variants that makes
//! a spread of a few points meaningful, where independent per-variant intervals would swamp it.
//!
//! - [`kendall_w`]: Kendall's coefficient of concordance W over raters (variants) ranking objects (models), with
//!   the correction for ties; 1 when every variant orders the models alike, 0 when the orders cancel out.
//! - [`rank_flips`]: pairs of objects whose order reverses between some two raters.
//! - [`variant_spread`]: one model's score under each variant, their range (max − min) and standard deviation,
//!   each with a case-resampling interval.
//! - [`concordance`]: W over models × variants with the same interval, and the rank flips.

use serde::{Deserialize, Serialize};

use crate::bootstrap::{bootstrap, bootstrap_many, BootstrapConfig, Design};
use crate::{check_finite, CiMethod, Estimate, Result, StatsError};

/// Two scores closer than this (relative to the larger, or absolutely below 1) are tied: means of the same
/// 0/1 items summed in another order may differ in the last bits.
const TIE_TOLERANCE: f64 = 1e-12;

fn tied(a: f64, b: f64) -> bool {
    (a - b).abs() <= TIE_TOLERANCE * a.abs().max(b.abs()).max(1.0)
}

/// Ranks from 1 (lowest score) with tied scores (see [`TIE_TOLERANCE`]) sharing their average rank, and the
/// tie term `sum(t^3 - t)` over groups of `t` tied values.
fn ranks_with_ties(x: &[f64]) -> (Vec<f64>, f64) {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&i, &j| x[i].total_cmp(&x[j]));
    let mut ranks = vec![0.0; x.len()];
    let mut ties = 0.0;
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && tied(x[order[end]], x[order[start]]) {
            end += 1;
        }
        let rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        let t = (end - start) as f64;
        ties += t * t * t - t;
        start = end;
    }
    (ranks, ties)
}

fn check_matrix(what: &'static str, scores: &[Vec<f64>]) -> Result<(usize, usize)> {
    let m = scores.len();
    if m < 2 {
        return Err(StatsError::TooFew {
            what,
            min: 2,
            got: m,
        });
    }
    let n = scores[0].len();
    for (r, row) in scores.iter().enumerate() {
        if row.len() != n {
            return Err(StatsError::Invalid {
                what,
                expected: format!(
                    "a score for every object from every rater; rater 0 has {n}, rater {r} has {}",
                    row.len()
                ),
            });
        }
        check_finite(what, row)?;
    }
    if n < 2 {
        return Err(StatsError::TooFew {
            what,
            min: 2,
            got: n,
        });
    }
    Ok((m, n))
}

/// Kendall's W for `scores[rater][object]` (higher scores rank higher; the direction does not change W):
///
/// `W = 12 S / (m² (n³ − n) − m Σ T)`, where `S` is the sum of squared deviations of the objects' rank sums
/// from their mean `m (n + 1) / 2`, `m` raters, `n` objects, and `T = Σ (t³ − t)` over each rater's groups of
/// `t` tied objects (Kendall and Babington Smith 1939; the ties correction as in Siegel and Castellan 1988).
/// Needs two raters and two objects; undefined when every rater ties every object.
pub fn kendall_w(scores: &[Vec<f64>]) -> Result<f64> {
    const WHAT: &str = "kendall_w";
    let (m, n) = check_matrix(WHAT, scores)?;
    let mut sums = vec![0.0; n];
    let mut ties = 0.0;
    for row in scores {
        let (ranks, t) = ranks_with_ties(row);
        for (s, r) in sums.iter_mut().zip(ranks) {
            *s += r;
        }
        ties += t;
    }
    let (mf, nf) = (m as f64, n as f64);
    let mean = mf * (nf + 1.0) / 2.0;
    let s: f64 = sums.iter().map(|r| (r - mean) * (r - mean)).sum();
    let denominator = mf * mf * (nf * nf * nf - nf) - mf * ties;
    if denominator <= 0.0 {
        return Err(StatsError::Undefined {
            what: WHAT,
            why: "every rater ties every object",
        });
    }
    Ok((12.0 * s / denominator).clamp(0.0, 1.0))
}

/// Two objects whose order reverses between raters: `a` scores strictly above `b` under the raters in
/// `a_ahead` and strictly below under those in `b_ahead` (ties count for neither).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankFlip {
    pub a: usize,
    pub b: usize,
    pub a_ahead: Vec<usize>,
    pub b_ahead: Vec<usize>,
}

/// Every pair of objects (`a < b`) of `scores[rater][object]` that some rater puts strictly in one order and
/// another strictly in the other, in pair order. Rows must have equal lengths (checked as for [`kendall_w`],
/// except that one rater or one object is allowed and gives no flip).
pub fn rank_flips(scores: &[Vec<f64>]) -> Result<Vec<RankFlip>> {
    const WHAT: &str = "rank_flips";
    let n = scores.first().map_or(0, Vec::len);
    for (r, row) in scores.iter().enumerate() {
        if row.len() != n {
            return Err(StatsError::Invalid {
                what: WHAT,
                expected: format!(
                    "a score for every object from every rater; rater 0 has {n}, rater {r} has {}",
                    row.len()
                ),
            });
        }
        check_finite(WHAT, row)?;
    }
    let mut flips = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            let ahead = |first: usize, second: usize| -> Vec<usize> {
                scores
                    .iter()
                    .enumerate()
                    .filter(|(_, row)| row[first] > row[second] && !tied(row[first], row[second]))
                    .map(|(r, _)| r)
                    .collect()
            };
            let (a_ahead, b_ahead) = (ahead(a, b), ahead(b, a));
            if !a_ahead.is_empty() && !b_ahead.is_empty() {
                flips.push(RankFlip {
                    a,
                    b,
                    a_ahead,
                    b_ahead,
                });
            }
        }
    }
    Ok(flips)
}

/// Item scores of one model under one variant (0/1 correctness, per-task pass@1, ...), each item with the
/// index of its case in `0..n_cases`, the case numbering shared by every variant and model of one analysis.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CaseScores {
    pub values: Vec<f64>,
    pub cases: Vec<usize>,
}

impl CaseScores {
    pub fn push(&mut self, case: usize, value: f64) {
        self.cases.push(case);
        self.values.push(value);
    }
}

/// Per-case sums and counts of one cell, so a resample's mean is `Σ w_c sum_c / Σ w_c count_c`.
struct CaseSums {
    sums: Vec<f64>,
    counts: Vec<f64>,
}

impl CaseSums {
    fn new(what: &'static str, s: &CaseScores, n_cases: usize) -> Result<CaseSums> {
        if s.values.len() != s.cases.len() {
            return Err(StatsError::LengthMismatch {
                what,
                left: s.values.len(),
                right: s.cases.len(),
            });
        }
        if s.values.is_empty() {
            return Err(StatsError::TooFew {
                what,
                min: 1,
                got: 0,
            });
        }
        check_finite(what, &s.values)?;
        let mut sums = vec![0.0; n_cases];
        let mut counts = vec![0.0; n_cases];
        for (&c, &v) in s.cases.iter().zip(&s.values) {
            if c >= n_cases {
                return Err(StatsError::Invalid {
                    what,
                    expected: format!("case indices below n_cases = {n_cases}, got {c}"),
                });
            }
            sums[c] += v;
            counts[c] += 1.0;
        }
        Ok(CaseSums { sums, counts })
    }

    /// The mean with case weights `w` (how often each case was drawn); `None` when no drawn case has an item.
    fn mean(&self, w: &[f64]) -> Option<f64> {
        let (mut s, mut n) = (0.0, 0.0);
        for ((sum, count), wc) in self.sums.iter().zip(&self.counts).zip(w) {
            if *wc > 0.0 {
                s += wc * sum;
                n += wc * count;
            }
        }
        (n > 0.0).then(|| s / n)
    }
}

/// How often each case is in a draw of case indices.
fn weights(idx: &[usize], n_cases: usize, w: &mut Vec<f64>) {
    w.clear();
    w.resize(n_cases, 0.0);
    for &c in idx {
        w[c] += 1.0;
    }
}

/// Range and sample standard deviation (n − 1) of a model's per-variant scores.
fn range_sd(means: &[f64]) -> (f64, f64) {
    let max = means.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let min = means.iter().copied().fold(f64::INFINITY, f64::min);
    if max == min {
        // Exactly: the mean of k equal values need not equal them in the last bit.
        return (0.0, 0.0);
    }
    let k = means.len() as f64;
    let mean = means.iter().sum::<f64>() / k;
    let var = means.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (k - 1.0);
    (max - min, var.sqrt())
}

fn as_cluster_estimate(mut e: Estimate, n_cases: usize) -> Estimate {
    e.method = CiMethod::ClusterPercentileBootstrap;
    e.n = n_cases;
    e
}

/// One model's scores across prompt variants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VariantSpread {
    /// The mean item score under each variant, in the order given.
    pub scores: Vec<Estimate>,
    /// max − min of the per-variant means.
    pub range: Estimate,
    /// Sample standard deviation (n − 1 denominator) of the per-variant means.
    pub sd: Estimate,
}

/// The per-variant scores of one model (`variants[v]` its items under variant `v`), their range and standard
/// deviation, each with a percentile interval over resamples of the `n_cases` cases drawn jointly for every
/// variant. `n` in each estimate is the number of cases. Needs at least two variants.
pub fn variant_spread(
    variants: &[CaseScores],
    n_cases: usize,
    cfg: &BootstrapConfig,
) -> Result<VariantSpread> {
    const WHAT: &str = "variant_spread";
    if variants.len() < 2 {
        return Err(StatsError::TooFew {
            what: WHAT,
            min: 2,
            got: variants.len(),
        });
    }
    let cells = variants
        .iter()
        .map(|v| CaseSums::new(WHAT, v, n_cases))
        .collect::<Result<Vec<_>>>()?;
    let k = cells.len();
    let mut w = Vec::new();
    let mut estimates = bootstrap_many(&Design::units(n_cases), cfg, k + 2, |idx| {
        weights(idx, n_cases, &mut w);
        let means: Vec<Option<f64>> = cells.iter().map(|c| c.mean(&w)).collect();
        let (range, sd) = match means.iter().copied().collect::<Option<Vec<f64>>>() {
            Some(all) => {
                let (r, s) = range_sd(&all);
                (Some(r), Some(s))
            }
            None => (None, None),
        };
        means.into_iter().chain([range, sd]).collect()
    })?
    .into_iter()
    .map(|e| as_cluster_estimate(e, n_cases))
    .collect::<Vec<_>>();
    let sd = estimates.pop().expect("k + 2 estimates");
    let range = estimates.pop().expect("k + 2 estimates");
    Ok(VariantSpread {
        scores: estimates,
        range,
        sd,
    })
}

/// Whether models keep their order across prompt variants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Concordance {
    /// Kendall's W with variants as raters and models as the objects ranked, with a percentile interval over
    /// resamples of cases drawn jointly for every model and variant; `n` is the number of cases.
    pub w: Estimate,
    /// Pairs of models (indices into the models given) whose order reverses between variants (indices into
    /// the variants), from the point estimates.
    pub flips: Vec<RankFlip>,
    pub models: usize,
    pub variants: usize,
}

/// Kendall's W and rank flips of `cells[model][variant]`, each cell the model's items under that variant. Every
/// model needs the same number of variants (at least two), and there must be at least two models.
pub fn concordance(
    cells: &[Vec<CaseScores>],
    n_cases: usize,
    cfg: &BootstrapConfig,
) -> Result<Concordance> {
    const WHAT: &str = "concordance";
    if cells.len() < 2 {
        return Err(StatsError::TooFew {
            what: WHAT,
            min: 2,
            got: cells.len(),
        });
    }
    let variants = cells[0].len();
    let sums = cells
        .iter()
        .map(|row| {
            if row.len() != variants {
                return Err(StatsError::Invalid {
                    what: WHAT,
                    expected: format!(
                        "the same variants for every model; model 0 has {variants}, another has {}",
                        row.len()
                    ),
                });
            }
            row.iter()
                .map(|c| CaseSums::new(WHAT, c, n_cases))
                .collect::<Result<Vec<_>>>()
        })
        .collect::<Result<Vec<_>>>()?;
    // scores[variant][model]: variants rate models.
    let matrix = |w: &[f64]| -> Option<Vec<Vec<f64>>> {
        (0..variants)
            .map(|v| sums.iter().map(|row| row[v].mean(w)).collect())
            .collect()
    };
    let point = matrix(&vec![1.0; n_cases]).ok_or(StatsError::Undefined {
        what: WHAT,
        why: "a model has no item under a variant",
    })?;
    let flips = rank_flips(&point)?;
    let mut w = Vec::new();
    let estimate = bootstrap(&Design::units(n_cases), cfg, |idx| {
        weights(idx, n_cases, &mut w);
        matrix(&w).and_then(|m| kendall_w(&m).ok())
    })?;
    Ok(Concordance {
        w: as_cluster_estimate(estimate, n_cases),
        flips,
        models: cells.len(),
        variants,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BootstrapConfig {
        BootstrapConfig {
            resamples: 2_000,
            level: 0.95,
            seed: 23,
        }
    }

    #[test]
    fn perfect_agreement_and_perfect_reversal() {
        let same = vec![vec![0.1, 0.5, 0.9]; 4];
        assert!((kendall_w(&same).unwrap() - 1.0).abs() < 1e-15);
        // Two raters in opposite orders: rank sums are all equal, S = 0.
        let opposite = vec![vec![1.0, 2.0, 3.0], vec![3.0, 2.0, 1.0]];
        assert_eq!(kendall_w(&opposite).unwrap(), 0.0);
        let flips = rank_flips(&opposite).unwrap();
        assert_eq!(flips.len(), 3, "every pair reverses: {flips:?}");
        assert_eq!(
            flips[0],
            RankFlip {
                a: 0,
                b: 1,
                a_ahead: vec![1],
                b_ahead: vec![0]
            }
        );
        assert!(rank_flips(&same).unwrap().is_empty());
    }

    #[test]
    fn ties_are_corrected_and_total_ties_are_undefined() {
        // Worked by hand: ranks (2,1), (2,1), (2,1), (2,1), (1.5,1.5), (1,2): rank sums 10.5 and 7.5 around 9,
        // S = 4.5, one tied pair T = 6: W = 12 * 4.5 / (36 * 6 - 6 * 6) = 0.3.
        let m = vec![
            vec![1.0, 1.0 / 3.0],
            vec![1.0, 1.0 / 3.0],
            vec![1.0, 1.0 / 3.0],
            vec![1.0, 1.0 / 3.0],
            vec![1.0, 1.0],
            vec![0.0, 1.0 / 3.0],
        ];
        assert!((kendall_w(&m).unwrap() - 0.3).abs() < 1e-15);
        // The tie survives summation noise.
        let mut noisy = m.clone();
        noisy[4][1] = 0.1 + 0.2 + 0.7;
        assert_eq!(kendall_w(&noisy).unwrap(), kendall_w(&m).unwrap());
        assert!(kendall_w(&[vec![0.5, 0.5], vec![0.2, 0.2]]).is_err());
        assert!(kendall_w(&[vec![0.5, 0.6]]).is_err());
        assert!(kendall_w(&[vec![0.5], vec![0.6]]).is_err());
        assert!(kendall_w(&[vec![0.5, 0.6], vec![0.6]]).is_err());
        assert!(kendall_w(&[vec![0.5, f64::NAN], vec![0.6, 0.1]]).is_err());
    }

    /// 0/1 items: `right[c]` cases right out of `cases`, one item per case.
    fn items(right: usize, cases: usize) -> CaseScores {
        let mut s = CaseScores::default();
        for c in 0..cases {
            s.push(c, if c < right { 1.0 } else { 0.0 });
        }
        s
    }

    #[test]
    fn spread_of_identical_variants_is_zero_with_a_zero_interval() {
        let v = items(12, 20);
        let s = variant_spread(&[v.clone(), v.clone(), v], 20, &cfg()).unwrap();
        assert_eq!(s.scores.len(), 3);
        assert!((s.scores[0].value - 0.6).abs() < 1e-15);
        assert!(s.scores[0].ci_low < 0.6 && s.scores[0].ci_high > 0.6);
        // Joint resampling: the same cases under each variant give the same mean on every draw.
        assert_eq!(
            (s.range.value, s.range.ci_low, s.range.ci_high),
            (0.0, 0.0, 0.0)
        );
        assert_eq!((s.sd.value, s.sd.ci_high), (0.0, 0.0));
        assert_eq!(s.range.method, CiMethod::ClusterPercentileBootstrap);
        assert_eq!(s.range.n, 20);
    }

    #[test]
    fn spread_point_values_and_a_paired_interval() {
        // Variant 1 is right on two more cases than variant 0, on the same cases otherwise.
        let (a, b) = (items(10, 40), items(12, 40));
        let s = variant_spread(&[a, b], 40, &cfg()).unwrap();
        assert!((s.range.value - 0.05).abs() < 1e-15);
        assert!((s.sd.value - 0.05 / 2f64.sqrt()).abs() < 1e-15);
        assert!(s.range.ci_low <= s.range.value && s.range.value <= s.range.ci_high);
        // Jointly drawn, the range only moves with the draws of the two cases that differ (97.5th percentile
        // 5/40); variants resampled independently would put it near 0.3.
        assert!(s.range.ci_high <= 0.15, "{s:?}");
        // A case that is in one variant only (an errored item elsewhere) still counts where it is.
        let mut c = items(0, 3);
        c.values[0] = 1.0;
        let d = CaseScores {
            values: vec![0.0, 0.0],
            cases: vec![1, 2],
        };
        let s = variant_spread(&[c, d], 3, &cfg()).unwrap();
        assert!((s.scores[0].value - 1.0 / 3.0).abs() < 1e-15 && s.scores[1].value == 0.0);
        assert!(
            s.range.undefined_resamples > 0,
            "draws without case 1 or 2 leave variant 1 empty"
        );
    }

    #[test]
    fn spread_inputs_are_checked() {
        let v = items(1, 2);
        assert!(variant_spread(std::slice::from_ref(&v), 2, &cfg()).is_err());
        assert!(variant_spread(&[v.clone(), CaseScores::default()], 2, &cfg()).is_err());
        assert!(variant_spread(&[v.clone(), v.clone()], 1, &cfg()).is_err());
        let ragged = CaseScores {
            values: vec![1.0],
            cases: vec![0, 1],
        };
        assert!(variant_spread(&[v, ragged], 2, &cfg()).is_err());
    }

    #[test]
    fn concordance_finds_the_flip_and_bounds_w() {
        // Model 0 is far better than model 1 under variants 0 and 1 and far worse under variant 2.
        let cells = vec![
            vec![items(18, 20), items(17, 20), items(2, 20)],
            vec![items(5, 20), items(6, 20), items(16, 20)],
        ];
        let c = concordance(&cells, 20, &cfg()).unwrap();
        assert_eq!((c.models, c.variants), (2, 3));
        assert_eq!(
            c.flips,
            vec![RankFlip {
                a: 0,
                b: 1,
                a_ahead: vec![0, 1],
                b_ahead: vec![2]
            }]
        );
        // Rank sums 5 and 4 around 4.5: S = 0.5, W = 12 * 0.5 / (9 * 6) = 1/9.
        assert!((c.w.value - 1.0 / 9.0).abs() < 1e-15, "{c:?}");
        assert!(0.0 <= c.w.ci_low && c.w.ci_high <= 1.0);
        assert_eq!(c, concordance(&cells, 20, &cfg()).unwrap(), "seeded");
        assert!(concordance(&cells[..1], 20, &cfg()).is_err());
        let ragged = vec![cells[0].clone(), cells[1][..2].to_vec()];
        assert!(concordance(&ragged, 20, &cfg()).is_err());
    }
}
