//! `nmb eval --batch` against the loopback server's batch APIs (OpenAI's Batch API, Anthropic's Message Batches,
//! Gemini's batch mode): every request goes through a batch, consults one batch round per turn, and the answers
//! and scores are those of the same run sent call by call. A run killed while polling resumes its batches and
//! submits nothing twice; what an expired batch left unanswered is sent again.

use crate::common;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use nmb_fake_server::batch::BatchConfig;
use nmb_fake_server::{Config, FakeServer, Wire};
use serde_json::Value;

const WIRES: [Wire; 3] = [Wire::OpenAi, Wire::Anthropic, Wire::Gemini];

fn batch_server(polls: u32, expire_after: Option<usize>) -> FakeServer {
    server(Config {
        batch: BatchConfig {
            polls,
            expire_after,
            ..BatchConfig::default()
        },
        ..Config::default()
    })
}

fn eval(runs: &std::path::Path, model: &str, extra: &[&str]) -> Value {
    let out = nmb_command(runs).args(args(model, extra)).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    json_of(&out)
}

/// `nmb eval` of the sample suite with two samples per task, then `extra`.
fn args(model: &str, extra: &[&str]) -> Vec<String> {
    let head = [
        "eval",
        "--suite",
        "sample",
        "--model",
        model,
        "--samples",
        "2",
        "--json",
        "-q",
    ];
    head.iter().chain(extra).map(|a| a.to_string()).collect()
}

/// Runs `nmb` with `args` in `runs`, waits until `server` has made `batches` batches (60 s at most), waits
/// `linger` more, and SIGKILLs it.
fn kill_after_batches(
    runs: &std::path::Path,
    args: &[String],
    server: &FakeServer,
    batches: usize,
    linger: Duration,
) {
    let mut child = nmb_command(runs)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while server.batches_created() < batches {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{} of {batches} batches made",
            server.batches_created()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(linger);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Every answer of a run: (task, sample, turn) -> text.
fn answers(runs: &std::path::Path, run_id: &str) -> BTreeMap<(String, u32, u32), String> {
    let mut out = BTreeMap::new();
    for s in store(runs).run_samples(run_id).unwrap() {
        for t in &s.turns {
            let text = t.text.clone().unwrap_or_default();
            out.insert((s.task_id.clone(), s.sample_index, t.turn_index), text);
        }
    }
    out
}

/// The run sent call by call, on a store of its own.
fn unbatched(model: &str) -> (Value, BTreeMap<(String, u32, u32), String>) {
    let dir = tempfile::tempdir().unwrap();
    let out = eval(dir.path(), model, &[]);
    let run_id = out["run_id"].as_str().unwrap().to_string();
    (out.clone(), answers(dir.path(), &run_id))
}

/// The two runs' scores, equal in every figure. Their configuration hashes differ: a score report's hash covers
/// the run's manifest, which records that the run was sent in batches.
fn same_scores(batched: &Value, plain: &Value) {
    let without_hash = |v: &Value| {
        let mut v = v["scores"].clone();
        v.as_object_mut().expect("scores").remove("config_hash");
        v
    };
    let (a, b) = (&without_hash(batched), &without_hash(plain));
    assert!(!a["overall"].is_null(), "{batched}");
    if a != b {
        let dump = |v: &Value, name: &str| {
            let path = std::env::temp_dir().join(name);
            std::fs::write(&path, serde_json::to_string_pretty(v).unwrap()).unwrap();
            path
        };
        let (pa, pb) = (
            dump(a, "nmb-batched-scores.json"),
            dump(b, "nmb-plain-scores.json"),
        );
        panic!("the scores differ: diff {} {}", pa.display(), pb.display());
    }
}

#[test]
fn a_batch_run_answers_and_scores_as_the_same_run_sent_call_by_call() {
    for wire in WIRES {
        let server = batch_server(2, None);
        let model = model_spec(wire, &server);
        let dir = tempfile::tempdir().unwrap();
        let out = eval(dir.path(), &model, &["--batch", "--batch-poll", "0.05"]);
        assert_eq!(out["summary"]["samples_errored"], 0, "{wire:?}: {out}");
        let asked = server.requests();
        assert!(!asked.is_empty());
        assert!(
            asked.iter().all(|r| r.batch.is_some()),
            "{wire:?}: every request went through a batch"
        );
        let submissions = server.batch_submissions();
        assert!(
            submissions.values().all(|n| *n == 1),
            "{wire:?}: {submissions:?}"
        );
        // The sample suite's consults need one round per turn.
        assert!(server.batches_created() > 1, "{wire:?}");

        let run_id = out["run_id"].as_str().unwrap();
        let summary = store(dir.path()).summary(run_id).unwrap();
        assert_eq!(summary.batch.calls, summary.calls, "{wire:?}");
        assert!(summary.batch.tokens_in > 0);
        let batches = store(dir.path()).batches().unwrap();
        assert!(
            batches
                .iter()
                .all(|b| b.state == nmb_store::BatchState::Ended),
            "{batches:?}"
        );

        let (plain, plain_answers) = unbatched(&model);
        assert_eq!(answers(dir.path(), run_id), plain_answers, "{wire:?}");
        same_scores(&out, &plain);
        let cost = report_cost(dir.path(), run_id);
        let tokens = |k: &str| cost["tokens"][k].as_f64().unwrap();
        let listed = (tokens("input") * 2.0 + tokens("output") * 10.0) / 1e6;
        let dollars = cost["dollars"].as_f64().unwrap();
        assert!(
            (dollars - listed / 2.0).abs() < 1e-12,
            "{wire:?}: batches cost half: {cost}"
        );
    }
}

/// The report's cost of a run at $2 and $10 per million input and output tokens.
fn report_cost(runs: &std::path::Path, run_id: &str) -> Value {
    let report = runs.join("report");
    let out = nmb_command(runs)
        .args([
            "report", run_id, "--format", "json", "--price", "*=2,10", "--out",
        ])
        .arg(&report)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
            .unwrap();
    json["runs"][0]["cost"].clone()
}

#[test]
fn a_batch_run_killed_while_polling_resumes_without_submitting_again() {
    let server = batch_server(40, None);
    let model = model_spec(Wire::OpenAi, &server);
    let dir = tempfile::tempdir().unwrap();
    let batched = args(&model, &["--batch", "--batch-poll", "0.05"]);
    kill_after_batches(dir.path(), &batched, &server, 1, Duration::from_millis(300));
    let before = server.batch_submissions();
    let stored = store(dir.path()).batches().unwrap();
    assert!(
        stored
            .iter()
            .any(|b| b.state == nmb_store::BatchState::Submitted),
        "killed while polling: {stored:?}"
    );

    let out = eval(dir.path(), &model, &["--batch", "--batch-poll", "0.05"]);
    assert_eq!(out["summary"]["samples_errored"], 0, "{out}");
    assert_eq!(out["summary"]["samples_pending"], 0, "{out}");
    let after = server.batch_submissions();
    assert!(
        after.values().all(|n| *n == 1),
        "submitted twice: {after:?}"
    );
    assert!(before.keys().all(|k| after.contains_key(k)));

    let run_id = out["run_id"].as_str().unwrap();
    let (plain, plain_answers) = unbatched(&model);
    assert_eq!(answers(dir.path(), run_id), plain_answers);
    same_scores(&out, &plain);
}

#[test]
fn what_an_expired_batch_left_unanswered_is_sent_again() {
    for wire in [Wire::OpenAi, Wire::Anthropic] {
        let server = batch_server(1, Some(1));
        let model = model_spec(wire, &server);
        let dir = tempfile::tempdir().unwrap();
        let out = eval(
            dir.path(),
            &model,
            &["--batch", "--batch-poll", "0.05", "--limit", "3"],
        );
        assert_eq!(out["summary"]["samples_errored"], 0, "{wire:?}: {out}");
        assert_eq!(out["summary"]["samples_pending"], 0, "{wire:?}: {out}");
        let submissions = server.batch_submissions();
        assert!(
            submissions.values().any(|n| *n > 1),
            "{wire:?}: {submissions:?}"
        );
        let run_id = out["run_id"].as_str().unwrap();
        let (_, plain_answers) = unbatched(&model);
        let limited: BTreeMap<_, _> = answers(dir.path(), run_id);
        assert!(
            limited.iter().all(|(k, v)| plain_answers.get(k) == Some(v)),
            "{wire:?}"
        );
    }
}

#[test]
fn a_model_without_a_batch_api_is_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let args = eval_args("sample", "local:/nowhere/model.gguf", &["--batch"]);
    let out = nmb_command(dir.path()).args(&args).output().unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("has no batch API"), "{err}");
}

/// An OpenAI reasoning model behind a custom URL refuses `max_tokens`, a temperature and `top_p` inside the
/// batch as it does alone: each refusal leaves the parameter out of the next batch, the run ends with no errored
/// sample, and the manifest records what was sent.
#[test]
fn a_parameter_refused_inside_a_batch_is_left_out_of_the_next_one() {
    let server = batch_server(0, None);
    let model = format!("openai:o3@{}/v1", server.url());
    let dir = tempfile::tempdir().unwrap();
    let out = eval(
        dir.path(),
        &model,
        &["--batch", "--batch-poll", "0.05", "--limit", "2"],
    );
    assert_eq!(out["summary"]["samples_errored"], 0, "{out}");
    let run_id = out["run_id"].as_str().unwrap();
    let manifest = store(dir.path()).run(run_id).unwrap().manifest;
    let adjusted = manifest.params_adjusted.expect("recorded");
    let names: Vec<&str> = adjusted.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["max_completion_tokens", "no_temperature", "no_top_p"]
    );
    assert!(server.requests().iter().all(|r| r.batch.is_some()));
}

/// A batch in which some requests fail: those samples are errored with the class a single call's failure gets,
/// the others answered; a Gemini batch that expires is sent again.
#[test]
fn failed_requests_in_a_batch_keep_their_class_and_an_expired_gemini_batch_is_sent_again() {
    let dir = tempfile::tempdir().unwrap();
    let suite = native_suite(
        dir.path(),
        &[
            TestTask {
                id: "t_ok",
                question: "What is the most likely diagnosis?",
            },
            TestTask {
                id: "t_refused",
                question: "What is the most likely diagnosis? FAULT:400",
            },
            TestTask {
                id: "t_context",
                question: "What is the most likely diagnosis? FAULT:context",
            },
        ],
    );
    let suite = format!("native:{}", suite.display());
    for wire in WIRES {
        let server = batch_server(1, None);
        let model = model_spec(wire, &server);
        let runs = dir.path().join(format!("runs-{wire:?}"));
        let args = eval_args(
            &suite,
            &model,
            &[
                "--batch",
                "--batch-poll",
                "0.05",
                "--no-score",
                "--json",
                "-q",
            ],
        );
        let out = json_of(&nmb_command(&runs).args(&args).output().unwrap());
        let run_id = out["run_id"].as_str().unwrap();
        let got: BTreeMap<String, String> = store(&runs)
            .run_samples(run_id)
            .unwrap()
            .into_iter()
            .map(|s| {
                let class = s.error_class.clone().unwrap_or_else(|| "ok".into());
                let task = s
                    .task_id
                    .rsplit('/')
                    .next()
                    .unwrap_or(&s.task_id)
                    .to_string();
                (task, class)
            })
            .collect();
        let want: BTreeMap<String, String> = [
            ("t_context", "context_length"),
            ("t_ok", "ok"),
            ("t_refused", "client_error"),
        ]
        .iter()
        .map(|(t, c)| (t.to_string(), c.to_string()))
        .collect();
        assert_eq!(got, want, "{wire:?}");
    }

    let server = batch_server(1, Some(0));
    let model = model_spec(Wire::Gemini, &server);
    let runs = dir.path().join("runs-expiring");
    let args = eval_args(
        &suite,
        &model,
        &[
            "--batch",
            "--batch-poll",
            "0.05",
            "--no-score",
            "--json",
            "-q",
            "--max-retries",
            "0",
        ],
    );
    // Every Gemini batch expires unanswered here: the requests keep going into new batches until stopped.
    kill_after_batches(&runs, &args, &server, 3, Duration::ZERO);
    assert!(server.batch_submissions().values().all(|n| *n >= 2));
}

/// A judge that answers every question validly: never equivalent, rubric 3 everywhere, knowledge gap.
fn judge(req: &nmb_fake_server::ReceivedRequest) -> nmb_fake_server::Reply {
    let text = req.all_text();
    let answer = if text.contains("Candidate") && text.contains("\"equivalent\"") {
        r#"{"equivalent": false, "rationale": "different"}"#
    } else if text.contains("Grade the MODEL ANSWER") {
        r#"{"scores": {"diagnostic_correctness": 3, "multimodal_integration": 3, "differential_reasoning": 3, "lesion_localisation": 3, "clinical_safety": 3}, "overall": 3, "rationale": "ok"}"#
    } else {
        r#"{"category": "knowledge_gap", "justification": "scripted"}"#
    };
    nmb_fake_server::Reply::Texts(vec![answer.to_string()])
}

/// `nmb score --judge-batch`: every judge question goes through the judge's batch API, and the scores equal
/// those of the same judge asked call by call.
#[test]
fn judges_can_batch_too() {
    let model_server = server(Config::default());
    let model = model_spec(Wire::OpenAi, &model_server);
    let judged = |batch: bool| {
        let judge_server = server(Config {
            responder: std::sync::Arc::new(judge),
            batch: BatchConfig {
                polls: 1,
                ..BatchConfig::default()
            },
            ..Config::default()
        });
        let dir = tempfile::tempdir().unwrap();
        let out = eval(dir.path(), &model, &["--no-score", "--limit", "6"]);
        let run_id = out["run_id"].as_str().unwrap();
        let judge_spec = format!("anthropic:judge@{}", judge_server.url());
        let mut args = vec![
            "score",
            run_id,
            "--judge",
            &judge_spec,
            "--no-bertscore",
            "--json",
        ];
        if batch {
            args.extend(["--judge-batch", "--judge-batch-poll", "0.05"]);
        }
        let scored = nmb_command(dir.path()).args(&args).output().unwrap();
        assert!(scored.status.success(), "{}", text(&scored.stderr));
        let asked = judge_server.requests();
        assert!(!asked.is_empty());
        assert!(
            asked.iter().all(|r| r.batch.is_some() == batch),
            "batch {batch}"
        );
        let report = json_of(&scored);
        (report["overall"].clone(), report["by_level_family"].clone())
    };
    let batched = judged(true);
    assert!(batched.0["rubric"].is_object(), "{}", batched.0);
    assert_eq!(batched, judged(false));
}

/// Killed after the provider made a batch but before its answer arrived: the store holds the batch as preparing,
/// without the provider's id. The resumed run finds it at the provider (OpenAI by metadata, Gemini by display
/// name, Anthropic by creation time and request count) and polls it: nothing is submitted twice.
#[test]
fn a_run_killed_while_submitting_finds_its_batch_at_the_provider() {
    for wire in WIRES {
        let server = server(Config {
            batch: BatchConfig {
                polls: 1,
                create_delay: Duration::from_secs(3),
                ..BatchConfig::default()
            },
            ..Config::default()
        });
        let model = model_spec(wire, &server);
        let dir = tempfile::tempdir().unwrap();
        let batched = ["--batch", "--batch-poll", "0.05", "--limit", "3"];
        kill_after_batches(
            dir.path(),
            &args(&model, &batched),
            &server,
            1,
            Duration::ZERO,
        );
        let stored = store(dir.path()).batches().unwrap();
        assert!(
            matches!(stored.as_slice(), [b] if b.state == nmb_store::BatchState::Preparing),
            "{wire:?}: {stored:?}"
        );

        let out = eval(dir.path(), &model, &batched);
        assert_eq!(out["summary"]["samples_errored"], 0, "{wire:?}: {out}");
        assert_eq!(out["summary"]["samples_pending"], 0, "{wire:?}: {out}");
        let submissions = server.batch_submissions();
        assert!(
            submissions.values().all(|n| *n == 1),
            "{wire:?}: submitted twice: {submissions:?}"
        );
        assert_eq!(server.batches_created(), 1, "{wire:?}");
    }
}

/// A stored batch the provider no longer has (404 on its poll) is given up, and its requests go into a new
/// batch: the run still finishes.
#[test]
fn a_batch_the_provider_lost_is_sent_again() {
    let first = batch_server(1_000_000, None);
    let port = first.port();
    let model = model_spec(Wire::OpenAi, &first);
    let dir = tempfile::tempdir().unwrap();
    let batched = ["--batch", "--batch-poll", "0.05", "--limit", "3"];
    kill_after_batches(
        dir.path(),
        &args(&model, &batched),
        &first,
        1,
        Duration::from_millis(200),
    );
    drop(first);
    // The same address, a server that never saw the batch.
    let second = (0..50)
        .find_map(|_| {
            let s = FakeServer::start_in_background(
                Config {
                    port,
                    ..Config::default()
                },
                2,
            );
            s.ok().or_else(|| {
                std::thread::sleep(Duration::from_millis(100));
                None
            })
        })
        .expect("the port is free again");
    let out = eval(dir.path(), &model, &batched);
    assert_eq!(out["summary"]["samples_errored"], 0, "{out}");
    assert_eq!(out["summary"]["samples_pending"], 0, "{out}");
    assert_eq!(second.batches_created(), 1);
    let states: Vec<_> = store(dir.path())
        .batches()
        .unwrap()
        .iter()
        .map(|b| b.state)
        .collect();
    assert!(
        states.contains(&nmb_store::BatchState::Abandoned),
        "{states:?}"
    );
}
