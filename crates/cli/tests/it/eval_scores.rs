//! `nmb eval` scores the run at its end (unless `--no-score`), stores that score report, and writes the report
//! with `--report DIR`; `nmb score RUN_ID` later finds the suite and its answer key from the run's manifest and
//! gives the same numbers.

use crate::common;

use common::*;
use nmb_fake_server::{Config, Wire};

/// A native suite of three differential tasks and an answer key whose diagnoses are among the fake server's.
fn suite_with_key(dir: &std::path::Path) -> (String, String) {
    let tasks = [
        TestTask {
            id: "case0/dx",
            question: "Most likely diagnosis?",
        },
        TestTask {
            id: "case1/dx",
            question: "Most likely diagnosis?",
        },
        TestTask {
            id: "case2/dx",
            question: "Most likely diagnosis?",
        },
    ];
    let root = native_suite(dir, &tasks);
    let key = dir.join("answers.jsonl");
    let rows = [
        r#"{"case_id": "case0", "diagnosis": "Multiple sclerosis"}"#,
        r#"{"case_id": "case1", "diagnosis": "Glioblastoma"}"#,
        r#"{"case_id": "case2", "diagnosis": "Ischemic stroke"}"#,
    ];
    std::fs::write(&key, rows.join("\n") + "\n").unwrap();
    (
        format!("native:{}", root.display()),
        key.display().to_string(),
    )
}

#[test]
fn eval_scores_at_the_end_and_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(Config::default());
    let model = model_spec(Wire::OpenAi, &server);
    let (suite, key) = suite_with_key(dir.path());
    let report_dir = dir.path().join("out");
    let report_arg = report_dir.display().to_string();
    let args = [
        "eval",
        "--suite",
        &suite,
        "--answers",
        &key,
        "--model",
        &model,
        "--samples",
        "5",
        "--no-bertscore",
        "--report",
        &report_arg,
        "-q",
    ];
    let out = nmb(dir.path(), &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("pass@1 unbiased"),
        "the score table: {stdout}"
    );
    let html = report_dir.join("report.html");
    assert!(
        stdout.contains(&format!("report: {}", html.display())),
        "the report's path is printed: {stdout}"
    );
    assert!(html.is_file() && report_dir.join("samples.csv").is_file());

    // With --json the overall scores come with the run summary.
    let json_args = [&args[..args.len() - 3], &["--json", "-q"]].concat();
    let again = json_of(&nmb(dir.path(), &json_args));
    assert_eq!(
        again["invocation"]["requests"], 0,
        "all answers from the store"
    );
    let overall = &again["scores"]["overall"];
    assert_eq!(overall["n"], 15, "3 tasks x 5 samples scored: {overall}");
    assert_eq!(overall["errored"], 0);

    // `nmb score RUN_ID` needs no --suite or --answers: the manifest says where they are. Same numbers.
    let run_id = again["run_id"].as_str().unwrap();
    let rescored = json_of(&nmb(
        dir.path(),
        &["score", run_id, "--no-bertscore", "--json"],
    ));
    assert_eq!(rescored["overall"], *overall);
    assert_eq!(
        rescored["config"]["config_hash"],
        again["scores"]["config_hash"]
    );
}

#[test]
fn no_score_leaves_the_run_unscored() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(Config::default());
    let model = model_spec(Wire::Anthropic, &server);
    let (suite, key) = suite_with_key(dir.path());
    let args = [
        "eval",
        "--suite",
        &suite,
        "--answers",
        &key,
        "--model",
        &model,
        "--samples",
        "1",
        "--no-score",
        "--json",
        "-q",
    ];
    let out = json_of(&nmb(dir.path(), &args));
    assert!(out["scores"].is_null(), "{out}");
    assert_eq!(out["summary"]["samples_ok"], 3);
}
