//! `nmb report` on a store written through the store's own API: the files it writes, their content, the
//! leaderboard export, and clear errors for a missing store, an unknown run and an unknown format.

use std::path::Path;
use std::process::{Command, Output};

use nmb_store::{CallRecord, ChoiceRecord, ImageInput, Manifest, Store};
use sha2::{Digest, Sha256};

fn nmb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nmb"))
        .args(args)
        .output()
        .expect("nmb runs")
}

fn png() -> Vec<u8> {
    nmb_test_support::images::gray_png(64, 48, 0)
}

/// One run, one task, two samples: one answered (with markup in it), one errored.
fn store_with_run(dir: &Path) -> String {
    let store = Store::open_dir(dir).unwrap();
    let manifest = Manifest {
        nmb_version: "0.1.0".into(),
        suite_id: "tiny".into(),
        suite_hash: "suitehash".into(),
        template_id: "per-family".into(),
        template_hash: "templatehash".into(),
        model: "openai:test-model@http://127.0.0.1:9".into(),
        params: serde_json::json!({"temperature": 0.7}),
        input_mode: nmb_store::InputMode::Full,
        samples: 2,
        dropped_inputs: vec!["images (text-only model: image parts are not sent)".into()],
        ..Manifest::default()
    };
    let run = store.create_run("cfg", &manifest).unwrap();
    store
        .plan_samples(&run.run_id, &[("case_1/dx", 2)])
        .unwrap();
    let bytes = png();
    let sha = hex::encode(Sha256::digest(&bytes));
    let body = serde_json::json!({"messages": [{"role": "user", "parts": [
        {"text": "What is the diagnosis?"}, {"image": sha, "mime": "image/png"}]}]});
    let image = ImageInput {
        sha256: &sha,
        mime: "image/png",
        bytes: &bytes,
    };
    store.put_prompt("p1", &body.to_string(), &[image]).unwrap();
    let call = |error, text| {
        let rec = CallRecord {
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
            raw: None,
            tokens_in: Some(1000),
            tokens_out: Some(200),
            latency_ms: Some(40),
            started_ms: 0,
            finished_ms: 40,
            batch_id: None,
        };
        (rec, text)
    };
    let (ok, text) = call(None, Some("Multiple sclerosis <b>bold</b>"));
    let choice = ChoiceRecord {
        thinking: None,
        finish_reason: None,
        sample_index: 0,
        choice_index: 0,
        text,
        error: None,
        final_turn: true,
    };
    store.record_call(&ok, &[choice]).unwrap();
    let err = nmb_store::ErrorInfo {
        class: "timeout",
        message: "no answer in 300 s",
    };
    let (bad, _) = call(Some(err), None);
    let choice = ChoiceRecord {
        thinking: None,
        finish_reason: None,
        sample_index: 1,
        choice_index: 0,
        text: None,
        error: None,
        final_turn: true,
    };
    store.record_call(&bad, &[choice]).unwrap();
    run.run_id
}

#[test]
fn writes_every_format_and_prints_the_paths() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let run_id = store_with_run(&runs);
    let out = dir.path().join("out");
    let o = nmb(&[
        "report",
        &run_id,
        "--runs-dir",
        runs.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--leaderboard",
        "--price",
        "test-model=2.5,10",
        "--resamples",
        "200",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let printed = String::from_utf8(o.stdout).unwrap();
    for name in [
        "report.html",
        "report.md",
        "samples.csv",
        "aggregate.csv",
        "report.json",
        "leaderboard.json",
        "data.js",
    ] {
        let p = out.join(name);
        assert!(p.is_file(), "{name} written");
        assert!(printed.contains(&p.display().to_string()), "{name} printed");
    }
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("has no scores"),
        "unscored runs are said to be"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(
        html.contains("Multiple sclerosis &lt;b&gt;bold&lt;/b&gt;"),
        "answers escaped"
    );
    assert!(
        html.contains("data:image/png;base64,"),
        "thumbnail embedded"
    );
    assert!(html.contains("timeout"), "error class shown");
    assert!(
        html.contains("images (text-only model"),
        "dropped inputs shown"
    );
    assert!(
        html.contains("$0.0090"),
        "cost: 2,000 in at $2.5/M + 400 out at $10/M"
    );
    let csv = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 2, "header and one row per sample");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["runs"][0]["run_id"], run_id.as_str());
    assert_eq!(json["runs"][0]["summary"]["samples_errored"], 1);
}

#[test]
fn clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let o = nmb(&[
        "report",
        "r1",
        "--runs-dir",
        dir.path().join("none").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no run store at"));

    let runs = dir.path().join("runs");
    store_with_run(&runs);
    let o = nmb(&[
        "report",
        "r-nope",
        "--runs-dir",
        runs.to_str().unwrap(),
        "--out",
        dir.path().join("o").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("r-nope"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    let o = nmb(&[
        "report",
        "r1",
        "--runs-dir",
        runs.to_str().unwrap(),
        "--format",
        "pdf",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown report format \"pdf\""));

    let o = nmb(&[
        "report",
        "r1",
        "--runs-dir",
        runs.to_str().unwrap(),
        "--price",
        "gpt=abc",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected IN,OUT"));
}
