//! A judge's pass rate corrected for its measured sensitivity and specificity (Rogan & Gladen, 1978).

use serde::{Deserialize, Serialize};

use crate::bootstrap::{defined, resample_loop, BootstrapConfig};
use crate::rng::Draw;
use crate::{CiMethod, Result, StatsError};

/// `(p_obs + Sp - 1) / (Se + Sp - 1)`, clipped to [0, 1]. Undefined when `Se + Sp <= 1`, i.e. when the judge is
/// no better than chance on the calibration set.
pub fn rogan_gladen(observed: f64, sensitivity: f64, specificity: f64) -> Result<f64> {
    for (what, v) in [
        ("observed", observed),
        ("sensitivity", sensitivity),
        ("specificity", specificity),
    ] {
        if !(0.0..=1.0).contains(&v) {
            return Err(StatsError::Invalid {
                what: "rogan_gladen",
                expected: format!("{what} in [0, 1], got {v}"),
            });
        }
    }
    rogan_gladen_raw(observed, sensitivity, specificity).ok_or(StatsError::Undefined {
        what: "rogan_gladen",
        why: "sensitivity + specificity <= 1 (judge no better than chance)",
    })
}

fn rogan_gladen_raw(observed: f64, sensitivity: f64, specificity: f64) -> Option<f64> {
    let youden = sensitivity + specificity - 1.0;
    (youden > 0.0).then(|| ((observed + specificity - 1.0) / youden).clamp(0.0, 1.0))
}

/// A judge's corrected pass rate with the inputs it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorrectedRate {
    /// Corrected pass rate with a stratified bootstrap interval; `n` is the number of run verdicts.
    pub corrected: crate::Estimate,
    /// Share of the run the judge passed.
    pub observed: f64,
    /// P(judge passes | clinician passes), on the calibration set.
    pub sensitivity: f64,
    /// P(judge fails | clinician fails), on the calibration set.
    pub specificity: f64,
    pub n_calibration_pass: usize,
    pub n_calibration_fail: usize,
}

/// Rogan–Gladen corrected pass rate of a judge over a run.
///
/// `run` holds the judge's verdicts on the run (true = pass). `calibration` holds `(judge, clinician)` verdict
/// pairs on items that clinicians also labelled; clinicians are taken as the truth.
///
/// Interval: a percentile bootstrap that, in every draw, resamples the run verdicts, the clinician-pass and the
/// clinician-fail calibration items independently, each at its own size, and recomputes Se, Sp, the observed
/// rate and the corrected rate. So the interval carries the uncertainty of the calibration as well as of the
/// run, which the delta method would only approximate for the small calibration sets this is used with (and the
/// clipping to [0, 1] is not differentiable). Draws where the resampled judge is no better than chance are
/// counted in `undefined_resamples`. It assumes the calibration items are representative of the run.
pub fn corrected_pass_rate(
    run: &[bool],
    calibration: &[(bool, bool)],
    cfg: &BootstrapConfig,
) -> Result<CorrectedRate> {
    if run.is_empty() {
        return Err(StatsError::TooFew {
            what: "corrected_pass_rate run verdicts",
            min: 1,
            got: 0,
        });
    }
    let positives: Vec<bool> = calibration
        .iter()
        .filter(|(_, truth)| *truth)
        .map(|(judge, _)| *judge)
        .collect();
    let negatives: Vec<bool> = calibration
        .iter()
        .filter(|(_, truth)| !*truth)
        .map(|(judge, _)| !*judge)
        .collect();
    for (what, group) in [
        ("calibration items clinicians passed", &positives),
        ("calibration items clinicians failed", &negatives),
    ] {
        if group.is_empty() {
            let expected = format!("at least one of the {what}");
            return Err(StatsError::Invalid {
                what: "corrected_pass_rate",
                expected,
            });
        }
    }
    let (observed, sensitivity, specificity) = (share(run), share(&positives), share(&negatives));
    let value = rogan_gladen(observed, sensitivity, specificity)?;
    let mut draw = Draw::new(cfg.seed);
    let mut idx = Vec::new();
    let mut resampled_share = |values: &[bool], draw: &mut Draw| {
        draw.fill_indices(values.len(), values.len(), &mut idx);
        idx.iter().filter(|&&i| values[i]).count() as f64 / values.len() as f64
    };
    let run_result = resample_loop(cfg, value, |_| {
        let o = resampled_share(run, &mut draw);
        let se = resampled_share(&positives, &mut draw);
        let sp = resampled_share(&negatives, &mut draw);
        defined(rogan_gladen_raw(o, se, sp))
    })?;
    Ok(CorrectedRate {
        corrected: run_result.estimate(CiMethod::StratifiedPercentileBootstrap, cfg, run.len()),
        observed,
        sensitivity,
        specificity,
        n_calibration_pass: positives.len(),
        n_calibration_fail: negatives.len(),
    })
}

fn share(values: &[bool]) -> f64 {
    values.iter().filter(|v| **v).count() as f64 / values.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formula_and_clipping() {
        // Se 0.8, Sp 0.9, observed 0.4: (0.4 + 0.9 - 1) / 0.7 = 0.428571...
        assert!((rogan_gladen(0.4, 0.8, 0.9).unwrap() - 0.3 / 0.7).abs() < 1e-15);
        assert_eq!(rogan_gladen(0.05, 0.8, 0.9).unwrap(), 0.0);
        assert_eq!(rogan_gladen(0.99, 0.8, 0.9).unwrap(), 1.0);
        assert!((rogan_gladen(0.3, 1.0, 1.0).unwrap() - 0.3).abs() < 1e-15);
        assert!(rogan_gladen(0.3, 0.5, 0.5).is_err());
        assert!(rogan_gladen(1.3, 0.9, 0.9).is_err());
    }

    fn flags(yes: usize, no: usize) -> Vec<bool> {
        let mut v = vec![true; yes];
        v.extend(vec![false; no]);
        v
    }

    #[test]
    fn corrected_rate_undoes_a_lenient_judge() {
        // Truth: 30% pass. Judge Se 0.9, Sp 0.8 -> observed 0.3*0.9 + 0.7*0.2 = 0.41.
        let run = flags(41, 59);
        let mut calibration = Vec::new();
        calibration.extend(flags(45, 5).into_iter().map(|j| (j, true)));
        calibration.extend(flags(10, 40).into_iter().map(|j| (j, false)));
        let cfg = BootstrapConfig {
            resamples: 2_000,
            level: 0.95,
            seed: 4,
        };
        let r = corrected_pass_rate(&run, &calibration, &cfg).unwrap();
        assert_eq!((r.sensitivity, r.specificity, r.observed), (0.9, 0.8, 0.41));
        assert!((r.corrected.value - 0.3).abs() < 1e-12, "{r:?}");
        let e = &r.corrected;
        assert!(
            e.ci_low < 0.3 && 0.3 < e.ci_high && e.ci_low >= 0.0 && e.ci_high <= 1.0,
            "{e:?}"
        );
        assert_eq!(r, corrected_pass_rate(&run, &calibration, &cfg).unwrap());
        // A run-only interval (Wilson on 100 verdicts) is narrower than one that also carries calibration noise.
        let run_only = crate::wilson(41, 100, 0.95).unwrap();
        assert!(
            e.ci_high - e.ci_low > (run_only.ci_high - run_only.ci_low) / 0.7 * 0.9,
            "{e:?}"
        );
    }

    #[test]
    fn needs_both_calibration_classes() {
        let cfg = BootstrapConfig::default();
        assert!(corrected_pass_rate(&[true], &[(true, true)], &cfg).is_err());
        assert!(corrected_pass_rate(&[], &[(true, true), (false, false)], &cfg).is_err());
    }
}
