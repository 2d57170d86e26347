//! The simulated vision model's rule against nmb-stats' paired, case-clustered bootstrap: over 100 seeded
//! simulations of a 16-case suite (each case its own diagnosis, 5 samples), the 95% interval of accuracy with
//! the true images minus accuracy with another case's covers the designed reliance in at least 93; the marker is
//! read exactly from clean images and less reliably under noise, as `nmb eval --perturb noise:0.2` sends them.

use nmb_fake_server::vision::{
    designed_reliance, marker_png, read_marker, reads_image, text_guess, DIAGNOSES,
};
use nmb_imaging::Perturbation;
use nmb_stats::{paired_bootstrap, BootstrapConfig, Design};

const CASES: usize = 16;
const SAMPLES: usize = 5;

/// What the vision model answers for a case's text and sample when shown `image`.
fn answer(image: &[u8], text: &str, sample: usize) -> usize {
    match read_marker(image) {
        Some(k) if reads_image(text, sample) => k,
        _ => text_guess(text, sample),
    }
}

#[test]
fn a_hundred_simulations_cover_the_designed_reliance_at_least_93_times() {
    let images: Vec<Vec<u8>> = (0..CASES).map(|i| marker_png(i, 32, i as u64)).collect();
    let mut covered = 0;
    for sim in 0..100u64 {
        let (mut truth, mut mismatch, mut cases) = (Vec::new(), Vec::new(), Vec::new());
        for case in 0..CASES {
            // Another case, chosen per simulation, never the case itself.
            let donor = (case + 1 + ((sim as usize * 7 + case * 3) % (CASES - 1))) % CASES;
            assert_ne!(donor, case);
            for s in 0..SAMPLES {
                let text = format!("simulation {sim}, case {case}");
                truth.push(f64::from(u8::from(answer(&images[case], &text, s) == case)));
                mismatch.push(f64::from(u8::from(
                    answer(&images[donor], &text, s) == case,
                )));
                cases.push(case);
            }
        }
        let cfg = BootstrapConfig {
            seed: sim,
            ..BootstrapConfig::default()
        };
        let d = paired_bootstrap(&truth, &mismatch, &Design::clusters_by(&cases), &cfg).unwrap();
        if d.diff.ci_low <= designed_reliance() && designed_reliance() <= d.diff.ci_high {
            covered += 1;
        }
    }
    assert!(
        covered >= 93,
        "{covered} of 100 intervals cover {}",
        designed_reliance()
    );
}

#[test]
fn the_marker_is_read_from_clean_images_and_misread_under_noise() {
    let noise: Perturbation = "noise:0.2".parse().unwrap();
    let (mut clean, mut noisy) = (0, 0);
    for i in 0..DIAGNOSES.len() * 4 {
        let png = marker_png(i, 32, i as u64);
        clean += usize::from(read_marker(&png) == Some(i % DIAGNOSES.len()));
        let changed = noise.apply(&png, 7).unwrap();
        noisy += usize::from(read_marker(&changed) == Some(i % DIAGNOSES.len()));
    }
    let n = DIAGNOSES.len() * 4;
    assert_eq!(clean, n);
    assert!(
        noisy > n / 5 && noisy < n * 4 / 5,
        "read {noisy} of {n} under noise"
    );
    let blank: Perturbation = "blank".parse().unwrap();
    assert_eq!(
        read_marker(&blank.apply(&marker_png(0, 32, 0), 0).unwrap()),
        Some(8)
    );
}
