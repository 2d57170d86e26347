//! `nmb bertscore` on the real MiniLM weights: the output shape, and that it ranks a paraphrase above an
//! unrelated sentence. Values themselves are checked against bert-score in crates/bertscore/tests/parity.rs.

use nmb_test_support::assets::minilm_dir;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn model_dir() -> Option<PathBuf> {
    minilm_dir()
}

fn nmb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nmb"))
        .args(args)
        .output()
        .expect("running nmb")
}

#[test]
fn json_scores_rank_a_paraphrase_above_an_unrelated_text() {
    let Some(model) = model_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (cands, refs) = (dir.path().join("c.txt"), dir.path().join("r.txt"));
    let reference = "Relapsing multiple sclerosis with periventricular plaques.";
    std::fs::write(
        &cands,
        format!(
            "{reference}\nMultiple sclerosis, relapsing form, with plaques around the ventricles.\n\
             The bakery sells bread and cakes on Sundays.\n"
        ),
    )
    .unwrap();
    std::fs::write(&refs, format!("{reference}\n{reference}\n{reference}\n")).unwrap();
    let out = nmb(&[
        "bertscore",
        "--model-dir",
        model.to_str().unwrap(),
        "--layer",
        "6",
        "--cands",
        cands.to_str().unwrap(),
        "--refs",
        refs.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON list");
    let scores: Vec<[f64; 3]> = v
        .as_array()
        .expect("a list")
        .iter()
        .map(|s| ["p", "r", "f"].map(|k| s[k].as_f64().expect("a number")))
        .collect();
    assert_eq!(scores.len(), 3);
    for [p, r, f] in &scores {
        let harmonic = 2.0 * p * r / (p + r);
        assert!(
            (f - harmonic).abs() < 1e-9,
            "F is not the harmonic mean of {p} and {r}"
        );
    }
    assert!(
        (scores[0][2] - 1.0).abs() < 1e-5,
        "identical texts: {:?}",
        scores[0]
    );
    assert!(
        scores[1][2] > scores[2][2],
        "paraphrase vs unrelated: {scores:?}"
    );
}

#[test]
fn mismatched_line_counts_name_both_files() {
    let Some(model) = model_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (cands, refs) = (dir.path().join("c.txt"), dir.path().join("r.txt"));
    std::fs::write(&cands, "a\nb\n").unwrap();
    std::fs::write(&refs, "a\n").unwrap();
    let out = nmb(&[
        "bertscore",
        "--model-dir",
        model.to_str().unwrap(),
        "--layer",
        "6",
        "--cands",
        cands.to_str().unwrap(),
        "--refs",
        refs.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("c.txt") && err.contains("r.txt"), "{err}");
}
