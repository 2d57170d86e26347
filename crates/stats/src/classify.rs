//! Multi-class classification metrics where the classifier may abstain (NeuroVLM-Bench's per-field scores).
//!
//! An abstention is a false negative for the true class and never a false positive for any class: it lowers
//! recall (and accuracy) but no class's precision. Labels are class indices `0..classes`; a prediction of `None`
//! is an abstention.

use serde::{Deserialize, Serialize};

use crate::bootstrap::{bootstrap_many, BootstrapConfig, Design};
use crate::{check_same_len, Estimate, Result, StatsError};

/// Precision, recall, F1 and support of one class. Precision is 0 when the class was never predicted, F1 is 0
/// when precision and recall are both 0 (scikit-learn's `zero_division=0`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ClassMetrics {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// Items whose true label is this class.
    pub support: u64,
}

/// Every per-field number at once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Classification {
    pub n: usize,
    /// Share of items predicted exactly right (an abstention is wrong).
    pub accuracy: f64,
    /// Mean recall over the classes present in the truth.
    pub balanced_accuracy: f64,
    /// Mean F1 over the classes present in the truth or the predictions.
    pub macro_f1: f64,
    /// F1 averaged with each class weighted by its support.
    pub weighted_f1: f64,
    pub abstention_rate: f64,
    /// One entry per class index, present or not.
    pub per_class: Vec<ClassMetrics>,
}

fn check(truth: &[usize], pred: &[Option<usize>], classes: usize) -> Result<()> {
    check_same_len("truth and predictions", truth.len(), pred.len())?;
    if truth.is_empty() {
        return Err(StatsError::Invalid {
            what: "classification",
            expected: "at least one item".into(),
        });
    }
    let out_of_range = truth
        .iter()
        .copied()
        .chain(pred.iter().flatten().copied())
        .find(|&c| c >= classes);
    match out_of_range {
        Some(c) => Err(StatsError::Invalid {
            what: "class label",
            expected: format!("an index below {classes}, got {c}"),
        }),
        None => Ok(()),
    }
}

/// The metrics on the items `idx` (repeats allowed, as in a bootstrap resample).
fn metrics_at(
    truth: &[usize],
    pred: &[Option<usize>],
    classes: usize,
    idx: &[usize],
) -> Classification {
    let mut tp = vec![0u64; classes];
    let mut predicted = vec![0u64; classes];
    let mut support = vec![0u64; classes];
    let (mut correct, mut abstained) = (0u64, 0u64);
    for &i in idx {
        support[truth[i]] += 1;
        match pred[i] {
            Some(p) => {
                predicted[p] += 1;
                if p == truth[i] {
                    tp[p] += 1;
                    correct += 1;
                }
            }
            None => abstained += 1,
        }
    }
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    let per_class: Vec<ClassMetrics> = (0..classes)
        .map(|c| {
            let precision = ratio(tp[c], predicted[c]);
            let recall = ratio(tp[c], support[c]);
            let f1 = if precision + recall > 0.0 {
                2.0 * precision * recall / (precision + recall)
            } else {
                0.0
            };
            ClassMetrics {
                precision,
                recall,
                f1,
                support: support[c],
            }
        })
        .collect();
    let n = idx.len() as u64;
    let present: Vec<usize> = (0..classes).filter(|&c| support[c] > 0).collect();
    let seen: Vec<usize> = (0..classes)
        .filter(|&c| support[c] > 0 || predicted[c] > 0)
        .collect();
    let mean = |cs: &[usize], f: &dyn Fn(&ClassMetrics) -> f64| {
        cs.iter().map(|&c| f(&per_class[c])).sum::<f64>() / cs.len().max(1) as f64
    };
    Classification {
        n: idx.len(),
        accuracy: ratio(correct, n),
        balanced_accuracy: mean(&present, &|m| m.recall),
        macro_f1: mean(&seen, &|m| m.f1),
        weighted_f1: per_class
            .iter()
            .map(|m| m.f1 * m.support as f64)
            .sum::<f64>()
            / n.max(1) as f64,
        abstention_rate: ratio(abstained, n),
        per_class,
    }
}

/// Accuracy, balanced accuracy, macro- and weighted-F1, abstention rate and per-class metrics.
pub fn classification(
    truth: &[usize],
    pred: &[Option<usize>],
    classes: usize,
) -> Result<Classification> {
    check(truth, pred, classes)?;
    let all: Vec<usize> = (0..truth.len()).collect();
    Ok(metrics_at(truth, pred, classes, &all))
}

/// The headline classification numbers, each with a bootstrap interval over `design` (use clusters of items
/// that share a case).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassificationEstimates {
    pub accuracy: Estimate,
    pub balanced_accuracy: Estimate,
    pub macro_f1: Estimate,
    pub weighted_f1: Estimate,
    pub abstention_rate: Estimate,
    /// One entry per class index.
    pub per_class: Vec<ClassEstimates>,
}

/// One class's precision, recall and F1 with bootstrap intervals. A number whose denominator is zero on the
/// full data is `None` (precision of a class never predicted, recall of a class never true, F1 of a class
/// neither); a resample where it is zero is left out of that interval and counted as undefined.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassEstimates {
    pub precision: Option<Estimate>,
    pub recall: Option<Estimate>,
    pub f1: Option<Estimate>,
    /// Items whose true label is this class.
    pub support: u64,
}

/// Per-class counts on some items.
struct Counts {
    tp: Vec<u64>,
    predicted: Vec<u64>,
    support: Vec<u64>,
}

fn counts_at(truth: &[usize], pred: &[Option<usize>], classes: usize, idx: &[usize]) -> Counts {
    let mut c = Counts {
        tp: vec![0; classes],
        predicted: vec![0; classes],
        support: vec![0; classes],
    };
    for &i in idx {
        c.support[truth[i]] += 1;
        if let Some(p) = pred[i] {
            c.predicted[p] += 1;
            c.tp[p] += u64::from(p == truth[i]);
        }
    }
    c
}

/// Precision, recall and F1 of class `k`, each `None` where its denominator is zero.
fn class_values(c: &Counts, k: usize) -> [Option<f64>; 3] {
    let ratio = |a: u64, b: u64| (b > 0).then(|| a as f64 / b as f64);
    let precision = ratio(c.tp[k], c.predicted[k]);
    let recall = ratio(c.tp[k], c.support[k]);
    let f1 = (c.predicted[k] + c.support[k] > 0).then(|| {
        let (p, r) = (precision.unwrap_or(0.0), recall.unwrap_or(0.0));
        if p + r > 0.0 {
            2.0 * p * r / (p + r)
        } else {
            0.0
        }
    });
    [precision, recall, f1]
}

/// [`classification`]'s numbers with percentile bootstrap intervals; every statistic uses the same seeded
/// resamples.
pub fn classification_estimates(
    truth: &[usize],
    pred: &[Option<usize>],
    classes: usize,
    design: &Design,
    cfg: &BootstrapConfig,
) -> Result<ClassificationEstimates> {
    check(truth, pred, classes)?;
    let all: Vec<usize> = (0..truth.len()).collect();
    let whole = counts_at(truth, pred, classes, &all);
    // Statistics undefined on the full data are left out of the bootstrap and reported as `None`.
    let mut wanted: Vec<(usize, usize)> = Vec::new();
    for k in 0..classes {
        for (j, v) in class_values(&whole, k).iter().enumerate() {
            if v.is_some() {
                wanted.push((k, j));
            }
        }
    }
    let width = 5 + wanted.len();
    let mut est = bootstrap_many(design, cfg, width, |idx| {
        let m = metrics_at(truth, pred, classes, idx);
        let c = counts_at(truth, pred, classes, idx);
        let mut out = vec![
            Some(m.accuracy),
            Some(m.balanced_accuracy),
            Some(m.macro_f1),
            Some(m.weighted_f1),
            Some(m.abstention_rate),
        ];
        out.extend(wanted.iter().map(|&(k, j)| class_values(&c, k)[j]));
        out
    })?
    .into_iter();
    let mut next = || est.next().expect("one estimate per statistic");
    let (accuracy, balanced_accuracy, macro_f1, weighted_f1, abstention_rate) =
        (next(), next(), next(), next(), next());
    let mut per_class: Vec<ClassEstimates> = (0..classes)
        .map(|k| ClassEstimates {
            precision: None,
            recall: None,
            f1: None,
            support: whole.support[k],
        })
        .collect();
    for &(k, j) in &wanted {
        let slot = match j {
            0 => &mut per_class[k].precision,
            1 => &mut per_class[k].recall,
            _ => &mut per_class[k].f1,
        };
        *slot = Some(next());
    }
    Ok(ClassificationEstimates {
        accuracy,
        balanced_accuracy,
        macro_f1,
        weighted_f1,
        abstention_rate,
        per_class,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_abstention_is_a_false_negative_and_never_a_false_positive() {
        // Class 0 is predicted once correctly, abstained once; class 1 once right, once called 0.
        let truth = [0, 0, 1, 1];
        let pred = [Some(0), None, Some(1), Some(0)];
        let m = classification(&truth, &pred, 2).unwrap();
        assert_eq!(m.accuracy, 0.5);
        assert_eq!(m.abstention_rate, 0.25);
        assert_eq!(
            m.per_class[0].precision, 0.5,
            "the abstention is not a false positive"
        );
        assert_eq!(m.per_class[0].recall, 0.5, "it is a false negative");
        assert_eq!(m.per_class[1].recall, 0.5);
        assert_eq!(m.per_class[1].precision, 1.0);
        assert_eq!(m.balanced_accuracy, 0.5);
    }

    #[test]
    fn labels_out_of_range_and_empty_input_are_errors() {
        assert!(classification(&[0, 3], &[Some(0), Some(1)], 3).is_err());
        assert!(classification(&[0], &[Some(5)], 3).is_err());
        assert!(classification(&[], &[], 3).is_err());
        assert!(classification(&[0], &[], 3).is_err());
    }
}
