//! Runs the built `nmb` binary: the acceptance checks of the suite subcommands.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn nmb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nmb"))
        .args(args)
        .output()
        .expect("running nmb")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn shared() -> Option<PathBuf> {
    nmb_test_support::assets::shared_dir()
}

fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "nmb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

#[test]
fn site_example_stats_and_validate() {
    let Some(shared) = shared() else { return };
    let site = shared.join("formats/neural-medbench-site.example.json");
    let site = site.to_str().unwrap();
    let stats = json_of(&nmb(&["suite", "stats", site, "--json"]));
    assert_eq!(stats["cases"], 3);
    assert_eq!(stats["empty_cases"], 1);
    assert_eq!(stats["images"], 5);
    assert_eq!(stats["image_formats"], serde_json::json!({"png": 5}));
    for key in ["tasks", "by_family", "by_level"] {
        assert!(stats.get(key).is_some(), "missing {key}");
    }

    let out = nmb(&["suite", "validate", site]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let text = stdout(&out);
    let warnings: Vec<&str> = text.lines().filter(|l| l.starts_with("warning")).collect();
    assert_eq!(warnings.len(), 1, "{text}");
    assert!(warnings[0].contains("case_3"), "{text}");
    assert!(!text.lines().any(|l| l.starts_with("error")), "{text}");
}

#[test]
fn vqa_rad_counts_and_head_filter() {
    let Some(shared) = shared() else { return };
    let path = shared.join("data/vqa-rad/trainset.json");
    let path = path.to_str().unwrap();
    let all = json_of(&nmb(&["suite", "stats", path, "--json"]));
    assert_eq!(all["tasks"], 3064);
    assert_eq!(
        all["images"], all["image_formats"]["jpeg"],
        "every image resolves to a JPEG"
    );
    assert_eq!(all["errors"], 0);
    let head = json_of(&nmb(&[
        "suite",
        "stats",
        path,
        "--filter",
        "image_organ=HEAD",
        "--json",
    ]));
    assert_eq!(head["tasks"], 977);
    let out = nmb(&["suite", "validate", &format!("vqa-rad:{path}")]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn medqa_has_1273_tasks() {
    let Some(shared) = shared() else { return };
    let path = shared.join("data/medqa/medagentsbench/test.jsonl");
    let stats = json_of(&nmb(&["suite", "stats", path.to_str().unwrap(), "--json"]));
    assert_eq!(stats["tasks"], 1273);
    assert_eq!(stats["by_family"]["multiple_choice"], 1273);
}

#[test]
fn show_prints_images_without_bytes() {
    let Some(shared) = shared() else { return };
    let site = shared.join("formats/neural-medbench-site.example.json");
    let out = nmb(&["suite", "show", site.to_str().unwrap(), "case_1"]);
    let text = stdout(&out);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("Case case_1"), "{text}");
    assert!(text.contains("png 96x112"), "{text}");
    assert!(!text.contains("base64"), "{text}");
    let missing = nmb(&["suite", "show", site.to_str().unwrap(), "case_3"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("empty placeholder"));
}

#[test]
fn validate_reports_errors_with_exit_1_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("site.json");
    std::fs::write(&path, r#"[{"case_id": "case_1", "text": "t", "images": ["data:image/png;base64,!!"], "questions": []}"#).unwrap();
    let out = nmb(&["suite", "validate", path.to_str().unwrap()]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "truncated JSON is an error, not a panic"
    );
    assert!(stdout(&out).contains("not valid JSON"), "{}", stdout(&out));

    std::fs::write(&path, r#"[{"case_id": "case_1", "text": "t", "images": ["data:image/png;base64,!!"], "questions": []}]"#).unwrap();
    let out = nmb(&["suite", "validate", path.to_str().unwrap(), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false);
    assert_eq!(report["errors"], 2, "{report}");
    let fields: Vec<&str> = report["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["field"].as_str())
        .collect();
    assert!(
        fields.contains(&"images[0]") && fields.contains(&"questions"),
        "{report}"
    );
    let kinds: Vec<u64> = (report["by_kind"].as_array().unwrap().iter())
        .map(|k| k["count"].as_u64().unwrap())
        .collect();
    assert_eq!(
        kinds.iter().sum::<u64>(),
        2,
        "every problem counted by kind: {report}"
    );
    let out = nmb(&["suite", "validate", path.to_str().unwrap()]);
    let text = stdout(&out);
    let summary = text.lines().position(|l| l.contains("2 error(s)")).unwrap();
    let kind_lines: Vec<&str> = text.lines().skip(summary + 1).collect();
    assert_eq!(
        kind_lines.len(),
        kinds.len(),
        "one line per kind after the summary: {text}"
    );
    assert!(kind_lines.iter().all(|l| l.contains(" × ")), "{text}");
}

/// A site file whose second image is a PNG signature and IHDR chunk and nothing else (it passed as "0 error(s)"
/// when validation read only headers).
#[test]
fn validate_decodes_every_image_in_full() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    let png = nmb_test_support::images::png(16, 3);
    let cut = &png[..8 + 25];
    let url = |b: &[u8]| {
        let b64 = base64::engine::general_purpose::STANDARD.encode(b);
        format!("data:image/jpeg;base64,{b64}")
    };
    let site = serde_json::json!([{"case_id": "case_1", "text": "A 70-year-old man.",
        "images": [url(&png), url(cut)],
        "questions": [{"question_number": 1, "question_text": "Diagnosis?"}]}]);
    let path = dir.path().join("direct-diagnosis.json");
    std::fs::write(&path, site.to_string()).unwrap();
    let path = path.to_str().unwrap();

    let out = nmb(&["suite", "validate", path]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("error"))
        .unwrap_or_else(|| panic!("no error line: {text}"));
    for part in [
        "direct-diagnosis.json",
        "case case_1",
        "field images[1]",
        "cannot decode png image",
    ] {
        assert!(line.contains(part), "{part:?} not in {line:?}");
    }

    let out = nmb(&["suite", "validate", path, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["errors"], 1, "{report}");
    let problem = &report["problems"][0];
    assert!(problem["file"]
        .as_str()
        .unwrap()
        .ends_with("direct-diagnosis.json"));
    assert_eq!(problem["case_id"], "case_1");
    assert_eq!(problem["field"], "images[1]");
    assert!(problem["message"]
        .as_str()
        .unwrap()
        .contains("expected a complete image"));
}

#[test]
fn sample_suite_stats_run() {
    let out = nmb(&["suite", "stats", "sample", "--json"]);
    let stats = json_of(&out);
    assert_eq!(stats["id"], "sample");
}

#[test]
fn help_has_examples_for_every_subcommand() {
    for args in [
        &["--help"][..],
        &["suite", "--help"],
        &["suite", "validate", "--help"],
        &["suite", "stats", "--help"],
        &["suite", "show", "--help"],
    ] {
        let out = nmb(args);
        assert!(out.status.success(), "{args:?}");
        let text = stdout(&out);
        assert!(
            text.contains("Examples:"),
            "{args:?} has no examples:\n{text}"
        );
    }
    assert_eq!(
        nmb(&["suite", "stats"]).status.code(),
        Some(2),
        "missing SUITE is a usage error"
    );
}

/// The memory budgets are flags: an image within the default raster budget is refused under a smaller one,
/// and the message names the file, the case and the image.
#[test]
fn the_image_budget_is_a_flag() {
    use base64::Engine;
    let dir = tempfile::tempdir().unwrap();
    // 1200 x 1200 pixels: over 1 MiB decoded, far under the default 512 MiB.
    let png = nmb_test_support::images::png(1200, 5);
    let b64 = base64::engine::general_purpose::STANDARD.encode(&png);
    let site = serde_json::json!([{"case_id": "case_1", "text": "A 70-year-old man.",
        "images": [format!("data:image/png;base64,{b64}")],
        "questions": [{"question_number": 1, "question_text": "Diagnosis?"}]}]);
    let path = dir.path().join("direct-diagnosis.json");
    std::fs::write(&path, site.to_string()).unwrap();
    let path = path.to_str().unwrap();
    let out = nmb(&["suite", "validate", path]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = nmb(&["--max-image-mib", "1", "suite", "validate", path]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("case case_1") && text.contains("field images[0]"),
        "{text}"
    );
}
