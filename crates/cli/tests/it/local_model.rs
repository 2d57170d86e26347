//! The real model end to end: `nmb eval` runs the local SmolLM2-135M-Instruct (Q4_1 GGUF, installed by
//! scripts/assets.sh) on two sample tasks; the answers are stored, and the manifest records the dropped images.

use crate::common;

use nmb_test_support::assets::smollm2_gguf;
use std::path::PathBuf;

use common::*;
use nmb_store::SampleStatus;

fn smollm2() -> Option<PathBuf> {
    smollm2_gguf()
}

#[test]
fn smollm2_answers_two_sample_tasks() {
    let Some(path) = smollm2() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let model = format!("local:{}", path.display());
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
        "--max-tokens",
        "24",
        "--seed",
        "7",
        "--json",
        "-q",
    ];
    let result = json_of(&nmb(dir.path(), &args));
    let summary = &result["summary"];
    assert_eq!(summary["samples_total"], 2, "{result}");
    assert_eq!(summary["samples_ok"], 2, "{result}");
    assert_eq!(summary["requests_sent"], 2);
    assert!(summary["tokens_in"].as_u64().unwrap() > 100);
    assert!(summary["tokens_out"].as_u64().unwrap() > 0);
    let run_id = result["run_id"].as_str().unwrap().to_string();

    let store = store(dir.path());
    for s in store.run_samples(&run_id).expect("samples") {
        assert_eq!(s.status, SampleStatus::Ok);
        let text = s.final_text.expect("an answer");
        assert!(!text.trim().is_empty(), "{}: empty answer", s.task_id);
        let raw = store
            .raw_response(s.turns[0].call.call_id)
            .unwrap()
            .unwrap();
        let raw: serde_json::Value = serde_json::from_str(&raw).unwrap();
        assert_eq!(raw["choices"][0]["text"], text.as_str());
        assert_eq!(
            raw["images_dropped"], 3,
            "the sample tasks have 3 images each"
        );
    }
    drop(store);

    let show = json_of(&nmb(dir.path(), &["runs", "show", &run_id, "--json"]));
    let dropped = show["manifest"]["dropped_inputs"].as_array().unwrap();
    assert!(
        dropped
            .iter()
            .any(|d| d.as_str().unwrap().starts_with("images")),
        "{show}"
    );
    let id = show["manifest"]["model_identity"]["local_model_id"]
        .as_str()
        .unwrap();
    assert!(id.starts_with("SmolLM2-135M-Instruct.Q4_1.gguf@"), "{id}");

    // Resuming the finished run generates nothing.
    let mut again = args.to_vec();
    again.extend(["--resume", &run_id]);
    let result = json_of(&nmb(dir.path(), &again));
    assert_eq!(result["invocation"]["requests"], 0);
    assert_eq!(result["summary"]["requests_sent"], 2);

    // Reports name the run by the model file's stem, never by its absolute path, outside the manifest.
    let stem = "SmolLM2-135M-Instruct.Q4_1";
    let report = |run: &str, out: &str| {
        let out = dir.path().join(out);
        let o = nmb(
            dir.path(),
            &[
                "report",
                run,
                "--out",
                out.to_str().unwrap(),
                "--leaderboard",
            ],
        );
        assert!(o.status.success(), "{}", text(&o.stderr));
        out
    };
    let out = report(&run_id, "report-default");
    let folder = path.parent().unwrap().display().to_string();
    for file in ["report.md", "data.js"] {
        let content = std::fs::read_to_string(out.join(file)).unwrap();
        assert!(content.contains(stem), "{file} shows {stem}");
        let outside_manifest = content.split("## Runs").next().unwrap();
        assert!(
            !outside_manifest.contains(&folder),
            "{file} shows the model's folder"
        );
    }
    // The CSV's `model` column is the name; `model_spec` keeps the spec for joins.
    let csv = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    let column = |name: &str, line: &str| {
        let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let i = header.iter().position(|h| *h == name).unwrap();
        line.split(',').nth(i).unwrap().to_string()
    };
    let row = csv.lines().nth(1).unwrap();
    assert_eq!(column("model", row), stem);
    assert_eq!(column("model_spec", row), model);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let before_manifest = html.split("id=\"manifest\"").next().unwrap();
    assert!(before_manifest.contains(stem) && !before_manifest.contains(&folder));

    // --name renames the run everywhere; the configuration (and so the stored answers) stay the same.
    let mut named = args.to_vec();
    named.extend(["--name", "Smol <Q4>"]);
    let renamed = json_of(&nmb(dir.path(), &named));
    assert_eq!(
        renamed["invocation"]["requests"], 0,
        "answers come from the store"
    );
    let renamed_id = renamed["run_id"].as_str().unwrap();
    let out = report(renamed_id, "report-named");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("| Smol <Q4> |"), "{md}");
    let csv = std::fs::read_to_string(out.join("samples.csv")).unwrap();
    assert!(csv.lines().nth(1).unwrap().contains(",Smol <Q4>,"), "{csv}");
    // The site writes names into its page as HTML: data.js carries them escaped, leaderboard.json as they are.
    let js = std::fs::read_to_string(out.join("data.js")).unwrap();
    assert!(js.contains("\"Smol &lt;Q4&gt;\""), "{js}");
    let json = std::fs::read_to_string(out.join("leaderboard.json")).unwrap();
    assert!(json.contains("\"Smol <Q4>\""), "{json}");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("Smol &lt;Q4&gt;"));
    let list = text(&nmb(dir.path(), &["runs", "list"]).stdout);
    assert!(list.contains("Smol <Q4>") && list.contains(stem), "{list}");
}

/// JSON answers cut at the token limit: the engine's finish reason `length` is stored with each, and the score
/// counts the unparseable ones that stopped there apart, in the stored report and in `nmb score`'s summary.
#[test]
fn json_answers_cut_at_the_token_limit_are_counted_apart() {
    let Some(path) = smollm2() else { return };
    let dir = tempfile::tempdir().expect("temp dir");
    let model = format!("local:{}", path.display());
    let args = [
        "eval",
        "--suite",
        "sample",
        "--model",
        &model,
        "--samples",
        "1",
        "--limit",
        "3",
        "--max-tokens",
        "6",
        "--seed",
        "7",
        "--no-bertscore",
        "--json",
        "-q",
    ];
    let result = json_of(&nmb(dir.path(), &args));
    let run_id = result["run_id"].as_str().unwrap().to_string();
    let store = store(dir.path());
    let mut cut = 0;
    for s in store.run_samples(&run_id).expect("samples") {
        let finish = s.turns.last().and_then(|t| t.finish_reason.clone());
        assert!(finish.is_some(), "{}: no finish reason stored", s.task_id);
        cut += usize::from(finish.as_deref() == Some("length"));
    }
    drop(store);
    assert!(cut > 0, "six tokens cut no answer: {result}");

    let scored = json_of(&nmb(
        dir.path(),
        &["score", &run_id, "--no-bertscore", "--json"],
    ));
    let overall = &scored["overall"];
    let failed = overall["parse_failed"].as_u64().unwrap();
    assert!(failed > 0, "{overall}");
    assert_eq!(overall["parse_failed_at_limit"], failed, "{overall}");
    assert!(failed <= cut as u64, "{overall}");
    let summary = nmb(dir.path(), &["score", &run_id, "--no-bertscore"]);
    let line = format!("{failed} unparseable ({failed} cut at the token limit)");
    assert!(
        String::from_utf8_lossy(&summary.stdout).contains(&line),
        "{line}"
    );
}

/// `--mmproj`: a `local:` model with a vision projector sees the sample task's images (none dropped, each
/// image's tokens counted in its prompt) and records the projector in its identity; a model without it keeps the
/// identity it had; `--mmproj` with an API model is refused before anything runs.
#[test]
fn a_local_model_with_a_projector_sees_the_images() {
    use nmb_test_support::gguf::Gguf;
    let dir = tempfile::tempdir().expect("temp dir");
    let (gguf, mmproj) = (dir.path().join("tiny.gguf"), dir.path().join("mmproj.gguf"));
    Gguf::tiny().write(&gguf);
    Gguf::tiny_projector().write(&mmproj);
    let model = format!("local:{}", gguf.display());
    let mmproj = mmproj.display().to_string();
    let eval = |extra: &[&str]| {
        let mut args = vec![
            "eval",
            "--suite",
            "sample",
            "--model",
            &model,
            "--samples",
            "1",
            "--limit",
            "1",
            "--max-tokens",
            "4",
            "--seed",
            "7",
            "--json",
            "-q",
        ];
        args.extend(extra);
        json_of(&nmb(dir.path(), &args))
    };
    let seeing = eval(&["--mmproj", &mmproj]);
    assert_eq!(seeing["summary"]["samples_ok"], 1, "{seeing}");
    let blind = eval(&[]);
    assert_eq!(blind["summary"]["samples_ok"], 1, "{blind}");
    let (run, blind_run) = (
        seeing["run_id"].as_str().unwrap().to_string(),
        blind["run_id"].as_str().unwrap().to_string(),
    );
    assert_ne!(run, blind_run, "a projector makes another run");
    let store = store(dir.path());
    let raw = |run_id: &str| -> serde_json::Value {
        let s = store.run_samples(run_id).expect("samples").remove(0);
        let raw = store
            .raw_response(s.turns[0].call.call_id)
            .unwrap()
            .unwrap();
        serde_json::from_str(&raw).unwrap()
    };
    let (seen, dropped) = (raw(&run), raw(&blind_run));
    assert_eq!(seen["images_dropped"], 0, "{seen}");
    assert_eq!(dropped["images_dropped"], 3, "{dropped}");
    drop(store);
    let show = |run_id: &str| json_of(&nmb(dir.path(), &["runs", "show", run_id, "--json"]));
    let (shown, blind_shown) = (show(&run), show(&blind_run));
    let identity = &shown["manifest"]["model_identity"];
    assert!(
        identity["mmproj_id"]
            .as_str()
            .unwrap()
            .starts_with("mmproj.gguf@"),
        "{identity}"
    );
    assert_eq!(identity["mmproj_type"], "gemma3");
    assert!(
        blind_shown["manifest"]["model_identity"]
            .get("mmproj_id")
            .is_none(),
        "{blind_shown}"
    );
    let dropped_inputs = shown["manifest"]["dropped_inputs"].to_string();
    assert!(!dropped_inputs.contains("images"), "{dropped_inputs}");

    let api = nmb(
        dir.path(),
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            "openai:m@http://127.0.0.1:9/v1",
            "--mmproj",
            &mmproj,
        ],
    );
    let said = text(&api.stderr);
    assert!(!api.status.success(), "{said}");
    assert!(said.contains("--mmproj is for `local:` models"), "{said}");
}
