//! The judges' bias probes end to end, over loopback sockets: runs of the sample suite asked of a fake model,
//! scored by `nmb score` with simulated judges whose leanings the test injects (`nmb_fake_server::judge`), and
//! read back from `nmb report`'s `report.json`, HTML and Markdown.
//!
//! - Thinking effect: a judge that adds a point when it sees the model's thinking, on a run where about half the
//!   answers have thinking, scored with and without `--judge-sees-thinking`: the report recovers the sign and
//!   rough size, counts the answers without thinking it left out, and says the probe does not apply to a run
//!   without thinking.
//! - Length bias: a jury of a judge that adds points per doubling of an answer's length and a fair one; a review
//!   set of every answer, graded by a simulated clinician with each answer's true grade (through the store's
//!   API, as the reviewer pages write grades): the biased judge's length slope excludes 0 with the injected
//!   sign, the fair judge's covers 0.

use std::collections::BTreeMap;
use std::path::Path;

use nmb_fake_server::judge::{true_grade, SimJudge};
use nmb_fake_server::{default_reply, Config, FakeServer, ReceivedRequest, Reply};
use nmb_store::Grade;
use serde_json::Value;

use crate::common::*;

/// A model that answers as the fake server does by default, each sample's answer naming its seed (nmb asks
/// each sample apart, with its own seed), with `change` applied to each answer and a number drawn from the
/// conversation's hash and the seed (so a resumed or rescored run sees the same answers).
fn model(change: fn(usize, String) -> String) -> FakeServer {
    let reply = move |req: &ReceivedRequest| {
        let Reply::Texts(texts) = default_reply(req) else {
            unreachable!("the default reply is text")
        };
        let seed = req.params.seed.unwrap_or(0);
        let first = u8::from_str_radix(&req.conversation_sha256[..2], 16).unwrap_or(0) as usize;
        Reply::Texts(
            texts
                .into_iter()
                .enumerate()
                .map(|(i, t)| {
                    let t = t.replace("conversation ", &format!("sample {seed}, conversation "));
                    change(first + i + seed as usize, t)
                })
                .collect(),
        )
    };
    server(Config {
        responder: std::sync::Arc::new(reply),
        ..Config::default()
    })
}

/// Thinks before every other answer, in a `<think>` block nmb stores apart from the answer.
fn thinks_every_other(k: usize, text: String) -> String {
    if k.is_multiple_of(2) {
        format!("<think>\nDemyelination or a tumour? Weighing option {k}.\n</think>\n\n{text}")
    } else {
        text
    }
}

/// Pads every other answer with a hundred words.
fn long_every_other(k: usize, text: String) -> String {
    if k.is_multiple_of(2) {
        format!("{text}\n{}", vec!["Further detail."; 50].join(" "))
    } else {
        text
    }
}

fn judge(sim: SimJudge) -> FakeServer {
    server(Config {
        responder: sim.responder(),
        ..Config::default()
    })
}

/// `nmb eval` of the sample suite, unscored, two samples per task; the run id.
fn eval(runs: &Path, model: &FakeServer, name: &str) -> String {
    let spec = format!("openai:{name}@{}/v1", model.url());
    let out = json_of(&nmb(
        runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            &spec,
            "--samples",
            "2",
            "--no-score",
            "--json",
            "-q",
        ],
    ));
    assert_eq!(out["summary"]["samples_errored"], 0, "{out}");
    out["run_id"].as_str().unwrap().to_string()
}

/// `nmb score RUN --judge J ...` and then `extra`; the report.
fn score(runs: &Path, run_id: &str, judges: &[&str], extra: &[&str]) -> Value {
    let mut args = vec!["score", run_id];
    for j in judges {
        args.extend(["--judge", j]);
    }
    args.extend(["--resamples", "200", "--no-bertscore", "--json"]);
    args.extend(extra);
    json_of(&nmb(runs, &args))
}

/// `nmb report RUN` in HTML, Markdown and JSON; (report.json's run, report.html, report.md).
fn report(runs: &Path, run_id: &str, out: &Path) -> (Value, String, String) {
    let o = nmb_command(runs)
        .args([
            "report",
            run_id,
            "--format",
            "html,md,json",
            "--resamples",
            "1000",
            "--out",
        ])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap();
    let json: Value = serde_json::from_str(&read("report.json")).unwrap();
    (
        json["runs"][0].clone(),
        read("report.html"),
        read("report.md"),
    )
}

fn judge_spec(name: &str, server: &FakeServer) -> String {
    format!("openai:{name}@{}/v1", server.url())
}

#[test]
fn showing_the_thinking_to_a_judge_that_rewards_it_is_measured() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let thinker = model(thinks_every_other);
    let judge_server = judge(SimJudge {
        thinking_effect: 1,
        noise: 1,
        ..SimJudge::default()
    });
    let j = judge_spec("judge-x", &judge_server);
    let run_id = eval(runs, &thinker, "thinker");
    let hidden = score(runs, &run_id, &[&j], &[]);
    let asked_hidden = judge_server.requests().len();
    let shown = score(runs, &run_id, &[&j], &["--judge-sees-thinking"]);
    let asked_shown = judge_server.requests().len() - asked_hidden;
    // Answers without thinking get the same prompts both ways: the cache answers them.
    assert!(
        asked_shown < asked_hidden,
        "{asked_shown} new calls against {asked_hidden}"
    );
    score(runs, &run_id, &[&j], &["--judge-sees-thinking"]);
    assert_eq!(
        judge_server.requests().len(),
        asked_hidden + asked_shown,
        "rescoring sends nothing"
    );

    // What the probe must count, worked out here from the store and the first report.
    let with: Vec<(String, u64)> = store(runs)
        .run_samples(&run_id)
        .unwrap()
        .into_iter()
        .filter(|s| s.turns.iter().any(|t| t.thinking.is_some()))
        .map(|s| (s.task_id, u64::from(s.sample_index)))
        .collect();
    let graded = hidden["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["rubric"]["judges"][0]["overall"].is_u64())
        .count();
    assert!(
        with.len() >= 15 && with.len() + 15 <= graded,
        "about half the answers think: {} of {graded}",
        with.len()
    );

    // The mean shift and the flipped verdicts (a pass is 3 or more), from the two reports.
    let overall = |r: &Value| -> BTreeMap<(String, u64), f64> {
        (r["samples"].as_array().unwrap().iter())
            .filter_map(|s| {
                let g = s["rubric"]["judges"][0]["overall"].as_f64()?;
                Some((
                    (
                        s["task_id"].as_str()?.to_string(),
                        s["sample_index"].as_u64()?,
                    ),
                    g,
                ))
            })
            .collect()
    };
    let (before, after) = (overall(&hidden), overall(&shown));
    let pairs: Vec<(f64, f64)> = with.iter().map(|k| (before[k], after[k])).collect();
    let n = pairs.len() as f64;
    let expected_shift = pairs.iter().map(|(h, s)| s - h).sum::<f64>() / n;
    let expected_flips = pairs
        .iter()
        .filter(|(h, s)| (*h >= 3.0) != (*s >= 3.0))
        .count() as f64
        / n;

    let (json, html, md) = report(runs, &run_id, &dir.path().join("report"));
    let probe = &json["thinking_probe"];
    assert_eq!(
        probe["with_thinking"].as_u64().unwrap() as usize,
        with.len(),
        "{probe}"
    );
    assert_eq!(
        probe["without_thinking"].as_u64().unwrap() as usize,
        graded - with.len()
    );
    let effect = &probe["judges"][0];
    assert_eq!(effect["judge"], j.as_str());
    let d = &effect["mean_difference"];
    let (value, low) = (d["value"].as_f64().unwrap(), d["ci_low"].as_f64().unwrap());
    eprintln!("thinking effect: {d}");
    assert!(low > 0.0, "the injected +1 is recovered as a rise: {d}");
    assert!((value - 1.0).abs() < 0.5, "and near its size: {d}");
    assert!(
        (value - expected_shift).abs() < 1e-9,
        "{value} against {expected_shift}"
    );
    let flips = effect["flip_share"]["value"].as_f64().unwrap();
    assert!(
        (flips - expected_flips).abs() < 1e-9,
        "{flips} against {expected_flips}"
    );
    let sentence = probe["sentences"][0].as_str().unwrap();
    eprintln!("{sentence}");
    assert!(
        sentence.contains(&format!("raised {j}'s grade by {value:.2} points"))
            && sentence.contains(&format!("on {} answers", with.len())),
        "{sentence}"
    );
    assert!(
        html.contains("Judges against clinicians"),
        "the section opens for the probe alone"
    );
    // The judge's name is escaped in HTML (its apostrophe too); the figures are not.
    assert!(html.contains(&format!("&#39;s grade by {value:.2} points")));
    assert!(md.contains(sentence));

    // A run without thinking, scored both ways: the probe says it does not apply.
    let plain_model = server(Config::default());
    let plain = eval(runs, &plain_model, "plain");
    score(runs, &plain, &[&j], &[]);
    score(runs, &plain, &[&j], &["--judge-sees-thinking"]);
    let (json, html, _) = report(runs, &plain, &dir.path().join("plain"));
    let probe = &json["thinking_probe"];
    assert_eq!(probe["with_thinking"], 0);
    assert!(probe["judges"].as_array().unwrap().is_empty());
    let sentence = probe["sentences"][0].as_str().unwrap();
    assert!(sentence.contains("does not apply"), "{sentence}");
    assert!(html.contains("does not apply"));
}

/// Each answer's true grade, as a clinician who grades perfectly gives it: item key -> grade.
fn clinician_grades(runs: &Path, run_id: &str) -> BTreeMap<(String, u32), i64> {
    store(runs)
        .run_samples(run_id)
        .unwrap()
        .into_iter()
        .filter_map(|s| {
            let answer = s.final_text?;
            Some(((s.task_id, s.sample_index), true_grade(&answer)))
        })
        .collect()
}

#[test]
fn a_judge_that_rewards_length_is_caught_and_a_fair_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let wordy = model(long_every_other);
    let run_id = eval(runs, &wordy, "model-a");
    let (long_server, fair_server) = (
        judge(SimJudge {
            length_per_doubling: 0.4,
            noise: 1,
            ..SimJudge::default()
        }),
        judge(SimJudge {
            noise: 1,
            ..SimJudge::default()
        }),
    );
    let (long, fair) = (
        judge_spec("judge-long", &long_server),
        judge_spec("judge-fair", &fair_server),
    );
    let scored = score(runs, &run_id, &[&long, &fair], &[]);
    let created = json_of(&nmb(
        runs,
        &[
            "review",
            "create",
            &run_id,
            "--reviewers",
            "lee",
            "--seed",
            "3",
            "--json",
        ],
    ));
    let set = created["set_id"].as_str().unwrap();
    let correct: BTreeMap<(String, u32), bool> = scored["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            let key = (
                s["task_id"].as_str()?.to_string(),
                s["sample_index"].as_u64()? as u32,
            );
            Some((key, s["correct"].as_bool()?))
        })
        .collect();
    let truth = clinician_grades(runs, &run_id);
    let store = store(runs);
    let hash = store.review_set(set).unwrap().unwrap().rubric_hash;
    let mut graded = 0;
    while let Some(a) = store.assigned_item(set, "lee", graded + 1).unwrap() {
        let key = (a.item.task_id.clone(), a.item.sample_index);
        let verdict = if correct.get(&key) == Some(&true) {
            "correct"
        } else {
            "incorrect"
        };
        let grade = Grade {
            verdict: Some(verdict.into()),
            scores: [("overall".to_string(), truth[&key] as u8)].into(),
            taxonomy: None,
            comment: None,
            criteria: Default::default(),
        };
        store
            .append_grade(set, "lee", a.item.item_no, &hash, &grade)
            .unwrap();
        graded += 1;
    }
    assert!(graded >= 40, "every answer reviewed: {graded}");

    let (json, html, md) = report(runs, &run_id, &dir.path().join("report"));
    let bias = json["review_calibrations"][0]["bias"].as_array().unwrap();
    let slope = |judge: &str| {
        let probe = bias
            .iter()
            .find(|b| b["judge"] == judge)
            .unwrap_or_else(|| panic!("no probe of {judge}: {bias:?}"));
        assert_eq!(probe["items"].as_u64().unwrap() as u32, graded, "{probe}");
        let s = &probe["length_slope"];
        (
            s["value"].as_f64().unwrap(),
            s["ci_low"].as_f64().unwrap(),
            s["ci_high"].as_f64().unwrap(),
        )
    };
    let (value, low, high) = slope(&long);
    eprintln!("length slope of the biased judge: {value} [{low}, {high}]");
    assert!(
        low > 0.0,
        "the injected length bias is caught: {value} [{low}, ..]"
    );
    let (value, low, high) = slope(&fair);
    eprintln!("length slope of the fair judge: {value} [{low}, {high}]");
    assert!(
        low <= 0.0 && 0.0 <= high,
        "the fair judge: {value} [{low}, {high}]"
    );
    for text in [&html, &md] {
        assert!(
            text.contains("Length bias: at the same clinician grade, "),
            "the sentences are shown"
        );
    }
}
