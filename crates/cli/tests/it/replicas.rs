//! One model served by two loopback servers (`openai:test-model@URL_A/v1,URL_B/v1`) through `nmb eval`: both
//! get a fair share of the calls and every stored call names the server that answered it; a replica that fails
//! everything is left out without losing or re-buying an answer; and the run is the same run (configuration
//! hash, model, cached answers) as one against the first URL alone.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use common::*;
use nmb_fake_server::{Config, FakeServer, Fault};
use serde_json::Value;

const CONCURRENCY: &str = "4";

fn slow() -> Config {
    Config {
        latency: Duration::from_millis(40),
        ..Config::default()
    }
}

fn base(server: &FakeServer) -> String {
    format!("{}/v1", server.url())
}

/// `nmb eval` of the sample suite, one sample per task, `CONCURRENCY` calls at once.
fn eval(runs: &Path, model: &str) -> Value {
    json_of(&nmb(
        runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            model,
            "--samples",
            "1",
            "--concurrency",
            CONCURRENCY,
            "--no-score",
            "--json",
            "-q",
        ],
    ))
}

/// Every planned sample was answered.
fn assert_all_ok(result: &Value) {
    let s = &result["summary"];
    assert!(s["samples_total"].as_u64().unwrap() > 0, "{result}");
    assert_eq!(s["samples_ok"], s["samples_total"], "{result}");
    assert_eq!(s["samples_errored"], 0, "{result}");
    assert_eq!(s["samples_pending"], 0, "{result}");
}

/// The stored calls of a run, by the replica each names.
fn calls_by_replica(runs: &Path, run_id: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for c in store(runs).run_calls(run_id).unwrap() {
        let replica = c.replica.unwrap_or_else(|| "(none)".into());
        *out.entry(replica).or_default() += 1;
    }
    out
}

#[test]
fn two_replicas_share_the_calls_and_each_call_names_its_server() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let (a, b) = (server(slow()), server(slow()));
    let (url_a, url_b) = (base(&a), base(&b));
    let result = eval(runs, &format!("openai:test-model@{url_a},{url_b}"));
    assert_all_ok(&result);
    let run_id = result["run_id"].as_str().unwrap();

    let (sent_a, sent_b) = (a.request_count(), b.request_count());
    let total = sent_a + sent_b;
    assert_eq!(result["invocation"]["attempts"], total, "{result}");
    assert!(
        sent_a * 4 >= total && sent_b * 4 >= total,
        "each replica gets at least a quarter: {sent_a} and {sent_b} of {total}"
    );
    // each stored call names the server that received it
    let by_replica = calls_by_replica(runs, run_id);
    assert_eq!(
        by_replica,
        BTreeMap::from([(url_a.clone(), sent_a), (url_b.clone(), sent_b)])
    );
    // and the model they answered for is the first URL's, the same on both
    let calls = store(runs).run_calls(run_id).unwrap();
    let identity = format!("openai:test-model@{url_a}");
    assert!(calls.iter().all(|c| c.model == identity));
    assert_eq!(a.bad_requests() + b.bad_requests(), 0);
}

#[test]
fn a_replica_that_fails_everything_is_left_out_and_nothing_is_lost_or_paid_twice() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let failing = server(Config {
        fault_every: Some((1, Fault::Status(500))),
        ..slow()
    });
    let ok = server(slow());
    let (url_failing, url_ok) = (base(&failing), base(&ok));
    let result = eval(runs, &format!("openai:test-model@{url_failing},{url_ok}"));
    assert_all_ok(&result);
    let run_id = result["run_id"].as_str().unwrap();

    // Taken out at its first failure (for 30 s, longer than this run): only the calls sent to it before that
    // reached it, at most one per call in flight at once (the eval keeps up to twice --concurrency).
    let (failed, answered) = (failing.request_count(), ok.request_count());
    assert!(failed >= 1, "the first call went to the first replica");
    assert!(
        failed <= 8,
        "{failed} requests reached the failing replica ({answered} the other)"
    );
    // Every call was answered by the healthy replica, each exactly once: one stored call per answer it sent,
    // and every request the failing one got is a failed attempt of a stored call, retried elsewhere.
    let calls = store(runs).run_calls(run_id).unwrap();
    assert!(calls.iter().all(|c| c.ok), "every call ended answered");
    assert_eq!(
        calls_by_replica(runs, run_id),
        BTreeMap::from([(url_ok.clone(), answered)])
    );
    let retried: u64 = calls.iter().map(|c| u64::from(c.attempts - 1)).sum();
    assert_eq!(
        retried, failed,
        "each failed request was retried once, elsewhere"
    );
    assert_eq!(result["invocation"]["attempts"], failed + answered);
}

#[test]
fn a_run_on_replicas_is_the_same_run_as_on_its_first_url() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let (a, b) = (server(Config::default()), server(Config::default()));
    let (url_a, url_b) = (base(&a), base(&b));
    let replicated = eval(runs, &format!("openai:test-model@{url_a},{url_b}"));
    assert_all_ok(&replicated);
    assert!(b.request_count() > 0);
    let sent = (a.request_count(), b.request_count());

    // The same evaluation against the first URL alone: a new run (the first one finished) with the same
    // configuration, every answer from the response cache, nothing sent.
    let single = eval(runs, &format!("openai:test-model@{url_a}"));
    assert_all_ok(&single);
    assert_eq!((a.request_count(), b.request_count()), sent);
    assert_eq!(single["invocation"]["requests"], 0, "{single}");
    let store = store(runs);
    let run = |v: &Value| {
        store
            .get_run(v["run_id"].as_str().unwrap())
            .unwrap()
            .expect("the run")
    };
    let (r, s) = (run(&replicated), run(&single));
    assert_ne!(r.run_id, s.run_id);
    assert_eq!(r.config_hash, s.config_hash);
    assert_eq!(r.manifest.model, s.manifest.model);
    assert_eq!(r.manifest.model, format!("openai:test-model@{url_a}"));
    assert_eq!(r.manifest.model_identity, s.manifest.model_identity);

    // Any replica list led by the same URL is the same configuration, answered from the same cache.
    let c = server(Config::default());
    let more = eval(runs, &format!("openai:test-model@{url_a},{}", base(&c)));
    assert_eq!(run(&more).config_hash, s.config_hash);
    assert_eq!(more["invocation"]["requests"], 0, "{more}");
}
