//! Clinician review end to end: a review set on a run of the sample suite, two reviewers grading it in
//! headless Chromium by keyboard, `nmb agreement --review` printing the agreement table from the store, and
//! `nmb report` showing the judges against the clinicians and the corrected rates, with a human baseline
//! (`nmb import`) beside the model.

use fantoccini::Client;
use nmb_test_support::browser::WebDriver;
use serde_json::Value;

use crate::common::*;
use crate::review_browser::{at_item, press, setup, Review, TAB};
use crate::serve_browser::wait_for_text;

/// Each of a reviewer's items by keyboard: the verdict the scoring gave (flipped on every fourth item), then
/// every rubric row. `correct` maps a position to the scoring's verdict.
async fn grade_all(c: &Client, r: &Review, name: &str, correct: impl Fn(u32) -> bool) {
    let total = r.items(name);
    c.goto(r.link(name)).await.unwrap();
    for position in 1..=total {
        at_item(c, position, total).await;
        let pass = correct(position) != (position % 4 == 0);
        press(c, if pass { "1" } else { "3" }).await;
        let digit = if pass { '4' } else { '1' };
        press(c, &format!("{TAB}{}", digit.to_string().repeat(6))).await;
        let saved = wait_for_text(c, "#save-status", |t| t == "saved").await;
        assert_eq!(saved, "saved", "{name}'s item {position}");
        press(c, "j").await;
    }
    let done = wait_for_text(c, "#counts", |t| t.starts_with("You graded")).await;
    assert!(done.contains(&format!("of {total} items")), "{done}");
}

#[test]
fn two_reviewers_grade_in_the_browser_and_the_report_shows_the_corrected_rates() {
    let r = setup();
    // Every pair of diagnoses equivalent, so some answers count as correct.
    let judge_server = crate::review_cli::judge_server(true);
    let judge_spec = format!("openai:judge-y@{}/v1", judge_server.url());
    let scored = json_of(&nmb(
        &r.runs,
        &[
            "score",
            &r.run_id,
            "--judge",
            &judge_spec,
            "--resamples",
            "200",
            "--no-bertscore",
            "--json",
        ],
    ));
    let verdicts: Vec<(String, u32, bool)> = scored["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s: &Value| {
            Some((
                s["task_id"].as_str()?.to_string(),
                s["sample_index"].as_u64()? as u32,
                s["correct"].as_bool()?,
            ))
        })
        .collect();
    let store = store(&r.runs);
    let correct = |name: &str| {
        let items: Vec<bool> = (1..=r.items(name))
            .map(|p| {
                let a = store.assigned_item(&r.set_id, name, p).unwrap().unwrap();
                verdicts
                    .iter()
                    .any(|(t, i, c)| *t == a.item.task_id && *i == a.item.sample_index && *c)
            })
            .collect();
        move |p: u32| items[p as usize - 1]
    };
    let (ann, bob) = (correct("ann"), correct("bob"));

    let browsed = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let driver = WebDriver::start().await?;
        grade_all(&driver.client, &r, "ann", ann).await;
        grade_all(&driver.client, &r, "bob", bob).await;
        driver.close().await;
        Some(())
    });
    if browsed.is_none() {
        return;
    }

    // The agreement table, from the store.
    let out = nmb(
        &r.runs,
        &["agreement", "--review", &r.set_id, "--resamples", "200"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(table.contains("clinicians ann, bob"), "{table}");
    assert!(table.contains("== dimension verdict"), "{table}");
    assert!(
        table.contains("judge:grader vs clinicians' consensus"),
        "{table}"
    );
    assert!(
        table.contains(&format!("judge:{judge_spec} vs clinicians' consensus")),
        "{table}"
    );
    let json = json_of(&nmb(
        &r.runs,
        &[
            "agreement",
            "--review",
            &r.set_id,
            "--resamples",
            "200",
            "--json",
        ],
    ));
    let verdict = json["dimensions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["dimension"] == "verdict")
        .unwrap();
    let pair = verdict["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["a"] == "ann" && p["b"] == "bob")
        .expect("ann and bob share items");
    let shared = store
        .review_items(&r.set_id)
        .unwrap()
        .iter()
        .filter(|i| i.shared)
        .count();
    assert_eq!(pair["shared_items"].as_u64().unwrap() as usize, shared);

    // A human baseline beside the model.
    let answers = r.runs.join("lee.jsonl");
    std::fs::write(
        &answers,
        format!(
            "{{\"task_id\": \"{}\", \"answer\": \"Final diagnosis: Glioblastoma\"}}\n",
            verdicts[0].0
        ),
    )
    .unwrap();
    let human = json_of(&nmb(
        &r.runs,
        &[
            "import",
            answers.to_str().unwrap(),
            "--suite",
            "sample",
            "--as",
            "human:lee",
            "--no-bertscore",
            "--json",
        ],
    ));
    let human_run = human["run_id"].as_str().unwrap();

    let out_dir = r.runs.join("report");
    let out = nmb(
        &r.runs,
        &[
            "report",
            &r.run_id,
            human_run,
            "--out",
            out_dir.to_str().unwrap(),
            "--format",
            "html,md",
            "--resamples",
            "200",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(
        md.contains("lee (human)"),
        "no human baseline in the report"
    );
    assert!(md.contains("## Judges against clinicians"), "{md}");
    assert!(md.contains(&r.set_id));
    let grader = &verdict["corrected_pass_rates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["judge"] == "judge:grader")
        .expect("the grader's corrected rate")["result"];
    if grader.is_object() {
        assert!(
            md.contains("clinician-corrected"),
            "no corrected accuracy in the headline"
        );
    }
    eprintln!("grader corrected rate: {grader}");
}
