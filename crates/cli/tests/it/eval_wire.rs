//! `nmb eval` on the bundled sample suite against a loopback server speaking each real wire format: what
//! arrives there (images, parameters, roles, multi-turn history, keys) and what is stored.

use crate::common;

use std::collections::{HashMap, HashSet};

use common::*;
use nmb_fake_server::{Config, ReceivedRequest, Wire};
use serde_json::Value;

/// Whether `s` is a string in `v`, or the serialisation of an object in it (an Anthropic `tool_use` input, the
/// form a constrained answer comes back in on that wire).
fn json_has_string(v: &Value, s: &str) -> bool {
    match v {
        Value::String(x) => x == s,
        Value::Array(a) => a.iter().any(|x| json_has_string(x, s)),
        Value::Object(o) => {
            serde_json::to_string(v).is_ok_and(|t| t == s)
                || o.values().any(|x| json_has_string(x, s))
        }
        _ => false,
    }
}

/// The image hashes of a stored prompt body, in order.
fn stored_images(body: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(body).expect("prompt body is JSON");
    v["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|p| p["image"].as_str().map(str::to_string))
        .collect()
}

fn received_images(r: &ReceivedRequest) -> Vec<String> {
    r.messages
        .iter()
        .flat_map(|m| m.image_hashes())
        .map(str::to_string)
        .collect()
}

fn check_wire(wire: Wire) {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = server(Config::default());
    let key = format!("test-key-{wire:?}-0123456789");
    let out = nmb_command(dir.path())
        .env(key_var(wire), &key)
        .args([
            "eval",
            "--suite",
            "sample",
            "--model",
            &model_spec(wire, &server),
        ])
        .args(["--samples", "2", "--max-tokens", "300", "--seed", "40"])
        .args(["--temperature", "0.5", "--top-p", "0.9", "--json", "-q"])
        .output()
        .expect("nmb runs");
    let result = json_of(&out);
    let summary = &result["summary"];
    assert_eq!(summary["samples_total"], 50, "{result}");
    assert_eq!(summary["samples_ok"], 50, "{result}");
    assert_eq!(summary["samples_errored"], 0, "{result}");
    assert!(summary["tokens_in"].as_u64().unwrap() > 0);
    assert!(summary["tokens_out"].as_u64().unwrap() > 0);
    assert_eq!(summary["latency_ms"]["count"], summary["calls"]);
    let run_id = result["run_id"].as_str().expect("run id").to_string();

    let requests = server.requests();
    assert_eq!(server.bad_requests(), 0);
    assert_eq!(
        requests.len() as u64,
        summary["requests_sent"].as_u64().unwrap()
    );
    let native_n = wire != Wire::Anthropic;
    for r in &requests {
        assert_eq!(r.wire, wire);
        assert_eq!(r.model, "test-model");
        let auth = r.auth.as_ref().expect("a key was sent");
        assert!(
            auth.value.contains(&key),
            "{wire:?}: key sent in {}",
            auth.header
        );
        assert!(
            !r.key_in_query,
            "the key travels in a header, never the URL"
        );
        let p = &r.params;
        assert_eq!(p.temperature, Some(0.5));
        assert_eq!(p.top_p, Some(0.9));
        assert_eq!(p.max_tokens, Some(300));
        match (wire, p.n) {
            (Wire::Anthropic, n) => {
                assert_eq!(n, None);
                assert_eq!(p.seed, None, "the Messages API has no seed");
            }
            (_, Some(2)) => assert_eq!(p.seed, Some(40)),
            (_, None | Some(1)) => assert!(matches!(p.seed, Some(40 | 41)), "{p:?}"),
            (_, n) => panic!("unexpected n {n:?}"),
        }
        // roles: system prompt first, then user/assistant alternating, ending with the user
        assert_eq!(r.messages[0].role, "system");
        assert!(r.messages[0]
            .text()
            .starts_with("You are an experienced neurology expert"));
        for (i, m) in r.messages[1..].iter().enumerate() {
            let want = if i % 2 == 0 { "user" } else { "assistant" };
            assert_eq!(m.role, want, "{wire:?} message {}", i + 1);
        }
        assert_eq!(r.messages.last().unwrap().role, "user");
        assert!(r.image_count() > 0, "full inputs send images");
    }
    if native_n {
        assert!(requests.iter().any(|r| r.params.n == Some(2)), "n is used");
    }

    // Every stored call matches exactly one conversation the server saw: same texts, roles and image bytes.
    let store = store(dir.path());
    let by_hash: HashMap<&str, &ReceivedRequest> = requests
        .iter()
        .map(|r| (r.conversation_sha256.as_str(), r))
        .collect();
    let calls = store.run_calls(&run_id).expect("calls");
    assert_eq!(calls.len(), requests.len());
    let stored_hashes: HashSet<&str> = calls.iter().map(|c| c.prompt_hash.as_str()).collect();
    let seen_hashes: HashSet<&str> = by_hash.keys().copied().collect();
    assert_eq!(
        stored_hashes, seen_hashes,
        "{wire:?}: what was sent is what was stored"
    );
    for c in &calls {
        let r = by_hash[c.prompt_hash.as_str()];
        let body = store
            .prompt_body(&c.prompt_hash)
            .unwrap()
            .expect("prompt stored");
        assert_eq!(
            stored_images(&body),
            received_images(r),
            "images arrive as stored"
        );
        let raw = store
            .raw_response(c.call_id)
            .unwrap()
            .expect("raw body stored");
        assert!(serde_json::from_str::<Value>(&raw).is_ok());
        assert!(c.tokens_in.unwrap_or(0) > 0 && c.latency_ms.is_some());
    }
    for h in store_images(&store, &calls) {
        assert!(store.image(&h).unwrap().is_some(), "image {h} stored");
    }

    // Answers are what the server said, and multi-turn requests carry the sample's own earlier answers.
    let samples = store.run_samples(&run_id).expect("samples");
    let mut multi_turn = 0;
    for s in &samples {
        for t in &s.turns {
            let text = t.text.as_deref().expect("ok turns have text");
            assert!(!text.is_empty());
            let raw = store.raw_response(t.call.call_id).unwrap().unwrap();
            let raw: Value = serde_json::from_str(&raw).unwrap();
            assert!(
                json_has_string(&raw, text),
                "stored text comes from the response"
            );
        }
        if s.turns.len() < 2 {
            continue;
        }
        multi_turn += 1;
        for k in 1..s.turns.len() {
            let r = by_hash[s.turns[k].call.prompt_hash.as_str()];
            let history: Vec<String> = r
                .messages
                .iter()
                .filter(|m| m.role == "assistant")
                .map(|m| m.text())
                .collect();
            let earlier: Vec<String> = s.turns[..k]
                .iter()
                .map(|t| t.text.clone().unwrap())
                .collect();
            assert_eq!(
                history, earlier,
                "{} sample {} turn {k}",
                s.task_id, s.sample_index
            );
        }
    }
    assert_eq!(multi_turn, 8, "4 multi-turn tasks x 2 samples");
}

fn store_images(store: &nmb_store::Store, calls: &[nmb_store::CallInfo]) -> HashSet<String> {
    calls
        .iter()
        .flat_map(|c| stored_images(&store.prompt_body(&c.prompt_hash).unwrap().unwrap()))
        .collect()
}

#[test]
fn openai_wire() {
    check_wire(Wire::OpenAi);
}

#[test]
fn anthropic_wire() {
    check_wire(Wire::Anthropic);
}

#[test]
fn gemini_wire() {
    check_wire(Wire::Gemini);
}

#[test]
fn text_inputs_send_no_images() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = server(Config::default());
    let out = nmb(
        dir.path(),
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            &model_spec(Wire::OpenAi, &server),
            "--samples",
            "1",
            "--limit",
            "4",
            "--inputs",
            "text",
            "--json",
            "-q",
        ],
    );
    let result = json_of(&out);
    assert_eq!(result["summary"]["samples_ok"], 4);
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert!(requests.iter().all(|r| r.image_count() == 0));
    let show = json_of(&nmb(
        dir.path(),
        &["runs", "show", result["run_id"].as_str().unwrap(), "--json"],
    ));
    assert_eq!(show["manifest"]["input_mode"], "text");
    assert_eq!(show["manifest"]["dropped_inputs"], serde_json::json!([]));
}
