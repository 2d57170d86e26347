//! The report's cost section: two runs against a server whose every answer reports cached input and reasoning
//! tokens as OpenAI does (`prompt_tokens_details.cached_tokens`, `completion_tokens_details.reasoning_tokens`),
//! priced with and without cache rates. The split, the total and the dollars per correct answer in
//! `report.json` follow from the stored token counts; the HTML has the table and the accuracy-against-cost
//! chart, and headless Chromium renders both.

use crate::common;

use common::*;
use nmb_test_support::browser;

const PROMPT: u64 = 1000;
pub(crate) const CACHED: u64 = 600;
const COMPLETION: u64 = 400;
const REASONING: u64 = 300;

pub(crate) fn server_reporting_cache_and_reasoning() -> nmb_fake_server::FakeServer {
    let body = serde_json::json!({
        "id": "c", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
            "content": "{\"differential\": [{\"rank\": 1, \"diagnosis\": \"Multiple sclerosis\", \"evidence\": \"e\"}]}"}}],
        "usage": {"prompt_tokens": PROMPT, "completion_tokens": COMPLETION,
                  "total_tokens": PROMPT + COMPLETION,
                  "prompt_tokens_details": {"cached_tokens": CACHED},
                  "completion_tokens_details": {"reasoning_tokens": REASONING}},
    });
    always(200, body.to_string())
}

#[test]
fn the_cost_is_split_by_what_it_paid_for_and_set_against_accuracy() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let server = server_reporting_cache_and_reasoning();
    let mut ids = Vec::new();
    for model in ["alpha", "beta"] {
        let spec = format!("openai:{model}@{}/v1", server.url());
        let args = eval_args(
            "sample",
            &spec,
            &["--limit", "6", "--no-bertscore", "--json", "-q"],
        );
        let out = json_of(&nmb_command(&runs).args(args).output().unwrap());
        ids.push(out["run_id"].as_str().unwrap().to_string());
    }
    let report = dir.path().join("report");
    let out = nmb_command(&runs)
        .args(["report", &ids[0], &ids[1], "--format", "html,json"])
        .args(["--price", "alpha=2,10,0.5,2.5", "--price", "beta=1,5"])
        .arg("--out")
        .arg(&report)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
            .unwrap();
    // (input, output, cached input) per million; beta has no cache rate, so its cached input is input.
    let rates = [(2.0, 10.0, 0.5), (1.0, 5.0, 1.0)];
    for (run, (input, output, cached)) in json["runs"].as_array().unwrap().iter().zip(rates) {
        let cost = &run["cost"];
        let calls = cost["tokens"]["input"].as_u64().unwrap() / PROMPT;
        assert!(calls > 0, "{cost}");
        assert_eq!(cost["tokens"]["cached_in"].as_u64(), Some(calls * CACHED));
        assert_eq!(
            cost["tokens"]["reasoning"].as_u64(),
            Some(calls * REASONING)
        );
        let per = |tokens: u64, rate: f64| (calls * tokens) as f64 * rate / 1e6;
        let want = [
            ("input", per(PROMPT - CACHED, input)),
            ("cached_input", per(CACHED, cached)),
            ("cache_write", 0.0),
            ("output", per(COMPLETION - REASONING, output)),
            ("reasoning", per(REASONING, output)),
        ];
        let split = &cost["split"];
        let mut total = 0.0;
        for (part, dollars) in want {
            let got = split[part].as_f64().unwrap();
            assert!(
                (got - dollars).abs() < 1e-12,
                "{part}: {got} against {dollars}"
            );
            total += dollars;
        }
        assert!((split["total"].as_f64().unwrap() - total).abs() < 1e-12);
        assert_eq!(cost["dollars"], split["total"]);
        match cost["correct"].as_u64().unwrap() {
            0 => assert!(cost["per_correct"].is_null()),
            correct => {
                let per_correct = cost["per_correct"].as_f64().unwrap();
                assert!((per_correct - total / correct as f64).abs() < 1e-12);
            }
        }
    }

    let page = report.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<h2 id=\"cost\">Cost</h2>"),
        "the cost section"
    );
    assert!(html.contains("per correct answer") && html.contains("cached input"));
    assert!(html.contains("Accuracy against cost"), "the chart");
    let Some(chromium) = browser::chromium() else {
        return;
    };
    let (dom, log) = browser::dump_dom(&chromium, &page);
    assert!(dom.contains("id=\"cost\""), "rendered; log:\n{log}");
    assert_eq!(
        dom.matches("aria-label=\"Accuracy against cost\"").count(),
        1,
        "the chart is rendered"
    );
    let png = browser::screenshot_dir().join("report-cost.png");
    browser::screenshot(&chromium, &page, &png, 1280, 2400);
}
