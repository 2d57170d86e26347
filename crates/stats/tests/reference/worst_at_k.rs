//! Worst-at-k against HealthBench's formula (every k-subset's minimum, averaged, then the mean over problems
//! clipped to [0, 1]), computed by `fixtures/make_worst_at_k.py` from HealthBench's published analysis.

use nmb_stats::{worst_at_k, worst_at_k_curve, Average, BootstrapConfig, TaskSamples};
use serde_json::Value;

const TOLERANCE: f64 = 1e-12;

#[test]
fn worst_at_k_matches_healthbench() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/worst_at_k.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let r: Value = serde_json::from_str(&text).unwrap();
    let sets = r["sets"].as_array().unwrap();
    assert!(sets.len() >= 4, "too few sets in {path}");
    let floats = |v: &Value| -> Vec<f64> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect()
    };
    let cfg = BootstrapConfig {
        resamples: 200,
        ..BootstrapConfig::default()
    };
    for set in sets {
        let name = set["name"].as_str().unwrap();
        let problems: Vec<Vec<f64>> = set["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(floats)
            .collect();
        for (i, (scores, want)) in problems
            .iter()
            .zip(set["per_problem"].as_array().unwrap())
            .enumerate()
        {
            for (k, w) in floats(want).iter().enumerate() {
                let got = worst_at_k(scores, k + 1).unwrap();
                assert!(
                    (got - w).abs() <= TOLERANCE,
                    "{name}, problem {i}, k={}: {got} vs {w}",
                    k + 1
                );
            }
        }
        let cases: Vec<String> = (0..problems.len())
            .map(|i| format!("problem {i}"))
            .collect();
        let tasks: Vec<TaskSamples> = problems
            .iter()
            .zip(&cases)
            .map(|(s, c)| TaskSamples { case: c, scores: s })
            .collect();
        for (average, key) in [
            (Average::ClippedToUnit, "clipped_mean"),
            (Average::Mean, "mean"),
        ] {
            let curve = worst_at_k_curve(&tasks, average, &cfg).unwrap();
            let want = floats(&set[key]);
            assert_eq!(curve.len(), want.len(), "{name}");
            for (point, w) in curve.iter().zip(&want) {
                assert!(
                    (point.estimate.value - w).abs() <= TOLERANCE,
                    "{name}, {key}, k={}: {} vs {w}",
                    point.k,
                    point.estimate.value
                );
                assert_eq!(point.tasks, problems.len());
            }
        }
    }
}
