//! `nmb eval` against llama.cpp's own OpenAI-compatible server (PyPI `xllamacpp`) running SmolLM2 on the CPU:
//! the sample suite's text path with n > 1 (which that server rejects, so nmb falls back to one request per
//! sample), JSON-mode differentials, and images refused as `unsupported_input`. Skips without xllamacpp or the
//! GGUF locally; fails under CI.

use crate::common;

use common::*;
use nmb_test_support::assets::smollm2_gguf;
use nmb_test_support::llama::LlamaServer;

/// (call parameters, answer, finish reason) of every answered sample.
fn samples_of(store: &nmb_store::Store, run_id: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for s in store.run_samples(run_id).unwrap() {
        let Some(turn) = s.turns.last() else { continue };
        let Some(answer) = &turn.text else { continue };
        let raw = store
            .raw_response(turn.call.call_id)
            .unwrap()
            .unwrap_or_default();
        let raw: serde_json::Value = serde_json::from_str(&raw).unwrap_or_default();
        let finish = raw["choices"][turn.choice_index as usize]["finish_reason"]
            .as_str()
            .unwrap_or("")
            .to_string();
        out.push((turn.call.params.clone(), answer.clone(), finish));
    }
    out
}

#[test]
fn the_sample_suite_runs_against_a_real_llama_cpp_server() {
    let Some(gguf) = smollm2_gguf() else { return };
    let Some(server) = LlamaServer::start(&gguf) else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let model = format!("openai:smollm2@{}", server.v1());
    let base = [
        "eval",
        "--suite",
        "sample",
        "--model",
        &model,
        "--max-tokens",
        "96",
        "--seed",
        "7",
        "--no-score",
        "--json",
        "-q",
    ];
    // Text path: the first three tasks (differentials and a lesion task, all JSON mode), 2 samples each.
    let text_run = json_of(&nmb(
        dir.path(),
        &[
            &base[..],
            &["--inputs", "text", "--samples", "2", "--limit", "3"],
        ]
        .concat(),
    ));
    let summary = &text_run["summary"];
    assert_eq!(summary["samples_errored"], 0, "{text_run}");
    assert_eq!(summary["samples_ok"], 6);
    let store = store(dir.path());
    let run_id = text_run["run_id"].as_str().unwrap();
    let info = store.run(run_id).unwrap();
    let why = info.manifest.n_unsupported.clone().unwrap_or_default();
    assert!(
        why.contains("'n'"),
        "the rejection of n was recorded: {why:?}"
    );
    // Differential answers come back in JSON mode, under the schema: an object whose first key is the
    // differential; where the model stopped by itself (not at --max-tokens), the whole answer parses.
    let differentials: Vec<_> = samples_of(&store, run_id)
        .into_iter()
        .filter(|(params, _, _)| params.contains("\"differential\""))
        .collect();
    assert!(!differentials.is_empty());
    for (_, answer, finish) in differentials {
        let compact: String = answer.split_whitespace().collect();
        assert!(compact.starts_with("{\"differential\":["), "{answer}");
        if finish == "stop" {
            let v: serde_json::Value = serde_json::from_str(answer.trim()).unwrap_or_else(|e| {
                panic!("a finished JSON-mode answer is not JSON ({e}): {answer}")
            });
            assert!(v["differential"].is_array(), "{answer}");
        }
    }

    // Images to this text-only server: unsupported_input, not retried; every sample errored, so exit 1.
    let out = nmb(
        dir.path(),
        &[
            &base[..],
            &["--inputs", "full", "--samples", "1", "--limit", "1"],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(1), "every sample errored");
    let image_run: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(image_run["all_errored"], true, "{image_run}");
    assert_eq!(
        image_run["summary"]["errors_by_class"]["unsupported_input"], 1,
        "{image_run}"
    );
    let calls = store
        .run_calls(image_run["run_id"].as_str().unwrap())
        .unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].attempts, 1);
}
