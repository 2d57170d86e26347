//! Simulations with known truth: a judge with repeat noise σ, a length bias β per doubling of the answer's
//! words and a self-preference δ on its own family's answers, graded beside simulated clinicians who put a
//! known share of answers in a wrong grade. Each injected quantity must fall inside its 95% interval in at
//! least 93 of 100 seeded simulations (the 95% level, with slack for the bootstrap's own error).
//!
//! The clinicians' errors, the answers' lengths and the answers' families are drawn independently of one
//! another and of the true grade, so that holding the clinicians' grade fixed leaves the length slope unbiased
//! and the residual gap between families equal to δ.

use nmb_stats::{group_gap, length_slope, paired_shift, retest_icc, BootstrapConfig, Design};

const SIMULATIONS: u64 = 100;
const ITEMS: usize = 400;
const REPEATS: usize = 3;
const SIGMA: f64 = 0.6;
const BETA: f64 = 0.4;
const DELTA: f64 = 0.5;
const CLINICIAN_ERROR: f64 = 0.15;
const OWN_SHARE: f64 = 0.4;

/// SplitMix64 with Box–Muller normals: small, fixed, and independent of the crate's resampling stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct World {
    /// Per item, the judge's score at each repeat.
    repeats: Vec<Vec<f64>>,
    clinician: Vec<i64>,
    log2_words: Vec<f64>,
    own: Vec<bool>,
    /// The share of score variance between items, which ICC(2,1) estimates.
    true_icc: f64,
}

fn simulate(seed: u64) -> World {
    let mut rng = Rng(seed);
    let mut world = World {
        repeats: Vec::new(),
        clinician: Vec::new(),
        log2_words: Vec::new(),
        own: Vec::new(),
        true_icc: 0.0,
    };
    for _ in 0..ITEMS {
        let grade = rng.below(4) as i64;
        let clinician = if rng.uniform() < CLINICIAN_ERROR {
            (grade + 1 + rng.below(3) as i64) % 4
        } else {
            grade
        };
        let log2_words = 4.0 + 5.0 * rng.uniform();
        let own = rng.uniform() < OWN_SHARE;
        let centre = grade as f64 + BETA * log2_words + if own { DELTA } else { 0.0 };
        let repeats: Vec<f64> = (0..REPEATS)
            .map(|_| centre + SIGMA * rng.normal())
            .collect();
        world.repeats.push(repeats);
        world.clinician.push(clinician);
        world.log2_words.push(log2_words);
        world.own.push(own);
    }
    // The item effects' variance in this population: grades uniform on 0..=3, lengths uniform on a width of
    // 5 log2 words, and the own-family indicator.
    let tau2 = 1.25 + BETA * BETA * 25.0 / 12.0 + DELTA * DELTA * OWN_SHARE * (1.0 - OWN_SHARE);
    world.true_icc = tau2 / (tau2 + SIGMA * SIGMA);
    world
}

fn cfg(seed: u64) -> BootstrapConfig {
    BootstrapConfig {
        resamples: 2000,
        level: 0.95,
        seed,
    }
}

fn covered(value: f64, e: &nmb_stats::Estimate) -> bool {
    e.ci_low <= value && value <= e.ci_high
}

#[test]
fn injected_stability_and_biases_are_recovered_within_their_intervals() {
    let (mut icc, mut slope, mut gap) = (0, 0, 0);
    for seed in 0..SIMULATIONS {
        let w = simulate(1000 + seed);
        let design = Design::units(ITEMS);
        let e = retest_icc(&w.repeats, 0.95).unwrap();
        icc += usize::from(covered(w.true_icc, &e));
        // The slope and the gap are read from one repeat's score, as a judge asked once would give it.
        let once: Vec<f64> = w.repeats.iter().map(|r| r[0]).collect();
        let e = length_slope(&once, &w.log2_words, &w.clinician, &design, &cfg(seed)).unwrap();
        slope += usize::from(covered(BETA, &e));
        let residual: Vec<f64> = once
            .iter()
            .zip(&w.clinician)
            .map(|(j, c)| j - *c as f64)
            .collect();
        let e = group_gap(&residual, &w.own, &design, &cfg(seed)).unwrap();
        gap += usize::from(covered(DELTA, &e));
    }
    assert!(
        icc >= 93,
        "test-retest ICC covered in {icc} of {SIMULATIONS}"
    );
    assert!(
        slope >= 93,
        "length slope covered in {slope} of {SIMULATIONS}"
    );
    assert!(
        gap >= 93,
        "self-preference gap covered in {gap} of {SIMULATIONS}"
    );
    eprintln!("covered: icc {icc}, slope {slope}, gap {gap} of {SIMULATIONS}");
}

/// A judge asked twice about each answer, without and with the model's thinking: showing it adds `effect` on
/// average, more in some cases than others (a case-level spread), with independent noise on each asking. Two
/// answers per case, resampled by case.
fn thinking_world(seed: u64, effect: f64) -> (Vec<f64>, Vec<f64>, Vec<usize>) {
    const CASES: usize = 100;
    let mut rng = Rng(seed);
    let (mut shown, mut hidden, mut case_of) = (Vec::new(), Vec::new(), Vec::new());
    for case in 0..CASES {
        let case_shift = 0.3 * rng.normal();
        for _answer in 0..2 {
            let grade = 1.0 + rng.below(4) as f64;
            hidden.push(grade + SIGMA * rng.normal());
            shown.push(grade + effect + case_shift + SIGMA * rng.normal());
            case_of.push(case);
        }
    }
    (shown, hidden, case_of)
}

/// The injected effect. The difference is shifted by it exactly, so one effect checks them all: 0 and -0.7 on
/// the same seeds give the same count. Over 1,000 simulations the interval covered 0.4 in 937 to 947 of them
/// (three runs on other seeds): near the nominal 95%, so the bar of 93 of 100 has little slack.
const THINKING_EFFECT: f64 = 0.4;

#[test]
fn thinking_probe_recovers_an_injected_effect_within_its_interval() {
    let mut covered_count = 0;
    for seed in 0..SIMULATIONS {
        let (shown, hidden, case_of) = thinking_world(2000 + seed, THINKING_EFFECT);
        let design = Design::clusters_by(&case_of);
        let s = paired_shift(&shown, &hidden, 3.0, &design, &cfg(seed)).unwrap();
        covered_count += usize::from(covered(THINKING_EFFECT, &s.mean_difference));
    }
    assert!(
        covered_count >= 93,
        "thinking effect covered in {covered_count} of {SIMULATIONS}"
    );
    eprintln!("thinking effect: covered in {covered_count} of {SIMULATIONS}");
}
