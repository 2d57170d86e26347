//! The error taxonomy per perturbation: `nmb eval --perturb mismatch,blank` on the simulated vision model
//! (`nmb_fake_server::vision`), scored with the simulated taxonomy judge of its marked images
//! (`nmb_fake_server::visual_judge::marked_reply`) and `--judge-images same`, then `nmb report`. The judge
//! labels a wrong answer about a flat grey image a visual hallucination, one that reads the marker it was shown
//! (another case's) a reasoning failure, and one that ignored or misread its image a perceptual failure; so the
//! unperturbed run's errors are perceptual, `blank`'s are hallucinations and `mismatch`'s mostly neither, and
//! the image-reliance section must show those shares as the score reports hold them. Scored again by the same
//! judge without the images, the section shows the sentence that says the shares need them instead.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use crate::perturb::suite as marked_suite;
use nmb_fake_server::vision::vision_reply;
use nmb_fake_server::visual_judge::marked_reply;
use nmb_fake_server::Config;
use nmb_test_support::browser;
use serde_json::Value;

/// Of a run's wrong answers with a label, the share labelled each class, from its stored score report.
fn shares_of(runs: &Path, run: &str) -> (usize, f64, f64) {
    let report = nmb_results::stored::latest(&store(runs), run)
        .unwrap()
        .expect("scored");
    let labels: Vec<&str> = (report.samples.iter())
        .filter(|s| s.status.is_scored() && s.correct == Some(false))
        .filter_map(|s| s.taxonomy.as_ref()?.category.map(|c| c.as_str()))
        .collect();
    let share = |c: &str| labels.iter().filter(|l| **l == c).count() as f64 / labels.len() as f64;
    (
        labels.len(),
        share("perceptual_failure"),
        share("visual_hallucination"),
    )
}

fn report(runs: &Path, ids: &[&String], out: &Path) -> (Value, String, String) {
    let mut args = vec!["report"];
    args.extend(ids.iter().map(|s| s.as_str()));
    let out_s = out.display().to_string();
    args.extend(["--format", "html,md,json", "--out", &out_s]);
    let o = nmb(runs, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
    (
        serde_json::from_str(&read("report.json")).unwrap(),
        read("report.md"),
        read("report.html"),
    )
}

#[test]
fn visual_error_shares_per_perturbation_follow_the_seeing_judge_and_wait_for_images() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let suite = marked_suite(tmp.path());
    let models = server(Config {
        responder: Arc::new(vision_reply),
        ..Config::default()
    });
    let judge = server(Config {
        responder: Arc::new(marked_reply),
        ..Config::default()
    });
    let judge_spec = format!("openai:marked-judge@{}/v1", judge.url());
    let out = nmb_command(&runs)
        .env("OPENAI_API_KEY", "k")
        .args(["eval", "--suite"])
        .arg(&suite)
        .args(["--model", &format!("openai:vision@{}/v1", models.url())])
        .args(["--name", "vision", "--samples", "5", "--seed", "3"])
        .args(["--perturb", "mismatch,blank", "--judge", &judge_spec])
        .args(["--judge-images", "same", "--no-rubric", "--no-bertscore"])
        .args(["--json", "-q"])
        .output()
        .unwrap();
    let doc = json_of(&out);
    let ids: BTreeMap<String, String> = (doc["perturb"].as_array().unwrap().iter())
        .map(|r| {
            (
                r["perturbation"].as_str().unwrap().to_string(),
                r["run_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(ids.len(), 3, "{ids:?}");
    let all: Vec<&String> = ids.values().collect();

    let (json, md, html) = report(&runs, &all, &tmp.path().join("seeing"));
    let model = &json["analysis"]["reliance"][0];
    assert!(model.get("taxonomy_note").is_none(), "{model}");
    let rows = model["taxonomy"].as_array().expect("the shares are shown");
    let got: BTreeMap<&str, &Value> = rows
        .iter()
        .map(|r| (r["perturbation"].as_str().unwrap(), r))
        .collect();
    assert_eq!(
        got.keys().copied().collect::<Vec<_>>(),
        ["blank", "mismatch", "none"]
    );
    let estimate = |label: &str, class: &str| {
        let e = &got[label][class];
        (
            e["value"].as_f64().unwrap(),
            e["ci_low"].as_f64().unwrap(),
            e["ci_high"].as_f64().unwrap(),
        )
    };
    for (label, id) in &ids {
        let (labelled, perceptual, hallucination) = shares_of(&runs, id);
        assert!(labelled > 0, "{label}: wrong answers were labelled");
        assert_eq!(got[label.as_str()]["run_id"], id.as_str());
        assert_eq!(got[label.as_str()]["labelled"], labelled);
        let (p, plo, phi) = estimate(label, "perceptual_failure");
        let (h, hlo, hhi) = estimate(label, "visual_hallucination");
        assert!(
            (p - perceptual).abs() < 1e-12,
            "{label}: {p} vs {perceptual}"
        );
        assert!(
            (h - hallucination).abs() < 1e-12,
            "{label}: {h} vs {hallucination}"
        );
        assert!(plo <= p && p <= phi && hlo <= h && h <= hhi, "{label}");
    }
    // As designed: blank images make hallucinations, the unperturbed run's errors (images ignored) are
    // perceptual, and another case's image read right is neither.
    let (none_p, none_plo, _) = estimate("none", "perceptual_failure");
    let (_, _, none_hhi) = estimate("none", "visual_hallucination");
    let (_, blank_hlo, _) = estimate("blank", "visual_hallucination");
    let (mismatch_p, _, mismatch_phi) = estimate("mismatch", "perceptual_failure");
    assert!(
        blank_hlo > none_hhi,
        "blank hallucinates more than unperturbed"
    );
    assert!(
        mismatch_phi < none_plo && mismatch_p < none_p,
        "mismatch's errors are less perceptual than the unperturbed run's: {rows:?}"
    );
    assert!(md.contains("### Visual errors per perturbation"), "{md}");
    assert!(md.contains("| vision | blank |"), "{md}");
    assert!(html.contains("id=\"image-reliance-taxonomy\""));

    if let Some(chromium) = browser::chromium() {
        let page = tmp.path().join("seeing").join("report.html");
        let (dom, log) = browser::dump_dom(&chromium, &page);
        assert!(
            dom.contains("id=\"image-reliance-taxonomy\"") && dom.contains("visual hallucination"),
            "rendered; log:\n{log}"
        );
        let png = browser::screenshot_dir().join("report-image-reliance-taxonomy.png");
        browser::screenshot(&chromium, &page, &png, 1280, 2600);
    }

    // The same runs scored by the same judge without the images: its labels of visual errors are guesses, and
    // the section says the shares need the images instead of showing them.
    for id in &all {
        let o = nmb(
            &runs,
            &[
                "score",
                id,
                "--judge",
                &judge_spec,
                "--no-rubric",
                "--no-bertscore",
                "--json",
            ],
        );
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let (json, md, html) = report(&runs, &all, &tmp.path().join("blind"));
    let model = &json["analysis"]["reliance"][0];
    assert!(model.get("taxonomy").is_none(), "{model}");
    let note = model["taxonomy_note"].as_str().unwrap();
    assert!(note.contains("--judge-images same"), "{note}");
    assert!(md.contains(note), "{md}");
    assert!(!md.contains("### Visual errors per perturbation"));
    assert!(html.contains("class=\"reliance-taxonomy-note\""));
    assert!(!html.contains("id=\"image-reliance-taxonomy\""));
}
