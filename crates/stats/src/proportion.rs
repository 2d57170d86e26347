//! Closed-form tools for proportions: the Wilson interval, the exact McNemar test and the normal quantile they
//! need.

use serde::{Deserialize, Serialize};

use crate::{check_same_len, CiMethod, Estimate, Result, StatsError};

/// Wilson score interval for `successes` out of `n`, at coverage `level`. A sanity check next to the bootstrap:
/// unlike the percentile bootstrap it does not collapse to a single point at 0% or 100%.
pub fn wilson(successes: u64, n: u64, level: f64) -> Result<Estimate> {
    const WHAT: &str = "wilson";
    if n == 0 {
        return Err(StatsError::TooFew {
            what: WHAT,
            min: 1,
            got: 0,
        });
    }
    if successes > n {
        return Err(StatsError::Invalid {
            what: WHAT,
            expected: format!("successes <= n, got {successes} of {n}"),
        });
    }
    let z = z_for_level(WHAT, level)?;
    let (nf, p) = (n as f64, successes as f64 / n as f64);
    let z2 = z * z;
    let denom = 1.0 + z2 / nf;
    let centre = (p + z2 / (2.0 * nf)) / denom;
    let half = z / denom * (p * (1.0 - p) / nf + z2 / (4.0 * nf * nf)).sqrt();
    Ok(Estimate {
        value: p,
        ci_low: (centre - half).max(0.0),
        ci_high: (centre + half).min(1.0),
        level,
        method: CiMethod::Wilson,
        seed: None,
        resamples: None,
        undefined_resamples: 0,
        n: n as usize,
    })
}

fn z_for_level(what: &'static str, level: f64) -> Result<f64> {
    if !(level > 0.0 && level < 1.0) {
        return Err(StatsError::Invalid {
            what,
            expected: format!("a coverage strictly between 0 and 1, got {level}"),
        });
    }
    normal_quantile(0.5 + level / 2.0)
}

/// Which McNemar test produced a p-value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McNemarTest {
    /// The exact binomial test on the discordant items ([`mcnemar_exact`]): valid when the items are
    /// independent (one answer per task).
    #[default]
    Exact,
    /// Durkalski et al. (2003) for matched pairs in clusters ([`mcnemar_clustered`]): several answers per task
    /// and several tasks per case count as one case's evidence, not as independent pairs.
    ClusterAdjusted,
}

impl McNemarTest {
    /// The test's name, for tables and notes.
    pub fn label(self) -> &'static str {
        match self {
            McNemarTest::Exact => "exact McNemar",
            McNemarTest::ClusterAdjusted => "cluster-adjusted McNemar (Durkalski 2003)",
        }
    }

    /// A short tag for table cells.
    pub fn tag(self) -> &'static str {
        match self {
            McNemarTest::Exact => "exact",
            McNemarTest::ClusterAdjusted => "cluster-adj.",
        }
    }
}

/// Discordant-pair counts and a McNemar p-value for two runs on the same items.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct McNemar {
    /// Items run A got right and run B got wrong.
    pub only_a: u64,
    /// Items run B got right and run A got wrong.
    pub only_b: u64,
    pub p_value: f64,
    /// The test behind `p_value` (reports written before this field existed used the exact test).
    #[serde(default)]
    pub test: McNemarTest,
    /// The χ² statistic of the cluster-adjusted test (`None` for the exact test, or without discordance).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statistic: Option<f64>,
    /// Clusters the cluster-adjusted test saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<usize>,
}

/// Exact (binomial) McNemar test on the discordant pairs: `p = min(1, 2 P(X <= min(b, c)))` with
/// `X ~ Binomial(b + c, 1/2)`; 1.0 when there are no discordant pairs.
///
/// The binomial tail is summed in log space, term by term from `P(X = 0) = 2^-(b+c)`, so it neither underflows
/// for thousands of pairs nor forms large binomial coefficients.
pub fn mcnemar_exact(only_a: u64, only_b: u64) -> f64 {
    let n = only_a + only_b;
    if n == 0 {
        return 1.0;
    }
    let m = only_a.min(only_b);
    let mut log_term = -(n as f64) * std::f64::consts::LN_2;
    let mut log_terms = Vec::with_capacity(m as usize + 1);
    log_terms.push(log_term);
    for i in 0..m {
        log_term += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
        log_terms.push(log_term);
    }
    (2.0 * log_sum_exp(&log_terms).exp()).min(1.0)
}

fn log_sum_exp(logs: &[f64]) -> f64 {
    let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    max + logs.iter().map(|l| (l - max).exp()).sum::<f64>().ln()
}

/// McNemar test from per-item correctness of two runs on the same items (`a[i]`, `b[i]` are item `i`).
pub fn mcnemar_paired(a: &[bool], b: &[bool]) -> Result<McNemar> {
    check_same_len("mcnemar_paired a vs b", a.len(), b.len())?;
    let only_a = a.iter().zip(b).filter(|(x, y)| **x && !**y).count() as u64;
    let only_b = a.iter().zip(b).filter(|(x, y)| !**x && **y).count() as u64;
    Ok(McNemar {
        only_a,
        only_b,
        p_value: mcnemar_exact(only_a, only_b),
        test: McNemarTest::Exact,
        statistic: None,
        clusters: None,
    })
}

/// McNemar's test for matched pairs that come in clusters (Durkalski, Palesch, Lipsitz and Rust, "Analysis of
/// clustered matched-pair data", Stat Med 2003; 22:2417-28). With `b_k` and `c_k` the items of cluster `k` that
/// only A and only B got right,
///
/// `X² = (Σ_k (b_k − c_k))² / Σ_k (b_k − c_k)²`, and `p = P(χ²₁ > X²)`.
///
/// The variance comes from the spread of the clusters' net differences, so answers that move together (the n
/// samples of a task, the tasks of a case) count as one cluster's evidence: repeating every item k times leaves
/// X² unchanged, where the exact test on items would grow ever more certain. No discordance at all gives p = 1.
/// It relies on a χ² approximation that needs many clusters; with few (one cluster always gives X² = 1) the
/// p-value is rough, and callers should say so.
pub fn mcnemar_clustered(a: &[bool], b: &[bool], clusters: &[&str]) -> Result<McNemar> {
    check_same_len("mcnemar_clustered a vs b", a.len(), b.len())?;
    check_same_len("mcnemar_clustered a vs clusters", a.len(), clusters.len())?;
    let mut net: std::collections::BTreeMap<&str, i64> = std::collections::BTreeMap::new();
    let (mut only_a, mut only_b) = (0u64, 0u64);
    for ((&x, &y), &c) in a.iter().zip(b).zip(clusters) {
        let d = net.entry(c).or_insert(0);
        if x && !y {
            only_a += 1;
            *d += 1;
        } else if !x && y {
            only_b += 1;
            *d -= 1;
        }
    }
    let sum: f64 = net.values().map(|&d| d as f64).sum();
    let squares: f64 = net.values().map(|&d| (d * d) as f64).sum();
    let (statistic, p_value) = if squares == 0.0 {
        (None, 1.0)
    } else {
        let x2 = sum * sum / squares;
        (Some(x2), chi_square_1_sf(x2))
    };
    Ok(McNemar {
        only_a,
        only_b,
        p_value,
        test: McNemarTest::ClusterAdjusted,
        statistic,
        clusters: Some(net.len()),
    })
}

/// The standard normal CDF Φ(x), as `erfc(−x/√2) / 2` (statrs's erfc: about 1e-11 relative in the tails
/// nmb reads, ample for power and interval levels).
pub(crate) fn normal_cdf(x: f64) -> f64 {
    0.5 * statrs::function::erf::erfc(-x / std::f64::consts::SQRT_2)
}

/// `P(χ²₁ > x)`, which is `erfc(sqrt(x / 2))`.
fn chi_square_1_sf(x: f64) -> f64 {
    statrs::function::erf::erfc((x / 2.0).sqrt())
}

/// Quantile function of the standard normal distribution (Wichura's algorithm AS 241, PPND16, relative error
/// about 1e-16). Errors outside the open interval (0, 1).
pub fn normal_quantile(p: f64) -> Result<f64> {
    if !(p > 0.0 && p < 1.0) {
        return Err(StatsError::Invalid {
            what: "normal_quantile",
            expected: format!("p in (0, 1), got {p}"),
        });
    }
    let q = p - 0.5;
    if q.abs() <= 0.425 {
        let r = 0.180625 - q * q;
        return Ok(q * poly(&as241::CENTRAL_NUM, r) / poly(&as241::CENTRAL_DEN, r));
    }
    let tail = if q < 0.0 { p } else { 1.0 - p };
    let r = (-tail.ln()).sqrt();
    let x = if r <= 5.0 {
        let r = r - 1.6;
        poly(&as241::NEAR_NUM, r) / poly(&as241::NEAR_DEN, r)
    } else {
        let r = r - 5.0;
        poly(&as241::FAR_NUM, r) / poly(&as241::FAR_DEN, r)
    };
    Ok(if q < 0.0 { -x } else { x })
}

/// Horner evaluation of `c[0] + c[1] x + ... + c[7] x^7`.
fn poly(c: &[f64; 8], x: f64) -> f64 {
    c.iter().rev().fold(0.0, |acc, &ci| acc * x + ci)
}

/// Coefficients of AS 241 (Wichura 1988), copied digit for digit from the published algorithm so they can be
/// checked against it; most carry more digits than an f64 holds.
#[allow(clippy::excessive_precision)]
mod as241 {
    pub(super) const CENTRAL_NUM: [f64; 8] = [
        3.387_132_872_796_366_608,
        133.141_667_891_784_377_45,
        1_971.590_950_306_551_442_7,
        13_731.693_765_509_461_125,
        45_921.953_931_549_871_457,
        67_265.770_927_008_700_853,
        33_430.575_583_588_128_105,
        2_509.080_928_730_122_672_7,
    ];
    pub(super) const CENTRAL_DEN: [f64; 8] = [
        1.0,
        42.313_330_701_600_911_252,
        687.187_007_492_057_908_3,
        5_394.196_021_424_751_107_7,
        21_213.794_301_586_595_867,
        39_307.895_800_092_710_61,
        28_729.085_735_721_942_674,
        5_226.495_278_852_854_561,
    ];
    pub(super) const NEAR_NUM: [f64; 8] = [
        1.423_437_110_749_683_577_34,
        4.630_337_846_156_545_295_9,
        5.769_497_221_460_691_405_5,
        3.647_848_324_763_204_605_04,
        1.270_458_252_452_368_382_58,
        0.241_780_725_177_450_611_77,
        0.022_723_844_989_269_184_583_3,
        7.745_450_142_783_414_076_4e-4,
    ];
    pub(super) const NEAR_DEN: [f64; 8] = [
        1.0,
        2.053_191_626_637_758_821_87,
        1.676_384_830_183_803_849_4,
        0.689_767_334_985_100_004_55,
        0.148_103_976_427_480_074_59,
        0.015_198_666_563_616_457_196_6,
        5.475_938_084_995_344_946e-4,
        1.050_750_071_644_416_843_24e-9,
    ];
    pub(super) const FAR_NUM: [f64; 8] = [
        6.657_904_643_501_103_777_2,
        5.463_784_911_164_114_369_9,
        1.784_826_539_917_291_335_8,
        0.296_560_571_828_504_891_23,
        0.026_532_189_526_576_123_093,
        0.001_242_660_947_388_078_438_6,
        2.711_555_568_743_487_578_15e-5,
        2.010_334_399_292_288_132_65e-7,
    ];
    pub(super) const FAR_DEN: [f64; 8] = [
        1.0,
        0.599_832_206_555_887_937_69,
        0.136_929_880_922_735_805_31,
        0.014_875_361_290_850_614_852_5,
        7.868_691_311_456_132_591e-4,
        1.846_318_317_510_054_681_8e-5,
        1.421_511_758_316_445_888_7e-7,
        2.044_263_103_389_939_785_64e-15,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_quantile_known_values() {
        assert!((normal_quantile(0.975).unwrap() - 1.959_963_984_540_054).abs() < 1e-14);
        assert_eq!(normal_quantile(0.5).unwrap(), 0.0);
        assert!((normal_quantile(0.025).unwrap() + 1.959_963_984_540_054).abs() < 1e-14);
        assert!(normal_quantile(0.0).is_err());
        assert!(normal_quantile(1.0).is_err());
    }

    #[test]
    fn mcnemar_small_cases_by_hand() {
        assert_eq!(mcnemar_exact(0, 0), 1.0);
        // b=0, c=5: 2 * 2^-5 = 0.0625.
        assert!((mcnemar_exact(0, 5) - 0.0625).abs() < 1e-15);
        // b=1, c=4: 2 * (1 + 5) / 32 = 0.375.
        assert!((mcnemar_exact(4, 1) - 0.375).abs() < 1e-15);
        assert_eq!(mcnemar_exact(7, 7), 1.0);
        assert!(mcnemar_exact(0, 5_000) == 0.0 || mcnemar_exact(0, 5_000) < 1e-300);
    }

    #[test]
    fn clustered_mcnemar_ignores_repetition_where_the_exact_test_does_not() {
        let a = [true, true, false, true, true, false, true, false];
        let b = [false, true, true, false, false, false, false, true];
        let cases = ["c1", "c1", "c2", "c3", "c3", "c4", "c5", "c6"];
        let once = mcnemar_clustered(&a, &b, &cases).unwrap();
        let rep = |v: &[bool]| v.iter().flat_map(|&x| [x; 5]).collect::<Vec<_>>();
        let rep_cases: Vec<&str> = cases.iter().flat_map(|&c| [c; 5]).collect();
        let five = mcnemar_clustered(&rep(&a), &rep(&b), &rep_cases).unwrap();
        assert!((once.p_value - five.p_value).abs() < 1e-12);
        assert_eq!(five.only_a, 5 * once.only_a);
        let exact_once = mcnemar_paired(&a, &b).unwrap().p_value;
        let exact_five = mcnemar_paired(&rep(&a), &rep(&b)).unwrap().p_value;
        assert!(
            exact_five < exact_once / 4.0,
            "{exact_five} vs {exact_once}"
        );
        assert_eq!(once.test, McNemarTest::ClusterAdjusted);
        assert_eq!(once.clusters, Some(6));
        assert!(mcnemar_clustered(&a, &b, &cases[..3]).is_err());
    }

    #[test]
    fn mcnemar_from_items() {
        let a = [true, true, false, false, true];
        let b = [true, false, true, false, false];
        let m = mcnemar_paired(&a, &b).unwrap();
        assert_eq!((m.only_a, m.only_b), (2, 1));
        assert!(mcnemar_paired(&a, &b[..4]).is_err());
    }

    #[test]
    fn wilson_edges() {
        let zero = wilson(0, 20, 0.95).unwrap();
        assert_eq!(zero.ci_low, 0.0);
        assert!(zero.ci_high > 0.1 && zero.ci_high < 0.2, "{zero:?}");
        let all = wilson(20, 20, 0.95).unwrap();
        assert_eq!(all.ci_high, 1.0);
        assert!(wilson(3, 2, 0.95).is_err());
        assert!(wilson(0, 0, 0.95).is_err());
    }
}
