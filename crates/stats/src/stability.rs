//! How steady a judge is when asked the same question again, and how its scores lean: test–retest agreement
//! between a judge's repeats, the slope of its score on answer length at a fixed clinician grade, and the gap
//! in its residual against clinicians between two groups of answers (its own family's and the others').
//!
//! Each statistic comes with a percentile bootstrap interval over the caller's [`Design`] (items, or the cases
//! that hold them), so the caller decides what is resampled.

use std::collections::BTreeMap;

use crate::agreement::icc_raw;
use crate::bootstrap::{bootstrap, bootstrap_many, BootstrapConfig, Design};
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, FisherSnedecor};

use crate::{check_finite, check_same_len, CiMethod, Estimate, Result, StatsError};

/// Test–retest ICC of one judge: `repeats[i][r]` is its score on item `i` at repeat `r` (repeat `r` used the
/// same seed on every item). ICC(2,1), two-way random effects with absolute agreement, because a seed slot is
/// the same for every item and so could act like a rater with its own offset; absolute agreement counts such an
/// offset as instability rather than forgiving it (ICC(3,1) would). With no offset it estimates ICC(1,1), the
/// share of score variance that lies between items: `τ² / (τ² + σ²)` for item effects of variance `τ²` and
/// repeat noise `σ²`.
///
/// The interval is McGraw & Wong's F interval at `level`, not a bootstrap: in simulations with known truth the
/// percentile bootstrap over items covered the true ICC in about 92% of runs at the 95% level, the F interval
/// in about 95%.
///
/// A judge whose repeats always agree (the common case at temperature 0) has no variance within items: its ICC
/// is exactly 1, and the interval is [1, 1], the limit of McGraw & Wong's bounds as the error mean square goes
/// to 0 (their formula itself divides by 1 − ICC and is undefined there; pingouin gives NaN). Only scores that do
/// not vary at all, between items either, leave the ICC undefined.
pub fn retest_icc(repeats: &[Vec<f64>], level: f64) -> Result<Estimate> {
    let k = check_repeats("retest_icc", repeats)?;
    for row in repeats {
        check_finite("retest_icc scores", row)?;
    }
    if k < 2 {
        return Err(StatsError::TooFew {
            what: "retest_icc repeats per item",
            min: 2,
            got: k,
        });
    }
    if !(level > 0.0 && level < 1.0) {
        return Err(StatsError::Invalid {
            what: "retest_icc level",
            expected: format!("a coverage strictly between 0 and 1, got {level}"),
        });
    }
    let rows: Vec<&[f64]> = repeats.iter().map(Vec::as_slice).collect();
    let ms = MeanSquares::of(&rows);
    let undefined = StatsError::Undefined {
        what: "retest_icc",
        why: "the scores have no variance",
    };
    let value = icc_raw(&rows).ok_or(undefined.clone())?;
    // Decided on the scores themselves: their mean squares carry rounding that 1 - ICC would magnify.
    let agree = rows.iter().all(|r| r.iter().all(|x| *x == r[0]));
    let (value, low, high) = if agree {
        (1.0, 1.0, 1.0)
    } else {
        let (low, high) = ms.mcgraw_wong(value, 1.0 - level).ok_or(undefined)?;
        (value, low, high)
    };
    Ok(Estimate {
        value,
        ci_low: low,
        ci_high: high,
        level,
        method: CiMethod::FDistribution,
        seed: None,
        resamples: None,
        undefined_resamples: 0,
        n: repeats.len(),
    })
}

/// The two-way ANOVA mean squares of an items × repeats matrix.
struct MeanSquares {
    n: f64,
    k: f64,
    rows: f64,
    cols: f64,
    err: f64,
}

impl MeanSquares {
    fn of(rows: &[&[f64]]) -> Self {
        let (n, k) = (rows.len() as f64, rows[0].len() as f64);
        let row_means: Vec<f64> = rows.iter().map(|r| r.iter().sum::<f64>() / k).collect();
        let col_means: Vec<f64> = (0..rows[0].len())
            .map(|j| rows.iter().map(|r| r[j]).sum::<f64>() / n)
            .collect();
        let grand = row_means.iter().sum::<f64>() / n;
        let ss_rows = k * row_means.iter().map(|m| (m - grand).powi(2)).sum::<f64>();
        let ss_cols = n * col_means.iter().map(|m| (m - grand).powi(2)).sum::<f64>();
        let mut ss_err = 0.0;
        for (r, rm) in rows.iter().zip(&row_means) {
            for (x, cm) in r.iter().zip(&col_means) {
                ss_err += (x - rm - cm + grand).powi(2);
            }
        }
        MeanSquares {
            n,
            k,
            rows: ss_rows / (n - 1.0),
            cols: ss_cols / (k - 1.0),
            err: ss_err / ((n - 1.0) * (k - 1.0)),
        }
    }

    /// McGraw & Wong (1996), case 2A, single measure; the same arithmetic as pingouin's `intraclass_corr`.
    fn mcgraw_wong(&self, icc: f64, alpha: f64) -> Option<(f64, f64)> {
        let MeanSquares {
            n,
            k,
            rows,
            cols,
            err,
        } = *self;
        let a = k * icc / (n * (1.0 - icc));
        let b = 1.0 + k * icc * (n - 1.0) / (n * (1.0 - icc));
        let v = (a * cols + b * err).powi(2)
            / ((a * cols).powi(2) / (k - 1.0) + (b * err).powi(2) / ((n - 1.0) * (k - 1.0)));
        let upper_q = |d1: f64, d2: f64| {
            FisherSnedecor::new(d1, d2)
                .ok()
                .map(|f| f.inverse_cdf(1.0 - alpha / 2.0))
        };
        let f_u = upper_q(n - 1.0, v)?;
        let f_l = upper_q(v, n - 1.0)?;
        let spread = k * cols + (k * n - k - n) * err;
        let low = n * (rows - f_u * err) / (f_u * spread + n * rows);
        let high = n * (f_l * rows - err) / (spread + n * f_l * rows);
        (low.is_finite() && high.is_finite()).then_some((low, high))
    }
}

/// Fleiss' kappa for items each rated the same number of times (`codes[i]` holds item `i`'s nominal labels,
/// compared exactly): `(P̄ - P̄e) / (1 - P̄e)`. Between a judge's repeats it says how far the repeats agree on a
/// verdict beyond what their label shares alone would give. Undefined when every label is the same.
pub fn fleiss_kappa(codes: &[Vec<i64>]) -> Result<f64> {
    let k = check_repeats("fleiss_kappa", codes)?;
    if k < 2 {
        return Err(StatsError::TooFew {
            what: "fleiss_kappa ratings per item",
            min: 2,
            got: k,
        });
    }
    let all: Vec<usize> = (0..codes.len()).collect();
    fleiss_raw(codes, &all).ok_or(StatsError::Undefined {
        what: "fleiss_kappa",
        why: "every rating carries the same label",
    })
}

/// [`fleiss_kappa`] with a percentile bootstrap interval over `design`.
pub fn retest_kappa(
    codes: &[Vec<i64>],
    design: &Design,
    cfg: &BootstrapConfig,
) -> Result<Estimate> {
    fleiss_kappa(codes)?;
    bootstrap(design, cfg, |idx| fleiss_raw(codes, idx))
}

/// The slope of `score` on `length` holding `stratum` fixed: ordinary least squares with one intercept per
/// stratum (the clinicians' grade), which is the pooled within-stratum slope
/// `Σ (x - x̄ₛ)(y - ȳₛ) / Σ (x - x̄ₛ)²`. Undefined when length never varies within a stratum.
pub fn length_slope(
    score: &[f64],
    length: &[f64],
    stratum: &[i64],
    design: &Design,
    cfg: &BootstrapConfig,
) -> Result<Estimate> {
    check_same_len("length_slope score vs length", score.len(), length.len())?;
    check_same_len("length_slope score vs stratum", score.len(), stratum.len())?;
    check_finite("length_slope score", score)?;
    check_finite("length_slope length", length)?;
    bootstrap(design, cfg, |idx| within_slope(score, length, stratum, idx))
}

/// Mean of `values` where `in_group` holds minus their mean elsewhere. As a self-preference probe, `values` is
/// the judge's residual against the clinicians (judge minus clinician) and `in_group` marks answers of the
/// judge's own family. Resamples holding only one group are undefined and counted.
pub fn group_gap(
    values: &[f64],
    in_group: &[bool],
    design: &Design,
    cfg: &BootstrapConfig,
) -> Result<Estimate> {
    check_same_len("group_gap values vs groups", values.len(), in_group.len())?;
    check_finite("group_gap values", values)?;
    let inside = in_group.iter().filter(|g| **g).count();
    if inside == 0 || inside == in_group.len() {
        return Err(StatsError::Undefined {
            what: "group_gap",
            why: "every value falls in one group",
        });
    }
    bootstrap(design, cfg, |idx| gap(values, in_group, idx))
}

/// What showing a judge something more (a model's thinking) did to its scores of the same answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairedShift {
    /// Mean of `shown - hidden` over the items.
    pub mean_difference: Estimate,
    /// Share of items whose verdict (score at or above the pass mark) differs between the two.
    pub flip_share: Estimate,
}

/// The paired shift of one judge's scores of the same items, asked with something `shown` against `hidden`:
/// the mean difference and the share of verdicts that flip at `pass`, both with percentile intervals from the
/// same resamples of `design` (clusters of items that share a case).
pub fn paired_shift(
    shown: &[f64],
    hidden: &[f64],
    pass: f64,
    design: &Design,
    cfg: &BootstrapConfig,
) -> Result<PairedShift> {
    check_same_len("paired_shift shown vs hidden", shown.len(), hidden.len())?;
    check_finite("paired_shift shown", shown)?;
    check_finite("paired_shift hidden", hidden)?;
    let mut e = bootstrap_many(design, cfg, 2, |idx| {
        let n = idx.len() as f64;
        let diff: f64 = idx.iter().map(|&i| shown[i] - hidden[i]).sum();
        let flips = idx
            .iter()
            .filter(|&&i| (shown[i] >= pass) != (hidden[i] >= pass))
            .count();
        vec![Some(diff / n), Some(flips as f64 / n)]
    })?;
    let flip_share = e.pop().expect("two statistics");
    let mean_difference = e.pop().expect("two statistics");
    Ok(PairedShift {
        mean_difference,
        flip_share,
    })
}

fn check_repeats<T>(what: &'static str, rows: &[Vec<T>]) -> Result<usize> {
    if rows.len() < 2 {
        return Err(StatsError::TooFew {
            what,
            min: 2,
            got: rows.len(),
        });
    }
    let k = rows[0].len();
    match rows.iter().position(|r| r.len() != k) {
        Some(i) => Err(StatsError::Invalid {
            what,
            expected: format!(
                "{k} ratings on every item, as on item 0; item {i} has {}",
                rows[i].len()
            ),
        }),
        None => Ok(k),
    }
}

fn fleiss_raw(codes: &[Vec<i64>], idx: &[usize]) -> Option<f64> {
    let k = codes[idx[0]].len() as f64;
    let n = idx.len() as f64;
    let mut totals: BTreeMap<i64, f64> = BTreeMap::new();
    let mut agreement = 0.0;
    let mut counts: BTreeMap<i64, f64> = BTreeMap::new();
    for &i in idx {
        counts.clear();
        for &c in &codes[i] {
            *counts.entry(c).or_default() += 1.0;
        }
        let pairs: f64 = counts.values().map(|c| c * (c - 1.0)).sum();
        agreement += pairs / (k * (k - 1.0));
        for (&c, &m) in &counts {
            *totals.entry(c).or_default() += m;
        }
    }
    let observed = agreement / n;
    let expected: f64 = totals.values().map(|t| (t / (n * k)).powi(2)).sum();
    let kappa = (observed - expected) / (1.0 - expected);
    (expected < 1.0).then_some(kappa)
}

fn within_slope(y: &[f64], x: &[f64], stratum: &[i64], idx: &[usize]) -> Option<f64> {
    // Sums per stratum, then the pooled within-stratum covariance and variance.
    let mut sums: BTreeMap<i64, (f64, f64, f64)> = BTreeMap::new();
    for &i in idx {
        let s = sums.entry(stratum[i]).or_default();
        s.0 += 1.0;
        s.1 += x[i];
        s.2 += y[i];
    }
    let (mut sxy, mut sxx) = (0.0, 0.0);
    for &i in idx {
        let (n, sx, sy) = sums[&stratum[i]];
        let dx = x[i] - sx / n;
        sxy += dx * (y[i] - sy / n);
        sxx += dx * dx;
    }
    // Relative to the spread of x, a tiny sxx is rounding left over from a stratum whose lengths are equal.
    let scale: f64 = idx.iter().map(|&i| x[i] * x[i]).sum::<f64>().max(1.0);
    (sxx > 1e-12 * scale).then(|| sxy / sxx)
}

fn gap(values: &[f64], in_group: &[bool], idx: &[usize]) -> Option<f64> {
    let (mut sum_in, mut n_in, mut sum_out, mut n_out) = (0.0, 0usize, 0.0, 0usize);
    for &i in idx {
        if in_group[i] {
            sum_in += values[i];
            n_in += 1;
        } else {
            sum_out += values[i];
            n_out += 1;
        }
    }
    (n_in > 0 && n_out > 0).then(|| sum_in / n_in as f64 - sum_out / n_out as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fleiss_kappa_of_perfect_and_chance_agreement() {
        let perfect = vec![vec![1, 1, 1], vec![0, 0, 0], vec![1, 1, 1]];
        assert!((fleiss_kappa(&perfect).unwrap() - 1.0).abs() < 1e-12);
        let constant = vec![vec![1, 1], vec![1, 1]];
        assert!(fleiss_kappa(&constant).is_err());
        let ragged = vec![vec![1, 1], vec![1]];
        assert!(matches!(
            fleiss_kappa(&ragged),
            Err(StatsError::Invalid { .. })
        ));
    }

    #[test]
    fn repeats_that_always_agree_have_an_icc_of_one_with_a_point_interval() {
        let agreeing = vec![
            vec![0.1, 0.1, 0.1],
            vec![4.0, 4.0, 4.0],
            vec![3.0, 3.0, 3.0],
        ];
        let e = retest_icc(&agreeing, 0.95).unwrap();
        assert_eq!((e.value, e.ci_low, e.ci_high), (1.0, 1.0, 1.0));
        // No variance anywhere: nothing to measure.
        let flat = vec![vec![3.0, 3.0], vec![3.0, 3.0]];
        assert!(matches!(
            retest_icc(&flat, 0.95),
            Err(StatsError::Undefined { .. })
        ));
        // One repeat apart from the others is not perfect agreement.
        let offset = vec![
            vec![2.0, 2.0, 3.0],
            vec![4.0, 4.0, 5.0],
            vec![3.0, 3.0, 4.0],
        ];
        let e = retest_icc(&offset, 0.95).unwrap();
        assert!(e.value < 1.0 && e.ci_low < e.value, "{e:?}");
    }

    #[test]
    fn slope_ignores_differences_between_strata() {
        // Within each stratum score rises by 2 per unit length; the strata sit far apart.
        let x = [1.0, 2.0, 3.0, 1.0, 2.0, 3.0];
        let y = [2.0, 4.0, 6.0, 102.0, 104.0, 106.0];
        let s = [0, 0, 0, 5, 5, 5];
        let cfg = BootstrapConfig {
            resamples: 50,
            ..Default::default()
        };
        let e = length_slope(&y, &x, &s, &Design::units(6), &cfg).unwrap();
        assert!((e.value - 2.0).abs() < 1e-12);
    }

    #[test]
    fn paired_shift_is_the_mean_difference_and_the_flipped_share() {
        let shown = [4.0, 3.0, 2.0, 5.0];
        let hidden = [3.0, 3.0, 3.0, 4.0];
        let s = paired_shift(
            &shown,
            &hidden,
            3.0,
            &Design::clusters_by(&["a", "a", "b", "c"]),
            &BootstrapConfig::default(),
        )
        .unwrap();
        assert!((s.mean_difference.value - 0.25).abs() < 1e-12);
        // Only the third item crosses the mark (2 against 3).
        assert!((s.flip_share.value - 0.25).abs() < 1e-12);
        assert_eq!(s.mean_difference.n, 4);
        assert!(paired_shift(
            &[1.0],
            &[1.0, 2.0],
            3.0,
            &Design::units(1),
            &BootstrapConfig::default()
        )
        .is_err());
    }

    #[test]
    fn gap_needs_both_groups() {
        let cfg = BootstrapConfig::default();
        assert!(group_gap(&[1.0, 2.0], &[true, true], &Design::units(2), &cfg).is_err());
        let e = group_gap(
            &[3.0, 1.0, 2.0],
            &[true, false, false],
            &Design::units(3),
            &cfg,
        )
        .unwrap();
        assert!((e.value - 1.5).abs() < 1e-12);
    }
}
