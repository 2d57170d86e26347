//! Anthropic's prompt cache through `nmb eval`: every request marks its system prompt and its case (the first
//! user message), and against the loopback server, which caches a marked prefix of at least 1,024 tokens as the
//! API documents, a task's first sample writes the prefix and the others read it; the run's summary and the
//! stored calls count those tokens apart, and the report prices them.

use crate::common;

use common::*;
use nmb_fake_server::{Config, Wire};

/// A one-case native suite whose notes make the case long enough to be cached (about 1,500 tokens).
fn long_case_suite(dir: &std::path::Path) -> std::path::PathBuf {
    let notes =
        "Progressive gait disturbance with urinary urgency and slowed thinking over two years. "
            .repeat(70);
    let case = serde_json::json!({
        "case_id": "case1",
        "ehr": {"Age": 74, "Sex": "male"},
        "notes": notes,
        "tasks": [{"id": "dx", "family": "differential", "question": "What is the most likely diagnosis?",
                   "reference": {"diagnosis": "Normal pressure hydrocephalus"}}],
    });
    one_case_suite(dir, "long", "", &case)
}

#[test]
fn the_first_sample_writes_the_case_to_the_cache_and_the_others_read_it() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let suite = format!("native:{}", long_case_suite(dir.path()).display());
    let server = server(Config::default());
    let model = model_spec(Wire::Anthropic, &server);
    let args = [
        "eval",
        "--suite",
        &suite,
        "--model",
        &model,
        "--samples",
        "3",
        "--concurrency",
        "1",
        "--no-score",
        "--json",
        "-q",
    ];
    let out = json_of(&nmb_command(&runs).args(args).output().unwrap());
    assert_eq!(out["summary"]["samples_ok"], 3, "{out}");
    let asked = server.requests();
    assert_eq!(asked.len(), 3);
    let prefix = asked[0]
        .params
        .cache_prefix
        .clone()
        .expect("the request marks its prefix");
    assert!(
        prefix.1 >= 1024,
        "the case is long enough to cache: {prefix:?}"
    );
    assert!(
        asked
            .iter()
            .all(|r| r.params.cache_prefix.as_ref() == Some(&prefix)),
        "every sample marks the same prefix"
    );
    let (writes, reads): (Vec<u64>, Vec<u64>) = asked
        .iter()
        .map(|r| (r.params.cache_write, r.params.cache_read))
        .unzip();
    assert_eq!(writes, [prefix.1, 0, 0]);
    assert_eq!(reads, [0, prefix.1, prefix.1]);

    let run_id = out["run_id"].as_str().unwrap();
    let summary = store(&runs).summary(run_id).unwrap();
    assert_eq!(summary.tokens_cache_write, prefix.1);
    assert_eq!(summary.tokens_cached_in, 2 * prefix.1);
    assert!(summary.tokens_in > summary.tokens_cached_in + summary.tokens_cache_write);
}
