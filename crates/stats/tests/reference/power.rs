//! The power a paired comparison is predicted to have ([`PairedVariance`]) against the rejection rate of the
//! tests `nmb compare` runs, in seeded simulations of paired suites with known effects.
//!
//! Each simulated suite has `CASES` cases of `TASKS` tasks with `SAMPLES` samples each, answered by two runs.
//! An answer is right when a latent score crosses 0 (a probit model): the run's level, plus a case effect and a
//! task effect both runs share (which makes paired answers correlate and a case's answers alike), plus a case
//! effect of the run's own (which makes the *difference* vary from case to case), plus the answer's own noise.
//! With every latent term normal, a run's accuracy is exactly Φ(level / s), s the latent's standard deviation,
//! so each run's level is set to give a known accuracy and the true difference is exact.
//!
//! For each effect, the power predicted from each simulated suite's own answers (what `nmb power` computes) is
//! averaged over the simulations and compared with the share of simulations in which the test rejected at
//! α = 0.05: the paired bootstrap resampling cases (`nmb compare`'s A − B interval and bootstrap p, with the
//! same `paired_bootstrap` call) and the cluster-adjusted McNemar test.
//!
//! The simulation's size is a knob: `NMB_POWER_SIMULATIONS` (default 300) suites per effect and
//! `NMB_POWER_RESAMPLES` (default 1,000) bootstrap resamples per suite. The bar is 3 points at 1,000
//! simulations, widened by √(1000 / simulations) for fewer, so that it stays about two standard errors of the
//! observed rate.

use nmb_stats::{
    mcnemar_clustered, normal_quantile, paired_bootstrap, BootstrapConfig, Design, PairedTest,
    PairedVariance,
};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

const CASES: usize = 120;
const TASKS: usize = 2;
const SAMPLES: usize = 3;
const ALPHA: f64 = 0.05;
/// Standard deviations of the shared case effect, the shared task effect and each run's own case effect.
const SHARED_CASE: f64 = 0.8;
const SHARED_TASK: f64 = 0.5;
const OWN_CASE: f64 = 0.5;
/// Run B's accuracy; run A's is this plus the effect.
const BASE: f64 = 0.6;
/// Differences in accuracy, chosen for a power of roughly 0.3, 0.6 and 0.85.
const EFFECTS: [f64; 3] = [0.04, 0.06, 0.08];

fn knob(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name}={v} is not a count"))
        })
        .unwrap_or(default)
}

fn uniform(rng: &mut ChaCha8Rng) -> f64 {
    ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let (u, v) = (uniform(rng), uniform(rng));
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

struct Suite {
    a: Vec<f64>,
    b: Vec<f64>,
}

/// One paired suite in which run A's accuracy exceeds run B's by exactly `effect`.
fn suite(seed: u64, effect: f64) -> Suite {
    let s = (1.0 + SHARED_CASE.powi(2) + SHARED_TASK.powi(2) + OWN_CASE.powi(2)).sqrt();
    let level_a = s * normal_quantile(BASE + effect).unwrap();
    let level_b = s * normal_quantile(BASE).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..CASES {
        let case = SHARED_CASE * normal(&mut rng);
        let (own_a, own_b) = (OWN_CASE * normal(&mut rng), OWN_CASE * normal(&mut rng));
        for _ in 0..TASKS {
            let task = SHARED_TASK * normal(&mut rng);
            for _ in 0..SAMPLES {
                let right = |level: f64, own: f64, rng: &mut ChaCha8Rng| {
                    f64::from(u8::from(level + case + task + own + normal(rng) > 0.0))
                };
                a.push(right(level_a, own_a, &mut rng));
                b.push(right(level_b, own_b, &mut rng));
            }
        }
    }
    Suite { a, b }
}

#[test]
fn predicted_power_matches_the_rejection_rate_of_nmb_compares_tests() {
    let simulations = knob("NMB_POWER_SIMULATIONS", 300);
    let resamples = knob("NMB_POWER_RESAMPLES", 1_000);
    let tolerance = 0.03 * (1000.0 / simulations as f64).sqrt().max(1.0);
    let case_labels: Vec<String> = (0..CASES).map(|c| format!("case{c:03}")).collect();
    let task_labels: Vec<String> = (0..TASKS).map(|t| format!("task{t}")).collect();
    let cases: Vec<&str> = (0..CASES * TASKS * SAMPLES)
        .map(|i| case_labels[i / (TASKS * SAMPLES)].as_str())
        .collect();
    let tasks: Vec<&str> = (0..CASES * TASKS * SAMPLES)
        .map(|i| task_labels[i / SAMPLES % TASKS].as_str())
        .collect();
    let design = Design::clusters_by(&cases);
    let mut failures = Vec::new();
    for (e, &effect) in EFFECTS.iter().enumerate() {
        let (mut predicted, mut rejected) = ([0.0; 2], [0usize; 2]);
        for sim in 0..simulations as u64 {
            let s = suite(1_000_000 * (e as u64 + 1) + sim, effect);
            let variance = PairedVariance::estimate(&s.a, &s.b, &cases, &tasks).unwrap();
            for (slot, test) in [PairedTest::Bootstrap, PairedTest::ClusteredMcNemar]
                .into_iter()
                .enumerate()
            {
                predicted[slot] += variance.power(test, effect, CASES, ALPHA).unwrap();
            }
            let cfg = BootstrapConfig {
                resamples,
                level: 0.95,
                seed: sim,
            };
            if paired_bootstrap(&s.a, &s.b, &design, &cfg).unwrap().p_value < ALPHA {
                rejected[0] += 1;
            }
            let (ba, bb): (Vec<bool>, Vec<bool>) =
                s.a.iter()
                    .zip(&s.b)
                    .map(|(&x, &y)| (x > 0.5, y > 0.5))
                    .unzip();
            if mcnemar_clustered(&ba, &bb, &cases).unwrap().p_value < ALPHA {
                rejected[1] += 1;
            }
        }
        for (slot, test) in ["paired bootstrap", "clustered McNemar"]
            .into_iter()
            .enumerate()
        {
            let predicted = predicted[slot] / simulations as f64;
            let observed = rejected[slot] as f64 / simulations as f64;
            eprintln!(
                "effect {effect:.2}, {test}: predicted power {predicted:.3}, observed rejection rate {observed:.3} \
                 ({simulations} simulations, {resamples} resamples)"
            );
            if (predicted - observed).abs() > tolerance {
                failures.push(format!(
                    "effect {effect}, {test}: predicted {predicted:.3}, observed {observed:.3}"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "off by more than {tolerance:.3}: {failures:#?}"
    );
}
