//! Balanced F1 of met / not-met decisions: how HealthBench meta-evaluates its grader against physicians,
//! criterion by criterion.
//!
//! Each pair is one rater's decision beside a reference decision on the same criterion of the same answer
//! (`(rater, reference)`). F1 is computed once with "met" as the positive class and once with "not met", and
//! the two are averaged, so a rater cannot score well by saying "met" to everything when most criteria are met.
//! With several reference raters, every (rater, reference) pair counts, as in HealthBench's meta-evaluation.
//! This equals scikit-learn's `f1_score(reference, rater, average="macro")` whenever both classes occur.

use crate::bootstrap::{bootstrap, BootstrapConfig, Design};
use crate::{Estimate, Result};

/// Counts of agreement by class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Counts {
    both_met: usize,
    both_not: usize,
    rater_only: usize,
    reference_only: usize,
}

impl Counts {
    fn add(&mut self, (rater, reference): (bool, bool)) {
        match (rater, reference) {
            (true, true) => self.both_met += 1,
            (false, false) => self.both_not += 1,
            (true, false) => self.rater_only += 1,
            (false, true) => self.reference_only += 1,
        }
    }
}

/// F1 of one class from its true positives and both kinds of miss; `None` when the class never occurs on
/// either side, where precision and recall are both undefined.
fn f1(hits: usize, false_pos: usize, false_neg: usize) -> Option<f64> {
    if hits + false_pos == 0 || hits + false_neg == 0 {
        return None;
    }
    // 2PR/(P+R) written on counts: the same value without two divisions that could round differently.
    Some(2.0 * hits as f64 / (2 * hits + false_pos + false_neg) as f64)
}

fn from_counts(c: &Counts) -> Option<f64> {
    let met = f1(c.both_met, c.rater_only, c.reference_only)?;
    let not_met = f1(c.both_not, c.reference_only, c.rater_only)?;
    Some((met + not_met) / 2.0)
}

/// The mean of F1 on "met" and F1 on "not met" over `(rater, reference)` pairs; `None` when either class is
/// missing from the rater's or the reference's decisions (HealthBench leaves the value undefined there).
pub fn balanced_f1(pairs: &[(bool, bool)]) -> Option<f64> {
    let mut c = Counts::default();
    pairs.iter().for_each(|&p| c.add(p));
    from_counts(&c)
}

/// [`balanced_f1`] with a percentile bootstrap interval over items: `items[i]` holds every `(rater, reference)`
/// pair of one criterion of one answer (one per reference rater), and `design` resamples items (or clusters of
/// them, such as all criteria of one answer).
pub fn balanced_f1_estimate(
    items: &[Vec<(bool, bool)>],
    design: &Design,
    cfg: &BootstrapConfig,
) -> Result<Estimate> {
    let counts: Vec<Counts> = items
        .iter()
        .map(|pairs| {
            let mut c = Counts::default();
            pairs.iter().for_each(|&p| c.add(p));
            c
        })
        .collect();
    bootstrap(design, cfg, |idx| {
        let mut total = Counts::default();
        for &i in idx {
            let c = &counts[i];
            total.both_met += c.both_met;
            total.both_not += c.both_not;
            total.rater_only += c.rater_only;
            total.reference_only += c.reference_only;
        }
        from_counts(&total)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perfect_agreement_is_one_and_a_missing_class_is_undefined() {
        let pairs = [(true, true), (false, false), (true, true)];
        assert_eq!(balanced_f1(&pairs), Some(1.0));
        assert_eq!(balanced_f1(&[(true, true), (true, true)]), None);
        assert_eq!(balanced_f1(&[]), None);
    }

    #[test]
    fn missing_the_rare_class_costs_more_than_accuracy_shows() {
        let mut pairs = vec![(true, true); 9];
        pairs.push((true, false));
        pairs.push((false, false));
        // Accuracy is 10/11; F1 on "met" is 18/19 but on "not met" only 2/3, and both weigh the same.
        let got = balanced_f1(&pairs).unwrap();
        let want = (18.0 / 19.0 + 2.0 / 3.0) / 2.0;
        assert!((got - want).abs() < 1e-15, "{got}");
    }

    #[test]
    fn the_interval_covers_the_point_and_is_reproducible() {
        let items: Vec<Vec<(bool, bool)>> = (0..40)
            .map(|i| vec![(i % 3 != 0, i % 4 != 0), (i % 3 != 0, i % 5 != 0)])
            .collect();
        let cfg = BootstrapConfig {
            resamples: 300,
            ..BootstrapConfig::default()
        };
        let a = balanced_f1_estimate(&items, &Design::units(items.len()), &cfg).unwrap();
        let flat: Vec<(bool, bool)> = items.iter().flatten().copied().collect();
        assert_eq!(a.value, balanced_f1(&flat).unwrap());
        assert!(a.ci_low <= a.value && a.value <= a.ci_high, "{a:?}");
        let b = balanced_f1_estimate(&items, &Design::units(items.len()), &cfg).unwrap();
        assert_eq!(a, b);
    }
}
