//! Criterion marks on the reviewer pages, in headless Chromium: a review set made with `--criteria`, a
//! reviewer marking each criterion by keyboard (Tab to a criterion, Space to check it), the marks stored with
//! the grade, and `nmb agreement --review` comparing them with a judge's marks of the same criteria as balanced
//! F1, recomputed here from what the store holds.

use std::sync::Arc;

use fantoccini::{Client, Locator};
use nmb_fake_server::Config;
use nmb_results::criteria::CriterionRubric;
use nmb_test_support::browser::WebDriver;

use crate::common::*;
use crate::criteria_cli::{judge, judge_says_met, repo_file};
use crate::review_browser::{at_item, grades, press, setup_with, shot, Review, TAB};
use crate::serve_browser::wait_for_text;

const MARKED_ITEMS: u32 = 3;

#[test]
fn a_reviewer_marks_criteria_by_keyboard_and_agreement_compares_them_with_the_judge() {
    let criteria = repo_file("rubrics/sample-criteria-v1.toml");
    let r = setup_with(&["--criteria", &criteria], Some(server(Config::default())));
    let judge_server = server(Config {
        responder: Arc::new(judge),
        ..Config::default()
    });
    let judge_spec = format!("openai:judge-x@{}/v1", judge_server.url());
    json_of(&nmb(
        &r.runs,
        &[
            "score",
            &r.run_id,
            "--judge",
            &judge_spec,
            "--criteria",
            &criteria,
            "--no-rubric",
            "--no-taxonomy",
            "--no-bertscore",
            "--resamples",
            "200",
            "--json",
        ],
    ));
    let marked = tokio::runtime::Runtime::new().unwrap().block_on(mark(&r));
    if !marked {
        return;
    }
    let rubric = CriterionRubric::load(std::path::Path::new(&criteria)).unwrap();
    let store = store(&r.runs);
    let stored = grades(&r.runs, &r.set_id, "ann");
    let mut pairs = Vec::new();
    for position in 1..=MARKED_ITEMS {
        let item = store
            .assigned_item(&r.set_id, "ann", position)
            .unwrap()
            .unwrap()
            .item;
        let g = stored[position as usize - 1].as_ref().expect("graded");
        let listed = rubric.for_task(&item.task_id);
        assert_eq!(
            g.criteria.len(),
            listed.len(),
            "item {position}: {:?}",
            g.criteria
        );
        for (k, c) in listed.iter().enumerate() {
            assert_eq!(
                g.criteria[&c.id],
                k % 2 == 0,
                "item {position}, criterion {}",
                c.id
            );
            pairs.push((judge_says_met(&c.id), k % 2 == 0));
        }
    }
    let report = json_of(&nmb(
        &r.runs,
        &[
            "agreement",
            "--review",
            &r.set_id,
            "--json",
            "--resamples",
            "200",
        ],
    ));
    let c = &report["criteria"];
    // Only raters who marked criteria: the scoring's own correctness decision (judge:grader) marked none.
    assert_eq!(c["judges"].as_array().unwrap().len(), 1, "{c}");
    let j = &c["judges"][0];
    assert_eq!(j["rater"], format!("judge:{judge_spec}").as_str(), "{c}");
    assert_eq!(j["pairs"].as_u64(), Some(pairs.len() as u64), "{c}");
    match nmb_stats::balanced_f1(&pairs) {
        Some(want) => {
            let got = j["balanced_f1"]["value"].as_f64().unwrap();
            assert!((got - want).abs() < 1e-12, "{got} vs {want}");
        }
        None => assert!(
            j["balanced_f1"].is_null() && j["undefined"].is_string(),
            "{c}"
        ),
    }
}

/// Marks the criteria of ann's first items: verdict 1, then Tab through the criteria checking every other one.
/// `false` when no browser is available here (skipped locally).
async fn mark(r: &Review) -> bool {
    let Some(driver) = WebDriver::start().await else {
        return false;
    };
    let c = &driver.client;
    let total = r.items("ann");
    c.goto(r.link("ann")).await.unwrap();
    for position in 1..=MARKED_ITEMS {
        at_item(c, position, total).await;
        let boxes = criterion_boxes(c).await;
        assert!(boxes > 0, "item {position} lists no criteria");
        press(c, "1").await;
        for k in 0..boxes {
            press(c, &TAB.to_string()).await;
            if k % 2 == 0 {
                press(c, " ").await;
            }
        }
        let saved = wait_for_text(c, "#save-status", |t| t == "saved").await;
        assert_eq!(saved, "saved", "autosave on item {position}");
        if position == 1 {
            shot(c, "review-criteria.png").await;
        }
        press(c, "j").await;
    }
    at_item(c, MARKED_ITEMS + 1, total).await;
    driver.close().await;
    true
}

async fn criterion_boxes(c: &Client) -> usize {
    c.find_all(Locator::Css("input[name=criterion]"))
        .await
        .unwrap()
        .len()
}
