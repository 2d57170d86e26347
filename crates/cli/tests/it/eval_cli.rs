//! `nmb eval` and `nmb runs` behaviour: resuming a finished run sends nothing, the request budget, dry runs,
//! and clear errors for bad input.

use crate::common;

use common::*;
use nmb_fake_server::{Config, Wire};

fn eval_args<'a>(model: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "eval",
        "--suite",
        "sample",
        "--model",
        model,
        "--samples",
        "2",
    ];
    v.extend_from_slice(&["--limit", "6", "--json", "-q"]);
    v.extend_from_slice(extra);
    v
}

#[test]
fn resuming_a_finished_run_sends_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = server(Config::default());
    let model = model_spec(Wire::Anthropic, &server);
    let first = json_of(&nmb(dir.path(), &eval_args(&model, &[])));
    assert_eq!(first["summary"]["status"], "finished");
    assert_eq!(first["summary"]["samples_ok"], 12);
    let run_id = first["run_id"].as_str().unwrap().to_string();
    let sent = server.request_count();
    assert_eq!(sent, first["summary"]["requests_sent"].as_u64().unwrap());

    let again = json_of(&nmb(dir.path(), &eval_args(&model, &["--resume", &run_id])));
    assert_eq!(again["run_id"], run_id.as_str());
    assert_eq!(again["invocation"]["requests"], 0);
    assert_eq!(
        server.request_count(),
        sent,
        "no request reached the server"
    );
    assert_eq!(
        again["summary"]["requests_sent"],
        first["summary"]["requests_sent"]
    );
    assert_eq!(again["summary"]["samples_ok"], 12);

    // The same command after a finished run: a new run, every answer from the store.
    let rerun = json_of(&nmb(dir.path(), &eval_args(&model, &[])));
    assert_ne!(rerun["run_id"], run_id.as_str());
    assert_eq!(rerun["invocation"]["requests"], 0);
    assert_eq!(rerun["summary"]["samples_ok"], 12);
    assert_eq!(rerun["summary"]["cache_hits"], 12);
    assert_eq!(server.request_count(), sent);

    // Another configuration cannot resume this run, and the error says what differs.
    let out = nmb(
        dir.path(),
        &eval_args(&model, &["--resume", &run_id, "--temperature", "0.1"]),
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains(&run_id) && err.contains("params"), "{err}");

    let list = text(&nmb(dir.path(), &["runs", "list"]).stdout);
    assert!(list.contains(&run_id), "{list}");
    let show = text(&nmb(dir.path(), &["runs", "show", &run_id]).stdout);
    assert!(show.contains("12 total: 12 ok, 0 errored"), "{show}");
}

#[test]
fn the_request_budget_stops_and_the_next_invocation_continues() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = server(Config::default());
    let model = model_spec(Wire::Anthropic, &server);
    let part = json_of(&nmb(
        dir.path(),
        &eval_args(&model, &["--max-requests", "5", "--concurrency", "2"]),
    ));
    assert_eq!(part["stopped_early"], true);
    assert_eq!(part["invocation"]["requests"], 5);
    assert_eq!(server.request_count(), 5);
    assert_eq!(part["summary"]["status"], "interrupted");
    assert_eq!(part["summary"]["samples_ok"], 5);
    let rest = json_of(&nmb(dir.path(), &eval_args(&model, &[])));
    assert_eq!(rest["run_id"], part["run_id"], "resumed by default");
    assert_eq!(rest["invocation"]["requests"], 7);
    assert_eq!(rest["summary"]["samples_ok"], 12);
    assert_eq!(server.request_count(), 12);
    assert_eq!(rest["summary"]["status"], "finished");
}

/// After a resume, the summary says how many answers were already stored, how many were asked now and how
/// many came from the response cache (it used to say "0 answer(s) from the store"); a resumed run takes the
/// --name given on the way.
#[test]
fn a_resumed_invocation_says_what_was_stored_asked_and_cached() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = server(Config::default());
    let model = model_spec(Wire::Anthropic, &server);
    let part = json_of(&nmb(
        dir.path(),
        &eval_args(&model, &["--max-requests", "5", "--concurrency", "2"]),
    ));
    assert_eq!(part["summary"]["samples_ok"], 5);
    let text_args: Vec<&str> = eval_args(&model, &["--no-score", "--name", "budget run"])
        .into_iter()
        .filter(|a| *a != "--json")
        .collect();
    let out = nmb(dir.path(), &text_args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("5 answer(s) already stored in this run; 7 asked now (7 request(s)"),
        "{stdout}"
    );
    assert!(stdout.contains("; 0 from the response cache"), "{stdout}");
    let run_id = part["run_id"].as_str().unwrap();
    assert!(stdout.contains(run_id), "resumed by default");
    let again = json_of(&nmb(dir.path(), &eval_args(&model, &["--resume", run_id])));
    assert_eq!(again["summary"]["status"], "finished");
    assert_eq!(again["invocation"]["answers_already_stored"], 12);
    assert_eq!(again["invocation"]["answers_asked"], 0);
    assert_eq!(again["invocation"]["requests"], 0);
    assert_eq!(server.request_count(), 12);
    let show = text(&nmb(dir.path(), &["runs", "show", run_id]).stdout);
    assert!(show.contains("name          budget run"), "{show}");
}

#[test]
fn dry_run_counts_and_sends_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runs = dir.path().join("runs");
    let out = nmb(
        &runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            "openai:gpt-4o",
            "--samples",
            "5",
            "--dry-run",
            "--json",
        ],
    );
    let v = json_of(&out);
    assert_eq!(v["tasks"], 25);
    // 21 single-turn tasks with n = 5 in one request each; 4 multi-turn tasks x 5 samples x their turns.
    let multi: u64 = v["per_task"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["turns"].as_u64().unwrap() > 1)
        .map(|t| t["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(v["requests"].as_u64().unwrap(), 21 + multi);
    assert!(v["est_input_tokens"].as_u64().unwrap() > 0);
    assert!(v["images_sent"].as_u64().unwrap() > 0);
    assert!(!runs.exists(), "a dry run creates no store");
    // Anthropic has no `n`: one request per sample.
    let a = json_of(&nmb(
        &runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            "anthropic:claude",
            "--samples",
            "5",
            "--dry-run",
            "--json",
        ],
    ));
    assert_eq!(a["requests"], a["answers"]);
    let text_out = text(
        &nmb(
            &runs,
            &[
                "eval",
                "--suite",
                "sample",
                "--model",
                "openai:gpt-4o",
                "--dry-run",
            ],
        )
        .stdout,
    );
    assert!(text_out.contains("estimated input tokens"), "{text_out}");
    assert!(text_out.contains("stroke_left_mca/dx"), "{text_out}");
}

#[test]
fn bad_input_is_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["eval", "--suite", "sample", "--model", "gpt-4o"],
            1,
            "BACKEND:MODEL",
        ),
        (
            &["eval", "--suite", "sample", "--model", "mistral:large"],
            1,
            "unknown backend",
        ),
        (
            &["eval", "--suite", "sample", "--model", "openai:gpt-4o"],
            1,
            "OPENAI_API_KEY is not set",
        ),
        (
            &[
                "eval",
                "--suite",
                "nope.json",
                "--model",
                "openai:m@http://127.0.0.1:9",
            ],
            1,
            "nope.json",
        ),
        (
            &[
                "eval",
                "--suite",
                "sample",
                "--model",
                "local:/no/such.gguf",
            ],
            1,
            "/no/such.gguf",
        ),
        (
            &[
                "eval", "--suite", "sample", "--model", "openai:m", "--top-p", "0",
            ],
            2,
            "--top-p",
        ),
        (
            &[
                "eval",
                "--suite",
                "sample",
                "--model",
                "openai:m",
                "--samples",
                "0",
            ],
            2,
            "--samples",
        ),
        (
            &[
                "eval",
                "--suite",
                "sample",
                "--model",
                "openai:m",
                "--temperature",
                "-1",
            ],
            2,
            "--temperature",
        ),
        (
            &[
                "eval", "--suite", "sample", "--model", "openai:m", "--inputs", "video",
            ],
            2,
            "full, text, images",
        ),
        (
            &[
                "eval", "--suite", "sample", "--model", "openai:m", "--resume", "x", "--fresh",
            ],
            2,
            "--fresh",
        ),
        (
            &[
                "eval",
                "--suite",
                "sample",
                "--model",
                "openai:m@http://127.0.0.1:9",
                "--resume",
                "r-none",
            ],
            1,
            "r-none",
        ),
        (
            &[
                "eval",
                "--suite",
                "sample",
                "--model",
                "openai:m",
                "--template",
                "/no/t.j2",
            ],
            1,
            "/no/t.j2",
        ),
        (
            &[
                "eval",
                "--suite",
                "sample",
                "--model",
                "openai:m@http://127.0.0.1:9",
                "--filter",
                "family=none",
            ],
            1,
            "no tasks",
        ),
    ];
    for (args, code, needle) in cases {
        let out = nmb(d, args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected {needle:?} in {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let out = nmb(&d.join("empty"), &["runs", "show", "r-none"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no run store"));
    let out = nmb(d, &["runs", "show", "r-none"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no run \"r-none\""));
}

#[test]
fn every_help_has_examples() {
    let dir = tempfile::tempdir().expect("temp dir");
    for args in [
        &["--help"][..],
        &["eval", "--help"],
        &["runs", "--help"],
        &["runs", "list", "--help"],
        &["runs", "show", "--help"],
        &["suite", "--help"],
        &["suite", "validate", "--help"],
        &["suite", "stats", "--help"],
        &["suite", "show", "--help"],
        &["score", "--help"],
        &["compare", "--help"],
        &["report", "--help"],
        &["agreement", "--help"],
        &["bertscore", "--help"],
    ] {
        let out = nmb(dir.path(), args);
        assert!(out.status.success());
        let help = text(&out.stdout);
        assert!(help.contains("Examples:"), "{args:?}: {help}");
    }
    let help = text(&nmb(dir.path(), &["eval", "--help"]).stdout);
    for flag in [
        "--suite",
        "--model",
        "--samples",
        "--inputs",
        "--limit",
        "--concurrency",
        "--max-requests",
        "--dry-run",
        "--resume",
        "--fresh",
        "--temperature",
        "--top-p",
        "--max-tokens",
        "--seed",
        "--template",
        "--answers",
        "--filter",
        "--runs-dir",
        "NMB_RUNS_DIR",
        "--no-score",
        "--judge",
        "--report",
        "OPENAI_API_KEY",
    ] {
        assert!(help.contains(flag), "eval --help lacks {flag}");
    }
}

#[test]
fn runs_dir_comes_from_the_environment() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = server(Config::default());
    let model = model_spec(Wire::OpenAi, &server);
    let runs = dir.path().join("from-env");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_nmb"))
        .env("NMB_RUNS_DIR", &runs)
        .args([
            "eval",
            "--suite",
            "sample",
            "--model",
            &model,
            "--samples",
            "1",
            "--limit",
            "1",
            "-q",
        ])
        .output()
        .expect("nmb");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(runs.join("nmb.sqlite").is_file());
    let stdout = text(&out.stdout);
    assert!(
        stdout
            .trim_end()
            .lines()
            .last()
            .unwrap()
            .starts_with("run id: "),
        "{stdout}"
    );
}

/// A scoring option that cannot work (a missing baseline file, an unparseable judge) fails before the model is
/// asked anything, not after the whole evaluation.
#[test]
fn bad_scoring_options_fail_before_any_request() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = server(Config::default());
    let model = model_spec(Wire::OpenAi, &server);
    let Some(minilm) = nmb_test_support::assets::minilm_dir() else {
        return;
    };
    let missing = dir.path().join("no-such-baseline.tsv");
    for extra in [
        vec![
            "--bertscore-model",
            minilm.to_str().unwrap(),
            "--bertscore-rescale",
            missing.to_str().unwrap(),
        ],
        vec!["--judge", "nonsense-without-backend"],
    ] {
        let out = nmb(dir.path(), &eval_args(&model, &extra));
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("scoring option"),
            "{}",
            text(&out.stderr)
        );
    }
    assert_eq!(
        server.request_count(),
        0,
        "the model was asked before the check"
    );
}
