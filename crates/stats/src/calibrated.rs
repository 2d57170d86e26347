//! Accuracy from a judge's scores calibrated to clinicians on the share of items they reviewed.
//!
//! Clinicians review some items; a judge scores every item. An isotonic map from judge score to the clinicians'
//! verdict is fitted on the reviewed items ([`crate::isotonic`]) and read at each unreviewed item's score as the
//! chance clinicians would pass it. The corrected rate counts each reviewed item by its verdict and each
//! unreviewed one by that chance. Its interval bootstraps the reviewed items (refitting the map in every draw) and
//! the unreviewed items independently, so it carries the map's own uncertainty as well as the items'. A logistic
//! map fitted by maximum likelihood gives the same rate a second way, as a check on the isotonic fit's shape.
//!
//! [`learning_curve`] refits on the first k reviewed items for growing k, to show how the interval narrows as
//! reviews grow; [`reviews_for_width`] extrapolates the reviews a target width needs.
//!
//! It assumes the reviewed items are representative of the rest (drawn at random), and that the judge scores
//! both the same way.

use serde::Serialize;

use crate::bootstrap::{defined, resample_loop};
use crate::rng::Draw;
use crate::{check_finite, isotonic, BootstrapConfig, CiMethod, Estimate, Result, StatsError};

/// The corrected rate and the check beside it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CalibratedRate {
    /// Through the isotonic map, with its stratified bootstrap interval.
    pub corrected: Estimate,
    /// Through a logistic map instead; `None` where its fit does not converge (scores that separate the verdicts
    /// perfectly).
    pub logistic: Option<f64>,
    pub reviewed: usize,
    pub unreviewed: usize,
}

/// A logistic map `P(pass) = 1 / (1 + exp(-(intercept + slope * score)))`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Logistic {
    pub intercept: f64,
    pub slope: f64,
}

impl Logistic {
    pub fn predict(&self, score: f64) -> f64 {
        1.0 / (1.0 + (-(self.intercept + self.slope * score)).exp())
    }
}

/// The unpenalised maximum-likelihood logistic fit of `verdicts` on `scores` (Newton's method, as
/// scikit-learn's `LogisticRegression(penalty=None, solver="newton-cholesky")`). `None` where it does not
/// converge: the verdicts are separated by the scores, or the scores are all equal.
pub fn logistic(scores: &[f64], verdicts: &[bool]) -> Option<Logistic> {
    let (mut a, mut b) = (0.0f64, 0.0f64);
    for _ in 0..100 {
        // Gradient and Hessian of the log-likelihood in (a, b).
        let (mut ga, mut gb, mut haa, mut hab, mut hbb) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for (&x, &y) in scores.iter().zip(verdicts) {
            let p = Logistic {
                intercept: a,
                slope: b,
            }
            .predict(x);
            let r = f64::from(u8::from(y)) - p;
            let w = p * (1.0 - p);
            ga += r;
            gb += r * x;
            haa += w;
            hab += w * x;
            hbb += w * x * x;
        }
        let det = haa * hbb - hab * hab;
        if !(det.is_finite() && det > 1e-300) {
            return None;
        }
        let da = (hbb * ga - hab * gb) / det;
        let db = (haa * gb - hab * ga) / det;
        a += da;
        b += db;
        if !(a.is_finite() && b.is_finite()) || a.abs() > 1e6 || b.abs() > 1e6 {
            return None;
        }
        if da.abs() < 1e-13 * (1.0 + a.abs()) && db.abs() < 1e-13 * (1.0 + b.abs()) {
            return Some(Logistic {
                intercept: a,
                slope: b,
            });
        }
    }
    None
}

/// The share of all items clinicians would pass: `reviewed` as (judge score, clinicians' verdict) pairs,
/// `unreviewed` as judge scores alone.
pub fn calibrated_rate(
    unreviewed: &[f64],
    reviewed: &[(f64, bool)],
    cfg: &BootstrapConfig,
) -> Result<CalibratedRate> {
    check(unreviewed, reviewed)?;
    let value = rate(unreviewed, reviewed).ok_or(StatsError::Invalid {
        what: "calibrated_rate",
        expected: "judge scores the isotonic map can be fitted to".into(),
    })?;
    let mut draw = Draw::new(cfg.seed);
    let (mut ri, mut ui) = (Vec::new(), Vec::new());
    let (mut rs, mut us) = (Vec::new(), Vec::new());
    let result = resample_loop(cfg, value, |_| {
        draw.fill_indices(reviewed.len(), reviewed.len(), &mut ri);
        draw.fill_indices(unreviewed.len(), unreviewed.len(), &mut ui);
        rs.clear();
        rs.extend(ri.iter().map(|&i| reviewed[i]));
        us.clear();
        us.extend(ui.iter().map(|&i| unreviewed[i]));
        defined(rate(&us, &rs))
    })?;
    let n = reviewed.len() + unreviewed.len();
    let logistic = logistic_rate(unreviewed, reviewed);
    Ok(CalibratedRate {
        corrected: result.estimate(CiMethod::StratifiedPercentileBootstrap, cfg, n),
        logistic,
        reviewed: reviewed.len(),
        unreviewed: unreviewed.len(),
    })
}

fn check(unreviewed: &[f64], reviewed: &[(f64, bool)]) -> Result<()> {
    check_finite("calibrated_rate unreviewed scores", unreviewed)?;
    let scores: Vec<f64> = reviewed.iter().map(|(s, _)| *s).collect();
    check_finite("calibrated_rate reviewed scores", &scores)?;
    if reviewed.len() < 2 {
        return Err(StatsError::TooFew {
            what: "calibrated_rate reviewed items",
            min: 2,
            got: reviewed.len(),
        });
    }
    Ok(())
}

/// The corrected rate through the isotonic map fitted on `reviewed`.
fn rate(unreviewed: &[f64], reviewed: &[(f64, bool)]) -> Option<f64> {
    let x: Vec<f64> = reviewed.iter().map(|(s, _)| *s).collect();
    let y: Vec<f64> = reviewed
        .iter()
        .map(|(_, v)| f64::from(u8::from(*v)))
        .collect();
    let map = isotonic(&x, &y, None).ok()?;
    let passed: f64 =
        y.iter().sum::<f64>() + unreviewed.iter().map(|s| map.predict(*s)).sum::<f64>();
    Some(passed / (reviewed.len() + unreviewed.len()) as f64)
}

fn logistic_rate(unreviewed: &[f64], reviewed: &[(f64, bool)]) -> Option<f64> {
    let x: Vec<f64> = reviewed.iter().map(|(s, _)| *s).collect();
    let y: Vec<bool> = reviewed.iter().map(|(_, v)| *v).collect();
    let map = logistic(&x, &y)?;
    let passed = y.iter().filter(|v| **v).count() as f64
        + unreviewed.iter().map(|s| map.predict(*s)).sum::<f64>();
    Some(passed / (reviewed.len() + unreviewed.len()) as f64)
}

/// One point of a learning curve: the interval with the first `reviewed` reviews.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurvePoint {
    pub reviewed: usize,
    pub corrected: Estimate,
}

impl CurvePoint {
    pub fn width(&self) -> f64 {
        self.corrected.ci_high - self.corrected.ci_low
    }
}

/// The corrected rate with the first k reviewed items (in the order given) for each k in `steps`, the others'
/// verdicts set aside (their scores join the unreviewed), so the curve shows what fewer reviews would have
/// given. Steps below 2 or beyond the reviewed items are left out.
pub fn learning_curve(
    unreviewed: &[f64],
    reviewed: &[(f64, bool)],
    steps: &[usize],
    cfg: &BootstrapConfig,
) -> Result<Vec<CurvePoint>> {
    let mut out = Vec::new();
    for &k in steps.iter().filter(|k| (2..=reviewed.len()).contains(*k)) {
        let mut rest: Vec<f64> = unreviewed.to_vec();
        rest.extend(reviewed[k..].iter().map(|(s, _)| *s));
        let r = calibrated_rate(&rest, &reviewed[..k], cfg)?;
        out.push(CurvePoint {
            reviewed: k,
            corrected: r.corrected,
        });
    }
    Ok(out)
}

/// The reviews an interval of `target` width needs, from the widest-sampled point of a curve, taking the width
/// to shrink as one over the square root of the reviews (what a proportion's interval does); at least the
/// reviews already made. `None` for an empty curve or a point of zero width.
pub fn reviews_for_width(curve: &[CurvePoint], target: f64) -> Option<usize> {
    let last = curve.iter().max_by_key(|p| p.reviewed)?;
    let width = last.width();
    if !(width > 0.0 && target > 0.0) {
        return None;
    }
    let needed = last.reviewed as f64 * (width / target).powi(2);
    Some((needed.ceil() as usize).max(last.reviewed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::{RngCore, SeedableRng};

    fn uniform(rng: &mut rand_chacha::ChaCha8Rng) -> f64 {
        (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Items whose chance of passing rises with a latent quality the judge sees with noise.
    fn simulate(seed: u64, n: usize, noise: f64) -> (Vec<f64>, Vec<bool>, f64) {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut scores = Vec::new();
        let mut verdicts = Vec::new();
        let mut truth = 0.0;
        for _ in 0..n {
            let quality = uniform(&mut rng);
            let p = 0.1 + 0.8 * quality;
            truth += p;
            verdicts.push(uniform(&mut rng) < p);
            let score = (quality + noise * (uniform(&mut rng) - 0.5)).clamp(0.0, 1.0);
            scores.push((score * 5.0).round());
        }
        (scores, verdicts, truth / n as f64)
    }

    fn split(scores: &[f64], verdicts: &[bool], reviewed: usize) -> (Vec<f64>, Vec<(f64, bool)>) {
        let r = scores[..reviewed]
            .iter()
            .copied()
            .zip(verdicts[..reviewed].iter().copied())
            .collect();
        (scores[reviewed..].to_vec(), r)
    }

    fn cfg(seed: u64, resamples: usize) -> BootstrapConfig {
        BootstrapConfig {
            resamples,
            seed,
            ..BootstrapConfig::default()
        }
    }

    /// The pass rate of the population items are drawn from: quality is uniform on [0, 1], so 0.1 + 0.8 / 2.
    const POPULATION_RATE: f64 = 0.5;

    /// In 100 seeded simulations, the interval holds the population's pass rate at least 93 times (the
    /// interval resamples items, so its target is the rate of the population they are drawn from).
    #[test]
    fn the_interval_covers_the_truth_in_simulation() {
        let mut covered = 0;
        for seed in 0..100 {
            let (scores, verdicts, _) = simulate(seed, 400, 0.3);
            let truth = POPULATION_RATE;
            let (unreviewed, reviewed) = split(&scores, &verdicts, 80);
            let r = calibrated_rate(&unreviewed, &reviewed, &cfg(seed, 400)).unwrap();
            if r.corrected.ci_low <= truth && truth <= r.corrected.ci_high {
                covered += 1;
            }
        }
        assert!(covered >= 93, "covered {covered} of 100");
    }

    /// The corrected rate comes closer to the truth as the reviewed share grows.
    #[test]
    fn more_reviews_bring_the_rate_to_the_truth() {
        let error = |reviewed: usize| -> f64 {
            (0..40)
                .map(|seed| {
                    let (scores, verdicts, truth) = simulate(1000 + seed, 600, 0.6);
                    let (u, r) = split(&scores, &verdicts, reviewed);
                    let rate = calibrated_rate(&u, &r, &cfg(seed, 10)).unwrap();
                    (rate.corrected.value - truth).powi(2)
                })
                .sum::<f64>()
                / 40.0
        };
        let (few, many) = (error(20), error(300));
        assert!(
            many < few / 2.0,
            "squared error {few} with 20 reviews, {many} with 300"
        );
    }

    #[test]
    fn the_curve_narrows_and_says_how_many_reviews_a_width_needs() {
        let (scores, verdicts, _) = simulate(7, 500, 0.3);
        let (u, r) = split(&scores, &verdicts, 200);
        let curve = learning_curve(&u, &r, &[25, 50, 100, 200], &cfg(7, 400)).unwrap();
        assert_eq!(curve.len(), 4);
        assert!(curve[3].width() < curve[0].width(), "{curve:?}");
        let last = curve[3].width();
        let needed = reviews_for_width(&curve, last / 2.0).unwrap();
        assert!((790..=810).contains(&needed), "{needed}");
        assert_eq!(reviews_for_width(&curve, last * 2.0), Some(200));
    }

    #[test]
    fn bad_inputs_are_refused() {
        assert!(calibrated_rate(&[1.0], &[(1.0, true)], &cfg(1, 10)).is_err());
        assert!(calibrated_rate(&[f64::NAN], &[(1.0, true), (2.0, false)], &cfg(1, 10)).is_err());
        assert!(logistic(&[1.0, 2.0], &[false, true]).is_none(), "separated");
    }
}
