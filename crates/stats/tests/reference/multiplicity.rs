//! Holm and Benjamini–Hochberg adjusted p-values: against statsmodels' `multipletests` on the families of
//! `fixtures/make_multiplicity.py`, and in seeded simulations of families of tests with no effect (the error
//! rates each correction promises to hold).

use nmb_stats::{adjust, adjust_family, Correction};
use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

/// The bar the fixtures are held to.
const TOLERANCE: f64 = 1e-12;

#[test]
fn adjusted_p_values_match_statsmodels_multipletests() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/multiplicity.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let r: Value = serde_json::from_str(&text).unwrap();
    assert!(
        r["versions"]["statsmodels"].is_string(),
        "{path} does not record statsmodels' version"
    );
    let families = r["families"].as_array().unwrap();
    assert!(families.len() >= 20, "too few families in {path}");
    let floats = |v: &Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    for fam in families {
        let name = fam["name"].as_str().unwrap();
        let p = floats(&fam["p"]);
        for (key, correction) in [
            ("holm", Correction::Holm),
            ("bh", Correction::BenjaminiHochberg),
        ] {
            let want = floats(&fam[key]);
            let got = adjust(&p, correction).unwrap();
            assert_eq!(got.len(), want.len());
            for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (g - w).abs() <= TOLERANCE,
                    "{name}, {key}, index {i}: {g} vs statsmodels {w}"
                );
            }
        }
        for (a, (h, b)) in adjust_family(&p)
            .unwrap()
            .iter()
            .zip(floats(&fam["holm"]).iter().zip(floats(&fam["bh"])))
        {
            assert!(
                (a.holm - h).abs() <= TOLERANCE && (a.bh - b).abs() <= TOLERANCE,
                "{name}: {a:?}"
            );
        }
    }
}

fn uniform(rng: &mut ChaCha8Rng) -> f64 {
    ((rng.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let (u, v) = (uniform(rng), uniform(rng));
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
}

/// Two-sided p-value of a z statistic.
fn two_sided(z: f64) -> f64 {
    statrs::function::erf::erfc(z.abs() / std::f64::consts::SQRT_2)
}

const ALPHA: f64 = 0.05;
const FAMILIES: usize = 4_000;
const TESTS: usize = 10;

/// Share of families with any false rejection (FWER) and mean false discovery proportion (FDR), for Holm, BH
/// and no correction, over seeded families of `TESTS` z-tests that share a correlation `rho` (an equicorrelated
/// normal, positive dependence as between the groups of one comparison), the first `effects` of them with a
/// real effect of 3 standard errors.
fn error_rates(seed: u64, rho: f64, effects: usize) -> [(f64, f64); 3] {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut totals = [(0.0, 0.0); 3];
    for _ in 0..FAMILIES {
        let shared = normal(&mut rng);
        let p: Vec<f64> = (0..TESTS)
            .map(|t| {
                let shift = if t < effects { 3.0 } else { 0.0 };
                two_sided(shift + rho.sqrt() * shared + (1.0 - rho).sqrt() * normal(&mut rng))
            })
            .collect();
        let adjusted = adjust_family(&p).unwrap();
        let decisions: [Vec<bool>; 3] = [
            adjusted.iter().map(|a| a.holm <= ALPHA).collect(),
            adjusted.iter().map(|a| a.bh <= ALPHA).collect(),
            p.iter().map(|&x| x <= ALPHA).collect(),
        ];
        for (total, rejected) in totals.iter_mut().zip(&decisions) {
            let false_ones = rejected[effects..].iter().filter(|&&r| r).count();
            let all = rejected.iter().filter(|&&r| r).count();
            total.0 += f64::from(u8::from(false_ones > 0));
            total.1 += false_ones as f64 / all.max(1) as f64;
        }
    }
    totals.map(|(fwer, fdr)| (fwer / FAMILIES as f64, fdr / FAMILIES as f64))
}

/// Three standard errors of a rate near α over `FAMILIES` families: the simulation's own error.
fn slack() -> f64 {
    3.0 * (ALPHA * (1.0 - ALPHA) / FAMILIES as f64).sqrt()
}

#[test]
fn under_no_effect_holm_holds_the_family_wise_error_and_bh_the_false_discovery_rate() {
    for (seed, rho) in [(1, 0.0), (2, 0.5)] {
        let [holm, bh, raw] = error_rates(seed, rho, 0);
        eprintln!(
            "no effect, rho {rho}: FWER Holm {:.4}, FDR BH {:.4}, FWER raw {:.4}",
            holm.0, bh.1, raw.0
        );
        assert!(
            holm.0 <= ALPHA + slack(),
            "rho {rho}: Holm's family-wise error {} above {ALPHA}",
            holm.0
        );
        assert!(
            bh.1 <= ALPHA + slack(),
            "rho {rho}: BH's false discovery rate {} above {ALPHA}",
            bh.1
        );
        // The simulation can see a violation: unadjusted p-values give a far higher family-wise error.
        assert!(
            raw.0 > 2.0 * ALPHA,
            "rho {rho}: raw family-wise error {}",
            raw.0
        );
    }
}

#[test]
fn with_some_real_effects_the_guarantees_hold_for_the_true_nulls() {
    let [holm, bh, raw] = error_rates(3, 0.3, 4);
    eprintln!(
        "4 of {TESTS} real: FWER Holm {:.4}, FDR BH {:.4}, FDR raw {:.4}",
        holm.0, bh.1, raw.1
    );
    assert!(
        holm.0 <= ALPHA + slack(),
        "Holm's family-wise error {}",
        holm.0
    );
    // BH holds the FDR at α·m0/m (here 0.03).
    assert!(
        bh.1 <= ALPHA * 0.6 + slack(),
        "BH's false discovery rate {}",
        bh.1
    );
    assert!(raw.0 > 2.0 * ALPHA);
}
