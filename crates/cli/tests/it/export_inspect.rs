//! `nmb export inspect`: a run evaluated against the fake server (answers right or wrong by the conversation's
//! hash, two samples a task, one task's calls failing) is exported as an Inspect AI eval log and read back with
//! PyPI `inspect-ai`'s own reader: every sample's score equals nmb's verdict (errored samples have none and carry
//! their error), every output the stored answer, and the headline metrics the score report's numbers. An unscored
//! or unknown run is refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use nmb_fake_server::{Config, FakeServer, ReceivedRequest, Reply, Wire};
use serde_json::Value;

const REFERENCE: &str = "Multiple sclerosis";
const CASES: usize = 8;

/// A native suite of differential tasks referring to multiple sclerosis; the last case's calls fail (HTTP 500).
fn suite(dir: &Path) -> PathBuf {
    let root = dir.join("export-suite");
    std::fs::create_dir_all(root.join("images")).unwrap();
    std::fs::write(
        root.join("suite.toml"),
        "id = \"export-suite\"\nversion = \"1\"\n[defaults]\nlevel = \"direct\"\n",
    )
    .unwrap();
    let mut lines = Vec::new();
    for i in 0..CASES {
        let name = format!("images/case{i}.png");
        std::fs::write(
            root.join(&name),
            nmb_fake_server::support::noise_png(16, i as u64),
        )
        .unwrap();
        let fault = if i == CASES - 1 { " FAULT:500" } else { "" };
        let case = serde_json::json!({
            "case_id": format!("case{i}"),
            "images": [{"path": name, "modality": "MRI", "sequence": "FLAIR", "plane": "axial"}],
            "notes": "Relapsing numbness and blurred vision.",
            "tasks": [{"id": format!("c{i}"), "family": "differential",
                "question": format!("Case {i}: the most likely diagnosis?{fault}"),
                "reference": {"diagnosis": REFERENCE}}],
        });
        lines.push(case.to_string());
    }
    std::fs::write(root.join("cases.jsonl"), lines.join("\n") + "\n").unwrap();
    root
}

fn draw(req: &ReceivedRequest, i: usize) -> u64 {
    let key = format!("{}|{i}", req.conversation_sha256);
    key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

fn server() -> FakeServer {
    crate::common::server(Config {
        responder: Arc::new(|req| {
            let texts = (0..req.samples() as usize)
                .map(|i| {
                    let top = if draw(req, i).is_multiple_of(2) {
                        REFERENCE
                    } else {
                        "Migraine"
                    };
                    serde_json::json!({"differential": [{"rank": 1, "diagnosis": top}]}).to_string()
                })
                .collect();
            Reply::Texts(texts)
        }),
        ..Config::default()
    })
}

/// A scored run of the suite (two samples a task): the runs folder and its id.
pub(crate) fn scored_run(dir: &Path) -> (PathBuf, String, FakeServer) {
    let (runs, run, server, _) = scored_run_with(dir, &[]);
    (runs, run, server)
}

/// As [`scored_run`], with more `nmb eval` arguments; also gives what the evaluation wrote on stderr.
pub(crate) fn scored_run_with(dir: &Path, more: &[&str]) -> (PathBuf, String, FakeServer, String) {
    let runs = dir.join("runs");
    let suite = suite(dir);
    let server = server();
    let out = nmb_command(&runs)
        .args(["eval", "--suite"])
        .arg(&suite)
        .args(["--model", &model_spec(Wire::OpenAi, &server)])
        .args([
            "--samples",
            "2",
            "--max-retries",
            "0",
            "--no-bertscore",
            "--json",
            "-q",
        ])
        .args(more)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let run = doc["run_id"].as_str().unwrap_or_default().to_string();
    assert!(
        !run.is_empty(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    (runs, run, server, text(&out.stderr))
}

#[test]
fn inspect_reads_the_log_with_nmbs_scores() {
    let Some(python) = nmb_test_support::assets::tools_python("inspect_ai") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (runs, run, _server) = scored_run(dir.path());
    let log = dir.path().join("logs/run.json");
    let out = nmb(
        &runs,
        &["export", "inspect", &run, "--out", log.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/export/read_inspect.py");
    let read = std::process::Command::new(python)
        .arg(script)
        .arg(&log)
        .output()
        .unwrap();
    assert!(read.status.success(), "{}", text(&read.stderr));
    let got: Value = serde_json::from_slice(&read.stdout).unwrap();

    let store = store(&runs);
    let report = nmb_results::stored::latest(&store, &run).unwrap().unwrap();
    let answers: BTreeMap<(String, u32), Option<String>> = store
        .run_samples(&run)
        .unwrap()
        .into_iter()
        .map(|s| ((s.task_id, s.sample_index), s.final_text))
        .collect();

    assert_eq!(got["status"], "success");
    assert_eq!(got["run_id"], run.as_str());
    assert_eq!(got["task"], "export-suite");
    assert_eq!(got["model"], "openai/test-model");
    assert_eq!(got["headline"]["metric"], "accuracy");
    let samples = got["samples"].as_array().unwrap();
    assert_eq!(samples.len(), report.samples.len());
    let (mut scored, mut errored) = (0, 0);
    for s in &report.samples {
        let g = samples
            .iter()
            .find(|g| g["id"] == s.task_id.as_str() && g["epoch"] == s.sample_index + 1)
            .unwrap_or_else(|| panic!("{} #{} missing from the log", s.task_id, s.sample_index));
        assert_eq!(g["case_id"], s.case_id.as_str());
        match s.correct.filter(|_| s.status.is_scored()) {
            Some(c) => {
                scored += 1;
                assert_eq!(g["score"].as_f64(), Some(if c { 1.0 } else { 0.0 }), "{g}");
                let answer = answers[&(s.task_id.clone(), s.sample_index)].clone();
                assert_eq!(g["completion"].as_str(), answer.as_deref());
                assert_eq!(g["roles"].as_array().unwrap().last().unwrap(), "assistant");
                assert!(g["input_images"].as_u64().unwrap() >= 1, "{g}");
            }
            None => {
                assert!(g["score"].is_null(), "an unscored sample has no score: {g}");
            }
        }
        if s.status == nmb_results::SampleStatus::Errored {
            errored += 1;
            assert!(g["error"].is_string(), "{g}");
        }
    }
    assert!(
        scored > 0 && errored > 0,
        "{scored} scored, {errored} errored"
    );
    let metrics = &got["metrics"];
    let acc = report.overall.accuracy.as_ref().unwrap();
    assert_eq!(metrics["accuracy"].as_f64(), Some(acc.value));
    assert_eq!(metrics["accuracy_ci_low"].as_f64(), Some(acc.ci_low));
    assert_eq!(metrics["accuracy_ci_high"].as_f64(), Some(acc.ci_high));
    assert_eq!(metrics["n"].as_f64(), Some(report.overall.n as f64));
    assert_eq!(
        metrics["errored"].as_f64(),
        Some(report.overall.errored as f64)
    );
    assert_eq!(
        got["scored_samples"].as_u64(),
        Some(report.overall.n as u64)
    );
    let p1 = report
        .overall
        .pass_at_1
        .unbiased_estimator
        .as_ref()
        .unwrap();
    assert_eq!(metrics["pass_at_1_unbiased"].as_f64(), Some(p1.value));
}

#[test]
fn an_unknown_or_unscored_run_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    store(&runs);
    let log = dir.path().join("run.json");
    let out = nmb(
        &runs,
        &[
            "export",
            "inspect",
            "r-no-such-run",
            "--out",
            log.to_str().unwrap(),
        ],
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("unknown run r-no-such-run"), "{err}");
    assert!(!log.exists());
}
