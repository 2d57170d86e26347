//! A server without `n` and without vision, answering as llama.cpp's server does: `n > 1` gets HTTP 400
//! "Field 'n': ...", an image gets HTTP 500 "image input is not supported ... mmproj". The run falls back to one
//! request per sample (remembered for the run, recorded in the manifest), and images end as a non-retried
//! `unsupported_input` with a hint.

use crate::common;

use std::sync::Arc;

use common::*;
use nmb_fake_server::{default_reply, Config, Reply, Wire};

const N_REJECTED: &str = r#"{"error":{"code":400,"message":"Field 'n': Value must be between 1 <= value <= 1, but got 2","type":"invalid_request_error"}}"#;
const NO_VISION: &str = r#"{"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj","type":"server_error"}}"#;

fn llama_cpp_like() -> nmb_fake_server::FakeServer {
    server(Config {
        responder: Arc::new(|req| {
            let raw = |status, body: &str| Reply::Raw {
                status,
                headers: Vec::new(),
                body: body.to_string(),
            };
            if req.image_count() > 0 {
                raw(500, NO_VISION)
            } else if req.samples() > 1 {
                raw(400, N_REJECTED)
            } else {
                default_reply(req)
            }
        }),
        ..Config::default()
    })
}

fn eval(runs: &std::path::Path, model: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "eval",
        "--suite",
        "sample",
        "--model",
        model,
        "--samples",
        "3",
        "--limit",
        "4",
        "--no-score",
        "--json",
        "-q",
    ];
    args.extend_from_slice(extra);
    json_of(&nmb(runs, &args))
}

#[test]
fn a_server_without_n_gets_one_request_per_sample_for_the_rest_of_the_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = llama_cpp_like();
    let model = model_spec(Wire::OpenAi, &server);
    // The first request asks n = 3 and is rejected; the budget stops the run one request later.
    let part = eval(
        dir.path(),
        &model,
        &[
            "--inputs",
            "text",
            "--concurrency",
            "1",
            "--max-requests",
            "2",
        ],
    );
    assert_eq!(part["stopped_early"], true);
    assert_eq!(server.requests()[0].samples(), 3);
    // The resumed run remembers: not one more request with n > 1.
    let run = eval(dir.path(), &model, &["--inputs", "text"]);
    assert_eq!(run["run_id"], part["run_id"]);
    assert_eq!(run["summary"]["samples_errored"], 0, "{run}");
    assert_eq!(run["summary"]["samples_ok"], 12);
    let requests = server.requests();
    assert!(
        requests[2..].iter().all(|r| r.samples() == 1),
        "n > 1 after the fallback"
    );
    // Each sample's request had its own seed.
    let mut seeds: Vec<_> = requests
        .iter()
        .filter(|r| r.samples() == 1)
        .map(|r| (r.conversation_sha256.clone(), r.params.seed))
        .collect();
    let singles = seeds.len();
    assert_eq!(singles, 12);
    seeds.sort();
    seeds.dedup();
    assert_eq!(seeds.len(), singles, "distinct seeds per sample");

    let info = store(dir.path())
        .run(run["run_id"].as_str().unwrap())
        .unwrap();
    let why = info
        .manifest
        .n_unsupported
        .expect("the manifest records the fallback");
    assert!(why.contains("Field 'n'"), "{why}");
}

#[test]
fn no_n_forces_one_request_per_sample_from_the_start() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = llama_cpp_like();
    let model = model_spec(Wire::OpenAi, &server);
    let run = eval(dir.path(), &model, &["--inputs", "text", "--no-n"]);
    assert_eq!(run["summary"]["samples_ok"], 12);
    assert!(server.requests().iter().all(|r| r.samples() == 1));
    let info = store(dir.path())
        .run(run["run_id"].as_str().unwrap())
        .unwrap();
    assert_eq!(info.manifest.n_unsupported.as_deref(), Some(nmb_run::NO_N));
}

#[test]
fn images_sent_to_a_text_only_server_are_unsupported_input_and_not_retried() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = llama_cpp_like();
    let model = model_spec(Wire::OpenAi, &server);
    let args = [
        "eval",
        "--suite",
        "sample",
        "--model",
        &model,
        "--samples",
        "1",
        "--limit",
        "2",
    ];
    let out = nmb(
        dir.path(),
        &[&args[..], &["--no-score", "--json", "-q"]].concat(),
    );
    // Every sample errored: nmb eval says so and exits 1, with the class's hint.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let run: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(run["all_errored"], true);
    assert!(
        run["error"].as_str().unwrap().contains("--inputs text"),
        "{run}"
    );
    assert_eq!(run["summary"]["samples_errored"], 2, "{run}");
    assert_eq!(run["summary"]["errors_by_class"]["unsupported_input"], 2);
    assert_eq!(server.request_count(), 2, "no retries");
    let store = store(dir.path());
    let calls = store.run_calls(run["run_id"].as_str().unwrap()).unwrap();
    for c in calls {
        assert_eq!(c.attempts, 1);
        let message = c.error_message.unwrap_or_default();
        assert!(message.contains("--inputs text"), "{message}");
    }
}
