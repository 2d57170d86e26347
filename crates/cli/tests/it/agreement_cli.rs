//! `nmb agreement` end to end: the JSON it prints for the calibration fixture, and its errors on bad files.
//! The statistics themselves are checked against SciPy and friends in crates/calibration/tests/reference.rs.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn nmb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nmb"))
        .args(args)
        .output()
        .expect("running nmb")
}

fn fixture() -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../calibration/fixtures/ratings.csv")
        .display()
        .to_string()
}

#[test]
fn json_report_has_every_section() {
    let out = nmb(&[
        "agreement",
        &fixture(),
        "--json",
        "--pass-threshold",
        "3",
        "--resamples",
        "300",
        "--dimension",
        "overall",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["bootstrap"]["resamples"], 300);
    let dims = v["dimensions"].as_array().unwrap();
    assert_eq!(dims.len(), 1);
    let d = &dims[0];
    assert_eq!(d["dimension"], "overall");
    assert_eq!(
        d["pairs"].as_array().unwrap().len(),
        10,
        "5 annotators give 10 pairs"
    );
    let groups: Vec<&str> = d["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["all", "clinicians", "judges"]);
    for j in d["judge_vs_clinicians"].as_array().unwrap() {
        let names: Vec<&str> = j["measures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["measure"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "pearson",
                "spearman",
                "cohen_kappa",
                "quadratic_kappa",
                "alpha_interval",
                "alpha_nominal",
                "icc_2_1"
            ]
        );
    }
    let rates = d["corrected_pass_rates"].as_array().unwrap();
    assert_eq!(rates.len(), 2);
    let c = &rates[0]["result"]["corrected"];
    assert!(
        c["ci_low"].as_f64() <= c["value"].as_f64() && c["value"].as_f64() <= c["ci_high"].as_f64()
    );
}

#[test]
fn bad_files_list_every_problem_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.csv");
    std::fs::write(
        &path,
        "annotator,item,dimension,score\ndr_a,i1,overall,4\ndr_a,i1,overall,5\ndr_b,i2,overall,lots\n",
    )
    .unwrap();
    let out = nmb(&["agreement", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.csv:3") && err.contains("bad.csv:4: column score"),
        "{err}"
    );
    let missing = nmb(&["agreement", "/nonexistent/ratings.csv"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/ratings.csv"));
}
