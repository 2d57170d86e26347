//! Seeded simulations with known truth: each injected quantity must fall inside its 95% interval in at least
//! 93% of the simulations (issue 29's bar: the nominal level, with slack).

use nmb_stats::{
    position_bias, preference_ranking, BootstrapConfig, Preference, PreferenceRanking,
};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SIMULATIONS: u64 = 100;
const COVERED_AT_LEAST: usize = 93;

fn uniform(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let (u, v) = (uniform(rng).max(1e-300), uniform(rng));
    (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn config(seed: u64) -> BootstrapConfig {
    BootstrapConfig {
        resamples: 300,
        level: 0.95,
        seed,
    }
}

/// A Davidson vote: A, B or a tie with weight `nu`, at log-odds `s` of A over B.
fn davidson(rng: &mut ChaCha8Rng, s: f64, nu: f64) -> Preference {
    let (a, b) = ((s / 2.0).exp(), (-s / 2.0).exp());
    let x = uniform(rng) * (a + b + nu);
    if x < a {
        Preference::AWins
    } else if x < a + b {
        Preference::BWins
    } else {
        Preference::Tie
    }
}

/// Four models with known strengths, a length effect and ties; one clinician votes on every pair of every task,
/// each pair shown in a random order with a random length difference.
fn clinicians_vote(seed: u64, theta: &[f64], beta: f64, nu: f64) -> PreferenceRanking {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut votes, mut rows, mut task_of) = (Vec::new(), Vec::new(), Vec::new());
    for task in 0..100 {
        for x in 0..theta.len() {
            for y in x + 1..theta.len() {
                for _reviewer in 0..1 {
                    let (a, b) = if rng.next_u32() % 2 == 0 {
                        (x, y)
                    } else {
                        (y, x)
                    };
                    let length = 2.0 * uniform(&mut rng) - 1.0;
                    let s = theta[a] - theta[b] + beta * length;
                    votes.push((a, b, davidson(&mut rng, s, nu)));
                    rows.push(vec![length]);
                    task_of.push(task);
                }
            }
        }
    }
    preference_ranking(theta.len(), &votes, &rows, &task_of, &config(seed))
        .unwrap_or_else(|e| panic!("simulation {seed}: {e}"))
}

/// Five quantities are checked at once here, so 300 simulations rather than 100 keep the count's own noise
/// down. Over 2,000 simulations (seed bases 0 and 5,000, 1,000 each) the strengths' estimates spread within 2%
/// of the Fisher-information standard error (0.11 for θ_0) and their bias is under a sixth of it, so the
/// estimator is not what fell short: NumPy's quantile rule at 300 resamples leaves 2.8% in each tail, and the
/// strengths' percentile intervals covered 93.5–95.0% of the 2,000. The ranking's limits are now the
/// (B + 1)·α/2-th order statistics, which covered 94.2–95.6% of the 1,000 at seed base 5,000 (NumPy's rule
/// 93.6–95.0% on the same resamples). This test at seed bases 0, 300, ..., 1,500 (`NMB_SIMULATION_SEED_BASE`)
/// covered the strengths in 280 to 291 of 300 (94.8% of all 7,200) and the style coefficient in 279 to 292.
const BT_SIMULATIONS: u64 = 300;
const BT_COVERED_PERCENT: usize = 93;

/// The base of the seeds; `NMB_SIMULATION_SEED_BASE` moves it, to check that a pass is not luck.
fn seed_base() -> u64 {
    std::env::var("NMB_SIMULATION_SEED_BASE")
        .ok()
        .map_or(0, |s| {
            s.parse().expect("NMB_SIMULATION_SEED_BASE is a number")
        })
}

#[test]
fn bradley_terry_recovers_known_strengths_and_ranking() {
    // Centred, as the fit reports them.
    let theta = [-0.9, -0.3, 0.2, 1.0];
    let (beta, nu) = (0.7, 0.4);
    let mut covered = [0usize; 5];
    let mut ordered = 0;
    let base = seed_base();
    for seed in base..base + BT_SIMULATIONS {
        let r = clinicians_vote(seed, &theta, beta, nu);
        for (k, (e, truth)) in r.theta.iter().zip(theta).enumerate() {
            covered[k] += usize::from(e.ci_low <= truth && truth <= e.ci_high);
        }
        let b = &r.beta[0];
        covered[4] += usize::from(b.ci_low <= beta && beta <= b.ci_high);
        let points: Vec<f64> = r.theta.iter().map(|e| e.value).collect();
        ordered += usize::from(points.windows(2).all(|w| w[0] < w[1]));
    }
    eprintln!(
        "seed base {base}: covered {covered:?} of {BT_SIMULATIONS}, order recovered in {ordered}"
    );
    for (k, &c) in covered.iter().enumerate() {
        assert!(
            c * 100 >= BT_COVERED_PERCENT * BT_SIMULATIONS as usize,
            "parameter {k} covered in {c} of {BT_SIMULATIONS}: {covered:?}"
        );
    }
    // The gaps are at least 0.5 on the log-odds scale, over 4 standard errors of a difference at 600 votes.
    assert!(
        ordered * 100 >= 95 * BT_SIMULATIONS as usize,
        "the true order was recovered in {ordered} of {BT_SIMULATIONS}"
    );
}

#[test]
fn position_bias_is_recovered_from_a_judge_that_favours_the_first_answer() {
    for gamma in [0.0, 0.6] {
        let (mut flips_covered, mut first_covered) = (0, 0);
        for seed in 0..SIMULATIONS {
            let mut rng = ChaCha8Rng::seed_from_u64(1000 + seed);
            let (mut pairs, mut task_of) = (Vec::new(), Vec::new());
            let (mut flip_truth, mut first_truth) = (0.0, 0.0);
            for task in 0..60 {
                for _pair in 0..3 {
                    let delta = normal(&mut rng);
                    // X shown first, then Y shown first; the judge adds γ to whichever answer it sees first.
                    let (p1, p2) = (sigmoid(delta + gamma), sigmoid(delta - gamma));
                    let vote = |rng: &mut ChaCha8Rng, p: f64| {
                        if uniform(rng) < p {
                            Preference::AWins
                        } else {
                            Preference::BWins
                        }
                    };
                    pairs.push((vote(&mut rng, p1), vote(&mut rng, p2)));
                    task_of.push(task);
                    flip_truth += p1 * (1.0 - p2) + (1.0 - p1) * p2;
                    first_truth += (p1 + (1.0 - p2)) / 2.0;
                }
            }
            let n = pairs.len() as f64;
            let (flip_truth, first_truth) = (flip_truth / n, first_truth / n);
            let b = position_bias(&pairs, &task_of, &config(seed)).unwrap();
            let covers =
                |e: &nmb_stats::Estimate, t: f64| usize::from(e.ci_low <= t && t <= e.ci_high);
            flips_covered += covers(&b.flip_share, flip_truth);
            first_covered += covers(&b.first_position_wins, first_truth);
            if gamma == 0.0 {
                assert!(
                    (first_truth - 0.5).abs() < 1e-12,
                    "no bias means a true share of 0.5"
                );
            }
        }
        assert!(
            flips_covered >= COVERED_AT_LEAST && first_covered >= COVERED_AT_LEAST,
            "γ {gamma}: flip share covered {flips_covered}, first-position share {first_covered} of {SIMULATIONS}"
        );
    }
}
