//! Faults injected by the loopback server, through `nmb eval`, on each wire: every sample ends stored as ok or
//! as errored with the right class, and an errored sample never carries an answer.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use nmb_fake_server::{Config, Wire};
use nmb_store::SampleStatus;

/// (task id, question with its fault marker, expected outcome: `ok` or the error class).
const CASES: &[(&str, &str, &str)] = &[
    ("t_ok", "What is the most likely diagnosis?", "ok"),
    // Once, with Retry-After: 1 s; the retry succeeds.
    (
        "t_429",
        "What is the most likely diagnosis? FAULT:429:1*1",
        "ok",
    ),
    // Every attempt: the retries run out.
    (
        "t_429_always",
        "What is the most likely diagnosis? FAULT:429:0",
        "rate_limit",
    ),
    (
        "t_500",
        "What is the most likely diagnosis? FAULT:500",
        "server_error",
    ),
    (
        "t_503",
        "What is the most likely diagnosis? FAULT:503",
        "server_error",
    ),
    // Twice, then the third attempt succeeds.
    (
        "t_503_twice",
        "What is the most likely diagnosis? FAULT:503*2",
        "ok",
    ),
    (
        "t_reset",
        "What is the most likely diagnosis? FAULT:reset",
        "network",
    ),
    (
        "t_slow",
        "What is the most likely diagnosis? FAULT:slow:4000",
        "timeout",
    ),
    (
        "t_malformed",
        "What is the most likely diagnosis? FAULT:malformed",
        "malformed_response",
    ),
    (
        "t_empty",
        "What is the most likely diagnosis? FAULT:empty",
        "malformed_response",
    ),
    (
        "t_context",
        "What is the most likely diagnosis? FAULT:context",
        "context_length",
    ),
    (
        "t_refusal",
        "What is the most likely diagnosis? FAULT:refusal",
        "refusal",
    ),
];

fn check_faults(wire: Wire) {
    let dir = tempfile::tempdir().expect("temp dir");
    let tasks: Vec<TestTask<'_>> = CASES
        .iter()
        .map(|(id, q, _)| TestTask { id, question: q })
        .collect();
    let suite = native_suite(dir.path(), &tasks);
    let server = server(Config::default());
    let runs = dir.path().join("runs");
    let out = nmb_command(&runs)
        .args(["eval", "--suite", suite.to_str().unwrap()])
        .args(["--model", &model_spec(wire, &server)])
        .args(["--samples", "1", "--timeout", "1", "--max-retries", "2"])
        .args(["--concurrency", "12", "--json", "-q"])
        .output()
        .expect("nmb runs");
    let result = json_of(&out);
    let run_id = result["run_id"].as_str().unwrap();
    let store = store(&runs);
    let samples = store.run_samples(run_id).expect("samples");
    assert_eq!(samples.len(), CASES.len());
    let mut want_errors: BTreeMap<String, u64> = BTreeMap::new();
    for (id, _, want) in CASES {
        let s = samples
            .iter()
            .find(|s| s.task_id == *id)
            .unwrap_or_else(|| panic!("{wire:?}: sample of {id} stored"));
        let turn = &s.turns[0];
        if *want == "ok" {
            assert_eq!(s.status, SampleStatus::Ok, "{wire:?} {id}: {s:?}");
            assert!(!s.final_text.as_deref().unwrap_or("").is_empty());
            let attempts = if *id == "t_ok" { 1 } else { 2 };
            assert!(turn.call.attempts >= attempts, "{wire:?} {id}: {s:?}");
        } else {
            assert_eq!(s.status, SampleStatus::Errored, "{wire:?} {id}: {s:?}");
            assert_eq!(
                s.error_class.as_deref(),
                Some(*want),
                "{wire:?} {id}: {s:?}"
            );
            assert_eq!(turn.error_class.as_deref(), Some(*want));
            assert_eq!(
                s.final_text, None,
                "{wire:?} {id}: an error is not an answer"
            );
            assert_eq!(turn.text, None, "{wire:?} {id}: an error is not an answer");
            *want_errors.entry(want.to_string()).or_default() += 1;
        }
        let retried = !matches!(*want, "context_length" | "refusal" | "ok");
        if retried {
            assert_eq!(turn.call.attempts, 3, "{wire:?} {id}: 1 + --max-retries 2");
        }
    }
    let summary = &result["summary"];
    assert_eq!(
        serde_json::to_value(&want_errors).unwrap(),
        summary["errors_by_class"],
        "{wire:?}"
    );
    assert_eq!(summary["samples_pending"], 0);
    // Retry-After is honoured: the 429'd call spanned at least the second it asked for, while its
    // stored latency is the answering attempt's own time, without that wait.
    let s429 = samples.iter().find(|s| s.task_id == "t_429").unwrap();
    let call = &s429.turns[0].call;
    assert!(call.finished_ms - call.started_ms >= 1000, "{s429:?}");
    assert!(call.latency_ms.unwrap() < 1000, "{s429:?}");

    // Resuming the run retries only the errored samples; every one is sent again, none of the ok ones.
    let before: Vec<_> = server.requests();
    let out = nmb_command(&runs)
        .args(["eval", "--suite", suite.to_str().unwrap()])
        .args(["--model", &model_spec(wire, &server)])
        .args(["--samples", "1", "--timeout", "1", "--max-retries", "0"])
        .args(["--resume", run_id, "--json", "-q"])
        .output()
        .expect("nmb runs");
    let again = json_of(&out);
    let after = server.requests();
    let resent: Vec<_> = after[before.len()..].to_vec();
    assert_eq!(
        resent.len() as u64,
        want_errors.values().sum::<u64>(),
        "{wire:?}"
    );
    for r in &resent {
        let text = r.all_text();
        assert!(
            text.contains("FAULT:"),
            "{wire:?}: an ok sample was asked again"
        );
    }
    assert_eq!(
        again["summary"]["samples_errored"],
        summary["samples_errored"]
    );
}

#[test]
fn openai_faults() {
    check_faults(Wire::OpenAi);
}

#[test]
fn anthropic_faults() {
    check_faults(Wire::Anthropic);
}

#[test]
fn gemini_faults() {
    check_faults(Wire::Gemini);
}
