//! Subgroup intervals in seeded simulations with a known rate per subgroup: subgroups of unequal size (12, 30
//! and 70 cases, and a marked one of 6), cases of 1 to 4 tasks with 1 to 3 samples each, and a rate that varies
//! from case to case around its subgroup's rate (so a case's answers are alike and the clustering matters).
//! Each case's rate is its subgroup's rate plus a symmetric uniform offset, so the expected share of right
//! answers in the subgroup is exactly the subgroup's rate, whatever the cases' sizes.

use nmb_stats::{subgroups, Average, BootstrapConfig, MIN_SUBGROUP_CASES};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Simulations run (the bar is 93 of every 100); `NMB_SUBGROUP_SIMULATIONS` sets another number, to measure
/// the coverage more precisely than 100 simulations can.
fn simulations() -> u64 {
    std::env::var("NMB_SUBGROUP_SIMULATIONS").map_or(100, |v| v.parse().expect("a count"))
}
/// Subgroup, cases, true rate, half-width of the case-to-case spread.
const GROUPS: [(&str, usize, f64, f64); 4] = [
    ("a", 12, 0.55, 0.3),
    ("b", 30, 0.7, 0.25),
    ("c", 70, 0.8, 0.2),
    ("small", 6, 0.65, 0.3),
];

fn uniform(rng: &mut ChaCha8Rng) -> f64 {
    ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

fn between(rng: &mut ChaCha8Rng, low: usize, high: usize) -> usize {
    low + (rng.next_u32() as usize % (high - low + 1))
}

#[test]
fn subgroup_intervals_cover_the_true_rates() {
    let mut covered = [0usize; GROUPS.len()];
    let mut gap_covered = 0;
    let sims = simulations();
    let covered_at_least = (sims * 93).div_ceil(100) as usize;
    for sim in 0..sims {
        let mut rng = ChaCha8Rng::seed_from_u64(7_000 + sim);
        let (mut values, mut cases, mut groups) = (Vec::new(), Vec::new(), Vec::new());
        for (g, &(_, n_cases, rate, spread)) in GROUPS.iter().enumerate() {
            for c in 0..n_cases {
                let case_rate = rate + spread * (2.0 * uniform(&mut rng) - 1.0);
                for _task in 0..between(&mut rng, 1, 4) {
                    for _sample in 0..between(&mut rng, 1, 3) {
                        values.push(f64::from(u8::from(uniform(&mut rng) < case_rate)));
                        cases.push(format!("{g}-{c}"));
                        groups.push(g);
                    }
                }
            }
        }
        let labels: Vec<&str> = cases.iter().map(String::as_str).collect();
        let cfg = BootstrapConfig {
            resamples: 2_000,
            level: 0.95,
            seed: sim,
        };
        let s = subgroups(&values, &labels, &groups, Average::Mean, &cfg).unwrap();
        assert_eq!(s.groups.len(), GROUPS.len(), "a subgroup was dropped");
        for (g, est) in s.groups.iter().enumerate() {
            assert_eq!(est.group, g);
            assert_eq!(est.cases, GROUPS[g].1);
            assert_eq!(est.few_cases, GROUPS[g].1 < MIN_SUBGROUP_CASES);
            let truth = GROUPS[g].2;
            if est.estimate.ci_low <= truth && truth <= est.estimate.ci_high {
                covered[g] += 1;
            }
        }
        let gap = s.gap.expect("three subgroups have at least 10 cases");
        let truth = GROUPS[gap.best].2 - GROUPS[gap.worst].2;
        if gap.gap.ci_low <= truth && truth <= gap.gap.ci_high {
            gap_covered += 1;
        }
    }
    for (g, &(name, n, _, _)) in GROUPS.iter().enumerate() {
        eprintln!(
            "subgroup {name} ({n} cases): covered in {} of {sims}",
            covered[g]
        );
    }
    eprintln!("gap between the best and the worst subgroup: covered in {gap_covered} of {sims}");
    for (g, &(name, n, _, _)) in GROUPS.iter().enumerate() {
        if n >= MIN_SUBGROUP_CASES {
            assert!(
                covered[g] >= covered_at_least,
                "subgroup {name} ({n} cases) covered its rate in only {} of {sims}",
                covered[g]
            );
        }
    }
    assert!(
        gap_covered >= covered_at_least,
        "the gap covered the true gap in only {gap_covered}"
    );
}
