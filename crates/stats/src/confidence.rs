//! How well a stated confidence predicts being right: expected calibration error (equal-width and equal-mass
//! bins), the Brier score, AUROC, and the bins of a reliability diagram.
//!
//! Confidences must lie in [0, 1]; a caller filters out answers that gave none (or an invalid one) and reports
//! them separately.

use serde::{Deserialize, Serialize};

use crate::bootstrap::{bootstrap, BootstrapConfig, Design};
use crate::{check_finite, check_same_len, Estimate, Result, StatsError};

/// One bin of a reliability diagram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bin {
    /// Confidence range of the bin: `[lo, hi)`, the last bin also taking 1.
    pub lo: f64,
    pub hi: f64,
    pub count: usize,
    /// Mean stated confidence in the bin (`None` when empty).
    pub confidence: Option<f64>,
    /// Share correct in the bin (`None` when empty).
    pub accuracy: Option<f64>,
}

fn check(conf: &[f64], correct: &[bool]) -> Result<()> {
    check_same_len("confidences and outcomes", conf.len(), correct.len())?;
    check_finite("confidence", conf)?;
    if conf.is_empty() {
        return Err(StatsError::Invalid {
            what: "calibration",
            expected: "at least one answer with a confidence".into(),
        });
    }
    match conf.iter().find(|c| !(0.0..=1.0).contains(*c)) {
        Some(c) => Err(StatsError::Invalid {
            what: "confidence",
            expected: format!("a number in [0, 1], got {c}"),
        }),
        None => Ok(()),
    }
}

/// The equal-width bin of a confidence: `[i/bins, (i+1)/bins)`, with 1 in the last bin (NumPy's
/// `minimum((c * bins).astype(int), bins - 1)`, the same floating-point steps).
fn bin_of(c: f64, bins: usize) -> usize {
    ((c * bins as f64) as usize).min(bins - 1)
}

/// `bins` equal-width bins over [0, 1], for a reliability diagram.
pub fn reliability(conf: &[f64], correct: &[bool], bins: usize) -> Result<Vec<Bin>> {
    check(conf, correct)?;
    let bins = bins.max(1);
    let mut sum_conf = vec![0.0; bins];
    let mut hits = vec![0usize; bins];
    let mut count = vec![0usize; bins];
    for (c, ok) in conf.iter().zip(correct) {
        let b = bin_of(*c, bins);
        sum_conf[b] += c;
        hits[b] += usize::from(*ok);
        count[b] += 1;
    }
    Ok((0..bins)
        .map(|b| {
            let n = count[b];
            Bin {
                lo: b as f64 / bins as f64,
                hi: (b + 1) as f64 / bins as f64,
                count: n,
                confidence: (n > 0).then(|| sum_conf[b] / n as f64),
                accuracy: (n > 0).then(|| hits[b] as f64 / n as f64),
            }
        })
        .collect())
}

/// Gap between confidence and accuracy over groups, weighted by group size.
fn weighted_gap(groups: &[Vec<usize>], conf: &[f64], correct: &[bool], n: usize) -> f64 {
    groups
        .iter()
        .filter(|g| !g.is_empty())
        .map(|g| {
            let m = g.len() as f64;
            let c = g.iter().map(|&i| conf[i]).sum::<f64>() / m;
            let a = g.iter().filter(|&&i| correct[i]).count() as f64 / m;
            m / n as f64 * (a - c).abs()
        })
        .sum()
}

/// Expected calibration error over `bins` equal-width bins of [0, 1].
pub fn ece(conf: &[f64], correct: &[bool], bins: usize) -> Result<f64> {
    check(conf, correct)?;
    let all: Vec<usize> = (0..conf.len()).collect();
    Ok(ece_at(conf, correct, bins.max(1), &all))
}

fn ece_at(conf: &[f64], correct: &[bool], bins: usize, idx: &[usize]) -> f64 {
    let mut groups = vec![Vec::new(); bins];
    for &i in idx {
        groups[bin_of(conf[i], bins)].push(i);
    }
    weighted_gap(&groups, conf, correct, idx.len())
}

/// Adaptive (equal-mass) ECE: answers sorted by confidence (ties by position) and cut into `bins` groups whose
/// sizes differ by at most one, the larger groups first (as NumPy's `array_split`).
pub fn adaptive_ece(conf: &[f64], correct: &[bool], bins: usize) -> Result<f64> {
    check(conf, correct)?;
    let all: Vec<usize> = (0..conf.len()).collect();
    Ok(adaptive_ece_at(conf, correct, bins.max(1), &all))
}

fn adaptive_ece_at(conf: &[f64], correct: &[bool], bins: usize, idx: &[usize]) -> f64 {
    let mut order = idx.to_vec();
    order.sort_by(|&a, &b| conf[a].total_cmp(&conf[b]).then(a.cmp(&b)));
    let (size, extra) = (order.len() / bins, order.len() % bins);
    let mut groups = Vec::with_capacity(bins);
    let mut start = 0;
    for g in 0..bins {
        let len = size + usize::from(g < extra);
        groups.push(order[start..start + len].to_vec());
        start += len;
    }
    weighted_gap(&groups, conf, correct, idx.len())
}

/// Mean squared difference between confidence and outcome (1 for correct, 0 for wrong).
pub fn brier(conf: &[f64], correct: &[bool]) -> Result<f64> {
    check(conf, correct)?;
    let all: Vec<usize> = (0..conf.len()).collect();
    Ok(brier_at(conf, correct, &all))
}

fn brier_at(conf: &[f64], correct: &[bool], idx: &[usize]) -> f64 {
    idx.iter()
        .map(|&i| (conf[i] - f64::from(u8::from(correct[i]))).powi(2))
        .sum::<f64>()
        / idx.len() as f64
}

/// Area under the ROC curve of confidence as a score for being correct (ties count one half), or `None` when
/// every answer is right or every answer is wrong.
pub fn auroc(conf: &[f64], correct: &[bool]) -> Result<Option<f64>> {
    check(conf, correct)?;
    let all: Vec<usize> = (0..conf.len()).collect();
    Ok(auroc_at(conf, correct, &all))
}

fn auroc_at(conf: &[f64], correct: &[bool], idx: &[usize]) -> Option<f64> {
    // Mann–Whitney: the rank sum of the positives, with tied scores sharing their average rank.
    let mut order = idx.to_vec();
    order.sort_by(|&a, &b| conf[a].total_cmp(&conf[b]));
    let (mut rank_sum, mut start) = (0.0, 0);
    while start < order.len() {
        let mut end = start;
        while end + 1 < order.len() && conf[order[end + 1]] == conf[order[start]] {
            end += 1;
        }
        let avg_rank = (start + end) as f64 / 2.0 + 1.0;
        let positives = order[start..=end].iter().filter(|&&i| correct[i]).count();
        rank_sum += avg_rank * positives as f64;
        start = end + 1;
    }
    let pos = idx.iter().filter(|&&i| correct[i]).count() as f64;
    let neg = idx.len() as f64 - pos;
    (pos > 0.0 && neg > 0.0).then(|| (rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg))
}

/// ECE (10 equal-width bins), adaptive ECE, Brier score and AUROC, each with a bootstrap interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationEstimates {
    pub ece: Estimate,
    pub adaptive_ece: Estimate,
    pub brier: Estimate,
    /// `None` when every answer (on the full data) is right or every one is wrong.
    pub auroc: Option<Estimate>,
    pub bins: Vec<Bin>,
}

/// The calibration numbers of `conf` against `correct`, with percentile bootstrap intervals over `design`.
pub fn calibration_estimates(
    conf: &[f64],
    correct: &[bool],
    bins: usize,
    design: &Design,
    cfg: &BootstrapConfig,
) -> Result<CalibrationEstimates> {
    check(conf, correct)?;
    let bins = bins.max(1);
    let auroc = match auroc(conf, correct)? {
        Some(_) => Some(bootstrap(design, cfg, |idx| auroc_at(conf, correct, idx))?),
        None => None,
    };
    Ok(CalibrationEstimates {
        ece: bootstrap(design, cfg, |idx| Some(ece_at(conf, correct, bins, idx)))?,
        adaptive_ece: bootstrap(design, cfg, |idx| {
            Some(adaptive_ece_at(conf, correct, bins, idx))
        })?,
        brier: bootstrap(design, cfg, |idx| Some(brier_at(conf, correct, idx)))?,
        auroc,
        bins: reliability(conf, correct, bins)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_perfectly_calibrated_and_a_perfectly_wrong_predictor() {
        let conf = [1.0, 1.0, 0.0, 0.0];
        let right = [true, true, false, false];
        assert_eq!(ece(&conf, &right, 10).unwrap(), 0.0);
        assert_eq!(brier(&conf, &right).unwrap(), 0.0);
        assert_eq!(auroc(&conf, &right).unwrap(), Some(1.0));
        let wrong = [false, false, true, true];
        assert_eq!(ece(&conf, &wrong, 10).unwrap(), 1.0);
        assert_eq!(auroc(&conf, &wrong).unwrap(), Some(0.0));
        assert_eq!(auroc(&conf, &[true; 4]).unwrap(), None);
    }

    #[test]
    fn confidences_outside_zero_to_one_are_errors() {
        assert!(ece(&[1.2], &[true], 10).is_err());
        assert!(brier(&[f64::NAN], &[true]).is_err());
        assert!(auroc(&[], &[]).is_err());
    }

    #[test]
    fn bins_are_closed_on_the_left_and_the_last_takes_one() {
        assert_eq!(bin_of(0.0, 10), 0);
        assert_eq!(bin_of(0.0999, 10), 0);
        assert_eq!(bin_of(0.1, 10), 1);
        assert_eq!(bin_of(0.3, 10), 3);
        assert_eq!(bin_of(1.0, 10), 9);
    }
}
