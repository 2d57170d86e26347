//! API keys set to a recognisable value appear nowhere: not in the database, not in debug logs, not in any
//! output or file nmb writes (reports included), even when the server echoes the key back in an error body or in
//! a successful answer, to a model run or to a judge run.

use crate::common;

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
/// providers do ("Incorrect API key provided: sk-..."), and another quarter a successful answer that quotes it.
fn echoing_server() -> nmb_fake_server::FakeServer {
    server(Config {
        responder: Arc::new(|req| {
            let h = &req.conversation_sha256;
            let echo = h.starts_with(['0', '1', '2', '3']);
            let echo_ok = h.starts_with(['4', '5', '6', '7']) || req.model == "judge-model";
            if let (Some(auth), true) = (&req.auth, echo_ok) {
                return Reply::Texts(vec![
                    format!(
                        "<think>Thinking with {}.</think>The most likely diagnosis is stroke. (Your key was {}.)",
                        auth.value, auth.value
                    );
                    req.samples() as usize
                ]);
            }
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

    // A judge run whose successful answers echo the key, then the report of the scored run.
    let judge =
        model_spec(nmb_fake_server::Wire::OpenAi, &server).replace("test-model", "judge-model");
    let out = nmb_command(&runs)
        .envs(KEYS)
        .env("NMB_LOG", "debug")
        .args([
            "score",
            &run_ids[0],
            "--judge",
            &judge,
            "--no-bertscore",
            "--max-reasks",
            "0",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    outputs.push(("score --judge stdout".into(), out.stdout));
    outputs.push(("score --judge stderr".into(), out.stderr));
    let out = nmb_command(&runs)
        .envs(KEYS)
        .args(["report", &run_ids[0], "--out"])
        .arg(runs.join("report"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));

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
    // ... and so were successful answers quoting it, of model runs and of the judge run.
    let all_runs = store.list_runs().unwrap();
    let answers_redacted = |kind: nmb_store::RunKind| {
        all_runs
            .iter()
            .filter(|r| r.manifest.kind == kind)
            .any(|r| {
                store.run_samples(&r.run_id).unwrap().iter().any(|s| {
                    s.turns.iter().any(|t| {
                        t.text.as_deref().is_some_and(|x| {
                            x.contains("Your key was") && x.contains("[REDACTED].)")
                        })
                    })
                })
            })
    };
    assert!(
        answers_redacted(nmb_store::RunKind::Model),
        "a model run's echoed answer"
    );
    assert!(
        answers_redacted(nmb_store::RunKind::Judge),
        "a judge run's echoed answer"
    );
    // ... and the thinking kept apart from those answers.
    let thinking_redacted = all_runs.iter().any(|r| {
        store.run_samples(&r.run_id).unwrap().iter().any(|s| {
            let thought = |t: &nmb_store::TurnRecord| t.thinking.clone().unwrap_or_default();
            s.turns
                .iter()
                .any(|t| thought(t).contains("Thinking with Bearer [REDACTED]"))
        })
    });
    assert!(thinking_redacted, "an echoed key in the thinking");
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

/// A store written before answers were redacted may hold a key in an answer and an error: the report still
/// shows `[REDACTED]` in every file.
#[test]
fn reports_cut_keys_out_of_an_older_store() {
    use nmb_store::{CallRecord, ChoiceRecord, ErrorInfo, Manifest};

    let dir = tempfile::tempdir().expect("temp dir");
    let runs = dir.path().join("runs");
    let (var, key) = KEYS[0];
    let s = store(&runs);
    let manifest = Manifest {
        model: "openai:echo-model@http://127.0.0.1:9/v1".into(),
        suite_id: "tiny".into(),
        samples: 2,
        ..Manifest::default()
    };
    let run = s.create_run("cfg", &manifest).unwrap();
    s.plan_samples(&run.run_id, &[("case_1/dx", 2)]).unwrap();
    let body =
        serde_json::json!({"messages": [{"role": "user", "parts": [{"text": "Diagnosis?"}]}]});
    s.put_prompt("p1", &body.to_string(), &[]).unwrap();
    let answer = format!("Stroke. Your key was {key}.");
    let message = format!("HTTP 401: Incorrect API key provided: {key}");
    let raw = format!("{{\"echo\": \"{key}\"}}");
    for (i, error) in [
        None,
        Some(ErrorInfo {
            class: "auth",
            message: &message,
        }),
    ]
    .into_iter()
    .enumerate()
    {
        let record = CallRecord {
            tokens: Default::default(),
            run_id: &run.run_id,
            task_id: "case_1/dx",
            turn_index: 0,
            prompt_hash: "p1",
            model: &manifest.model,
            params_json: "{}",
            template_id: "t",
            template_hash: "h",
            error,
            attempts: 1,
            raw: Some(&raw),
            tokens_in: Some(10),
            tokens_out: Some(5),
            latency_ms: Some(4),
            started_ms: 0,
            finished_ms: 4,
            batch_id: None,
        };
        let choice = ChoiceRecord {
            thinking: None,
            finish_reason: None,
            sample_index: i as u32,
            choice_index: 0,
            text: error.is_none().then_some(answer.as_str()),
            error: None,
            final_turn: true,
        };
        s.record_call(&record, &[choice]).unwrap();
    }
    drop(s);
    let out_dir = dir.path().join("report");
    let out = nmb_command(&runs)
        .env(var, key)
        .args(["report", &run.run_id, "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut files = Vec::new();
    files_under(&out_dir, &mut files);
    assert!(files.len() >= 5, "{files:?}");
    let mut redacted = 0;
    for f in &files {
        let content = String::from_utf8_lossy(&std::fs::read(f).unwrap()).into_owned();
        assert!(!content.contains(key), "key found in {}", f.display());
        redacted += usize::from(content.contains("[REDACTED]"));
    }
    assert!(
        redacted >= 2,
        "the answer is in the HTML and the CSV, redacted"
    );
}

/// A model URL may carry credentials (`user:password@`, `?api_key=`): they reach the server, but nothing nmb
/// stores, hashes, prints or writes holds them, and the run's identity is the URL without them, so the same
/// command again asks nothing twice.
#[test]
fn credentials_in_model_urls_are_sent_but_never_kept() {
    const PASSWORD: &str = "pw-CANARY-77aa41";
    const QUERY_KEY: &str = "KEY-CANARY-99bb52";
    let dir = tempfile::tempdir().expect("temp dir");
    let runs = dir.path().join("runs");
    let server = server(Config::default());
    let host = server.url().replace("http://", "");
    let spec = format!(
        "openai:test-model@http://nmbuser:{PASSWORD}@{host}/v1?api_key={QUERY_KEY}&region=eu"
    );
    let mut outputs: Vec<(String, Vec<u8>)> = Vec::new();
    let eval = |outputs: &mut Vec<(String, Vec<u8>)>| {
        let out = nmb_command(&runs)
            .env("NMB_LOG", "debug")
            .args(["eval", "--suite", "sample", "--model", &spec])
            .args(["--samples", "1", "--limit", "4", "--no-bertscore"])
            .output()
            .expect("nmb runs");
        assert!(out.status.success(), "{}", text(&out.stderr));
        let id = text(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("run id: "))
            .expect("eval prints the run id")
            .to_string();
        outputs.push(("eval stdout".into(), out.stdout));
        outputs.push(("eval stderr".into(), out.stderr));
        id
    };
    let id = eval(&mut outputs);
    let asked = server.requests();
    assert!(!asked.is_empty());
    assert!(
        asked
            .iter()
            .all(|r| r.query.contains(QUERY_KEY) && r.path.ends_with("/v1/chat/completions")),
        "the query key was sent, after the endpoint's path"
    );
    eval(&mut outputs);
    assert_eq!(
        server.requests().len(),
        asked.len(),
        "the second invocation asked nothing again"
    );
    for args in [
        vec!["runs", "show", id.as_str(), "--json"],
        vec!["runs", "list"],
    ] {
        let out = nmb_command(&runs).args(&args).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let shown = text(&out.stdout);
        let names_model = shown.contains(&format!("{host}/v1?region=eu")) || args[1] == "list";
        assert!(names_model, "{args:?} names the model's URL: {shown}");
        outputs.push((args.join(" "), out.stdout));
    }
    let out = nmb_command(&runs)
        .args(["report", &id, "--out"])
        .arg(runs.join("report"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mut files = Vec::new();
    files_under(&runs, &mut files);
    for secret in [PASSWORD, QUERY_KEY] {
        let hits = nmb_store::find_bytes_in_store(&runs.join("nmb.sqlite"), secret.as_bytes())
            .expect("store scan");
        assert!(hits.is_empty(), "{secret} found in the store: {hits:?}");
        for f in &files {
            let bytes = std::fs::read(f).unwrap();
            let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
            assert!(!found, "{secret} found in {}", f.display());
        }
        for (name, bytes) in &outputs {
            let found = bytes.windows(secret.len()).any(|w| w == secret.as_bytes());
            assert!(!found, "{secret} found in {name}");
        }
    }
}
