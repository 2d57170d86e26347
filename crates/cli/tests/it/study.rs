//! `nmb eval --config study.toml`: a run file with two loopback models and a depth and a breadth suite runs as
//! one study: every cell is an evaluation, runs are tagged and grouped, one report holds the two-axis view, a
//! second invocation asks nothing, a dry run prints the matrix and its cost, and a bad run file names the key
//! and line.

use std::path::Path;

use crate::common::*;
use nmb_fake_server::Config;

const MCQ: &str = r#"{"realidx": "q1", "question": "Which nerve?", "options": {"A": "Facial", "B": "Vagus"}, "answer_idx": "A"}
{"realidx": "q2", "question": "Which lobe?", "options": {"A": "Frontal", "B": "Occipital"}, "answer_idx": "B"}
{"realidx": "q3", "question": "Which artery?", "options": {"A": "MCA", "B": "PCA"}, "answer_idx": "A"}
"#;

fn run_file(dir: &Path, url: &str, extra: &str) -> std::path::PathBuf {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/mcq.jsonl"), MCQ).unwrap();
    let text = format!(
        r#"[study]
name = "two-axis"
report = "out"
{extra}
[[models]]
spec = "openai:model-a@{url}/v1"
name = "A"
price = [1.0, 4.0]

[[models]]
spec = "openai:model-b@{url}/v1"
name = "B"

[[suites]]
spec = "sample"
samples = 1
limit = 4

[[suites]]
spec = "mcq:data/mcq.jsonl"
samples = 1

[scoring]
bertscore = false
"#
    );
    let path = dir.join("study.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_run_file_runs_the_whole_matrix_once_and_reports_it() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let srv = server(Config::default());
    let file = run_file(tmp.path(), &srv.url(), "");
    let study = |extra: &[&str]| {
        nmb_command(&runs)
            .env("OPENAI_API_KEY", "k")
            .args(["eval", "--config"])
            .arg(&file)
            .args(extra)
            .output()
            .unwrap()
    };

    let dry = study(&["--dry-run"]);
    let shown = text(&dry.stdout);
    assert!(dry.status.success(), "{shown}{}", text(&dry.stderr));
    assert_eq!(srv.request_count(), 0, "a dry run sends nothing");
    assert!(
        shown.contains("4 cell(s)") && shown.contains("no price"),
        "{shown}"
    );
    assert!(
        shown
            .lines()
            .any(|l| l.trim_start().starts_with("total:") && l.contains('$')),
        "{shown}"
    );

    let result = json_of(&study(&["--json", "-q"]));
    let cells = result["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4, "{result}");
    let asked = srv.request_count();
    assert!(asked > 0);
    let report = std::path::PathBuf::from(result["report"].as_str().unwrap());
    assert!(
        report.starts_with(tmp.path().join("out")),
        "the report folder is relative to the run file"
    );
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(
        html.contains("id=\"two-axis\""),
        "breadth and depth runs of both models give the two-axis view"
    );
    for c in cells {
        let run = store(&runs).run(c["run_id"].as_str().unwrap()).unwrap();
        assert_eq!(run.manifest.study.as_deref(), Some("two-axis"));
    }
    let listed = text(&nmb(&runs, &["runs", "list"]).stdout);
    assert!(
        listed.contains("study two-axis") || !listed.contains("not in a study"),
        "{listed}"
    );

    let again = json_of(&study(&["--json", "-q"]));
    assert_eq!(again["cells"].as_array().unwrap().len(), 4);
    assert_eq!(
        srv.request_count(),
        asked,
        "the second invocation asks nothing twice"
    );
}

#[test]
fn a_bad_run_file_names_the_key_and_line_and_a_cap_is_not_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let file = run_file(tmp.path(), "http://127.0.0.1:9", "");
    let text_of = |path: &Path| {
        let out = nmb(
            &runs,
            &["eval", "--config", path.to_str().unwrap(), "--dry-run"],
        );
        assert!(!out.status.success());
        text(&out.stdout) + &text(&out.stderr)
    };
    let typo = std::fs::read_to_string(&file)
        .unwrap()
        .replace("limit = 4", "limt = 4");
    std::fs::write(&file, typo).unwrap();
    let said = text_of(&file);
    assert!(said.contains("limt") && said.contains("line 17"), "{said}");
    let capped = run_file(tmp.path(), "http://127.0.0.1:9", "max_cost = 1.0");
    let said = text_of(&capped);
    assert!(said.contains("max_cost"), "{said}");
    let out = nmb(&runs, &["eval", "--config", "x.toml", "--suite", "sample"]);
    assert_eq!(out.status.code(), Some(2), "--config goes alone");
}
