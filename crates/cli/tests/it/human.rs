//! Human baselines end to end: `nmb import` records a clinician's answers as the run of `human:NAME`, which is
//! scored, reported (next to a model's run, on the two-axis plot) and compared like any run; a file with errors
//! stores nothing and names every problem; importing again resumes the same run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nmb_fake_server::{Config, Wire};
use nmb_suite::{Family, Task};
use serde_json::{json, Value};

use crate::common::*;

const WRONG: &str = "Migraine without aura";

/// What the answers file says of each task: answered rightly, wrongly, or not at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meant {
    Right,
    Wrong,
    Missing,
}

/// One line per turn of `task` (ranked differentials for differential tasks), right or wrong by the reference.
fn lines_for(task: &Task, right: bool) -> Vec<Value> {
    let r = task.reference.clone().unwrap_or_default();
    let dx = r.diagnosis.clone().unwrap_or_default();
    let last = task.turns.len();
    (0..=last)
        .map(|turn| {
            let mut line = json!({"task_id": task.id, "turn": turn});
            let answer = match (task.family, turn == last, right) {
                (Family::Differential, true, true) => {
                    let mut list = vec![dx.clone()];
                    list.extend(r.differential.iter().filter(|d| **d != dx).cloned());
                    line["differential"] = json!(list);
                    return line;
                }
                (Family::Differential, true, false) => {
                    line["differential"] = json!([WRONG, "Tension-type headache"]);
                    return line;
                }
                (Family::Lesion, _, true) => format!(
                    "Lesion type: {}\nLocation: {}",
                    r.lesion_type.clone().unwrap_or_default(),
                    r.lesion_location.clone().unwrap_or_default()
                ),
                (Family::Lesion, _, false) => {
                    "Lesion type: no abnormality\nLocation: none".to_string()
                }
                (_, _, true) => format!(
                    "Final diagnosis: {dx}\nRationale: {}",
                    r.rationale.clone().unwrap_or_default()
                ),
                (_, _, false) => format!("Final diagnosis: {WRONG}\nRationale: headache."),
            };
            line["answer"] = json!(answer);
            line
        })
        .collect()
}

/// Answers to the sample suite: right for even tasks, wrong for odd ones, none for the first lesion task.
fn sample_answers(dir: &Path) -> (PathBuf, BTreeMap<String, Meant>) {
    let suite = nmb_suite::sample::build();
    let missing = suite
        .tasks()
        .find(|(_, t)| t.family == Family::Lesion)
        .map(|(_, t)| t.id.clone())
        .unwrap();
    let mut meant = BTreeMap::new();
    let mut lines = Vec::new();
    for (i, (_, task)) in suite.tasks().enumerate() {
        if task.id == missing {
            meant.insert(task.id.clone(), Meant::Missing);
            continue;
        }
        let right = i % 2 == 0;
        meant.insert(
            task.id.clone(),
            if right { Meant::Right } else { Meant::Wrong },
        );
        lines.extend(lines_for(task, right));
    }
    let path = dir.join("lee.jsonl");
    let text: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&path, text.join("\n") + "\n").unwrap();
    (path, meant)
}

fn import(runs: &Path, file: &Path, suite: &str, extra: &[&str]) -> Value {
    let mut args = vec![
        "import",
        file.to_str().unwrap(),
        "--suite",
        suite,
        "--as",
        "human:lee",
        "--no-bertscore",
        "--json",
        "-q",
    ];
    args.extend(extra);
    json_of(&nmb(runs, &args))
}

#[test]
fn a_human_baseline_is_scored_reported_and_compared_like_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let (file, meant) = sample_answers(dir.path());
    let out = import(&runs, &file, "sample", &[]);
    let run_id = out["run_id"].as_str().unwrap().to_string();
    let missing = meant.values().filter(|m| **m == Meant::Missing).count() as u64;
    assert_eq!(out["summary"]["samples_errored"], missing, "{out}");
    assert_eq!(out["summary"]["errors_by_class"]["no_answer"], missing);
    assert_eq!(
        out["summary"]["samples_ok"],
        meant.len() as u64 - missing,
        "{out}"
    );
    assert_eq!(out["summary"]["tokens_in"], 0);

    // The run records the model human:lee, names it as a person, and holds the answers as written.
    let store = store(&runs);
    let run = store.run(&run_id).unwrap();
    assert_eq!(run.manifest.model, "human:lee");
    assert_eq!(run.manifest.display_name(), "lee (human)");
    assert_eq!(run.manifest.samples, 1);
    let written = last_turns(&file);
    for s in store.run_samples(&run_id).unwrap() {
        match meant[&s.task_id] {
            Meant::Missing => {
                assert_eq!(s.status.as_str(), "errored");
                assert_eq!(s.error_class.as_deref(), Some("no_answer"));
            }
            _ => assert_eq!(
                s.final_text.as_ref(),
                Some(&written[&s.task_id]),
                "{}",
                s.task_id
            ),
        }
    }

    // Scored: right differentials count right, wrong ones never, the missing answer is left out.
    let scores = json_of(&nmb(&runs, &["score", &run_id, "--no-bertscore", "--json"]));
    assert_eq!(scores["overall"]["errored"], missing);
    let mut right_seen = 0;
    for s in scores["samples"].as_array().unwrap() {
        let task = s["task_id"].as_str().unwrap();
        match (meant[task], s["family"].as_str().unwrap()) {
            (Meant::Missing, _) => {
                assert_eq!(s["error_class"], "no_answer");
                assert!(s["correct"].is_null());
            }
            (Meant::Right, "differential") => {
                assert_eq!(s["correct"], true, "{task}: {s}");
                right_seen += 1;
            }
            (Meant::Wrong, _) => assert_ne!(s["correct"], true, "{task}: {s}"),
            _ => {}
        }
    }
    assert!(right_seen >= 3, "{right_seen} right differentials");

    // Next to a model's run, on both axes: the sample suite (depth) and a multiple-choice file (breadth).
    let fake = server(Config::default());
    let model = model_spec(Wire::OpenAi, &fake);
    let mcq = dir.path().join("medqa.jsonl");
    std::fs::write(&mcq, MCQ).unwrap();
    let mcq_suite = format!("mcq:{}", mcq.display());
    let mcq_answers = dir.path().join("lee-mcq.jsonl");
    std::fs::write(&mcq_answers, mcq_lines(&mcq_suite)).unwrap();
    let human_mcq = import(&runs, &mcq_answers, &mcq_suite, &[]);
    let mut model_runs = Vec::new();
    for suite in ["sample", mcq_suite.as_str()] {
        let args = [
            "eval",
            "--suite",
            suite,
            "--model",
            &model,
            "--samples",
            "1",
            "--no-bertscore",
            "--json",
            "-q",
        ];
        let out = json_of(&nmb(&runs, &args));
        model_runs.push(out["run_id"].as_str().unwrap().to_string());
    }
    let report_dir = dir.path().join("report");
    let human_mcq_id = human_mcq["run_id"].as_str().unwrap();
    let out = nmb(
        &runs,
        &[
            "report",
            &run_id,
            human_mcq_id,
            &model_runs[0],
            &model_runs[1],
            "--out",
            report_dir.to_str().unwrap(),
            "--format",
            "html,json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value =
        serde_json::from_slice(&std::fs::read(report_dir.join("report.json")).unwrap()).unwrap();
    let points = report["analysis"]["two_axis"]["points"].as_array().unwrap();
    let human = points
        .iter()
        .find(|p| p["model"] == "human:lee")
        .unwrap_or_else(|| panic!("no human point in {points:?}"));
    assert_eq!(human["name"], "lee (human)");
    assert_eq!(points.len(), 2, "{points:?}");
    let html = std::fs::read_to_string(report_dir.join("report.html")).unwrap();
    assert!(html.contains("lee (human)"));

    let out = nmb(&runs, &["compare", &run_id, &model_runs[0]]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("lee (human)"),
        "{}",
        text(&out.stdout)
    );
}

/// Each task's last-turn answer text as the run should hold it.
fn last_turns(file: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in std::fs::read_to_string(file).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let text = match v["differential"].as_array() {
            Some(list) => {
                let list: Vec<String> = list.iter().map(|d| d.as_str().unwrap().into()).collect();
                nmb_serve::differential_answer(&list)
            }
            None => v["answer"].as_str().unwrap().trim().to_string(),
        };
        out.insert(v["task_id"].as_str().unwrap().to_string(), text);
    }
    out
}

const MCQ: &str = r#"{"realidx": "q1", "question": "Which nerve?", "options": {"A": "Facial", "B": "Vagus"}, "answer_idx": "A"}
{"realidx": "q2", "question": "Which lobe?", "options": {"A": "Frontal", "B": "Occipital"}, "answer_idx": "B"}
{"realidx": "q3", "question": "Which artery?", "options": {"A": "MCA", "B": "PCA"}, "answer_idx": "A"}
"#;

/// The person's multiple-choice answers: right, right, wrong.
fn mcq_lines(suite: &str) -> String {
    let loaded = nmb_suite::load(suite, &Default::default()).unwrap();
    let picks = ["Answer: A", "Answer: B", "Answer: B"];
    loaded
        .suite
        .tasks()
        .zip(picks)
        .map(|((_, t), a)| json!({"task_id": t.id, "answer": a}).to_string() + "\n")
        .collect()
}

#[test]
fn a_bad_file_names_every_problem_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let suite = nmb_suite::sample::build();
    let first = |family: Family| {
        let (_, t) = suite.tasks().find(|(_, t)| t.family == family).unwrap();
        t.id.clone()
    };
    let (dx, lesion) = (first(Family::Differential), first(Family::Lesion));
    let file = dir.path().join("bad.jsonl");
    let lines = [
        json!({"task_id": dx, "answer": "Final diagnosis: stroke"}).to_string(),
        json!({"task_id": "no/such-task", "answer": "x"}).to_string(),
        json!({"task_id": lesion, "answer": " "}).to_string(),
        json!({"task_id": lesion, "answer": "a", "differential": ["b"]}).to_string(),
        json!({"task_id": lesion}).to_string(),
        json!({"task_id": dx, "differential": ["stroke"]}).to_string(),
        "{\"task_id\": ".to_string(),
        json!({"task_id": lesion, "answer": "x", "turn": 2}).to_string(),
        json!({"task_id": lesion, "answer": "a small spot"}).to_string(),
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let out = nmb(
        &runs,
        &[
            "import",
            file.to_str().unwrap(),
            "--suite",
            "sample",
            "--as",
            "human:lee",
        ],
    );
    assert!(!out.status.success());
    let err = text(&out.stderr);
    let f = file.display().to_string();
    for want in [
        format!("7 problem(s) in {f}; nothing was stored"),
        format!("{f}:2: task_id: no task \"no/such-task\" in suite sample"),
        format!("{f}:3: answer: empty"),
        format!("{f}:4: answer: give either answer or differential, not both"),
        format!("{f}:5: answer: missing"),
        format!("{f}:6: task_id: task {dx:?} turn 0 is answered twice (first on line 1)"),
        format!("{f}:7: not JSON"),
        format!("{f}:8: turn: task {lesion:?} has 1 turn(s)"),
        // The scorer could not read it: a warning, not a problem.
        format!("warning: {f}:9: answer: task {lesion:?} (lesion): "),
        "; it would be scored as parse_failed (wrong)".to_string(),
    ] {
        assert!(err.contains(&want), "{want:?} not in:\n{err}");
    }
    // Nothing stored: not even the store was made.
    assert!(!runs.join(nmb_store::DB_FILE_NAME).exists());
}

#[test]
fn importing_again_resumes_the_run_and_fills_its_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let suite = nmb_suite::sample::build();
    let tasks: Vec<&Task> = suite
        .tasks()
        .map(|(_, t)| t)
        .filter(|t| t.family == Family::Differential && t.turns.is_empty())
        .take(2)
        .collect();
    let file = dir.path().join("lee.jsonl");
    let write = |lines: &[Value]| {
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(&file, text.join("\n")).unwrap();
    };
    let one = lines_for(tasks[0], true);
    write(&one);
    let first = import(&runs, &file, "sample", &["--no-score"]);
    let run_id = first["run_id"].as_str().unwrap().to_string();
    assert_eq!(first["summary"]["samples_ok"], 1);
    let stored = |runs: &Path| {
        let suite_hash = nmb_suite::suite_hash(&suite).unwrap();
        store(runs).human_answers("lee", &suite_hash).unwrap()
    };
    let before = stored(&runs);
    assert_eq!(before.len(), 1);
    assert_eq!(before[0].source, "lee.jsonl");

    // The same file again: no answer appended again, the same run resumed.
    let again = import(&runs, &file, "sample", &["--no-score"]);
    assert_eq!(again["run_id"], run_id.as_str());
    assert_eq!(again["resumed"], true);
    assert_eq!(stored(&runs), before);

    // An answer to a task that had none: the same run, its no_answer sample answered now.
    let mut two = one.clone();
    two.extend(lines_for(tasks[1], false));
    write(&two);
    let filled = import(&runs, &file, "sample", &["--no-score"]);
    assert_eq!(filled["run_id"], run_id.as_str());
    assert_eq!(filled["summary"]["samples_ok"], 2);
    assert_eq!(stored(&runs).len(), 2);

    // A changed answer: a new run, never the old answer from the response cache.
    let changed = [lines_for(tasks[0], false), lines_for(tasks[1], false)].concat();
    write(&changed);
    let new = import(&runs, &file, "sample", &["--no-score"]);
    let new_id = new["run_id"].as_str().unwrap();
    assert_ne!(new_id, run_id);
    let samples = store(&runs).run_samples(new_id).unwrap();
    let s = samples.iter().find(|s| s.task_id == tasks[0].id).unwrap();
    assert!(s.final_text.as_deref().unwrap().contains(WRONG), "{s:?}");
    assert_eq!(store(&runs).list_runs().unwrap().len(), 2);
}
