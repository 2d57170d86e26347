//! A pairwise review end to end: two models' runs of the `sample` suite through the fake server, `nmb review
//! create --mode pairwise`, two clinicians voting by keyboard in headless Chromium on `nmb serve`'s pages, and
//! `nmb report` ranking the models from their votes.

use std::sync::Arc;

use nmb_fake_server::{default_reply, Config, FakeServer, Reply};
use nmb_test_support::browser::WebDriver;
use serde_json::Value;

use crate::common::*;
use crate::review_browser::{at_item, press};
use crate::serve_browser::{start_server, wait_for_text};

const TASKS: u32 = 6;

/// A fake model whose every answer starts with `tag`: the two models' answers have the same length and
/// formatting, so style control has nothing to separate and the ratings follow the votes alone.
fn model(tag: &'static str) -> FakeServer {
    server(Config {
        responder: Arc::new(move |req| match default_reply(req) {
            Reply::Texts(texts) => {
                Reply::Texts(texts.into_iter().map(|t| format!("{tag} {t}")).collect())
            }
            other => other,
        }),
        ..Config::default()
    })
}

fn eval(runs: &std::path::Path, spec: &str) -> String {
    let out = json_of(&nmb(
        runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            spec,
            "--samples",
            "1",
            "--limit",
            "6",
            "--no-bertscore",
            "--json",
            "-q",
        ],
    ));
    out["run_id"].as_str().expect("a run id").to_string()
}

/// How each reviewer votes, by position: `Some(true)` for the careful model, `Some(false)` for the terse one,
/// `None` for a tie, and "neither" where named.
fn plan(reviewer: &str, position: u32) -> &'static str {
    match (reviewer, position) {
        ("ann", 6) => "tie",
        ("bob", 3) => "terse",
        ("bob", 5) => "neither",
        _ => "careful",
    }
}

#[test]
fn two_clinicians_vote_in_chromium_and_the_report_ranks_the_models() {
    let dir = tempfile::tempdir().expect("temp dir");
    let runs = dir.path().join("runs");
    let (careful_fake, terse_fake) = (model("Careful:"), model("Terse:"));
    let careful = eval(
        &runs,
        &format!("openai:careful-model@{}/v1", careful_fake.url()),
    );
    let terse = eval(
        &runs,
        &format!("openai:terse-model@{}/v1", terse_fake.url()),
    );
    let (_server, url) = start_server(&runs);
    let created = json_of(&nmb(
        &runs,
        &[
            "review",
            "create",
            &careful,
            &terse,
            "--mode",
            "pairwise",
            "--reviewers",
            "ann,bob",
            "--overlap",
            "1",
            "--seed",
            "5",
            "--url",
            &url,
            "--json",
        ],
    ));
    assert_eq!(created["mode"], "pairwise");
    assert_eq!(created["items"], TASKS, "one pair per task");
    let set = created["set_id"].as_str().unwrap().to_string();
    let links: Vec<(String, String)> = (created["reviewers"].as_array().unwrap().iter())
        .map(|r: &Value| {
            (
                r["reviewer"].as_str().unwrap().into(),
                r["url"].as_str().unwrap().into(),
            )
        })
        .collect();
    let store = store(&runs);
    let pairs = store.review_pairs(&set).unwrap();
    let shown_first: Vec<bool> = (store.review_items(&set).unwrap().iter())
        .map(|i| i.run_id == careful)
        .collect();
    assert!(
        shown_first.iter().any(|c| *c) && shown_first.iter().any(|c| !*c),
        "the careful model is shown first in some pairs and second in others: {shown_first:?}"
    );
    for p in &pairs {
        let b = if shown_first[p.item_no as usize - 1] {
            &terse
        } else {
            &careful
        };
        assert_eq!(&p.run_id, b, "pair {} shows the other run as B", p.item_no);
    }

    let voted = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let Some(driver) = WebDriver::start().await else {
            return false;
        };
        let c = &driver.client;
        for (name, link) in &links {
            c.goto(link).await.unwrap();
            for position in 1..=TASKS {
                at_item(c, position, TASKS).await;
                let item = store.assigned_item(&set, name, position).unwrap().unwrap();
                let careful_is_a = item.item.run_id == careful;
                let key = match plan(name, position) {
                    "tie" => "t",
                    "neither" => "n",
                    "careful" if careful_is_a => "a",
                    "terse" if !careful_is_a => "a",
                    _ => "b",
                };
                let page = c.source().await.unwrap();
                assert!(
                    !page.contains("careful-model")
                        && !page.contains("terse-model")
                        && !page.contains(&careful),
                    "the page names no model or run"
                );
                press(c, key).await;
                let saved = wait_for_text(c, "#save-status", |t| t == "saved").await;
                assert_eq!(saved, "saved", "{name}'s vote on pair {position}");
                press(c, "j").await;
            }
            wait_for_text(c, "#done", |t| t == "All done").await;
        }
        true
    });
    if !voted {
        return;
    }

    // The store holds each vote as cast, in the side the reviewer saw.
    let votes = store.latest_votes(&set).unwrap();
    assert_eq!(votes.len(), 2 * TASKS as usize);
    let (mut wins, mut ties, mut losses, mut neither) = (0usize, 0usize, 0usize, 0usize);
    for v in &votes {
        let position = (1..=TASKS)
            .find(|&p| {
                store
                    .assigned_item(&set, &v.reviewer, p)
                    .unwrap()
                    .unwrap()
                    .item
                    .item_no
                    == v.item_no
            })
            .unwrap();
        let careful_is_a = shown_first[v.item_no as usize - 1];
        let planned = plan(&v.reviewer, position);
        let careful_won = (v.vote.choice == "a") == careful_is_a;
        match v.vote.choice.as_str() {
            "tie" => ties += 1,
            "neither" => neither += 1,
            _ if careful_won => wins += 1,
            _ => losses += 1,
        }
        let as_planned = match planned {
            "careful" => careful_won && (v.vote.choice == "a" || v.vote.choice == "b"),
            "terse" => !careful_won && (v.vote.choice == "a" || v.vote.choice == "b"),
            other => v.vote.choice == other,
        };
        assert!(
            as_planned,
            "{} on pair {position}: {:?}, planned {planned}",
            v.reviewer, v.vote.choice
        );
    }

    let out_dir = runs.join("report");
    let out = nmb(
        &runs,
        &[
            "report",
            &careful,
            &terse,
            "--out",
            out_dir.to_str().unwrap(),
            "--format",
            "md,json,html",
            "--resamples",
            "200",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    let section = md
        .split("## Clinicians' pairwise preference")
        .nth(1)
        .unwrap_or_else(|| panic!("no pairwise section in the report:\n{md}"));
    let first_row = section
        .lines()
        .find(|l| l.starts_with("| 1 "))
        .expect("a ranking row");
    assert!(first_row.contains("careful-model"), "{first_row}");
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("id=\"preference\""));

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    let ranking = &json["pairwise_rankings"][0];
    let (top, next) = (&ranking["models"][0], &ranking["models"][1]);
    assert!(top["model"].as_str().unwrap().contains("careful-model"));
    let counts =
        |m: &Value| ["wins", "ties", "losses", "neither"].map(|k| m[k].as_u64().unwrap() as usize);
    assert_eq!(counts(top), [wins, ties, losses, neither]);
    assert_eq!(counts(next), [losses, ties, wins, neither]);
    // Two models with Davidson's ties: the maximum-likelihood odds are wins over losses, so the ratings differ
    // by 400 log10(wins / losses) on the Elo-like scale.
    let gap = top["rating"]["value"].as_f64().unwrap() - next["rating"]["value"].as_f64().unwrap();
    let want = 400.0 * (wins as f64 / losses as f64).log10();
    assert!(
        (gap - want).abs() < 1e-6,
        "rating gap {gap}, expected {want}"
    );
    let rate = ranking["win_rate"][0][1].as_f64().unwrap();
    let decided = (wins + ties + losses) as f64;
    assert!((rate - (wins as f64 + ties as f64 / 2.0) / decided).abs() < 1e-12);
    assert!(ranking["sentence"]
        .as_str()
        .unwrap()
        .contains("careful-model"));
}

/// A judge that always prefers the careful model's answer when it is shown first, and when it is shown second
/// prefers it on every other such request and otherwise picks answer 1: a position bias that flips exactly half
/// of the pairs. `nmb review judge` must recover the flips, the first-position share and the agreement that this
/// implies, and ask nothing again on a second run.
#[test]
fn a_judge_with_an_injected_position_bias_is_measured_against_the_clinicians() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let dir = tempfile::tempdir().expect("temp dir");
    let runs = dir.path().join("runs");
    let (careful_fake, terse_fake) = (model("Careful:"), model("Terse:"));
    let careful = eval(
        &runs,
        &format!("openai:careful-model@{}/v1", careful_fake.url()),
    );
    let terse = eval(
        &runs,
        &format!("openai:terse-model@{}/v1", terse_fake.url()),
    );
    let created = json_of(&nmb(
        &runs,
        &[
            "review",
            "create",
            &careful,
            &terse,
            "--mode",
            "pairwise",
            "--reviewers",
            "ann,bob",
            "--overlap",
            "1",
            "--seed",
            "5",
            "--json",
        ],
    ));
    let set = created["set_id"].as_str().unwrap().to_string();
    let store = store(&runs);
    // Both clinicians prefer the careful model's answer on every pair, in whichever side it was shown.
    for item in store.review_items(&set).unwrap() {
        let choice = if item.run_id == careful { "a" } else { "b" };
        for reviewer in ["ann", "bob"] {
            let vote = nmb_store::Vote {
                choice: choice.into(),
                comment: None,
            };
            store
                .append_vote(&set, reviewer, item.item_no, &vote)
                .unwrap();
        }
    }
    let second_seen = Arc::new(AtomicU64::new(0));
    let seen = second_seen.clone();
    let judge = server(Config {
        responder: Arc::new(move |req| {
            let text = req.all_text();
            let careful_first = text.find("Careful:") < text.find("Terse:");
            let better = if careful_first || seen.fetch_add(1, Ordering::SeqCst).is_multiple_of(2) {
                "1"
            } else {
                "2"
            };
            Reply::Texts(vec![format!(
                "{{\"better\": \"{better}\", \"rationale\": \"r\"}}"
            )])
        }),
        ..Config::default()
    });
    let spec = format!("openai:judge-model@{}/v1", judge.url());
    let args = [
        "review",
        "judge",
        &set,
        "--judge",
        &spec,
        "--resamples",
        "200",
        "--json",
    ];
    let out = nmb(&runs, &args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let j = &doc["judges"][0];
    let n = TASKS as f64;
    assert_eq!(j["pairs"], TASKS);
    assert_eq!(
        judge.request_count(),
        2 * TASKS as u64,
        "each pair in both orders"
    );
    // Careful shown second: requests 0, 2, 4 of those pick answer 1 (a flip), 1, 3, 5 pick the careful answer.
    let flips = (TASKS / 2) as f64;
    let check = |e: &Value, want: f64, what: &str| {
        let (v, lo, hi) = (
            e["value"].as_f64().unwrap(),
            e["ci_low"].as_f64().unwrap(),
            e["ci_high"].as_f64().unwrap(),
        );
        assert!((v - want).abs() < 1e-12, "{what}: {v}, expected {want}");
        assert!(lo <= v && v <= hi, "{what}: [{lo}, {hi}] around {v}");
    };
    check(&j["position_bias"]["flip_share"], flips / n, "flip share");
    check(
        &j["position_bias"]["first_position_wins"],
        (n + flips) / (2.0 * n),
        "first-position wins",
    );
    check(
        &j["agreement"],
        (n - flips) / n,
        "agreement with the clinicians",
    );
    assert!(j["sentence"].as_str().unwrap().contains("judge-model"));

    let again = nmb(&runs, &args);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(
        judge.request_count(),
        2 * TASKS as u64,
        "asked before: answered from the store"
    );
    let again: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["judges"], doc["judges"]);

    // The report reads the stored verdicts back: the same numbers, with the same bootstrap settings.
    let out_dir = runs.join("report");
    let out = nmb(
        &runs,
        &[
            "report",
            &careful,
            &terse,
            "--out",
            out_dir.to_str().unwrap(),
            "--format",
            "md,json",
            "--resamples",
            "200",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    assert_eq!(report["pairwise_rankings"][0]["judges"], doc["judges"]);
    assert_eq!(
        judge.request_count(),
        2 * TASKS as u64,
        "the report asks no judge"
    );
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("first shown wins"), "{md}");
}
