//! The providers as they behave, through `nmb eval` against the fake server's emulation of each: the README's
//! example command of every provider with default flags, sent call by call and in batches; thinking that uses up
//! the answer's tokens; batch ids that keep samples apart; batches refused for a queue limit or as invalid;
//! waits told in the body; quota refusals; a Gemini batch's gRPC codes and Anthropic's `billing_error`.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use common::*;
use nmb_fake_server::batch::{BatchConfig, BatchFailure};
use nmb_fake_server::{Config, FakeServer, Wire};
use nmb_store::SampleStatus;
use serde_json::Value;

const BATCHED: [&str; 3] = ["--batch", "--batch-poll", "0.05"];

fn batch_server(fail: Vec<BatchFailure>) -> FakeServer {
    server(Config {
        batch: BatchConfig {
            polls: 1,
            fail,
            ..BatchConfig::default()
        },
        ..Config::default()
    })
}

/// `nmb ARGS --json -q` in `runs`, which must exit 0; its JSON.
fn run_ok(runs: &Path, args: &[String]) -> Value {
    let out = nmb_command(runs)
        .args(args)
        .args(["--json", "-q"])
        .output()
        .unwrap();
    json_of(&out)
}

/// `nmb ARGS --json -q` in `runs` whose every sample may have errored (exit 1 then); its JSON.
fn run_json(runs: &Path, args: &[String]) -> Value {
    let out = nmb_command(runs)
        .args(args)
        .args(["--json", "-q"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "{code:?}: {stdout}{}",
        text(&out.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout}{}", text(&out.stderr)))
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// The README's example of each provider (`nmb eval --help`), with the provider's URL pointed at the fake server
/// and no other flag: Claude Sonnet 4.5 as model and judge (it refuses temperature with top_p), Gemini 2.5 Pro,
/// an OpenAI model; each call by call and in batches.
#[test]
fn the_readme_examples_run_end_to_end_with_default_flags() {
    for batch in [false, true] {
        let server = batch_server(Vec::new());
        let url = server.url();
        let claude = format!("anthropic:claude-sonnet-4-5@{url}");
        let examples = [
            strings(&[
                "eval", "--suite", "sample", "--model", &claude, "--inputs", "text", "--limit",
                "10",
            ]),
            strings(&[
                "eval",
                "--suite",
                "sample",
                "--model",
                &format!("gemini:gemini-2.5-pro@{url}"),
                "--max-requests",
                "100",
            ]),
            strings(&[
                "eval",
                "--suite",
                "sample",
                "--model",
                &format!("openai:gpt-4o@{url}/v1"),
                "--judge",
                &claude,
                "--limit",
                "6",
            ]),
        ];
        for example in examples {
            let dir = tempfile::tempdir().unwrap();
            let mut args = example.clone();
            if batch {
                args.extend(strings(&BATCHED));
                if example.iter().any(|a| a == "--judge") {
                    args.extend(strings(&["--judge-batch", "--judge-batch-poll", "0.05"]));
                }
            }
            let out = run_ok(dir.path(), &args);
            let summary = &out["summary"];
            assert_eq!(
                summary["samples_errored"], 0,
                "batch {batch}: {example:?}: {out}"
            );
            assert!(summary["samples_ok"].as_u64().unwrap() > 0, "{out}");
            let store = store(dir.path());
            for run in store.list_runs().unwrap() {
                let s = store.summary(&run.run_id).unwrap();
                assert!(
                    s.call_errors_by_class.is_empty(),
                    "batch {batch}: {example:?}: run {} ({}): {:?}",
                    run.run_id,
                    run.manifest.model,
                    s.call_errors_by_class
                );
            }
            let run_id = out["run_id"].as_str().unwrap();
            let manifest = store.run(run_id).unwrap().manifest;
            if manifest.model.starts_with("anthropic:claude-sonnet-4-5") {
                let adjusted = manifest.params_adjusted.expect("recorded");
                assert!(
                    adjusted["no_top_p"].contains("Migrating to Claude 4.5"),
                    "{adjusted:?}"
                );
            }
            if manifest.model.starts_with("gemini:gemini-2.5-pro") {
                assert_eq!(
                    manifest.params["max_tokens"], 65_536,
                    "room for the thinking"
                );
            }
        }
        // Claude never got the pair it refuses, as model or as judge.
        for r in server
            .requests()
            .iter()
            .filter(|r| r.model.starts_with("claude"))
        {
            assert!(
                r.params.temperature.is_none() || r.params.top_p.is_none(),
                "{:?}",
                r.params
            );
        }
    }
}

/// A task whose answer the model never writes: it thinks until the token limit. Stored as an empty answer of
/// one attempt on every wire, and counted apart in the report.
#[test]
fn thinking_out_of_tokens_is_an_empty_answer_the_report_counts() {
    for wire in WIRES {
        let dir = tempfile::tempdir().unwrap();
        let suite = native_suite(
            dir.path(),
            &[
                TestTask {
                    id: "t_ok",
                    question: "What is the most likely diagnosis?",
                },
                TestTask {
                    id: "t_cut",
                    question: "What is the most likely diagnosis? FAULT:exhausted",
                },
            ],
        );
        let server = server(Config::default());
        let runs = dir.path().join("runs");
        let args = eval_args(
            suite.to_str().unwrap(),
            &model_spec(wire, &server),
            &["--max-retries", "2", "--no-bertscore"],
        );
        let out = run_ok(&runs, &args);
        assert_eq!(out["summary"]["samples_errored"], 0, "{wire:?}: {out}");
        let run_id = out["run_id"].as_str().unwrap();
        let samples = store(&runs).run_samples(run_id).unwrap();
        let cut = samples
            .iter()
            .find(|s| s.task_id.ends_with("t_cut"))
            .unwrap();
        assert_eq!(cut.status, SampleStatus::Ok, "{wire:?}: {cut:?}");
        assert_eq!(cut.final_text.as_deref(), Some(""), "{wire:?}");
        assert_eq!(
            cut.turns[0].call.attempts, 1,
            "{wire:?}: never paid for twice"
        );

        let report = runs.join("report");
        let made = nmb_command(&runs)
            .args(["report", run_id, "--format", "json", "--out"])
            .arg(&report)
            .output()
            .unwrap();
        assert!(made.status.success(), "{}", text(&made.stderr));
        let json: Value =
            serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
                .unwrap();
        let thinking = &json["analysis"]["thinking"][0];
        let all = thinking["groups"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(all["cut_off"], 1, "{wire:?}: {thinking}");

        // The API's finish reason is stored with each answer.
        let finish = cut.turns[0].finish_reason.as_deref();
        assert!(
            matches!(finish, Some("length" | "max_tokens" | "MAX_TOKENS")),
            "{wire:?}: {finish:?}"
        );
        let ok = samples
            .iter()
            .find(|s| s.task_id.ends_with("t_ok"))
            .unwrap();
        let finish = ok.turns[0].finish_reason.as_deref();
        assert!(
            matches!(finish, Some("stop" | "end_turn" | "tool_use" | "STOP")),
            "{wire:?}: {finish:?}"
        );
    }
}

/// The texts of each task's samples.
fn texts_by_task(runs: &Path, run_id: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in store(runs).run_samples(run_id).unwrap() {
        let text = s.final_text.clone().unwrap_or_default();
        out.entry(format!("{}#{}", s.task_id, s.turns.len()))
            .or_default()
            .push(text);
    }
    out
}

/// A model whose every call answers anew (a temperature above 0): in a batch, k samples of a task are k requests
/// and get k answers, on every provider, Anthropic's seedless body included.
#[test]
fn batched_samples_each_get_their_own_answer() {
    for wire in WIRES {
        let server = server(Config {
            responder: Arc::new(nmb_fake_server::varied_reply),
            batch: BatchConfig {
                polls: 1,
                ..BatchConfig::default()
            },
            ..Config::default()
        });
        let dir = tempfile::tempdir().unwrap();
        let model = model_spec(wire, &server);
        let mut args = strings(&["eval", "--suite", "sample", "--model", &model]);
        args.extend(strings(&["--samples", "3", "--limit", "4", "--no-score"]));
        args.extend(strings(&BATCHED));
        let out = run_ok(dir.path(), &args);
        assert_eq!(out["summary"]["samples_errored"], 0, "{wire:?}: {out}");
        let run_id = out["run_id"].as_str().unwrap();
        for (task, texts) in texts_by_task(dir.path(), run_id) {
            let distinct: BTreeSet<&String> = texts.iter().collect();
            assert_eq!(distinct.len(), texts.len(), "{wire:?} {task}: {texts:?}");
        }
    }
}

/// OpenAI fails a batch for the organisation's enqueued-token limit (`token_limit_exceeded`), Gemini for
/// `RESOURCE_EXHAUSTED`: its requests go again later in smaller batches and the run ends answered. A batch
/// failed as invalid ends its samples with the provider's own message.
#[test]
fn batches_refused_for_a_queue_limit_go_again_smaller() {
    for wire in [Wire::OpenAi, Wire::Gemini] {
        let server = batch_server(vec![BatchFailure::QueueLimit, BatchFailure::QueueLimit]);
        let dir = tempfile::tempdir().unwrap();
        let mut args = eval_args(
            "sample",
            &model_spec(wire, &server),
            &["--limit", "8", "--no-score"],
        );
        args.extend(strings(&BATCHED));
        let out = run_ok(dir.path(), &args);
        assert_eq!(out["summary"]["samples_errored"], 0, "{wire:?}: {out}");
        assert_eq!(out["summary"]["samples_pending"], 0, "{wire:?}: {out}");
        let sizes = server.batch_sizes();
        // Refused twice: the first batch's requests go again in batches half its size, the refused one of
        // those in batches of a quarter.
        assert!(sizes.len() >= 3, "{wire:?}: {sizes:?}");
        assert!(
            sizes[1..].iter().all(|n| *n <= sizes[0] / 2),
            "{wire:?}: {sizes:?}"
        );
        assert!(
            sizes.iter().any(|n| *n <= sizes[0] / 4),
            "{wire:?}: {sizes:?}"
        );

        let server = batch_server(vec![BatchFailure::Invalid]);
        let dir = tempfile::tempdir().unwrap();
        let mut args = eval_args(
            "sample",
            &model_spec(wire, &server),
            &["--limit", "2", "--no-score"],
        );
        args.extend(strings(&BATCHED));
        let out = run_json(dir.path(), &args);
        let run_id = out["run_id"].as_str().unwrap();
        let errored: Vec<_> = store(dir.path())
            .run_samples(run_id)
            .unwrap()
            .into_iter()
            .filter(|s| s.status == SampleStatus::Errored)
            .collect();
        assert!(!errored.is_empty(), "{wire:?}: {out}");
        let said = if wire == Wire::OpenAi {
            "The request body is not valid"
        } else {
            "contents is required"
        };
        for s in &errored {
            assert_eq!(
                s.error_class.as_deref(),
                Some("client_error"),
                "{wire:?}: {s:?}"
            );
            let message = s.error_message.as_deref().unwrap_or("");
            assert!(message.contains(said), "{wire:?}: {message}");
        }
    }
}

/// `--batch-max-requests`: no batch, and no set of unfinished batches, holds more requests than that.
#[test]
fn the_enqueued_size_stays_under_the_configured_limit() {
    let server = batch_server(Vec::new());
    let dir = tempfile::tempdir().unwrap();
    let mut args = eval_args(
        "sample",
        &model_spec(Wire::Anthropic, &server),
        &["--limit", "6", "--no-score"],
    );
    args.extend(strings(&BATCHED));
    args.extend(strings(&["--batch-max-requests", "2"]));
    let out = run_ok(dir.path(), &args);
    assert_eq!(out["summary"]["samples_errored"], 0, "{out}");
    let sizes = server.batch_sizes();
    assert!(
        sizes.len() >= 3 && sizes.iter().all(|n| *n <= 2),
        "{sizes:?}"
    );
}

/// (task, question) pairs of a native suite of faults, and the store of its run after `nmb eval` with `extra`.
fn fault_run(
    wire: Wire,
    server: &FakeServer,
    tasks: &[(&str, &str)],
    extra: &[&str],
) -> (tempfile::TempDir, Value) {
    let dir = tempfile::tempdir().unwrap();
    let tasks: Vec<TestTask> = tasks
        .iter()
        .map(|(id, question)| TestTask { id, question })
        .collect();
    let suite = native_suite(dir.path(), &tasks);
    let runs = dir.path().join("runs");
    let mut more = vec!["--no-score"];
    more.extend(extra);
    let args = eval_args(suite.to_str().unwrap(), &model_spec(wire, server), &more);
    let out = run_json(&runs, &args);
    (dir, out)
}

fn samples_of(dir: &tempfile::TempDir, out: &Value) -> Vec<nmb_store::SampleRecord> {
    store(&dir.path().join("runs"))
        .run_samples(out["run_id"].as_str().unwrap())
        .unwrap()
}

/// Gemini says how long to wait in the body (`RetryInfo.retryDelay`), not in a header: the call waits that long.
#[test]
fn geminis_retry_delay_is_waited() {
    let server = server(Config::default());
    let tasks = [(
        "t_wait",
        "What is the most likely diagnosis? FAULT:retryinfo:2*1",
    )];
    let (dir, out) = fault_run(Wire::Gemini, &server, &tasks, &[]);
    assert_eq!(out["summary"]["samples_errored"], 0, "{out}");
    let s = &samples_of(&dir, &out)[0];
    let call = &s.turns[0].call;
    assert_eq!(call.attempts, 2);
    assert!(
        call.finished_ms - call.started_ms >= 2000,
        "waited {} ms",
        call.finished_ms - call.started_ms
    );
}

/// A used-up quota ends the call at once, and the run's other calls end with it unsent.
#[test]
fn a_used_up_quota_ends_the_runs_calls_at_once() {
    for wire in WIRES {
        let server = server(Config::default());
        let tasks = [
            ("t_a", "What is the most likely diagnosis? FAULT:quota"),
            ("t_b", "What is the most likely diagnosis? FAULT:quota"),
            ("t_c", "What is the most likely diagnosis? FAULT:quota"),
        ];
        let (dir, out) = fault_run(
            wire,
            &server,
            &tasks,
            &["--concurrency", "1", "--max-retries", "2"],
        );
        assert_eq!(
            out["summary"]["errors_by_class"]["quota_exhausted"], 3,
            "{wire:?}: {out}"
        );
        assert_eq!(
            server.request_count(),
            1,
            "{wire:?}: the later calls were not sent"
        );
        let samples = samples_of(&dir, &out);
        assert!(samples.iter().any(|s| s
            .error_message
            .as_deref()
            .unwrap_or("")
            .contains("not sent")));
    }
}

/// A Gemini batch reports its inline errors as `google.rpc.Status` with gRPC codes; Anthropic's batch results
/// say `billing_error`. Each gets the class a single call's error would, and a used-up quota is not retried.
#[test]
fn batch_errors_get_the_class_of_a_single_calls() {
    let cases = [
        (Wire::Gemini, "FAULT:503", "server_error"),
        (Wire::Gemini, "FAULT:400", "client_error"),
        (Wire::Gemini, "FAULT:quota", "quota_exhausted"),
        (Wire::Anthropic, "FAULT:quota", "quota_exhausted"),
    ];
    for (wire, fault, class) in cases {
        let server = batch_server(Vec::new());
        let question = format!("What is the most likely diagnosis? {fault}");
        let mut extra = BATCHED.to_vec();
        extra.extend(["--max-retries", "1"]);
        let (dir, out) = fault_run(wire, &server, &[("t_fault", &question)], &extra);
        let s = &samples_of(&dir, &out)[0];
        assert_eq!(
            s.error_class.as_deref(),
            Some(class),
            "{wire:?} {fault}: {s:?}"
        );
        if class == "quota_exhausted" {
            let submitted = server.batch_submissions();
            assert!(
                submitted.values().all(|n| *n == 1),
                "{wire:?}: not retried: {submitted:?}"
            );
        }
    }
}
