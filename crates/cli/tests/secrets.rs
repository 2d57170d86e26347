//! API keys set to a recognisable value appear nowhere: not in the database, not in debug logs, not in any
//! output or file nmb writes, even when the server echoes the key back in an error body.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use nmb_fake_server::{default_reply, Config, Reply};

const KEYS: [(&str, &str); 3] = [
    ("OPENAI_API_KEY", "sk-nmb-CANARY-openai-5f0c2a9d7e"),
    ("ANTHROPIC_API_KEY", "sk-ant-nmb-CANARY-8b1e4d6f03"),
    ("GEMINI_API_KEY", "AIza-nmb-CANARY-gemini-3c7a91"),
];

/// Answers most requests normally; a quarter get a 401 whose body quotes the key they carried, as some
/// providers do ("Incorrect API key provided: sk-...").
fn echoing_server() -> nmb_fake_server::FakeServer {
    server(Config {
        responder: Arc::new(|req| {
            let echo = req.conversation_sha256.starts_with(['0', '1', '2', '3']);
            match (&req.auth, echo) {
                (Some(auth), true) => Reply::Raw {
                    status: 401,
                    headers: vec![("x-echo".into(), auth.value.clone())],
                    body: serde_json::json!({"error": {
                        "message": format!("Incorrect API key provided: {}", auth.value),
                        "type": "invalid_request_error"}})
                    .to_string(),
                },
                _ => default_reply(req),
            }
        }),
        ..Config::default()
    })
}

fn files_under(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let p = entry.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn keys_appear_nowhere() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runs = dir.path().join("runs");
    let server = echoing_server();
    let mut outputs: Vec<(String, Vec<u8>)> = Vec::new();
    let mut run_ids = Vec::new();
    for wire in WIRES {
        let out = nmb_command(&runs)
            .envs(KEYS)
            .env("NMB_LOG", "debug")
            .args([
                "eval",
                "--suite",
                "sample",
                "--model",
                &model_spec(wire, &server),
            ])
            .args(["--samples", "2", "--limit", "8", "--max-retries", "0"])
            .output()
            .expect("nmb runs");
        assert!(out.status.success(), "{wire:?}: {}", text(&out.stderr));
        let stdout = text(&out.stdout);
        let id = stdout
            .lines()
            .find_map(|l| l.strip_prefix("run id: "))
            .expect("eval prints the run id")
            .to_string();
        assert!(
            !text(&out.stderr).is_empty(),
            "debug logging produced output to search"
        );
        outputs.push((format!("{wire:?} stdout"), out.stdout));
        outputs.push((format!("{wire:?} stderr"), out.stderr));
        run_ids.push(id);
    }
    for id in &run_ids {
        let out = nmb_command(&runs)
            .env("NMB_LOG", "debug")
            .args(["runs", "show", id, "--json"])
            .output()
            .unwrap();
        let show: serde_json::Value = serde_json::from_slice(&out.stdout).expect("show JSON");
        let auth = show["errors_by_class"]["auth"].as_u64().unwrap_or(0);
        assert!(auth > 0, "the echoing 401s were exercised: {show}");
        assert!(show["samples_ok"].as_u64().unwrap() > 0);
        outputs.push((format!("runs show {id}"), out.stdout));
        outputs.push((format!("runs show {id} stderr"), out.stderr));
    }
    let out = nmb_command(&runs).args(["runs", "list"]).output().unwrap();
    outputs.push(("runs list".into(), out.stdout));

    // The keys did reach the server (so the search below could have found them).
    let requests = server.requests();
    for (var, key) in KEYS {
        assert!(
            requests
                .iter()
                .any(|r| r.auth.as_ref().is_some_and(|a| a.value.contains(key))),
            "{var} was sent"
        );
    }
    // The echoed bodies were stored, redacted.
    let store = store(&runs);
    let redacted = run_ids.iter().any(|id| {
        store.run_calls(id).unwrap().iter().any(|c| {
            c.error_class.as_deref() == Some("auth")
                && store
                    .raw_response(c.call_id)
                    .unwrap()
                    .is_some_and(|raw| raw.contains("[REDACTED]"))
        })
    });
    assert!(redacted, "an echoed key was stored as [REDACTED]");
    drop(store);

    let mut files = Vec::new();
    files_under(&runs, &mut files);
    assert!(!files.is_empty());
    for (_, key) in KEYS {
        let hits = nmb_store::find_bytes_in_store(&runs.join("nmb.sqlite"), key.as_bytes())
            .expect("store scan");
        assert!(hits.is_empty(), "key found in the store: {hits:?}");
        for f in &files {
            let bytes = std::fs::read(f).unwrap();
            assert!(
                !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
                "key found in {}",
                f.display()
            );
        }
        for (name, bytes) in &outputs {
            assert!(
                !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
                "key found in {name}"
            );
        }
    }
}
