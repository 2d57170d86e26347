//! Revision in multi-turn consults, end to end: a native suite of three-turn consults answered over the OpenAI
//! wire by a fake model that follows a script per case (right, wrong, unparseable, unresolved at each turn), then
//! `nmb score` and `nmb report`. Every count and rate is checked against what the script was made to do.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use nmb_fake_server::{Config, Fault, Reply};
use serde_json::Value;

const REFERENCE: &str = "Multiple sclerosis";
const SAMPLES: usize = 2;
/// The display name of the scripted model; its markup must come out escaped.
const NAME_A: &str = "anchor <b>A</b>";

/// What a script does, judged by hand from its letters (see [`answer`]): first turn correct, last turn correct,
/// top diagnosis changed, some wrong → right step, some right → wrong step; `None` = cannot be decided.
struct Script {
    turns: &'static str,
    first: Option<bool>,
    last: Option<bool>,
    changed: Option<bool>,
    wrong_to_right: Option<bool>,
    right_to_wrong: Option<bool>,
}

const fn script(
    turns: &'static str,
    first: Option<bool>,
    last: Option<bool>,
    changed: Option<bool>,
    wrong_to_right: Option<bool>,
    right_to_wrong: Option<bool>,
) -> Script {
    Script {
        turns,
        first,
        last,
        changed,
        wrong_to_right,
        right_to_wrong,
    }
}

const Y: Option<bool> = Some(true);
const N: Option<bool> = Some(false);
const U: Option<bool> = None;

/// One consult case per script.
const SCRIPTS: [Script; 8] = [
    // Corrects itself after new evidence.
    script("WRR", N, Y, Y, Y, N),
    // Abandons the right answer (the anchoring failure in reverse).
    script("RWW", Y, N, Y, N, Y),
    // Right throughout, "MS" then "Multiple sclerosis": the same diagnosis, not a change.
    script("RRr", Y, Y, N, N, N),
    // Anchored on the same wrong diagnosis.
    script("WWW", N, N, N, N, N),
    // Moves from one wrong diagnosis to another.
    script("WXX", N, N, Y, N, N),
    // Right, wrong, right again: both transitions, and no change between first and last.
    script("RWR", Y, Y, N, Y, Y),
    // A first turn the rules cannot match (Susac syndrome for MS): left out of first-turn accuracy and of the
    // transitions it would decide; the change from it to MS is still a change.
    script("URR", U, Y, Y, U, U),
    // An unparseable first turn counts as wrong; without a first top diagnosis the change is undecided.
    script("PWR", N, Y, U, Y, N),
];

/// A case whose consult errors at its second turn: left out of every number.
const ERRORED: &str = "RE";

/// One turn's answer by its letter.
fn answer(code: char) -> Reply {
    let differential = |top: &str| {
        serde_json::json!({"differential": [
            {"rank": 1, "diagnosis": top, "evidence": "periventricular lesions"},
            {"rank": 2, "diagnosis": "Migraine", "evidence": "headache"},
        ]})
        .to_string()
    };
    let text = match code {
        'R' => differential("MS"),
        'r' => differential("Multiple sclerosis"),
        'W' => differential("ADEM"),
        'X' => differential("Glioblastoma"),
        'U' => differential("Susac syndrome"),
        'P' => "I would rather see the spinal imaging before committing to any diagnosis.".into(),
        'E' => return Reply::Fault(Fault::Refusal),
        other => panic!("no answer for {other}"),
    };
    Reply::Texts(vec![text])
}

/// Model `model-a` follows the script named in the case notes (`SCRIPT=...`), at the turn given by the number of
/// user messages so far; `model-b` is right at every turn.
fn responder() -> nmb_fake_server::Responder {
    Arc::new(|req| {
        let turn = req.messages.iter().filter(|m| m.role == "user").count() - 1;
        let text = req.all_text();
        let script = text
            .split("SCRIPT=")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or("RRR");
        let code = if req.model == "model-b" {
            'R'
        } else {
            script.chars().nth(turn).expect("a letter for every turn")
        };
        match answer(code) {
            Reply::Texts(t) => Reply::Texts(vec![t[0].clone(); req.samples() as usize]),
            fault => fault,
        }
    })
}

fn consult_suite(dir: &Path) -> PathBuf {
    let root = dir.join("suite");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("suite.toml"),
        "id = \"revision\"\nversion = \"1\"\n",
    )
    .unwrap();
    let later = |i: usize| {
        serde_json::json!({"text": format!("New evidence {i}: spinal MRI and CSF results."),
                           "question": "Does this change your differential? Re-rank it."})
    };
    let mut lines = Vec::new();
    let scripts = SCRIPTS.iter().map(|s| s.turns).chain([ERRORED]);
    for (i, turns) in scripts.enumerate() {
        let case = serde_json::json!({
            "case_id": format!("c{i}"),
            "ehr": {"Age": 30 + i, "Sex": "female"},
            "notes": format!("Relapsing neurological symptoms. SCRIPT={turns} "),
            "tasks": [{"id": format!("c{i}/dx"), "family": "differential",
                       "question": "Give a ranked differential diagnosis.",
                       "turns": [later(1), later(2)],
                       "reference": {"diagnosis": REFERENCE}}],
        });
        lines.push(case.to_string());
    }
    // A single-turn task: scored as usual, not a consult.
    let single = serde_json::json!({
        "case_id": "single",
        "notes": "One question only. SCRIPT=W",
        "tasks": [{"id": "single/dx", "family": "differential", "level": "direct",
                   "question": "Give a ranked differential diagnosis.",
                   "reference": {"diagnosis": REFERENCE}}],
    });
    lines.push(single.to_string());
    std::fs::write(root.join("cases.jsonl"), lines.join("\n") + "\n").unwrap();
    root
}

fn eval(runs: &Path, suite: &Path, model: &str, name: &str) -> String {
    let out = nmb_command(runs)
        .env("OPENAI_API_KEY", "k")
        .args(["eval", "--suite"])
        .arg(suite)
        .args(["--model", model, "--name", name])
        .args(["--samples", &SAMPLES.to_string(), "--max-retries", "0"])
        .args(["--no-bertscore", "--json", "-q"])
        .output()
        .unwrap();
    json_of(&out)["run_id"].as_str().unwrap().to_string()
}

/// What the scripts add up to, per consult sample.
struct Expected {
    consults: usize,
    left_out: usize,
    unparseable_turns: usize,
    unresolved_turns: usize,
    /// (count, n) of each share: first turn, last turn, changed, wrong → right, right → wrong.
    shares: [(usize, usize); 5],
}

fn expected(scripts: &[&Script], left_out: usize) -> Expected {
    let tally = |pick: fn(&Script) -> Option<bool>| {
        let decided: Vec<bool> = scripts.iter().filter_map(|s| pick(s)).collect();
        let count = decided.iter().filter(|d| **d).count();
        (count * SAMPLES, decided.len() * SAMPLES)
    };
    let letters = |c: char| {
        scripts
            .iter()
            .map(|s| s.turns.chars().filter(|x| *x == c).count())
            .sum::<usize>()
            * SAMPLES
    };
    Expected {
        consults: scripts.len() * SAMPLES,
        left_out: left_out * SAMPLES,
        unparseable_turns: letters('P'),
        unresolved_turns: letters('U'),
        shares: [
            tally(|s| s.first),
            tally(|s| s.last),
            tally(|s| s.changed),
            tally(|s| s.wrong_to_right),
            tally(|s| s.right_to_wrong),
        ],
    }
}

/// `xx.x% (count/n)`, as the report writes a share.
fn share_text((count, n): (usize, usize)) -> String {
    format!("{:.1}% ({count}/{n})", 100.0 * count as f64 / n as f64)
}

fn check_group(g: &Value, want: &Expected, who: &str) {
    assert_eq!(g["consults"], want.consults, "{who}: {g}");
    assert_eq!(g["left_out"], want.left_out, "{who}: {g}");
    assert_eq!(g["turns"], want.consults * 3, "{who}: {g}");
    assert_eq!(g["unparseable_turns"], want.unparseable_turns, "{who}");
    assert_eq!(g["unresolved_turns"], want.unresolved_turns, "{who}");
    let keys = [
        ("first_turn", "correct", "accuracy"),
        ("last_turn", "correct", "accuracy"),
        ("changed_top_diagnosis", "count", "share"),
        ("wrong_to_right", "count", "share"),
        ("right_to_wrong", "count", "share"),
    ];
    for ((key, count, estimate), (c, n)) in keys.iter().zip(want.shares) {
        let x = &g[key];
        assert_eq!(
            (x[count].as_u64(), x["n"].as_u64()),
            (Some(c as u64), Some(n as u64)),
            "{who} {key}: {x}"
        );
        let e = &x[estimate];
        let value = e["value"].as_f64().unwrap();
        assert!(
            (value - c as f64 / n as f64).abs() < 1e-12,
            "{who} {key}: {e}"
        );
        let (lo, hi) = (
            e["ci_low"].as_f64().unwrap(),
            e["ci_high"].as_f64().unwrap(),
        );
        assert!(lo <= value && value <= hi, "{who} {key}: {e}");
        assert_eq!(
            e["n"], n,
            "{who} {key}: every decided consult is in the estimate"
        );
    }
    // What was not decided is counted apart, never folded into a share.
    let undecided = [
        ("first_turn", "unresolved"),
        ("last_turn", "unresolved"),
        ("changed_top_diagnosis", "undecided"),
        ("wrong_to_right", "undecided"),
        ("right_to_wrong", "undecided"),
    ];
    for ((key, field), (_, n)) in undecided.iter().zip(want.shares) {
        assert_eq!(g[key][field], want.consults - n, "{who} {key}");
    }
}

#[test]
fn every_turn_of_a_consult_is_scored_and_revision_is_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let suite = consult_suite(tmp.path());
    let srv = server(Config {
        responder: responder(),
        ..Config::default()
    });
    let url = format!("{}/v1", srv.url());
    let run_a = eval(&runs, &suite, &format!("openai:model-a@{url}"), NAME_A);
    let run_b = eval(&runs, &suite, &format!("openai:model-b@{url}"), "model-b");

    // Model A: the scripts.
    let scored = json_of(&nmb(&runs, &["score", &run_a, "--no-bertscore", "--json"]));
    let rev = &scored["revision"];
    let all: Vec<&Script> = SCRIPTS.iter().collect();
    let want = expected(&all, 1);
    check_group(&rev["overall"], &want, "model A overall");
    let levels = rev["by_level"].as_array().unwrap();
    assert_eq!(levels.len(), 1, "consults are multi-turn: {rev}");
    assert_eq!(levels[0]["level"], "multi_turn");
    check_group(&levels[0], &want, "model A multi_turn");
    // One script opens unparseable (wrong, counted) and one unresolved (left out, counted).
    let o = &rev["overall"];
    assert_eq!(o["first_turn"]["unparseable"], SAMPLES);
    assert_eq!(o["first_turn"]["unresolved"], SAMPLES);
    assert!(
        rev["notes"][0].as_str().unwrap().contains("cannot match"),
        "{rev}"
    );

    // Per sample: every turn's outcome, in order, and the top diagnosis it was read from.
    let samples = scored["samples"].as_array().unwrap();
    for (i, s) in SCRIPTS.iter().enumerate() {
        let id = format!("c{i}/dx");
        let mine: Vec<&Value> = samples
            .iter()
            .filter(|x| x["task_id"] == id.as_str())
            .collect();
        assert_eq!(mine.len(), SAMPLES);
        for x in mine {
            let outcomes: Vec<&str> = x["turns"]
                .as_array()
                .unwrap_or_else(|| panic!("{id}: {x}"))
                .iter()
                .map(|t| t["outcome"].as_str().unwrap())
                .collect();
            let want: Vec<&str> = s
                .turns
                .chars()
                .map(|c| match c {
                    'R' | 'r' => "correct",
                    'W' | 'X' => "wrong",
                    'P' => "unparseable",
                    _ => "unresolved",
                })
                .collect();
            assert_eq!(outcomes, want, "{id}");
            // The final answer is scored as before: the last turn's outcome is the sample's verdict.
            assert_eq!(x["correct"], s.last == Y, "{id}: {x}");
        }
    }
    let top = |task: &str, turn: usize| {
        samples.iter().find(|x| x["task_id"] == task).unwrap()["turns"][turn]["top_diagnosis"]
            .clone()
    };
    assert_eq!(top("c1/dx", 1), "ADEM");
    assert_eq!(
        top("c7/dx", 0),
        Value::Null,
        "an unparseable turn has no top diagnosis"
    );
    let errored = samples.iter().find(|x| x["task_id"] == "c8/dx").unwrap();
    assert_eq!(errored["status"], "errored");
    assert!(
        errored.get("turns").is_none(),
        "an errored consult has no turn scores: {errored}"
    );
    let single = samples
        .iter()
        .find(|x| x["task_id"] == "single/dx")
        .unwrap();
    assert!(
        single.get("turns").is_none(),
        "a single-turn task is not a consult"
    );

    // Model B: right at every turn, nothing changes.
    let scored_b = json_of(&nmb(&runs, &["score", &run_b, "--no-bertscore", "--json"]));
    let steady = script("RRR", Y, Y, N, N, N);
    let want_b = expected(&[&steady; SCRIPTS.len() + 1], 0);
    check_group(&scored_b["revision"]["overall"], &want_b, "model B");

    // The terminal shows the block.
    let out = nmb(&runs, &["score", &run_a, "--no-bertscore"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with("consults"));
    let header = lines
        .next()
        .unwrap_or_else(|| panic!("no revision block: {stdout}"));
    let line = lines.next().unwrap_or_default();
    assert!(header.contains("wrong -> right"), "{header}");
    assert!(line.trim_start().starts_with("multi_turn"), "{line}");
    assert!(
        line.contains(&format!("({}/{})", want.shares[3].0, want.shares[3].1)),
        "{line}"
    );

    // HTML and Markdown: one row per run and level, every share with its count.
    let report_dir = tmp.path().join("report");
    let out = nmb(
        &runs,
        &[
            "report",
            &run_a,
            &run_b,
            "--out",
            report_dir.to_str().unwrap(),
            "--format",
            "html,md",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(report_dir.join("report.html")).unwrap();
    let md = std::fs::read_to_string(report_dir.join("report.md")).unwrap();
    let section = html
        .split("<h2 id=\"revision\">Revision in consults</h2>")
        .nth(1)
        .unwrap_or_else(|| panic!("no revision section in the HTML"));
    let section = section.split("<h2").next().unwrap();
    assert!(
        section.contains("<td>anchor &lt;b&gt;A&lt;/b&gt;</td>"),
        "{section}"
    );
    assert!(!section.contains("<b>A</b>"), "the name is escaped");
    assert!(section.contains("<td>model-b</td>"), "{section}");
    assert_eq!(
        section.matches("<td>multi_turn</td>").count(),
        2,
        "{section}"
    );
    for (w, who) in [(&want, "A"), (&want_b, "B")] {
        for s in w.shares {
            assert!(
                section.contains(&format!(">{}<br><span class=\"ci\">[", share_text(s))),
                "model {who}: {} not in {section}",
                share_text(s)
            );
        }
    }
    let md_section = md
        .split("## Revision in consults")
        .nth(1)
        .unwrap_or_else(|| panic!("no revision section in the Markdown: {md}"));
    let md_section = md_section.split("\n## ").next().unwrap();
    let row_a = md_section
        .lines()
        .find(|l| {
            l.starts_with(&format!(
                "| {NAME_A} | revision | multi_turn | {} |",
                want.consults
            ))
        })
        .unwrap_or_else(|| panic!("no row for model A: {md_section}"));
    for s in want.shares {
        assert!(row_a.contains(&format!("{} [", share_text(s))), "{row_a}");
    }
    assert!(
        row_a.ends_with(&format!("| {} |", want.unresolved_turns)),
        "{row_a}"
    );
    assert!(
        md_section.contains(&format!(
            "| model-b | revision | multi_turn | {} |",
            want_b.consults
        )),
        "{md_section}"
    );
}
