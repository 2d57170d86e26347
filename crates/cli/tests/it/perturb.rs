//! `nmb eval --perturb mismatch,blank,noise:0.2` against the fake server's simulated models
//! (`nmb_fake_server::vision`): a vision model that reads a diagnosis marked in each image's pixels on three
//! samples in four, and a text-only model that ignores images. Each case of the suite has its own diagnosis, so
//! the vision model's reliance (accuracy with the true images minus accuracy with another case's, paired by
//! sample and clustered by case, nmb-stats' paired bootstrap over the stored score reports) must hold the
//! designed value in its interval, and the text-only model's must hold 0. Runs are named `NAME [perturbation]`,
//! a second invocation sends nothing, and bad lists are refused before anything is sent.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use nmb_fake_server::vision::{
    designed_reliance, marker_png, text_only_reply, vision_reply, DIAGNOSES,
};
use nmb_fake_server::{Config, FakeServer, ReceivedPart};
use nmb_stats::{paired_bootstrap, BootstrapConfig, Design};
use nmb_test_support::browser;
use serde_json::Value;

pub(crate) const CASES: usize = 16;

/// A native suite of 16 MRI cases, case i's image marked with diagnosis i, which is its reference.
pub(crate) fn suite(dir: &Path) -> PathBuf {
    let root = dir.join("marked");
    std::fs::create_dir_all(root.join("images")).unwrap();
    std::fs::write(
        root.join("suite.toml"),
        "id = \"marked\"\nversion = \"1\"\n[defaults]\nlevel = \"direct\"\n",
    )
    .unwrap();
    let mut lines = Vec::new();
    for (i, diagnosis) in DIAGNOSES.iter().enumerate().take(CASES) {
        let name = format!("images/case{i}.png");
        std::fs::write(root.join(&name), marker_png(i, 32, i as u64)).unwrap();
        let case = serde_json::json!({
            "case_id": format!("case{i}"),
            "images": [{"path": name, "modality": "MRI", "sequence": "FLAIR", "plane": "axial"}],
            "notes": format!("Patient {i}: progressive neurological symptoms."),
            "tasks": [{"id": format!("c{i}"), "family": "differential",
                "question": "What is the most likely diagnosis?",
                "reference": {"diagnosis": diagnosis}}],
        });
        lines.push(case.to_string());
    }
    std::fs::write(root.join("cases.jsonl"), lines.join("\n") + "\n").unwrap();
    root
}

fn fake() -> FakeServer {
    server(Config {
        responder: Arc::new(|req| match req.model.as_str() {
            "vision" => vision_reply(req),
            _ => text_only_reply(req),
        }),
        ..Config::default()
    })
}

fn eval(
    runs: &Path,
    suite: &Path,
    srv: &FakeServer,
    model: &str,
    list: &str,
) -> std::process::Output {
    nmb_command(runs)
        .env("OPENAI_API_KEY", "k")
        .args(["eval", "--suite"])
        .arg(suite)
        .args(["--model", &format!("openai:{model}@{}/v1", srv.url())])
        .args([
            "--name",
            model,
            "--samples",
            "5",
            "--seed",
            "3",
            "--perturb",
            list,
        ])
        .args(["--no-bertscore", "--json", "-q"])
        .output()
        .unwrap()
}

/// Each run's label and id, as `--json` lists them.
fn runs_of(out: &std::process::Output) -> BTreeMap<String, String> {
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stderr),
        text(&out.stdout)
    );
    let doc: Value = json_of(out);
    doc["perturb"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["perturbation"].as_str().unwrap().to_string(),
                r["run_id"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Per (task, sample): 1 for a right answer, with the case.
fn scores(runs: &Path, run: &str) -> BTreeMap<(String, u32), (f64, String)> {
    let report = nmb_results::stored::latest(&store(runs), run)
        .unwrap()
        .expect("scored");
    report
        .samples
        .iter()
        .filter(|s| s.status.is_scored())
        .map(|s| {
            let v = f64::from(u8::from(s.correct == Some(true)));
            ((s.task_id.clone(), s.sample_index), (v, s.case_id.clone()))
        })
        .collect()
}

/// Accuracy with `a` minus accuracy with `b`, paired by sample, clustered by case.
fn reliance(runs: &Path, a: &str, b: &str) -> nmb_stats::Estimate {
    let (sa, sb) = (scores(runs, a), scores(runs, b));
    assert_eq!(sa.len(), CASES * 5);
    let (mut x, mut y, mut cases) = (Vec::new(), Vec::new(), Vec::new());
    for (key, (v, case)) in &sa {
        x.push(*v);
        y.push(sb[key].0);
        cases.push(case.clone());
    }
    paired_bootstrap(
        &x,
        &y,
        &Design::clusters_by(&cases),
        &BootstrapConfig::default(),
    )
    .unwrap()
    .diff
}

fn images_sent(srv: &FakeServer) -> Vec<(String, String)> {
    srv.requests()
        .iter()
        .flat_map(|r| {
            let user = r
                .messages
                .iter()
                .flat_map(|m| &m.parts)
                .find_map(|p| match p {
                    ReceivedPart::Text { text } => text
                        .split("Patient ")
                        .nth(1)
                        .map(|t| t.split(':').next().unwrap_or("").to_string()),
                    _ => None,
                });
            let images: Vec<String> = r
                .messages
                .iter()
                .flat_map(|m| &m.parts)
                .filter_map(|p| match p {
                    ReceivedPart::Image { sha256, .. } => Some(sha256.clone()),
                    _ => None,
                })
                .collect();
            images
                .into_iter()
                .map(move |s| (user.clone().unwrap_or_default(), s))
        })
        .collect()
}

#[test]
fn reliance_is_recovered_for_the_vision_model_and_zero_for_the_text_only_one() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let suite = suite(tmp.path());
    let srv = fake();
    let list = "mismatch,blank,noise:0.2";

    let vision = runs_of(&eval(&runs, &suite, &srv, "vision", list));
    assert_eq!(
        vision.keys().collect::<Vec<_>>(),
        ["blank", "mismatch", "noise:0.2", "none"]
    );
    for (label, id) in &vision {
        let want = match label.as_str() {
            "none" => "vision".to_string(),
            p => format!("vision [{p}]"),
        };
        assert_eq!(store(&runs).run(id).unwrap().manifest.display_name(), want);
    }
    // Mismatch never sends a case its own image; the unperturbed run always does.
    let own: BTreeMap<String, String> = (0..CASES)
        .map(|i| {
            (
                i.to_string(),
                nmb_imaging::content_hash(&marker_png(i, 32, i as u64)),
            )
        })
        .collect();
    let sent = images_sent(&srv);
    let own_sent = sent
        .iter()
        .filter(|(case, sha)| own.get(case) == Some(sha))
        .count();
    assert_eq!(
        own_sent, CASES,
        "only the unperturbed run (one request a case) sends the case's own image"
    );

    let text_only = runs_of(&eval(&runs, &suite, &srv, "text-only", list));
    let asked = srv.request_count();

    let r = reliance(&runs, &vision["none"], &vision["mismatch"]);
    let designed = designed_reliance();
    assert!(
        r.ci_low <= designed && designed <= r.ci_high,
        "vision reliance {} [{}, {}] vs designed {designed}",
        r.value,
        r.ci_low,
        r.ci_high
    );
    assert!(r.ci_low > 0.0, "distinguishable from zero");
    let blank = reliance(&runs, &vision["none"], &vision["blank"]);
    assert!(
        blank.ci_low > 0.0,
        "blank images cost the vision model too: {blank:?}"
    );
    let noise = reliance(&runs, &vision["none"], &vision["noise:0.2"]);
    assert!(
        noise.value > 0.0 && noise.value < r.value,
        "noise costs less than mismatch: {noise:?}"
    );

    let t = reliance(&runs, &text_only["none"], &text_only["mismatch"]);
    assert!(
        t.ci_low <= 0.0 && 0.0 <= t.ci_high,
        "text-only reliance {t:?}"
    );

    report_shows_reliance(&runs, &vision, &text_only, r.value, t.value);

    // Again: every run resumes or reuses its stored answers.
    let again = runs_of(&eval(&runs, &suite, &srv, "vision", list));
    assert_eq!(again.len(), 4);
    assert_eq!(srv.request_count(), asked, "nothing is asked twice");
}

#[test]
fn bad_lists_are_refused_before_anything_is_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let suite = suite(tmp.path());
    let srv = fake();
    let out = eval(&runs, &suite, &srv, "vision", "mismatch,sharpen");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("accepted: blank, mismatch"),
        "{}",
        text(&out.stderr)
    );
    let out = eval(&runs, &suite, &srv, "vision", "noise:3");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("0 < SIGMA <= 1"),
        "{}",
        text(&out.stderr)
    );
    let out = eval(&runs, &suite, &srv, "vision", "blank,drop:dwi");
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no image of the suite has sequence DWI"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(srv.request_count(), 0, "nothing was sent");
}

/// `nmb report` over both models' runs: the image-reliance section in report.json, Markdown and HTML (rendered
/// by Chromium), with the reliance the test computed and each model's sentence.
fn report_shows_reliance(
    runs: &Path,
    vision: &BTreeMap<String, String>,
    text_only: &BTreeMap<String, String>,
    vision_reliance: f64,
    text_reliance: f64,
) {
    let out_dir = runs.parent().unwrap().join("report");
    let mut args = vec!["report".to_string()];
    args.extend(vision.values().cloned());
    args.extend(text_only.values().cloned());
    args.extend(["--format", "html,md,json", "--out"].map(String::from));
    args.push(out_dir.display().to_string());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = nmb(runs, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    let models = doc["analysis"]["reliance"].as_array().unwrap();
    assert_eq!(models.len(), 2, "one entry per model");
    for m in models {
        let (want, apart, base) = match m["name"].as_str().unwrap() {
            "vision" => (vision_reliance, true, &vision["none"]),
            _ => (text_reliance, false, &text_only["none"]),
        };
        assert_eq!(&m["baseline_run"], base);
        let got = m["reliance_mismatch"]["value"].as_f64().unwrap();
        assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        assert_eq!(m["distinguishable"], apart);
        let rows = m["rows"].as_array().unwrap();
        let labels: Vec<&str> = rows
            .iter()
            .filter(|r| r["group"] == "overall")
            .map(|r| r["perturbation"].as_str().unwrap())
            .collect();
        assert_eq!(labels.len(), 3, "{labels:?}");
        assert!(m["reliance_blank"]["value"].is_number());
    }
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("## Image reliance and robustness"), "{md}");
    assert!(md.contains(
        "vision: accuracy with the true images minus with another case's images (mismatch) is"
    ));
    assert!(md.contains("distinguishable from zero: its answers depend on the images"));
    assert!(md.contains(
        "text-only: accuracy with the true images minus with another case's images (mismatch) is"
    ));
    assert!(md.contains("not distinguishable from zero"));
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("id=\"image-reliance\""));
    assert!(html.contains(
        "aria-label=\"Accuracy under each perturbation minus unperturbed, with 95% CI\""
    ));

    let Some(chromium) = browser::chromium() else {
        return;
    };
    let page = out_dir.join("report.html");
    let (dom, log) = browser::dump_dom(&chromium, &page);
    assert!(
        dom.contains("id=\"image-reliance\""),
        "rendered; log:\n{log}"
    );
    assert_eq!(
        dom.matches("class=\"reliance-verdict\"").count(),
        2,
        "one sentence per model"
    );
    assert!(dom.contains(
        "aria-label=\"Accuracy under each perturbation minus unperturbed, with 95% CI\""
    ));
    let png = browser::screenshot_dir().join("report-image-reliance.png");
    browser::screenshot(&chromium, &page, &png, 1280, 2600);
}
