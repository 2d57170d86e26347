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
formats = ["html", "md"]
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
    assert_eq!(
        result["models_at_once"], 2,
        "without a cap the two models run at once, through one scheduler"
    );
    let asked = srv.request_count();
    assert!(asked > 0);
    let report = std::path::PathBuf::from(result["report"].as_str().unwrap());
    assert!(
        report.starts_with(tmp.path().join("out")),
        "the report folder is relative to the run file"
    );
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(
        tmp.path().join("out/report.md").exists() && !tmp.path().join("out/report.json").exists(),
        "only the formats the run file asks for"
    );
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
fn a_bad_run_file_names_the_key_and_line() {
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
    assert!(said.contains("limt") && said.contains("line 18"), "{said}");
    let capped = run_file(tmp.path(), "http://127.0.0.1:9", "max_cost = 1.0");
    let said = text_of(&capped);
    assert!(
        said.contains("max_cost") && said.contains("model-b"),
        "a cap needs every model's price: {said}"
    );
    let out = nmb(&runs, &["eval", "--config", "x.toml", "--suite", "sample"]);
    assert_eq!(out.status.code(), Some(2), "--config goes alone");
}

/// `--max-cost` (and the run file's `max_cost`): the study stops before its estimated spending could pass the cap, says where and why (and keeps
/// it in RUNS_DIR/studies/NAME.json); run again under the same cap it goes on, and once everything is stored a
/// cap of nothing still finishes, because stored answers cost nothing.
#[test]
fn a_budget_cap_stops_the_study_before_it_is_passed() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let srv = server(Config::default());
    // $1,000 per million tokens: one request (its prompt and up to 1,024 tokens out) may cost about $1.5.
    let priced = |cap: &str| {
        let file = run_file(tmp.path(), &srv.url(), cap);
        let text = std::fs::read_to_string(&file)
            .unwrap()
            .replace("price = [1.0, 4.0]", "price = [1000.0, 1000.0]")
            .replace("name = \"B\"", "name = \"B\"\nprice = [1000.0, 1000.0]");
        std::fs::write(&file, text).unwrap();
        file
    };
    let study = |file: &Path| {
        json_of(
            &nmb_command(&runs)
                .env("OPENAI_API_KEY", "k")
                .args(["eval", "--config"])
                .arg(file)
                .args(["--json", "-q"])
                .output()
                .unwrap(),
        )
    };
    let cap = 5.0;
    let file = priced("");
    let result = json_of(
        &nmb_command(&runs)
            .env("OPENAI_API_KEY", "k")
            .args(["eval", "--config"])
            .arg(&file)
            .args(["--json", "-q", "--max-cost", &cap.to_string()])
            .output()
            .unwrap(),
    );
    let stopped = &result["stopped"];
    assert_eq!(
        stopped["cell"], 1,
        "the first cell needs more than the cap allows: {result}"
    );
    assert!(
        stopped["reason"].as_str().unwrap().contains("cap"),
        "{stopped}"
    );
    let spent = result["spent"].as_f64().unwrap();
    assert!(spent > 0.0 && spent <= cap, "spent {spent} of {cap}");
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(runs.join("studies/two-axis.json")).unwrap())
            .unwrap();
    assert_eq!(
        state["stopped"], *stopped,
        "where and why it stopped is kept"
    );
    let asked = srv.request_count();

    let again = study(&priced(&format!("max_cost = {cap}")));
    assert!(again["spent"].as_f64().unwrap() <= cap, "{again}");
    assert!(
        srv.request_count() >= asked,
        "it goes on from where it stopped"
    );

    // Everything stored: no cap, then a cap of nothing asks nothing and still finishes.
    let all = study(&priced(""));
    assert!(all["stopped"].is_null(), "{all}");
    let asked = srv.request_count();
    let nothing = study(&priced("max_cost = 0.0"));
    assert!(
        nothing["stopped"].is_null(),
        "stored answers cost nothing: {nothing}"
    );
    assert_eq!(srv.request_count(), asked);
    assert_eq!(nothing["cells"].as_array().unwrap().len(), 4);
}

/// A model's `price` with cached-input and cache-write rates prices the study the way `--price
/// MODEL=IN,OUT,CACHED,WRITE` prices a report: the study report's cost split takes the cached input at its own
/// rate, and what a capped study says it spent is that split's total.
#[test]
fn a_run_files_cache_rates_price_the_study_report_and_its_spending() {
    use crate::report_cost::{server_reporting_cache_and_reasoning, CACHED};
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let srv = server_reporting_cache_and_reasoning();
    let file = tmp.path().join("study.toml");
    let text = format!(
        r#"[study]
name = "cached"
report = "out"
formats = ["json"]

[[models]]
spec = "openai:m@{}/v1"
price = [2.0, 10.0, 0.5, 2.5]

[[suites]]
spec = "sample"
samples = 1
limit = 2

[scoring]
bertscore = false
"#,
        srv.url()
    );
    std::fs::write(&file, text).unwrap();
    let result = json_of(
        &nmb_command(&runs)
            .env("OPENAI_API_KEY", "k")
            .args(["eval", "--config"])
            .arg(&file)
            .args(["--json", "-q", "--max-cost", "100"])
            .output()
            .unwrap(),
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("out/report.json")).unwrap())
            .unwrap();
    let cost = &report["runs"][0]["cost"];
    assert_eq!(cost["price"]["cached_input_per_mtok"], 0.5, "{cost}");
    assert_eq!(cost["price"]["cache_write_per_mtok"], 2.5, "{cost}");
    let calls = srv.request_count();
    assert!(calls > 0);
    assert_eq!(cost["tokens"]["cached_in"].as_u64(), Some(calls * CACHED));
    let cached = cost["split"]["cached_input"].as_f64().unwrap();
    assert!(
        (cached - (calls * CACHED) as f64 * 0.5 / 1e6).abs() < 1e-12,
        "{cost}"
    );
    let spent = result["spent"].as_f64().unwrap();
    let total = cost["split"]["total"].as_f64().unwrap();
    assert!(
        (spent - total).abs() < 1e-12,
        "spent {spent}, split {total}"
    );
}
