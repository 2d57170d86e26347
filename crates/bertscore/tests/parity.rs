//! Parity with the Python bert-score package (fixtures/parity.json, made by
//! fixtures/make_fixture.py) on the MiniLM weights, plus behaviour at the edges.

use nmb_test_support::assets::minilm_dir;
use std::path::PathBuf;
use std::sync::OnceLock;

use nmb_bertscore::{BertScoreError, BertScorer, Prf, ScoreOptions};
use serde_json::Value;

const TOL: f64 = 1e-4;

fn model_dir() -> Option<PathBuf> {
    minilm_dir()
}

/// One scorer for all tests in this file: loading is the slow part.
fn scorer() -> Option<&'static BertScorer> {
    static SCORER: OnceLock<Option<BertScorer>> = OnceLock::new();
    SCORER
        .get_or_init(|| model_dir().map(|d| BertScorer::load(&d, 6).expect("MiniLM loads")))
        .as_ref()
}

fn fixture() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/parity.json");
    let text = std::fs::read_to_string(&path).expect("fixtures/parity.json is committed");
    serde_json::from_str(&text).expect("fixture is JSON")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|s| s.as_str().expect("string").to_string())
        .collect()
}

fn expected(v: &Value) -> Vec<Prf> {
    serde_json::from_value(v.clone()).expect("list of {p,r,f}")
}

fn assert_close(got: &[Prf], want: &[Prf], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: pair count");
    let mut worst = 0f64;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        for (name, a, b) in [("P", g.p, w.p), ("R", g.r, w.r), ("F", g.f, w.f)] {
            let d = (a - b).abs();
            worst = worst.max(d);
            assert!(
                d <= TOL,
                "{what}: pair {i} {name}: got {a}, bert-score {b} (|diff| {d})"
            );
        }
    }
    eprintln!("{what}: max |diff| {worst:.2e} over {} pairs", got.len());
}

fn run(fx: &Value, scorer: &BertScorer, idf: bool, batch_size: usize, emulate: bool) -> Vec<Prf> {
    let opts = ScoreOptions {
        idf,
        batch_size,
        emulate_pad_zeros: emulate,
        ..ScoreOptions::default()
    };
    scorer
        .score(&strings(&fx["cands"]), &strings(&fx["refs"]), &opts)
        .expect("scores")
}

#[test]
fn tokens_match_bert_score() {
    let Some(scorer) = scorer() else { return };
    let fx = fixture();
    let ids = fx["token_ids"].as_object().expect("token_ids object");
    assert!(ids.len() >= 20);
    for (text, want) in ids {
        let want: Vec<u32> = serde_json::from_value(want.clone()).expect("ids");
        assert_eq!(
            scorer.token_ids(text).expect("tokenizes"),
            want,
            "text {text:?}"
        );
    }
}

#[test]
fn parity_without_idf() {
    let Some(scorer) = scorer() else { return };
    let fx = fixture();
    assert_close(
        &run(&fx, scorer, false, 4, true),
        &expected(&fx["scores"]["no_idf_bs4"]),
        "no idf, batch 4",
    );
    assert_close(
        &run(&fx, scorer, false, 1, true),
        &expected(&fx["scores"]["no_idf_bs1"]),
        "no idf, batch 1",
    );
}

#[test]
fn parity_with_idf() {
    let Some(scorer) = scorer() else { return };
    let fx = fixture();
    assert_close(
        &run(&fx, scorer, true, 4, true),
        &expected(&fx["scores"]["idf_bs4"]),
        "idf, batch 4",
    );
    assert_close(
        &run(&fx, scorer, true, 1, true),
        &expected(&fx["scores"]["idf_bs1"]),
        "idf, batch 1",
    );
}

#[test]
fn without_pad_emulation_pairs_score_alone() {
    let Some(scorer) = scorer() else { return };
    let fx = fixture();
    // Unpadded bert-score (batch 1) and the fixture's independent manual computation agree
    // with our batch-4 result once the padding quirk is off.
    assert_close(
        &run(&fx, scorer, false, 4, false),
        &expected(&fx["scores"]["no_idf_bs1"]),
        "no pad emulation vs bs1",
    );
    assert_close(
        &run(&fx, scorer, true, 4, false),
        &expected(&fx["manual"]["idf"]),
        "no pad emulation vs manual idf",
    );
}

#[test]
fn identical_strings_score_one() {
    let Some(scorer) = scorer() else { return };
    let text =
        "Restricted diffusion in the left MCA territory indicates an acute ischaemic stroke."
            .to_string();
    let other = "Guillain-Barre syndrome.".to_string();
    let scores = scorer
        .score(
            &[text.clone(), other.clone()],
            &[text, other],
            &ScoreOptions::default(),
        )
        .expect("scores");
    for s in scores {
        for v in [s.p, s.r, s.f] {
            assert!((v - 1.0).abs() < 1e-5, "{s:?}");
        }
    }
}

#[test]
fn count_mismatch_is_an_error() {
    let Some(scorer) = scorer() else { return };
    let err = scorer
        .score(
            &["a".into(), "b".into()],
            &["a".into()],
            &ScoreOptions::default(),
        )
        .expect_err("mismatch");
    assert!(
        matches!(err, BertScoreError::CountMismatch { cands: 2, refs: 1 }),
        "{err}"
    );
    assert!(err.to_string().contains("2 candidates but 1 references"));
}

#[test]
fn empty_and_blank_texts_score_zero() {
    let Some(scorer) = scorer() else { return };
    let cands: Vec<String> = ["", "Stroke.", "   ", "Stroke."].map(String::from).to_vec();
    let refs: Vec<String> = ["Stroke.", "", "Stroke.", "Stroke."]
        .map(String::from)
        .to_vec();
    for idf in [false, true] {
        let opts = ScoreOptions {
            idf,
            ..ScoreOptions::default()
        };
        let s = scorer.score(&cands, &refs, &opts).expect("scores");
        for prf in &s[..3] {
            assert_eq!((prf.p, prf.r, prf.f), (0.0, 0.0, 0.0), "idf {idf}");
        }
        assert!(s[3].f.is_finite());
    }
}

#[test]
fn baseline_rescales_each_score() {
    let Some(scorer) = scorer() else { return };
    let cands = vec!["Multiple sclerosis with periventricular lesions.".to_string()];
    let refs = vec!["Demyelinating plaques suggest MS.".to_string()];
    let raw = scorer
        .score(&cands, &refs, &ScoreOptions::default())
        .expect("raw")[0];
    let b = [0.3, 0.4, 0.5];
    let opts = ScoreOptions {
        baseline: Some(b),
        ..ScoreOptions::default()
    };
    let got = scorer.score(&cands, &refs, &opts).expect("rescaled")[0];
    assert!((got.p - (raw.p - 0.3) / 0.7).abs() < 1e-12);
    assert!((got.r - (raw.r - 0.4) / 0.6).abs() < 1e-12);
    assert!((got.f - (raw.f - 0.5) / 0.5).abs() < 1e-12);
    let bad = ScoreOptions {
        baseline: Some([1.0, 0.0, 0.0]),
        ..ScoreOptions::default()
    };
    assert!(scorer.score(&cands, &refs, &bad).is_err());
}

#[test]
fn layer_out_of_range_is_an_error() {
    let Some(dir) = model_dir() else { return };
    let err = BertScorer::load(&dir, 7).err().expect("layer 7 of 6");
    assert!(
        matches!(
            err,
            BertScoreError::Layer {
                layer: 7,
                max: 6,
                ..
            }
        ),
        "{err}"
    );
}
