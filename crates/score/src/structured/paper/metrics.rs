//! The reference's metrics on string labels, as scikit-learn computes them for `evaluate_detailed.py`: F1,
//! precision and recall over a chosen label set (`zero_division=0`), the same with abstentions that are never a
//! false positive (`f1_with_abstention`), balanced accuracy, one-vs-rest balanced accuracy per label, and ECE,
//! Brier and AUROC of a confidence.

use std::collections::BTreeSet;

use nmb_results::structured::paper::{Calibration, PerLabel};

/// Counts of one label.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    tp: u64,
    fp: u64,
    fn_: u64,
}

impl Counts {
    fn of(label: &str, truth: &[String], pred: &[String], abstain: Option<&str>) -> Counts {
        let mut c = Counts::default();
        for (t, p) in truth.iter().zip(pred) {
            // An abstention is replaced by a label no class has, as `f1_with_abstention` does.
            let p = if abstain == Some(p.as_str()) {
                None
            } else {
                Some(p.as_str())
            };
            let (is_t, is_p) = (t == label, p == Some(label));
            c.tp += u64::from(is_t && is_p);
            c.fp += u64::from(!is_t && is_p);
            c.fn_ += u64::from(is_t && !is_p);
        }
        c
    }

    fn support(&self) -> u64 {
        self.tp + self.fn_
    }

    fn precision(&self) -> f64 {
        ratio(self.tp, self.tp + self.fp)
    }

    fn recall(&self) -> f64 {
        ratio(self.tp, self.tp + self.fn_)
    }

    fn f1(&self) -> f64 {
        ratio(2 * self.tp, 2 * self.tp + self.fp + self.fn_)
    }
}

/// `a / b`, 0 where `b` is 0 (scikit-learn's `zero_division=0`).
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// Which labels a number is averaged over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Labels {
    /// The labels of the ground truth (`labels=np.unique(y_true)`).
    Truth,
    /// Every label in the truth or the predictions (scikit-learn's default).
    All,
}

/// One field's truth and predictions, normalised.
pub struct Series<'a> {
    pub truth: &'a [String],
    pub pred: &'a [String],
    /// The abstention label (`undetermined`): in the abstention-aware numbers it is no class and never a
    /// false positive.
    pub abstain: &'a str,
}

impl Series<'_> {
    /// The sorted label set.
    pub fn labels(&self, which: Labels) -> Vec<String> {
        let mut set: BTreeSet<&String> = self.truth.iter().collect();
        if which == Labels::All {
            set.extend(self.pred);
        }
        set.into_iter().cloned().collect()
    }

    fn counts(&self, labels: &[String], abstaining: bool) -> Vec<Counts> {
        let abstain = abstaining.then_some(self.abstain);
        labels
            .iter()
            .filter(|l| abstain != Some(l.as_str()))
            .map(|l| Counts::of(l, self.truth, self.pred, abstain))
            .collect()
    }

    /// Macro F1 over `which` labels; with `abstaining`, the abstention label is no class.
    pub fn macro_f1(&self, which: Labels, abstaining: bool) -> f64 {
        mean(&self.counts(&self.labels(which), abstaining), Counts::f1)
    }

    /// Support-weighted F1 over `which` labels.
    pub fn weighted_f1(&self, which: Labels, abstaining: bool) -> f64 {
        let counts = self.counts(&self.labels(which), abstaining);
        let total: u64 = counts.iter().map(Counts::support).sum();
        let weighted: f64 = counts.iter().map(|c| c.f1() * c.support() as f64).sum();
        if total == 0 {
            0.0
        } else {
            weighted / total as f64
        }
    }

    /// Macro precision over the truth's labels, abstentions never a false positive.
    pub fn macro_precision(&self) -> f64 {
        mean(
            &self.counts(&self.labels(Labels::Truth), true),
            Counts::precision,
        )
    }

    /// Macro recall over the truth's labels, abstentions never a false positive.
    pub fn macro_recall(&self) -> f64 {
        mean(
            &self.counts(&self.labels(Labels::Truth), true),
            Counts::recall,
        )
    }

    /// scikit-learn's `balanced_accuracy_score`: mean recall over the labels of the truth, an abstention label
    /// being an ordinary label.
    pub fn balanced_accuracy(&self) -> f64 {
        mean(
            &self.counts(&self.labels(Labels::Truth), false),
            Counts::recall,
        )
    }

    /// Every per-label list the reference keeps.
    pub fn per_label(&self) -> PerLabel {
        let labels = self.labels(Labels::All);
        let plain = self.counts(&labels, false);
        let abstaining = self.counts(&labels, true);
        let n = self.truth.len() as u64;
        PerLabel {
            support: plain.iter().map(Counts::support).collect(),
            f1: plain.iter().map(Counts::f1).collect(),
            balanced_accuracy: plain.iter().map(|c| one_vs_rest(c, n)).collect(),
            abstention_labels: labels
                .iter()
                .filter(|l| *l != self.abstain)
                .cloned()
                .collect(),
            precision: abstaining.iter().map(Counts::precision).collect(),
            recall: abstaining.iter().map(Counts::recall).collect(),
            f1_abstention: abstaining.iter().map(Counts::f1).collect(),
            labels,
        }
    }
}

/// `per_label_balanced_accuracy`: (recall + specificity) / 2 of one label against the rest.
fn one_vs_rest(c: &Counts, n: u64) -> f64 {
    let tn = n - (c.tp + c.fn_ + c.fp);
    (ratio(c.tp, c.tp + c.fn_) + ratio(tn, tn + c.fp)) / 2.0
}

fn mean(counts: &[Counts], f: fn(&Counts) -> f64) -> f64 {
    if counts.is_empty() {
        return 0.0;
    }
    counts.iter().map(f).sum::<f64>() / counts.len() as f64
}

/// The reference's calibration: confidences clipped to [0, 1]; ECE over ten equal bins, the first [0, 0.1] and
/// the others right-closed (a, b]; AUROC only when both outcomes occur. A NaN confidence makes scikit-learn
/// refuse the Brier score, and the reference then reports all three as NaN.
pub fn calibration(conf: &[f64], correct: &[bool]) -> Calibration {
    let probs: Vec<f64> = conf.iter().map(|c| c.clamp(0.0, 1.0)).collect();
    if probs.is_empty() || probs.iter().any(|p| p.is_nan()) {
        return Calibration {
            ece: None,
            brier: None,
            auroc: None,
        };
    }
    let hits: Vec<f64> = correct.iter().map(|&c| f64::from(u8::from(c))).collect();
    let brier = probs
        .iter()
        .zip(&hits)
        .map(|(p, y)| (p - y) * (p - y))
        .sum::<f64>()
        / probs.len() as f64;
    Calibration {
        ece: Some(ece(&probs, &hits, 10)),
        brier: Some(brier),
        auroc: auroc(&probs, correct),
    }
}

/// `ece_binned`: bin edges as `np.linspace(0, 1, bins + 1)` computes them.
fn ece(probs: &[f64], hits: &[f64], bins: usize) -> f64 {
    let step = 1.0 / bins as f64;
    let edge = |i: usize| if i == bins { 1.0 } else { i as f64 * step };
    let n = probs.len() as f64;
    let mut total = 0.0;
    for i in 0..bins {
        let (lo, hi) = (edge(i), edge(i + 1));
        let inside: Vec<usize> = (0..probs.len())
            .filter(|&j| (probs[j] > lo || (i == 0 && probs[j] >= lo)) && probs[j] <= hi)
            .collect();
        if inside.is_empty() {
            continue;
        }
        let m = inside.len() as f64;
        let acc = inside.iter().map(|&j| hits[j]).sum::<f64>() / m;
        let conf = inside.iter().map(|&j| probs[j]).sum::<f64>() / m;
        total += m / n * (acc - conf).abs();
    }
    total
}

/// The area under the ROC curve, ties counted half (what `roc_auc_score` computes); `None` without both
/// outcomes.
fn auroc(scores: &[f64], positive: &[bool]) -> Option<f64> {
    let pos = positive.iter().filter(|&&p| p).count();
    let neg = positive.len() - pos;
    if pos == 0 || neg == 0 {
        return None;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    let mut rank_sum = 0.0;
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && scores[order[j + 1]] == scores[order[i]] {
            j += 1;
        }
        // Tied scores share the mean of their ranks (1-based).
        let rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum += rank * order[i..=j].iter().filter(|&&k| positive[k]).count() as f64;
        i = j + 1;
    }
    let (pos, neg) = (pos as f64, neg as f64);
    Some((rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn an_abstention_is_a_false_positive_only_in_the_plain_numbers() {
        let truth = strings(&["a", "a", "b", "b"]);
        let pred = strings(&["a", "undetermined", "b", "a"]);
        let s = Series {
            truth: &truth,
            pred: &pred,
            abstain: "undetermined",
        };
        assert_eq!(s.labels(Labels::All), ["a", "b", "undetermined"]);
        // Over the truth's labels the abstention is never a class.
        assert!((s.macro_f1(Labels::Truth, false) - s.macro_f1(Labels::Truth, true)).abs() < 1e-15);
        // Over every label it is one, with F1 0, which lowers the plain mean.
        assert!(s.macro_f1(Labels::All, false) < s.macro_f1(Labels::All, true));
        assert_eq!(s.balanced_accuracy(), 0.5);
    }

    #[test]
    fn ece_bins_are_right_closed_and_the_first_holds_zero() {
        // 0.8 sits in (0.7, 0.8], with 0.75: one hit, one miss.
        let e = ece(&[0.75, 0.8, 0.0], &[1.0, 0.0, 0.0], 10);
        assert!(
            (e - (2.0 / 3.0 * (0.5f64 - 0.775).abs())).abs() < 1e-12,
            "{e}"
        );
        assert_eq!(auroc(&[0.2, 0.2, 0.9], &[false, true, true]), Some(0.75));
        assert_eq!(auroc(&[0.2, 0.9], &[true, true]), None);
    }
}
