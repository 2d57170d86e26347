//! OpenAI's reasoning models through `nmb eval`: a server that refuses `max_tokens`, `temperature` and `top_p` as
//! OpenAI documents gets them left out, the run finishes without errors and its manifest says what changed; a
//! run whose every sample errored exits non-zero.

use crate::common;

use common::*;
use nmb_fake_server::{Config, ReceivedRequest, Wire};

/// Whether a request is one OpenAI's reasoning models take.
fn as_reasoning_models_take(r: &ReceivedRequest) -> bool {
    let p = &r.params;
    p.max_tokens_field.as_deref() == Some("max_completion_tokens")
        && p.temperature.is_none()
        && p.top_p.is_none()
}

#[test]
fn a_reasoning_model_behind_a_custom_url_finishes_with_no_errors() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let server = server(Config::default());
    let model = format!("openai:o3@{}/v1", server.url());
    let args = |extra: &[&str]| {
        let mut a = eval_args("sample", &model, &["--no-score", "--json", "-q"]);
        a.extend(extra.iter().map(|e| e.to_string()));
        a
    };
    // A first invocation stops after two calls: enough to meet every refusal.
    let part = json_of(
        &nmb_command(&runs)
            .args(args(&["--max-requests", "2", "--concurrency", "1"]))
            .output()
            .unwrap(),
    );
    assert_eq!(part["summary"]["samples_errored"], 0, "{part}");
    let first = server.requests();
    let refused = first
        .iter()
        .filter(|r| !as_reasoning_models_take(r))
        .count();
    assert_eq!(
        refused, 3,
        "max_tokens, then temperature, then top_p, once each"
    );
    let run_id = part["run_id"].as_str().unwrap().to_string();
    let manifest = store(&runs).run(&run_id).unwrap().manifest;
    let adjusted = manifest.params_adjusted.expect("recorded");
    let names: Vec<&str> = adjusted.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        ["max_completion_tokens", "no_temperature", "no_top_p"]
    );
    assert!(
        adjusted["max_completion_tokens"].contains("Unsupported parameter: 'max_tokens'"),
        "{adjusted:?}"
    );
    assert_eq!(
        manifest.params["temperature"], 0.7,
        "the parameters asked stay recorded"
    );

    // The resumed run starts adjusted: not one refusal more.
    let rest = json_of(&nmb_command(&runs).args(args(&[])).output().unwrap());
    assert_eq!(rest["run_id"], run_id.as_str());
    assert_eq!(rest["summary"]["samples_errored"], 0, "{rest}");
    assert_eq!(rest["summary"]["samples_pending"], 0);
    assert_eq!(rest["all_errored"], false);
    let later = &server.requests()[first.len()..];
    assert!(!later.is_empty());
    assert!(later.iter().all(as_reasoning_models_take));
    // The report's manifest table says what was sent.
    let out = dir.path().join("report");
    let o = nmb_command(&runs)
        .args([
            "report",
            &run_id,
            "--out",
            out.to_str().unwrap(),
            "--resamples",
            "50",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("parameters adjusted"), "the manifest row");
    assert!(
        html.contains("no_top_p (the server refused it: Unsupported parameter: &#39;top_p&#39;")
    );
}

#[test]
fn a_run_whose_every_sample_errored_exits_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let body = r#"{"error":{"message":"Unsupported parameter: 'logprobs' is not supported with this model.","type":"invalid_request_error","param":"logprobs","code":"unsupported_parameter"}}"#;
    let server = always(400, body.to_string());
    let model = format!("openai:gpt-4o@{}/v1", server.url());
    let run = |json: bool| {
        let mut c = nmb_command(&runs);
        c.args(eval_args("sample", &model, &["-q"]));
        if json {
            c.arg("--json");
        }
        c.output().unwrap()
    };
    let out = run(true);
    assert!(!out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(v["all_errored"], true);
    assert_eq!(v["summary"]["samples_ok"], 0);
    let error = v["error"].as_str().unwrap();
    assert!(
        error.contains("every sample errored (client_error "),
        "{error}"
    );
    assert!(error.contains("--reasoning-model"), "the hint: {error}");
    // As text: the error on stderr, the same exit status.
    let out = run(false);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("error: every sample errored"));
}

#[test]
fn a_reasoning_effort_is_sent_recorded_and_hashed_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let server = server(Config::default());
    let eval = |model: &str, extra: &[&str]| {
        let mut c = nmb_command(&runs);
        c.args(eval_args(
            "sample",
            model,
            &["--limit", "2", "--no-score", "--json", "-q"],
        ))
        .args(extra);
        c.output().unwrap()
    };
    let openai = model_spec(Wire::OpenAi, &server);
    let plain = json_of(&eval(&openai, &[]));
    assert!(server
        .requests()
        .iter()
        .all(|r| r.params.reasoning.is_none()));
    let high = json_of(&eval(&openai, &["--reasoning-effort", "high"]));
    assert_ne!(high["run_id"], plain["run_id"], "another configuration");
    let asked: Vec<_> = server.requests()[2..].to_vec();
    assert!(!asked.is_empty());
    assert!(asked
        .iter()
        .all(|r| r.params.reasoning == Some("high".into())));
    let store = store(&runs);
    let manifest = |v: &serde_json::Value| store.run(v["run_id"].as_str().unwrap()).unwrap();
    let (plain_run, high_run) = (manifest(&plain), manifest(&high));
    assert!(plain_run.manifest.params.get("reasoning_effort").is_none());
    assert_eq!(high_run.manifest.params["reasoning_effort"], "high");
    assert_ne!(plain_run.config_hash, high_run.config_hash);

    // A backend that takes no effort refuses it before anything is sent.
    let before = server.requests().len();
    let anthropic = model_spec(Wire::Anthropic, &server);
    let out = eval(&anthropic, &["--reasoning-effort", "low"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("takes no reasoning effort (--reasoning-effort low)"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(server.requests().len(), before);
    let bad = eval(&openai, &["--reasoning-effort", "max"]);
    assert_eq!(bad.status.code(), Some(2), "bad usage");
}

/// A one-task native suite whose differential's reference is multiple sclerosis.
fn ms_suite(dir: &std::path::Path) -> std::path::PathBuf {
    let case = serde_json::json!({
        "case_id": "case1",
        "ehr": {"Age": 31, "Sex": "female"},
        "notes": "Optic neuritis, then a sensory level; periventricular lesions.",
        "tasks": [{"id": "dx", "family": "differential", "question": "What is the most likely diagnosis?",
                   "reference": {"diagnosis": "Multiple sclerosis"}}],
    });
    one_case_suite(dir, "thinking", "[defaults]\nlevel = \"direct\"\n", &case)
}

#[test]
fn a_draft_in_the_thinking_is_never_scored_as_the_answer() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let suite = ms_suite(dir.path());
    // The draft in the thinking names the reference; the answer after it does not.
    let content = "<think>\nDraft: {\"differential\": [{\"rank\": 1, \"diagnosis\": \"Multiple sclerosis\", \
                   \"evidence\": \"draft\"}]}\nOn reflection, no.\n</think>\n\n{\"differential\": [{\"rank\": 1, \
                   \"diagnosis\": \"Glioblastoma\", \"evidence\": \"final\"}]}";
    let body = serde_json::json!({
        "id": "c", "object": "chat.completion", "model": "thinker",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
    })
    .to_string();
    let server = always(200, body);
    let model = format!("openai:thinker@{}/v1", server.url());
    let suite = suite.to_str().unwrap();
    let out = nmb_command(&runs)
        .args(eval_args(
            suite,
            &model,
            &["--no-bertscore", "--json", "-q"],
        ))
        .output()
        .unwrap();
    let v = json_of(&out);
    let overall = &v["scores"]["overall"];
    assert_eq!(overall["n"], 1, "{overall}");
    assert_eq!(overall["correct"], 0, "the draft was scored: {overall}");
    let run_id = v["run_id"].as_str().unwrap();
    let samples = store(&runs).run_samples(run_id).unwrap();
    let text = samples[0].final_text.clone().unwrap();
    assert!(text.starts_with("{\"differential\""), "{text}");
    assert!(
        !text.contains("Draft") && !text.contains("<think>"),
        "{text}"
    );
    // The thinking is stored apart, and a cached answer keeps it.
    let thinking = samples[0].turns[0]
        .thinking
        .clone()
        .expect("thinking stored");
    assert!(
        thinking.starts_with("Draft: {") && thinking.ends_with("On reflection, no."),
        "{thinking}"
    );
    let again = json_of(
        &nmb_command(&runs)
            .args(eval_args(
                suite,
                &model,
                &["--no-bertscore", "--fresh", "--json", "-q"],
            ))
            .output()
            .unwrap(),
    );
    assert_eq!(again["invocation"]["answers_from_cache"], 1);
    let cached = store(&runs)
        .run_samples(again["run_id"].as_str().unwrap())
        .unwrap();
    assert!(cached[0].turns[0].cached);
    assert_eq!(
        cached[0].turns[0].thinking.as_deref(),
        Some(thinking.as_str())
    );

    // Judges see the answer alone, unless asked to see the thinking too.
    let judge = format!("openai:judge@{}/v1", server.url());
    let run_id = run_id.to_string();
    let score = |extra: &[&str]| {
        server.clear_requests();
        let out = nmb_command(&runs)
            .args([
                "score",
                &run_id,
                "--judge",
                &judge,
                "--no-bertscore",
                "--max-reasks",
                "0",
            ])
            .args(["--json"])
            .args(extra)
            .output()
            .unwrap();
        let report = json_of(&out);
        let asked: Vec<String> = server
            .requests()
            .iter()
            .filter(|r| r.model == "judge")
            .map(|r| r.all_text())
            .collect();
        assert!(!asked.is_empty(), "the judges were asked");
        (report["config"]["config_hash"].clone(), asked)
    };
    let (plain_hash, plain) = score(&[]);
    assert!(
        plain.iter().any(|t| t.contains("Glioblastoma")),
        "{plain:?}"
    );
    assert!(
        plain.iter().all(|t| !t.contains("On reflection, no.")),
        "{plain:?}"
    );
    let (shown_hash, shown) = score(&["--judge-sees-thinking"]);
    assert!(
        shown.iter().any(
            |t| t.contains("[the model's thinking before its answer]\nDraft: {")
                && t.contains("On reflection, no.\n[its answer]\n{\"differential\"")
        ),
        "{shown:?}"
    );
    assert_ne!(plain_hash, shown_hash, "another scoring configuration");
}

#[test]
fn geminis_thoughts_are_counted_as_output_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let suite = ms_suite(dir.path());
    let body = serde_json::json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"text": "Weighing demyelination against glioma.", "thought": true},
            {"text": "{\"differential\": [{\"rank\": 1, \"diagnosis\": \"Multiple sclerosis\", \"evidence\": \"x\"}]}"}
        ]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 900, "candidatesTokenCount": 40, "thoughtsTokenCount": 600}
    })
    .to_string();
    let server = always(200, body);
    let model = format!("gemini:gemini-2.5-flash@{}", server.url());
    let v = json_of(
        &nmb_command(&runs)
            .args(eval_args(
                suite.to_str().unwrap(),
                &model,
                &["--no-bertscore", "--json", "-q"],
            ))
            .output()
            .unwrap(),
    );
    assert_eq!(
        v["scores"]["overall"]["correct"], 1,
        "the answer, not the thought"
    );
    assert_eq!(v["summary"]["tokens_in"], 900);
    assert_eq!(v["summary"]["tokens_out"], 640, "answer 40 + thoughts 600");
    let calls = store(&runs)
        .run_calls(v["run_id"].as_str().unwrap())
        .unwrap();
    assert_eq!(calls[0].tokens.reasoning, Some(600), "stored apart too");
    assert_eq!(calls[0].tokens.cached_in, None, "none reported");
    let samples = store(&runs)
        .run_samples(v["run_id"].as_str().unwrap())
        .unwrap();
    let thought = samples[0].turns[0].thinking.as_deref();
    assert_eq!(thought, Some("Weighing demyelination against glioma."));
}

/// `--temperature none --top-p none` sends neither, on every wire; `--extra-body` adds its fields to the OpenAI
/// body as written. Both are recorded with the parameters and hashed: the same command without them is another
/// run.
#[test]
fn parameters_can_be_left_unsent_and_extra_fields_passed_through() {
    let extra = r#"{"top_k": 20, "min_p": 0, "chat_template_kwargs": {"enable_thinking": false}}"#;
    for wire in [Wire::OpenAi, Wire::Anthropic, Wire::Gemini] {
        let server = server(Config::default());
        let model = model_spec(wire, &server);
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join("runs");
        let mut flags = vec!["--temperature", "none", "--top-p", "none", "--limit", "2"];
        if wire == Wire::OpenAi {
            flags.extend(["--extra-body", extra]);
        }
        flags.extend(["--no-score", "--json", "-q"]);
        let out = json_of(
            &nmb_command(&runs)
                .args(eval_args("sample", &model, &flags))
                .output()
                .unwrap(),
        );
        assert_eq!(out["summary"]["samples_errored"], 0, "{wire:?}: {out}");
        let asked = server.requests();
        assert!(!asked.is_empty());
        for r in &asked {
            assert_eq!(
                (r.params.temperature, r.params.top_p),
                (None, None),
                "{wire:?}"
            );
            if wire == Wire::OpenAi {
                assert_eq!(r.params.other["top_k"], 20);
                assert_eq!(
                    r.params.other["chat_template_kwargs"]["enable_thinking"],
                    false
                );
            }
        }
        let run_id = out["run_id"].as_str().unwrap();
        let manifest = store(&runs).run(run_id).unwrap().manifest;
        assert_eq!(
            manifest.params["unsent"],
            serde_json::json!(["temperature", "top_p"]),
            "{wire:?}"
        );
        if wire == Wire::OpenAi {
            assert_eq!(manifest.params["extra_body"]["top_k"], 20);
        }

        let plain = eval_args(
            "sample",
            &model,
            &["--limit", "2", "--no-score", "--json", "-q"],
        );
        let again = json_of(&nmb_command(&runs).args(plain).output().unwrap());
        assert_ne!(
            again["run_id"], out["run_id"],
            "{wire:?}: sending them is another configuration"
        );
        let sent = &server.requests()[asked.len()..];
        assert!(
            sent.iter().all(|r| r.params.temperature == Some(0.7)),
            "{wire:?}"
        );
    }
}

#[test]
fn extra_body_must_be_a_json_object() {
    let dir = tempfile::tempdir().unwrap();
    let args = eval_args(
        "sample",
        "openai:m@http://127.0.0.1:9/v1",
        &["--extra-body", "[1, 2]"],
    );
    let out = nmb_command(dir.path()).args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("expected a JSON object"),
        "{}",
        text(&out.stderr)
    );
}
