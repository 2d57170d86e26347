//! The report's thinking section: runs of the sample suite against fake servers whose answers carry a reasoning
//! model's thinking of varying length, as a `<think>` block (no reasoning tokens reported, so words are counted)
//! and as `reasoning_content` with its reasoning tokens in the usage (tokens as reported). The numbers in
//! `report.json` are checked against what the store and the score report hold; the HTML has the table and one
//! chart per measure, escaped and without script, and headless Chromium renders them; a run without thinking adds
//! no row, and a report of it alone has no section.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use nmb_fake_server::{default_reply, Config, FakeServer, ReceivedRequest, Reply, Wire};
use nmb_test_support::browser;
use serde_json::{json, Value};

/// The thinking's length of sample `i` of a request: its own per conversation, 0 (no thinking) for one in six.
fn length_for(req: &ReceivedRequest, i: usize) -> u64 {
    let h = u64::from_str_radix(&req.conversation_sha256[..8], 16).unwrap();
    let n = (h + 7 * i as u64) % 48;
    if n.is_multiple_of(6) {
        0
    } else {
        n
    }
}

fn words(n: u64) -> String {
    (0..n)
        .map(|k| format!("step{k}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Answers as the default fake server's, after a `<think>` block of their length in words.
fn think_block_server() -> FakeServer {
    server(Config {
        responder: Arc::new(|req| match default_reply(req) {
            Reply::Texts(texts) => Reply::Texts(
                (texts.into_iter().enumerate())
                    .map(|(i, t)| match length_for(req, i) {
                        0 => t,
                        n => format!("<think>{}</think>\n{t}", words(n)),
                    })
                    .collect(),
            ),
            other => other,
        }),
        ..Config::default()
    })
}

/// Answers as the default fake server's, each with `reasoning_content`, and 25 reasoning tokens per word of the
/// request's thinking in its usage (one count for all the answers a request asked for).
fn reasoning_tokens_server() -> FakeServer {
    server(Config {
        responder: Arc::new(|req| {
            let Reply::Texts(texts) = default_reply(req) else {
                unreachable!("the default reply is texts")
            };
            let mut reasoning = 0;
            let choices: Vec<Value> = (texts.iter().enumerate())
                .map(|(i, text)| {
                    let n = length_for(req, i);
                    reasoning += 25 * n;
                    let mut message = json!({"role": "assistant", "content": text});
                    if n > 0 {
                        message["reasoning_content"] = words(n).into();
                    }
                    json!({"index": i, "message": message, "finish_reason": "stop"})
                })
                .collect();
            let body = json!({
                "id": "c", "object": "chat.completion", "model": req.model, "choices": choices,
                "usage": {"prompt_tokens": 100, "completion_tokens": 20 + reasoning,
                          "total_tokens": 120 + reasoning,
                          "completion_tokens_details": {"reasoning_tokens": reasoning}},
            });
            Reply::Raw {
                status: 200,
                headers: Vec::new(),
                body: body.to_string(),
            }
        }),
        ..Config::default()
    })
}

/// `nmb eval` of the whole sample suite, `samples` per task; the run id.
fn eval(runs: &Path, server: &FakeServer, model: &str, name: &str, samples: &str) -> String {
    let spec = model_spec(Wire::OpenAi, server).replace("test-model", model);
    let out = json_of(
        &nmb_command(runs)
            .args([
                "eval",
                "--suite",
                "sample",
                "--model",
                &spec,
                "--samples",
                samples,
            ])
            .args(["--name", name, "--no-bertscore", "--json", "-q"])
            .output()
            .unwrap(),
    );
    out["run_id"].as_str().unwrap().to_string()
}

fn report(runs: &Path, ids: &[&str], out: &Path) {
    let o = nmb_command(runs)
        .arg("report")
        .args(ids)
        .args(["--format", "html,md,json", "--resamples", "200", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// Each answered sample's thinking as the store holds it: (length in `measure`'s unit, thought at all).
fn stored_lengths(runs: &Path, run_id: &str, tokens: bool) -> BTreeMap<(String, u64), (f64, bool)> {
    let samples = store(runs).run_samples(run_id).unwrap();
    (samples.iter())
        .filter(|s| s.status == nmb_store::SampleStatus::Ok)
        .map(|s| {
            let length: f64 = (s.turns.iter())
                .map(|t| match tokens {
                    true => {
                        t.call.tokens.reasoning.unwrap_or(0) as f64 / f64::from(t.call.n_choices)
                    }
                    false => t
                        .thinking
                        .as_deref()
                        .map_or(0, |x| x.split_whitespace().count())
                        as f64,
                })
                .sum();
            // A share of a call's reasoning tokens counts as thinking, with or without text.
            let thought = length > 0.0 || s.turns.iter().any(|t| t.thinking.is_some());
            (
                (s.task_id.clone(), u64::from(s.sample_index)),
                (length, thought),
            )
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// report.json's thinking of one run against the store's thinking and the run's scores.
fn check_run(runs: &Path, json: &Value, run_id: &str, tokens: bool) {
    let run = (json["runs"].as_array().unwrap().iter())
        .find(|r| r["run_id"] == run_id)
        .unwrap();
    let thinking = (json["analysis"]["thinking"].as_array().unwrap().iter())
        .find(|t| t["run_id"] == run_id)
        .unwrap();
    let measure = if tokens {
        "reported_tokens"
    } else {
        "counted_words"
    };
    assert_eq!(thinking["measure"], measure);
    let lengths = stored_lengths(runs, run_id, tokens);
    // (level, family) of each scored sample, and whether it was right.
    let scored: BTreeMap<(String, u64), (String, String, bool)> =
        (run["scores"]["samples"].as_array().unwrap().iter())
            .filter(|s| s["status"] == "ok" || s["status"] == "parse_failed")
            .map(|s| {
                let key = (
                    s["task_id"].as_str().unwrap().to_string(),
                    s["sample_index"].as_u64().unwrap(),
                );
                let group = (
                    s["level"].as_str().unwrap().into(),
                    s["family"].as_str().unwrap().into(),
                );
                (key, (group.0, group.1, s["correct"] == true))
            })
            .collect();
    let mut expected: BTreeMap<(String, String), Vec<(f64, bool)>> = BTreeMap::new();
    for (key, value) in &lengths {
        let (level, family, _) = &scored[key];
        expected
            .entry((level.clone(), family.clone()))
            .or_default()
            .push(*value);
    }
    expected.insert(
        ("all".into(), "all".into()),
        lengths.values().copied().collect(),
    );
    let groups = thinking["groups"].as_array().unwrap();
    assert_eq!(groups.len(), expected.len(), "{thinking}");
    for g in groups {
        let key = (
            g["level"].as_str().unwrap_or("all").to_string(),
            g["family"].as_str().unwrap_or("all").to_string(),
        );
        let want = &expected[&key];
        let all: Vec<f64> = want.iter().map(|(l, _)| *l).collect();
        assert_eq!(
            g["answers"].as_u64().unwrap() as usize,
            want.len(),
            "{key:?}"
        );
        let with = want.iter().filter(|(_, t)| *t).count();
        assert_eq!(
            g["with_thinking"].as_u64().unwrap() as usize,
            with,
            "{key:?}"
        );
        let mean = all.iter().sum::<f64>() / all.len() as f64;
        assert!(
            (g["mean"].as_f64().unwrap() - mean).abs() < 1e-9,
            "{key:?}: {g}"
        );
        assert_eq!(g["median"].as_f64().unwrap(), median(all), "{key:?}");
    }
    check_bins(thinking, &lengths, &scored);
}

/// The bins cover every scored answer once, in order of length, the answers without thinking first and alone,
/// each with its own answers' count of right ones.
fn check_bins(
    thinking: &Value,
    lengths: &BTreeMap<(String, u64), (f64, bool)>,
    scored: &BTreeMap<(String, u64), (String, String, bool)>,
) {
    let bins = thinking["bins"].as_array().unwrap();
    assert!((2..=5).contains(&bins.len()), "{thinking}");
    let none = scored.keys().any(|k| lengths[k].0 <= 0.0);
    assert_eq!(
        bins[0]["max"].as_f64().unwrap() <= 0.0,
        none,
        "the answers without thinking first, alone"
    );
    let mut covered = 0;
    let mut last_max = -1.0;
    for b in bins {
        let (min, max) = (b["min"].as_f64().unwrap(), b["max"].as_f64().unwrap());
        assert!(min > last_max && min <= max, "{b}");
        last_max = max;
        let inside: Vec<bool> = (scored.iter())
            .filter(|(k, _)| (min..=max).contains(&lengths[*k].0))
            .map(|(_, (_, _, right))| *right)
            .collect();
        assert_eq!(b["answers"].as_u64().unwrap() as usize, inside.len(), "{b}");
        let right = inside.iter().filter(|r| **r).count();
        assert_eq!(b["correct"].as_u64().unwrap() as usize, right, "{b}");
        let accuracy = &b["accuracy"];
        let value = accuracy["value"].as_f64().unwrap();
        assert!(
            (value - right as f64 / inside.len() as f64).abs() < 1e-12,
            "{b}"
        );
        assert!(accuracy["ci_low"].as_f64().unwrap() <= value);
        assert!(accuracy["ci_high"].as_f64().unwrap() >= value);
        covered += inside.len();
    }
    assert_eq!(covered, scored.len(), "every scored answer in one bin");
}

#[test]
fn thinking_is_reported_per_level_and_family_and_against_accuracy() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let (think, reason, plain) = (
        think_block_server(),
        reasoning_tokens_server(),
        server(Config::default()),
    );
    let words_run = eval(&runs, &think, "qwq", "<i>thinker</i>", "1");
    // Two answers per request: each gets half its request's reasoning tokens.
    let tokens_run = eval(&runs, &reason, "deepseek-r1", "reasoner", "2");
    let plain_run = eval(&runs, &plain, "gpt-4o", "plain", "1");
    let out = dir.path().join("report");
    report(&runs, &[&words_run, &tokens_run, &plain_run], &out);

    let json: Value =
        serde_json::from_slice(&std::fs::read(out.join("report.json")).unwrap()).unwrap();
    check_run(&runs, &json, &words_run, false);
    check_run(&runs, &json, &tokens_run, true);
    let thinking = json["analysis"]["thinking"].as_array().unwrap();
    assert_eq!(thinking.len(), 2, "the run without thinking has no entry");
    let first = &thinking[0]["bins"][0];
    assert_eq!(
        first["max"], 0.0,
        "some answers of {words_run} did not think: {first}"
    );
    let calls = store(&runs).run_calls(&tokens_run).unwrap();
    assert!(
        calls.iter().any(|c| c.n_choices == 2),
        "the share is tested (a consult's later turns ask per sample)"
    );

    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let section = &html[html
        .find("<h2 id=\"thinking\">Thinking</h2>")
        .expect("the section")..];
    let section = &section[..section[4..].find("<h2").map_or(section.len(), |i| i + 4)];
    assert!(section.contains("thinking words, counted (the API reported no reasoning tokens)"));
    assert!(section.contains("reasoning tokens, as the API reported them"));
    assert!(section.contains("&lt;i&gt;thinker&lt;/i&gt;") && !html.contains("<i>thinker"));
    assert!(
        !section.contains(">plain<"),
        "no row for the run without thinking"
    );
    for unit in ["thinking words", "reasoning tokens"] {
        let label = format!("aria-label=\"Accuracy against thinking length ({unit})\"");
        assert_eq!(section.matches(&label).count(), 1, "one chart per measure");
    }
    assert!(html.contains("Content-Security-Policy") && !html.contains("<script"));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("## Thinking") && md.contains("### Accuracy by thinking length"));

    let alone = dir.path().join("alone");
    report(&runs, &[&plain_run], &alone);
    let html = std::fs::read_to_string(alone.join("report.html")).unwrap();
    assert!(!html.contains("id=\"thinking\"") && !html.contains("thinking length"));
    assert!(!std::fs::read_to_string(alone.join("report.md"))
        .unwrap()
        .contains("## Thinking"));
    let json: Value =
        serde_json::from_slice(&std::fs::read(alone.join("report.json")).unwrap()).unwrap();
    assert!(
        json["analysis"].get("thinking").is_none(),
        "{}",
        json["analysis"]
    );

    let Some(chromium) = browser::chromium() else {
        return;
    };
    let page = out.join("report.html");
    let (dom, log) = browser::dump_dom(&chromium, &page);
    assert!(
        dom.contains("id=\"thinking-table\""),
        "rendered; log:\n{log}"
    );
    assert_eq!(
        dom.matches("aria-label=\"Accuracy against thinking length")
            .count(),
        2,
        "both charts are rendered"
    );
    assert!(
        dom.matches("class=\"point\"").count() >= 4,
        "a point per bin"
    );
    let png = browser::screenshot_dir().join("report-thinking.png");
    browser::screenshot(&chromium, &page, &png, 1280, 2600);
}
