//! Agreement between raters (judges, clinicians): correlations, kappas, Krippendorff's alpha and ICC(2,1).
//!
//! Ratings matrices are laid out one row per item and one column per rater, with `None` where a rater did not
//! rate an item; that is what a pivot of `annotator, item, dimension, score` rows gives.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::bootstrap::{bootstrap, BootstrapConfig, Design};
use crate::{check_finite, check_same_len, Estimate, Result, StatsError};

/// Pearson's product-moment correlation. Undefined (an error) when either side has zero variance.
pub fn pearson(x: &[f64], y: &[f64]) -> Result<f64> {
    check_pair("pearson", x, y)?;
    pearson_raw(x, y).ok_or(StatsError::Undefined {
        what: "pearson",
        why: "one of the two series has zero variance",
    })
}

/// Spearman's rank correlation: Pearson's r on average ranks, so ties get the mean of the ranks they span.
pub fn spearman(x: &[f64], y: &[f64]) -> Result<f64> {
    check_pair("spearman", x, y)?;
    spearman_raw(x, y).ok_or(StatsError::Undefined {
        what: "spearman",
        why: "one of the two series is constant",
    })
}

/// Ranks starting at 1; tied values share the average of the ranks they occupy.
pub fn average_ranks(x: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&i, &j| x[i].total_cmp(&x[j]));
    let mut ranks = vec![0.0; x.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start + 1;
        while end < order.len() && x[order[end]] == x[order[start]] {
            end += 1;
        }
        // Positions start..end hold ranks start+1..=end; their mean is (start + 1 + end) / 2.
        let rank = (start + 1 + end) as f64 / 2.0;
        for &i in &order[start..end] {
            ranks[i] = rank;
        }
        start = end;
    }
    ranks
}

/// Cohen's kappa for two raters with nominal labels of any ordered type: `(p_o - p_e) / (1 - p_e)`.
/// Undefined when both raters use one and the same label throughout (`p_e = 1`).
pub fn cohen_kappa<L: Ord>(a: &[L], b: &[L]) -> Result<f64> {
    check_same_len("cohen_kappa a vs b", a.len(), b.len())?;
    if a.is_empty() {
        return Err(StatsError::TooFew {
            what: "cohen_kappa",
            min: 1,
            got: 0,
        });
    }
    let (a, b, categories) = index_labels(a, b);
    kappa_indexed(&a, &b, categories).ok_or(StatsError::Undefined {
        what: "cohen_kappa",
        why: "both raters give a single identical label",
    })
}

/// Quadratic-weighted kappa for ordinal integer scores (for example 0–5 rubric points). The disagreement
/// weight of scores `s` and `t` is `(s - t)^2` on the score values themselves, which equals scikit-learn's
/// `cohen_kappa_score(weights="quadratic", labels=range(lo, hi + 1))` — the full score range, so that an unused
/// middle score still counts as a step. Undefined when every score from both raters is the same.
pub fn quadratic_kappa(a: &[i64], b: &[i64]) -> Result<f64> {
    check_same_len("quadratic_kappa a vs b", a.len(), b.len())?;
    if a.is_empty() {
        return Err(StatsError::TooFew {
            what: "quadratic_kappa",
            min: 1,
            got: 0,
        });
    }
    let x: Vec<f64> = a.iter().map(|&v| v as f64).collect();
    let y: Vec<f64> = b.iter().map(|&v| v as f64).collect();
    quadratic_kappa_raw(&x, &y).ok_or(StatsError::Undefined {
        what: "quadratic_kappa",
        why: "every score from both raters is the same",
    })
}

/// Which distance Krippendorff's alpha uses between two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlphaLevel {
    /// Values are category codes; any two different codes disagree equally.
    Nominal,
    /// Values are numbers; disagreement is the squared difference.
    Interval,
}

/// Krippendorff's alpha over a ratings matrix (rows = items, columns = raters, `None` = not rated; rows may have
/// different lengths). Items with fewer than two ratings cannot be paired and are ignored, as in Krippendorff's
/// definition. Undefined when fewer than two pairable values exist or all pairable values are equal.
pub fn krippendorff_alpha(items: &[Vec<Option<f64>>], level: AlphaLevel) -> Result<f64> {
    check_ratings("krippendorff_alpha", items)?;
    let units = AlphaUnits::new(items, level);
    let all: Vec<usize> = (0..units.len()).collect();
    units
        .alpha(&all, &mut Vec::new())
        .ok_or(StatsError::Undefined {
            what: "krippendorff_alpha",
            why: "no pairable items, or every pairable value is the same",
        })
}

/// ICC(2,1) of Shrout & Fleiss (1979): two-way random effects, absolute agreement, single rater.
/// `items` has one row per item and one column per rater, complete (use [`agreement`] to drop incomplete rows).
/// `(MSR - MSE) / (MSR + (k-1) MSE + k (MSC - MSE) / n)` with the two-way ANOVA mean squares.
pub fn icc_2_1(items: &[Vec<f64>]) -> Result<f64> {
    const WHAT: &str = "icc_2_1";
    if items.len() < 2 {
        return Err(StatsError::TooFew {
            what: WHAT,
            min: 2,
            got: items.len(),
        });
    }
    let k = items[0].len();
    if k < 2 {
        return Err(StatsError::TooFew {
            what: "icc_2_1 raters",
            min: 2,
            got: k,
        });
    }
    for (i, row) in items.iter().enumerate() {
        if row.len() != k {
            return Err(StatsError::Invalid {
                what: WHAT,
                expected: format!(
                    "{k} ratings in every row (one per rater); row {i} has {}",
                    row.len()
                ),
            });
        }
        check_finite("icc_2_1 ratings", row)?;
    }
    let refs: Vec<&[f64]> = items.iter().map(Vec::as_slice).collect();
    icc_raw(&refs).ok_or(StatsError::Undefined {
        what: WHAT,
        why: "the ratings have no variance",
    })
}

/// The agreement statistics [`agreement`] can compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    Pearson,
    Spearman,
    CohenKappa,
    QuadraticKappa,
    AlphaInterval,
    AlphaNominal,
    #[serde(rename = "icc_2_1")]
    Icc21,
}

impl Measure {
    pub const ALL: [Measure; 7] = [
        Measure::Pearson,
        Measure::Spearman,
        Measure::CohenKappa,
        Measure::QuadraticKappa,
        Measure::AlphaInterval,
        Measure::AlphaNominal,
        Measure::Icc21,
    ];

    /// Whether the measure compares exactly two raters (the correlations and kappas).
    pub fn is_pairwise(self) -> bool {
        matches!(
            self,
            Measure::Pearson | Measure::Spearman | Measure::CohenKappa | Measure::QuadraticKappa
        )
    }
}

/// One agreement statistic on a ratings matrix (rows = items, columns = raters) with a percentile bootstrap
/// interval over items.
///
/// Which items count, and so [`Estimate::n`]:
/// - pairwise measures need exactly two columns and use the items both raters rated;
/// - Krippendorff's alpha uses the items with at least two ratings;
/// - ICC(2,1) needs the same number of columns in every row and uses the complete rows.
///
/// Cohen's kappa treats values as category codes compared exactly; quadratic kappa needs integer values.
/// Resamples on which the statistic is undefined (say, a constant rater) are counted, not hidden.
pub fn agreement(
    measure: Measure,
    items: &[Vec<Option<f64>>],
    cfg: &BootstrapConfig,
) -> Result<Estimate> {
    check_ratings("agreement ratings", items)?;
    match measure {
        Measure::Pearson => pairwise(items, cfg, pearson_raw),
        Measure::Spearman => pairwise(items, cfg, spearman_raw),
        Measure::CohenKappa => kappa_with_ci(items, cfg),
        Measure::QuadraticKappa => {
            check_integers(items)?;
            pairwise(items, cfg, quadratic_kappa_raw)
        }
        Measure::AlphaInterval => alpha_with_ci(items, AlphaLevel::Interval, cfg),
        Measure::AlphaNominal => alpha_with_ci(items, AlphaLevel::Nominal, cfg),
        Measure::Icc21 => icc_with_ci(items, cfg),
    }
}

fn pairwise<F>(items: &[Vec<Option<f64>>], cfg: &BootstrapConfig, stat: F) -> Result<Estimate>
where
    F: Fn(&[f64], &[f64]) -> Option<f64>,
{
    let (x, y) = rated_by_both(items)?;
    let (mut bx, mut by) = (Vec::with_capacity(x.len()), Vec::with_capacity(x.len()));
    bootstrap(&Design::units(x.len()), cfg, |idx| {
        gather(&x, idx, &mut bx);
        gather(&y, idx, &mut by);
        stat(&bx, &by)
    })
}

fn kappa_with_ci(items: &[Vec<Option<f64>>], cfg: &BootstrapConfig) -> Result<Estimate> {
    let (x, y) = rated_by_both(items)?;
    let codes = |v: &[f64]| v.iter().map(|&c| Code::new(c)).collect::<Vec<Code>>();
    let (a, b, categories) = index_labels(&codes(&x), &codes(&y));
    let (mut ba, mut bb) = (Vec::with_capacity(a.len()), Vec::with_capacity(a.len()));
    bootstrap(&Design::units(a.len()), cfg, |idx| {
        gather(&a, idx, &mut ba);
        gather(&b, idx, &mut bb);
        kappa_indexed(&ba, &bb, categories)
    })
}

/// The two columns of a two-rater matrix, keeping the items both raters rated.
fn rated_by_both(items: &[Vec<Option<f64>>]) -> Result<(Vec<f64>, Vec<f64>)> {
    if let Some((i, row)) = items.iter().enumerate().find(|(_, row)| row.len() != 2) {
        return Err(StatsError::Invalid {
            what: "agreement (pairwise measure)",
            expected: format!(
                "exactly two raters (columns) per item; item {i} has {}",
                row.len()
            ),
        });
    }
    let (x, y): (Vec<f64>, Vec<f64>) = items
        .iter()
        .filter_map(|row| Some((row[0]?, row[1]?)))
        .unzip();
    if x.len() < 2 {
        return Err(StatsError::TooFew {
            what: "agreement items rated by both raters",
            min: 2,
            got: x.len(),
        });
    }
    Ok((x, y))
}

fn alpha_with_ci(
    items: &[Vec<Option<f64>>],
    level: AlphaLevel,
    cfg: &BootstrapConfig,
) -> Result<Estimate> {
    let units = AlphaUnits::new(items, level);
    if units.len() == 0 {
        return Err(StatsError::TooFew {
            what: "krippendorff_alpha items with two or more ratings",
            min: 1,
            got: 0,
        });
    }
    let mut scratch = Vec::new();
    bootstrap(&Design::units(units.len()), cfg, |idx| {
        units.alpha(idx, &mut scratch)
    })
}

fn icc_with_ci(items: &[Vec<Option<f64>>], cfg: &BootstrapConfig) -> Result<Estimate> {
    let k = items.first().map_or(0, Vec::len);
    if let Some((i, row)) = items.iter().enumerate().find(|(_, row)| row.len() != k) {
        return Err(StatsError::Invalid {
            what: "agreement (icc_2_1)",
            expected: format!(
                "{k} raters (columns) in every row; item {i} has {}",
                row.len()
            ),
        });
    }
    if k < 2 {
        return Err(StatsError::TooFew {
            what: "icc_2_1 raters",
            min: 2,
            got: k,
        });
    }
    let complete: Vec<Vec<f64>> = items
        .iter()
        .filter_map(|row| row.iter().copied().collect::<Option<Vec<f64>>>())
        .collect();
    if complete.len() < 2 {
        return Err(StatsError::TooFew {
            what: "icc_2_1 items rated by every rater",
            min: 2,
            got: complete.len(),
        });
    }
    let mut rows: Vec<&[f64]> = Vec::with_capacity(complete.len());
    bootstrap(&Design::units(complete.len()), cfg, |idx| {
        rows.clear();
        rows.extend(idx.iter().map(|&i| complete[i].as_slice()));
        icc_raw(&rows)
    })
}

fn gather<T: Copy>(values: &[T], idx: &[usize], out: &mut Vec<T>) {
    out.clear();
    out.extend(idx.iter().map(|&i| values[i]));
}

fn check_pair(what: &'static str, x: &[f64], y: &[f64]) -> Result<()> {
    check_same_len(what, x.len(), y.len())?;
    if x.len() < 2 {
        return Err(StatsError::TooFew {
            what,
            min: 2,
            got: x.len(),
        });
    }
    check_finite(what, x)?;
    check_finite(what, y)
}

fn check_ratings(what: &'static str, items: &[Vec<Option<f64>>]) -> Result<()> {
    for (index, row) in items.iter().enumerate() {
        if let Some(value) = row.iter().flatten().find(|v| !v.is_finite()) {
            return Err(StatsError::NonFinite {
                what,
                index,
                value: *value,
            });
        }
    }
    Ok(())
}

fn check_integers(items: &[Vec<Option<f64>>]) -> Result<()> {
    const LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53: beyond it f64 no longer holds every integer.
    for (i, row) in items.iter().enumerate() {
        if let Some(v) = row
            .iter()
            .flatten()
            .find(|v| v.fract() != 0.0 || v.abs() > LIMIT)
        {
            return Err(StatsError::Invalid {
                what: "agreement (quadratic_kappa)",
                expected: format!("integer scores; item {i} has {v}"),
            });
        }
    }
    Ok(())
}

fn mean(x: &[f64]) -> f64 {
    x.iter().sum::<f64>() / x.len() as f64
}

fn pearson_raw(x: &[f64], y: &[f64]) -> Option<f64> {
    let (mx, my) = (mean(x), mean(y));
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    if sxx == 0.0 || syy == 0.0 {
        return None;
    }
    Some((sxy / (sxx * syy).sqrt()).clamp(-1.0, 1.0))
}

fn spearman_raw(x: &[f64], y: &[f64]) -> Option<f64> {
    pearson_raw(&average_ranks(x), &average_ranks(y))
}

/// Numbers the labels `0..categories` in their sort order.
fn index_labels<L: Ord>(a: &[L], b: &[L]) -> (Vec<usize>, Vec<usize>, usize) {
    let mut index: BTreeMap<&L, usize> = a.iter().chain(b).map(|l| (l, 0)).collect();
    for (i, slot) in index.values_mut().enumerate() {
        *slot = i;
    }
    let number = |v: &[L]| v.iter().map(|l| index[l]).collect::<Vec<usize>>();
    (number(a), number(b), index.len())
}

/// Kappa from integer counts over labels numbered `0..categories`, so the only rounding is the final division.
fn kappa_indexed(a: &[usize], b: &[usize], categories: usize) -> Option<f64> {
    let mut margins = vec![(0u64, 0u64); categories];
    let mut agree = 0u128;
    for (&x, &y) in a.iter().zip(b) {
        margins[x].0 += 1;
        margins[y].1 += 1;
        agree += u128::from(x == y);
    }
    let n = a.len() as u128;
    let chance: u128 = margins
        .iter()
        .map(|&(ra, rb)| u128::from(ra) * u128::from(rb))
        .sum();
    let (num, den) = (n * agree, n * n);
    if den == chance {
        return None;
    }
    Some((num as f64 - chance as f64) / (den as f64 - chance as f64))
}

/// `1 - sum (a_i - b_i)^2 / (S_aa + S_bb + n (mean_a - mean_b)^2)`: the quadratic-weighted kappa written with
/// moments instead of a confusion matrix (the expected disagreement `(1/n) sum_i sum_j (a_i - b_j)^2` expands to
/// the denominator).
fn quadratic_kappa_raw(a: &[f64], b: &[f64]) -> Option<f64> {
    let n = a.len() as f64;
    let (ma, mb) = (mean(a), mean(b));
    let saa: f64 = a.iter().map(|v| (v - ma).powi(2)).sum();
    let sbb: f64 = b.iter().map(|v| (v - mb).powi(2)).sum();
    let observed: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    let expected = saa + sbb + n * (ma - mb).powi(2);
    if expected == 0.0 {
        return None;
    }
    Some(1.0 - observed / expected)
}

/// Per-unit summaries of the pairable items, from which alpha over any multiset of units follows in time
/// linear in the number of units: bootstrap resamples need no copying or sorting.
///
/// Alpha is `1 - (n - 1) * sum_u D_u / (m_u - 1) / D_total`, where `D` sums the distance over ordered pairs of
/// distinct values — within unit `u` (with `m_u` values) or across all `n` pairable values. For interval data
/// `D = 2 m * (sum of squared deviations)`; for nominal data `D = m^2 - sum_c count_c^2`.
struct AlphaUnits {
    level: AlphaLevel,
    sizes: Vec<usize>,
    /// `D_u / (m_u - 1)`; it depends on the unit alone.
    within: Vec<f64>,
    /// Interval: per-unit sums of values and of squared values, both centred on the mean of all pairable values
    /// so that the total's `S2 - S1^2 / n` does not cancel.
    sums: Vec<f64>,
    squares: Vec<f64>,
    /// Interval: per-unit smallest and largest value, to tell "all values equal" exactly rather than from a
    /// rounded variance.
    ranges: Vec<(f64, f64)>,
    /// Nominal: per-unit `(category, count)` with categories numbered `0..categories`.
    counts: Vec<Vec<(usize, u64)>>,
    categories: usize,
}

impl AlphaUnits {
    /// Items with fewer than two ratings cannot be paired and are left out.
    fn new(items: &[Vec<Option<f64>>], level: AlphaLevel) -> Self {
        let units: Vec<Vec<f64>> = items
            .iter()
            .map(|row| row.iter().flatten().copied().collect::<Vec<f64>>())
            .filter(|values| values.len() >= 2)
            .collect();
        let sizes: Vec<usize> = units.iter().map(Vec::len).collect();
        let within = units
            .iter()
            .map(|u| within_disagreement(u, level))
            .collect();
        let all: Vec<f64> = units.iter().flatten().copied().collect();
        let centre = if all.is_empty() { 0.0 } else { mean(&all) };
        let sums = units
            .iter()
            .map(|u| u.iter().map(|v| v - centre).sum())
            .collect();
        let squares = units
            .iter()
            .map(|u| u.iter().map(|v| (v - centre).powi(2)).sum())
            .collect();
        let ranges = units
            .iter()
            .map(|u| {
                u.iter()
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                        (lo.min(v), hi.max(v))
                    })
            })
            .collect();
        let index: BTreeMap<Code, usize> = all
            .iter()
            .map(|&v| Code::new(v))
            .collect::<std::collections::BTreeSet<Code>>()
            .into_iter()
            .enumerate()
            .map(|(i, c)| (c, i))
            .collect();
        let counts = units
            .iter()
            .map(|u| {
                let mut per: BTreeMap<usize, u64> = BTreeMap::new();
                for &v in u {
                    *per.entry(index[&Code::new(v)]).or_default() += 1;
                }
                per.into_iter().collect()
            })
            .collect();
        AlphaUnits {
            level,
            sizes,
            within,
            sums,
            squares,
            ranges,
            counts,
            categories: index.len(),
        }
    }

    fn len(&self) -> usize {
        self.sizes.len()
    }

    /// Alpha over the units `idx` (with repeats); `None` when undefined.
    fn alpha(&self, idx: &[usize], scratch: &mut Vec<u64>) -> Option<f64> {
        let n: usize = idx.iter().map(|&i| self.sizes[i]).sum();
        if n < 2 {
            return None;
        }
        let nf = n as f64;
        let within: f64 = idx.iter().map(|&i| self.within[i]).sum();
        let total = match self.level {
            AlphaLevel::Interval => {
                let lo = idx
                    .iter()
                    .map(|&i| self.ranges[i].0)
                    .fold(f64::INFINITY, f64::min);
                let hi = idx
                    .iter()
                    .map(|&i| self.ranges[i].1)
                    .fold(f64::NEG_INFINITY, f64::max);
                if lo == hi {
                    return None;
                }
                let s1: f64 = idx.iter().map(|&i| self.sums[i]).sum();
                let s2: f64 = idx.iter().map(|&i| self.squares[i]).sum();
                2.0 * nf * (s2 - s1 * s1 / nf).max(0.0)
            }
            AlphaLevel::Nominal => {
                scratch.clear();
                scratch.resize(self.categories, 0);
                for &i in idx {
                    for &(c, k) in &self.counts[i] {
                        scratch[c] += k;
                    }
                }
                let same: u128 = scratch.iter().map(|&k| u128::from(k) * u128::from(k)).sum();
                (n as u128 * n as u128 - same) as f64
            }
        };
        if total == 0.0 {
            return None;
        }
        Some(1.0 - (nf - 1.0) * within / total)
    }
}

/// `D_u / (m_u - 1)` for one unit's values.
fn within_disagreement(values: &[f64], level: AlphaLevel) -> f64 {
    let m = values.len() as f64;
    let pairs = match level {
        AlphaLevel::Interval => {
            let mu = mean(values);
            2.0 * m * values.iter().map(|v| (v - mu).powi(2)).sum::<f64>()
        }
        AlphaLevel::Nominal => {
            let mut sorted: Vec<Code> = values.iter().map(|&v| Code::new(v)).collect();
            sorted.sort();
            let same: f64 = sorted
                .chunk_by(|a, b| a == b)
                .map(|run| (run.len() as f64).powi(2))
                .sum();
            m * m - same
        }
    };
    pairs / (m - 1.0)
}

/// ICC(2,1) with the residual sum of squares computed directly from the two-way residuals rather than as
/// `SST - SSR - SSC`, which would cancel badly when raters agree closely.
pub(crate) fn icc_raw(rows: &[&[f64]]) -> Option<f64> {
    let (n, k) = (rows.len(), rows[0].len());
    let (nf, kf) = (n as f64, k as f64);
    let row_means: Vec<f64> = rows.iter().map(|r| mean(r)).collect();
    let col_means: Vec<f64> = (0..k)
        .map(|j| rows.iter().map(|r| r[j]).sum::<f64>() / nf)
        .collect();
    let grand = mean(&row_means);
    let ss_rows = kf * row_means.iter().map(|m| (m - grand).powi(2)).sum::<f64>();
    let ss_cols = nf * col_means.iter().map(|m| (m - grand).powi(2)).sum::<f64>();
    let mut ss_err = 0.0;
    for (r, rm) in rows.iter().zip(&row_means) {
        for (x, cm) in r.iter().zip(&col_means) {
            ss_err += (x - rm - cm + grand).powi(2);
        }
    }
    let ms_rows = ss_rows / (nf - 1.0);
    let ms_cols = ss_cols / (kf - 1.0);
    let ms_err = ss_err / ((nf - 1.0) * (kf - 1.0));
    let den = ms_rows + (kf - 1.0) * ms_err + kf * (ms_cols - ms_err) / nf;
    if den == 0.0 {
        return None;
    }
    Some((ms_rows - ms_err) / den)
}

/// A finite f64 used as a nominal category code: ordered by `total_cmp`, with -0.0 folded into 0.0.
#[derive(Clone, Copy)]
struct Code(f64);

impl Code {
    fn new(v: f64) -> Self {
        Code(v + 0.0)
    }
}

impl PartialEq for Code {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Code {}
impl PartialOrd for Code {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Code {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_ranks_share_ties() {
        assert_eq!(
            average_ranks(&[10.0, 20.0, 20.0, 5.0]),
            vec![2.0, 3.5, 3.5, 1.0]
        );
        assert_eq!(average_ranks(&[1.0, 1.0, 1.0]), vec![2.0, 2.0, 2.0]);
    }

    #[test]
    fn perfect_and_reversed_correlation() {
        let x = [1.0, 2.0, 3.0, 4.0];
        assert!((pearson(&x, &[2.0, 4.0, 6.0, 8.0]).unwrap() - 1.0).abs() < 1e-15);
        assert!((spearman(&x, &[1.0, 8.0, 27.0, 64.0]).unwrap() - 1.0).abs() < 1e-15);
        assert!((spearman(&x, &[4.0, 3.0, 2.0, 1.0]).unwrap() + 1.0).abs() < 1e-15);
        assert!(pearson(&x, &[1.0; 4]).is_err());
        assert!(pearson(&x, &[1.0; 3]).is_err());
    }

    #[test]
    fn kappa_by_hand() {
        // 10 items: agree on 7; rater a says yes 6 times, b 5 times.
        // p_o = 0.7, p_e = 0.6*0.5 + 0.4*0.5 = 0.5, kappa = 0.4.
        let a = ["y", "y", "y", "y", "y", "y", "n", "n", "n", "n"];
        let b = ["y", "y", "y", "y", "n", "n", "y", "n", "n", "n"];
        assert!((cohen_kappa(&a, &b).unwrap() - 0.4).abs() < 1e-15);
        assert_eq!(cohen_kappa(&a, &a).unwrap(), 1.0);
        assert!(cohen_kappa(&["y", "y"], &["y", "y"]).is_err());
    }

    #[test]
    fn quadratic_kappa_counts_distance() {
        let truth = [0, 1, 2, 3, 4, 5];
        let close = [0, 1, 2, 3, 4, 4];
        let far = [0, 1, 2, 3, 4, 0];
        assert_eq!(quadratic_kappa(&truth, &truth).unwrap(), 1.0);
        assert!(quadratic_kappa(&truth, &close).unwrap() > quadratic_kappa(&truth, &far).unwrap());
    }

    #[test]
    fn alpha_perfect_agreement_is_one_and_ignores_lone_ratings() {
        let items = vec![
            vec![Some(1.0), Some(1.0), None],
            vec![Some(2.0), None, Some(2.0)],
            vec![Some(3.0), Some(3.0), Some(3.0)],
            vec![Some(9.0), None, None],
        ];
        assert_eq!(
            krippendorff_alpha(&items, AlphaLevel::Interval).unwrap(),
            1.0
        );
        assert_eq!(
            krippendorff_alpha(&items, AlphaLevel::Nominal).unwrap(),
            1.0
        );
        let constant = vec![
            vec![Some(0.1), Some(0.1), Some(0.1)],
            vec![Some(0.1), Some(0.1)],
        ];
        assert!(krippendorff_alpha(&constant, AlphaLevel::Nominal).is_err());
        assert!(krippendorff_alpha(&constant, AlphaLevel::Interval).is_err());
    }

    #[test]
    fn icc_needs_rectangular_finite_data() {
        assert!(icc_2_1(&[vec![1.0, 2.0], vec![3.0]]).is_err());
        assert!(icc_2_1(&[vec![1.0, 2.0]]).is_err());
        assert!(icc_2_1(&[vec![1.0, f64::NAN], vec![3.0, 4.0]]).is_err());
        let perfect = [vec![1.0, 1.0], vec![2.0, 2.0], vec![4.0, 4.0]];
        assert!((icc_2_1(&perfect).unwrap() - 1.0).abs() < 1e-15);
    }

    fn cfg() -> BootstrapConfig {
        BootstrapConfig {
            resamples: 1_000,
            level: 0.95,
            seed: 99,
        }
    }

    fn two_raters(n: usize) -> Vec<Vec<Option<f64>>> {
        // Rater b agrees with a except on every third item, where it is one point higher.
        (0..n)
            .map(|i| {
                let a = (i % 6) as f64;
                let b = if i % 3 == 0 { a + 1.0 } else { a };
                vec![Some(a), Some(b)]
            })
            .collect()
    }

    #[test]
    fn agreement_wraps_every_measure_with_a_deterministic_ci() {
        let items = two_raters(60);
        for measure in Measure::ALL {
            let e = agreement(measure, &items, &cfg()).unwrap();
            assert!(
                e.ci_low <= e.value && e.value <= e.ci_high,
                "{measure:?} {e:?}"
            );
            assert_eq!(e.n, 60);
            assert_eq!(
                e,
                agreement(measure, &items, &cfg()).unwrap(),
                "{measure:?} not deterministic"
            );
        }
    }

    #[test]
    fn agreement_point_estimates_match_the_plain_functions() {
        let items = two_raters(30);
        let x: Vec<f64> = items.iter().map(|r| r[0].unwrap()).collect();
        let y: Vec<f64> = items.iter().map(|r| r[1].unwrap()).collect();
        let xi: Vec<i64> = x.iter().map(|&v| v as i64).collect();
        let yi: Vec<i64> = y.iter().map(|&v| v as i64).collect();
        let full: Vec<Vec<f64>> = x.iter().zip(&y).map(|(a, b)| vec![*a, *b]).collect();
        let value = |m| agreement(m, &items, &cfg()).unwrap().value;
        assert_eq!(value(Measure::Pearson), pearson(&x, &y).unwrap());
        assert_eq!(value(Measure::Spearman), spearman(&x, &y).unwrap());
        assert_eq!(value(Measure::CohenKappa), cohen_kappa(&xi, &yi).unwrap());
        assert_eq!(
            value(Measure::QuadraticKappa),
            quadratic_kappa(&xi, &yi).unwrap()
        );
        assert_eq!(
            value(Measure::AlphaInterval),
            krippendorff_alpha(&items, AlphaLevel::Interval).unwrap()
        );
        assert_eq!(value(Measure::Icc21), icc_2_1(&full).unwrap());
    }

    #[test]
    fn agreement_uses_only_usable_items() {
        let mut items = two_raters(20);
        items.push(vec![Some(3.0), None]);
        items.push(vec![None, None]);
        assert_eq!(agreement(Measure::Pearson, &items, &cfg()).unwrap().n, 20);
        assert_eq!(agreement(Measure::Icc21, &items, &cfg()).unwrap().n, 20);
        assert_eq!(
            agreement(Measure::AlphaNominal, &items, &cfg()).unwrap().n,
            20
        );
    }

    #[test]
    fn agreement_rejects_bad_matrices() {
        let three = vec![vec![Some(1.0), Some(2.0), Some(3.0)]; 5];
        assert!(agreement(Measure::Pearson, &three, &cfg()).is_err());
        let fractional = vec![vec![Some(1.5), Some(2.0)], vec![Some(1.0), Some(3.0)]];
        assert!(agreement(Measure::QuadraticKappa, &fractional, &cfg()).is_err());
        let nan = vec![vec![Some(f64::NAN), Some(2.0)], vec![Some(1.0), Some(3.0)]];
        assert!(agreement(Measure::AlphaInterval, &nan, &cfg()).is_err());
    }

    #[test]
    fn ci_narrows_with_more_items() {
        let noisy = |n: usize| -> Vec<Vec<Option<f64>>> {
            let mut draw = crate::rng::Draw::new(n as u64);
            (0..n)
                .map(|_| {
                    let truth = draw.below(6) as f64;
                    let noise = draw.below(3) as f64 - 1.0;
                    vec![Some(truth), Some(truth + noise)]
                })
                .collect()
        };
        let small = agreement(Measure::Pearson, &noisy(30), &cfg()).unwrap();
        let large = agreement(Measure::Pearson, &noisy(600), &cfg()).unwrap();
        assert!(
            large.ci_high - large.ci_low < 0.5 * (small.ci_high - small.ci_low),
            "{small:?} {large:?}"
        );
    }
}
