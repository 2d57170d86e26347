//! Adjusted p-values for a family of comparisons: Holm's step-down (family-wise error) and
//! Benjamini–Hochberg's step-up (false discovery rate), as statsmodels' `multipletests` computes them
//! (methods `holm` and `fdr_bh`).
//!
//! A *family* is the set of p-values one reader scans for "significant" results at once: every group of one
//! `nmb compare`, every pair of models in a study at one level. The caller decides what is counted and should
//! say so beside the table; the arithmetic here only needs the list.

use serde::{Deserialize, Serialize};

use crate::{Result, StatsError};

/// Which adjustment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Correction {
    /// Holm (1979): controls the family-wise error rate (the chance of any false rejection) under any
    /// dependence between the tests.
    Holm,
    /// Benjamini and Hochberg (1995): controls the false discovery rate (the expected share of false rejections
    /// among the rejections) for independent or positively dependent tests.
    BenjaminiHochberg,
}

impl Correction {
    /// The name for tables and notes.
    pub fn label(self) -> &'static str {
        match self {
            Correction::Holm => "Holm",
            Correction::BenjaminiHochberg => "Benjamini–Hochberg",
        }
    }
}

/// One p-value of a family with its adjusted values; a comparison is significant at level α under a
/// correction when the adjusted value is at most α.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AdjustedP {
    pub raw: f64,
    pub holm: f64,
    /// Benjamini–Hochberg.
    pub bh: f64,
}

/// Holm and Benjamini–Hochberg adjusted values of every p-value in `p`, in the order given. `p` holds the
/// whole family (every comparison made, not only the ones shown as interesting). An empty family gives an
/// empty list; a NaN, an infinite value or a value outside [0, 1] is an error naming its index.
pub fn adjust_family(p: &[f64]) -> Result<Vec<AdjustedP>> {
    let holm = adjust(p, Correction::Holm)?;
    let bh = adjust(p, Correction::BenjaminiHochberg)?;
    Ok(p.iter()
        .zip(holm)
        .zip(bh)
        .map(|((&raw, holm), bh)| AdjustedP { raw, holm, bh })
        .collect())
}

/// Adjusted p-values in the order of `p`, equal to statsmodels'
/// `multipletests(p, method="holm" | "fdr_bh")[1]`.
///
/// With the `m` values sorted ascending, p₍₁₎ ≤ … ≤ p₍ₘ₎:
/// - Holm: p̃₍ᵢ₎ = min(1, maxⱼ≤ᵢ (m − j + 1)·p₍ⱼ₎) (a running maximum from the smallest p up);
/// - Benjamini–Hochberg: p̃₍ᵢ₎ = min(1, minⱼ≥ᵢ p₍ⱼ₎ / (j/m)) (a running minimum from the largest p down).
///
/// Tied p-values get the same adjusted value whatever their order, so the sort needs no tie rule (it is
/// stable all the same). p = 1 stays 1. Errors as [`adjust_family`].
pub fn adjust(p: &[f64], correction: Correction) -> Result<Vec<f64>> {
    check_p_values(p)?;
    let m = p.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&x, &y| p[x].total_cmp(&p[y]));
    let mut adjusted = vec![0.0; m];
    match correction {
        Correction::Holm => {
            let mut running = f64::NEG_INFINITY;
            for (rank, &i) in order.iter().enumerate() {
                running = running.max(p[i] * (m - rank) as f64);
                adjusted[i] = running.min(1.0);
            }
        }
        Correction::BenjaminiHochberg => {
            let mut running = f64::INFINITY;
            for (rank, &i) in order.iter().enumerate().rev() {
                // statsmodels divides by the empirical CDF (rank / m) rather than multiplying by m / rank; the
                // same operation keeps the two bit for bit.
                let ecdf = (rank + 1) as f64 / m as f64;
                running = running.min(p[i] / ecdf);
                adjusted[i] = running.min(1.0);
            }
        }
    }
    Ok(adjusted)
}

fn check_p_values(p: &[f64]) -> Result<()> {
    const WHAT: &str = "p-value adjustment";
    crate::check_finite(WHAT, p)?;
    match p.iter().position(|v| !(0.0..=1.0).contains(v)) {
        Some(index) => Err(StatsError::Invalid {
            what: WHAT,
            expected: format!(
                "p-values in [0, 1]; the one at index {index} is {}",
                p[index]
            ),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_family_by_hand() {
        // Sorted 0.01, 0.02, 0.03, 0.5. Holm: 0.04, 0.06, 0.06, 0.5. BH: 0.04, 0.04, 0.04, 0.5.
        let p = [0.03, 0.01, 0.5, 0.02];
        let holm = adjust(&p, Correction::Holm).unwrap();
        let bh = adjust(&p, Correction::BenjaminiHochberg).unwrap();
        let close = |x: &[f64], y: &[f64]| x.iter().zip(y).all(|(a, b)| (a - b).abs() < 1e-15);
        assert!(close(&holm, &[0.06, 0.04, 0.5, 0.06]), "{holm:?}");
        assert!(close(&bh, &[0.04, 0.04, 0.5, 0.04]), "{bh:?}");
    }

    #[test]
    fn ties_ones_and_empty_families() {
        let p = [0.02, 0.02, 1.0, 0.02];
        let holm = adjust(&p, Correction::Holm).unwrap();
        assert_eq!(holm, vec![0.08, 0.08, 1.0, 0.08]);
        let bh = adjust(&p, Correction::BenjaminiHochberg).unwrap();
        assert!(bh[..2]
            .iter()
            .chain(&bh[3..])
            .all(|&v| (v - 0.02 * 4.0 / 3.0).abs() < 1e-15));
        assert_eq!(bh[2], 1.0);
        assert!(adjust_family(&[]).unwrap().is_empty());
        let one = adjust_family(&[0.3]).unwrap();
        assert_eq!(
            one,
            vec![AdjustedP {
                raw: 0.3,
                holm: 0.3,
                bh: 0.3
            }]
        );
    }

    #[test]
    fn adjusted_values_never_fall_below_raw_and_never_exceed_one() {
        let p = [0.9, 0.0, 0.2, 0.04, 0.8, 0.001, 0.5];
        for a in adjust_family(&p).unwrap() {
            assert!(a.raw <= a.bh && a.bh <= a.holm && a.holm <= 1.0, "{a:?}");
        }
    }

    #[test]
    fn nan_and_out_of_range_values_are_refused() {
        let e = adjust_family(&[0.1, f64::NAN]).unwrap_err();
        assert!(matches!(e, StatsError::NonFinite { index: 1, .. }), "{e}");
        let e = adjust(&[0.1, 1.5], Correction::Holm).unwrap_err();
        assert!(e.to_string().contains("index 1 is 1.5"), "{e}");
        assert!(adjust(&[-0.1], Correction::BenjaminiHochberg).is_err());
    }
}
