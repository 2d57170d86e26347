//! Hostile text meant for a terminal: control characters and floods in ids, answers and file contents.
//!
//! Every case here forbids the raw control characters it plants (ESC, CSI, BEL, C1's CSI, a bidirectional
//! override): what nmb prints must show them escaped. Cases that flood (a megabyte id, an 800 KB TOML line)
//! check that what was printed stays short.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::json;

use super::{check_all, Case};
use crate::common::measured::run;
use crate::common::{native_suite, nmb_command, TestTask};

/// What a terminal would act on: clear the screen and home the cursor, set the title, C1's CSI, a
/// right-to-left override, a carriage return that overwrites the line.
const ANSI: &str = "\u{1b}[2J\u{1b}[H\u{1b}]0;pwned\u{7}\u{9b}31m\u{202e}\rerror: all good";
const RAW: [&str; 5] = ["\u{1b}", "\u{7}", "\u{9b}", "\u{202e}", "\r"];

/// Every case of this kind, written under `dir`.
pub fn cases(dir: &Path) -> Vec<Case> {
    vec![
        answer_key_case_id_validated(dir),
        answer_key_case_id_in_an_error(dir),
        notes_shown(dir),
        file_name_with_escapes(dir),
        csv_cell_quoted_in_a_problem(dir),
        import_task_id_of_a_megabyte(dir),
        run_file_toml_line_of_800_kb(dir),
        backtrace_asked_for(dir),
    ]
}

fn inert(case: Case) -> Case {
    RAW.iter().fold(case, |case, raw| case.forbid(raw))
}

fn runs(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}-runs"))
}

fn answer_key(dir: &Path) -> PathBuf {
    let path = dir.join("ansi-key.jsonl");
    let row = json!({"case_id": ANSI, "diagnosis": "Stroke"});
    std::fs::write(&path, format!("{row}\n")).unwrap();
    path
}

fn answer_key_case_id_validated(dir: &Path) -> Case {
    let runs = runs(dir, "key-validate");
    let mut c = nmb_command(&runs);
    c.args(["suite", "validate", "sample", "--answers"])
        .arg(answer_key(dir));
    inert(Case::refused(
        "an answer key's case_id of ANSI escapes, validated",
        c,
        &runs,
        &["unknown case", "\\u{1b}[2J"],
    ))
}

fn answer_key_case_id_in_an_error(dir: &Path) -> Case {
    let runs = runs(dir, "key-error");
    let mut c = nmb_command(&runs);
    c.args([
        "eval",
        "--suite",
        "sample",
        "--model",
        "openai:gpt-4o",
        "--dry-run",
    ])
    .arg("--answers")
    .arg(answer_key(dir));
    inert(Case::refused(
        "an answer key's case_id of ANSI escapes, in the error that refuses the suite",
        c,
        &runs,
        &["error", "\\u{1b}[2J"],
    ))
}

fn notes_shown(dir: &Path) -> Case {
    let root = dir.join("notes-suite");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("suite.toml"), "id = \"notes\"\nversion = \"1\"\n").unwrap();
    let case = json!({"case_id": "c1", "notes": format!("Line one.\n{ANSI}\nLine three."),
                      "tasks": [{"id": "c1/q", "family": "open_vqa", "question": ANSI,
                                 "reference": {"answer": ANSI}}]});
    std::fs::write(root.join("cases.jsonl"), format!("{case}\n")).unwrap();
    let runs = runs(dir, "notes");
    let mut c = nmb_command(&runs);
    c.args(["suite", "show"])
        .arg(format!("native:{}", root.display()))
        .arg("c1");
    inert(Case::answered(
        "notes, a question and an answer of ANSI escapes, shown",
        c,
        &runs,
        &["Line one.", "\\u{1b}[2J", "Line three."],
    ))
}

fn file_name_with_escapes(dir: &Path) -> Case {
    let path = dir.join("q\u{1b}[31mred\u{7}.csv");
    std::fs::write(&path, "id,question,answer\nq1,,yes\n").unwrap();
    let runs = runs(dir, "name");
    let mut c = nmb_command(&runs);
    c.args(["suite", "validate"])
        .arg(format!("table:{}", path.display()));
    inert(Case::refused(
        "a table whose file name holds ANSI escapes and BEL",
        c,
        &runs,
        &["q\\u{1b}[31mred\\u{7}.csv", "missing or empty"],
    ))
}

fn csv_cell_quoted_in_a_problem(dir: &Path) -> Case {
    let path = dir.join("cells.csv");
    let options = json!(["MCA", "ACA"]).to_string().replace('"', "\"\"");
    let text = format!("id,question,options,choice\nq1,Which?,\"{options}\",\"{ANSI}\"\n");
    std::fs::write(&path, text).unwrap();
    let runs = runs(dir, "cells");
    let mut c = nmb_command(&runs);
    c.args(["suite", "validate"])
        .arg(format!("table:{}", path.display()));
    inert(Case::refused(
        "a CSV choice cell of ANSI escapes, quoted in its problem",
        c,
        &runs,
        &["is not an option letter"],
    ))
}

/// A case that runs `command` itself: it must exit 1 or 2, say each of `says`, print none of the raw controls
/// and at most `max` bytes.
fn bounded(name: &str, command: Command, runs: &Path, says: &[&str], max: usize) -> Case {
    let says: Vec<String> = says.iter().map(|s| s.to_string()).collect();
    Case::custom(name, runs, move || {
        let out = run(command, Duration::from_secs(60));
        let said = out.said();
        let head: String = said.chars().take(600).collect();
        if ![1, 2].contains(&out.code) {
            return Err(format!("exit {} (expected 1 or 2): {head:?}", out.code));
        }
        if said.len() > max {
            return Err(format!(
                "printed {} bytes (at most {max}): {head:?}",
                said.len()
            ));
        }
        if let Some(raw) = RAW.iter().find(|r| said.contains(*r)) {
            return Err(format!("printed a raw {raw:?}: {head:?}"));
        }
        match says.iter().find(|s| !said.contains(s.as_str())) {
            Some(missing) => Err(format!("does not say {missing:?}: {head:?}")),
            None => Ok(()),
        }
    })
}

fn import_task_id_of_a_megabyte(dir: &Path) -> Case {
    let suite = native_suite(
        &dir.join("id-suite"),
        &[TestTask {
            id: "c0/dx",
            question: "Diagnosis?",
        }],
    );
    let id = format!("{ANSI}{}", "x".repeat(1 << 20));
    let path = dir.join("ids.jsonl");
    let line = json!({"task_id": id, "answer": format!("Diagnosis: stroke {ANSI}")});
    std::fs::write(&path, format!("{line}\n")).unwrap();
    let runs = runs(dir, "ids");
    let mut c = nmb_command(&runs);
    c.arg("import")
        .arg(&path)
        .args(["--suite", &suite.display().to_string(), "--as", "human:lee"]);
    bounded(
        "an imported task_id of ANSI escapes and a megabyte",
        c,
        &runs,
        &["no task", "more bytes)"],
        16 << 10,
    )
}

fn run_file_toml_line_of_800_kb(dir: &Path) -> Case {
    let path = dir.join("study.toml");
    let text = format!(
        "suite = \"sample\"\nmodels = {}{ANSI}\n",
        "[".repeat(800_000)
    );
    std::fs::write(&path, text).unwrap();
    let runs = runs(dir, "toml");
    let mut c = nmb_command(&runs);
    c.arg("eval").arg("--config").arg(&path);
    bounded(
        "a run file with an 800 KB line of nested arrays",
        c,
        &runs,
        &["study.toml", "line 2", "at byte "],
        4 << 10,
    )
}

fn backtrace_asked_for(dir: &Path) -> Case {
    let runs = runs(dir, "backtrace");
    let mut c = nmb_command(&runs);
    c.env("RUST_BACKTRACE", "1")
        .env("RUST_LIB_BACKTRACE", "1")
        .args(["import"])
        .arg(dir.join("no-such-answers.jsonl"))
        .args(["--suite", "sample", "--as", "human:lee"]);
    inert(
        Case::refused(
            "an error under RUST_BACKTRACE=1",
            c,
            &runs,
            &["no-such-answers.jsonl"],
        )
        .forbid("Stack backtrace")
        .forbid("backtrace"),
    )
}

#[test]
fn every_terminal_case_ends_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    check_all(cases(tmp.path()));
}
