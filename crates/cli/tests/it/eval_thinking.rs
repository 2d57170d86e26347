//! Anthropic's extended thinking through `nmb eval --thinking-budget`, against the loopback server, which checks
//! the documented rules (budget at least 1,024 and below max_tokens, no temperature, top_p at least 0.95, no
//! forced tool) and the signature of every thinking block sent back: each turn of a consult sends the earlier
//! answers' thinking back unchanged, also after a resume, when it is read from the stored responses; the
//! thinking is stored apart from the answer; a budget the API would refuse is refused before anything is sent.

use crate::common;

use common::*;
use nmb_fake_server::{Config, Wire};

/// A one-case native suite with a three-turn consult.
fn consult_suite(dir: &std::path::Path) -> std::path::PathBuf {
    let case = serde_json::json!({
        "case_id": "case1",
        "ehr": {"Age": 31, "Sex": "female"},
        "notes": "Optic neuritis, then a sensory level.",
        "tasks": [{"id": "consult", "family": "differential", "level": "multi_turn",
                   "question": "What is the most likely diagnosis?",
                   "turns": [{"text": "MRI shows periventricular lesions.", "question": "And now?"},
                             {"text": "Oligoclonal bands are present.", "question": "Your final answer?"}],
                   "reference": {"diagnosis": "Multiple sclerosis"}}],
    });
    one_case_suite(dir, "consult", "", &case)
}

/// An unscored evaluation printing its JSON, then `extra`.
fn quiet_eval(suite: &str, model: &str, extra: &[&str]) -> Vec<String> {
    let mut args = eval_args(suite, model, &["--no-score", "--json", "-q"]);
    args.extend(extra.iter().map(|e| e.to_string()));
    args
}

#[test]
fn extended_thinking_goes_back_signed_turn_by_turn_and_after_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let suite = format!("native:{}", consult_suite(dir.path()).display());
    let server = server(Config::default());
    let model = model_spec(Wire::Anthropic, &server);
    let thinking = ["--thinking-budget", "2048", "--max-tokens", "4096"];
    // The first invocation stops after the consult's first turn; the second asks the rest, reading that
    // turn's thinking back from the store.
    let mut first = thinking.to_vec();
    first.extend(["--max-requests", "1"]);
    let part = json_of(
        &nmb_command(&runs)
            .args(quiet_eval(&suite, &model, &first))
            .output()
            .unwrap(),
    );
    assert_eq!(part["summary"]["samples_errored"], 0, "{part}");
    assert_eq!(server.requests().len(), 1);
    let whole = json_of(
        &nmb_command(&runs)
            .args(quiet_eval(&suite, &model, &thinking))
            .output()
            .unwrap(),
    );
    assert_eq!(whole["summary"]["samples_errored"], 0, "{whole}");
    assert_eq!(whole["summary"]["samples_ok"], 1, "{whole}");

    let asked = server.requests();
    assert_eq!(asked.len(), 3, "one request per turn, none twice");
    for (turn, r) in asked.iter().enumerate() {
        let p = &r.params;
        assert_eq!(p.thinking_budget, Some(2048), "turn {turn}");
        assert_eq!(p.temperature, None, "temperature is not sent with thinking");
        assert_eq!(
            p.thinking_blocks_back as usize, turn,
            "turn {turn} sends back every earlier answer's thinking, its signature checked"
        );
    }
    let store = store(&runs);
    let run_id = whole["run_id"].as_str().unwrap();
    let samples = store.run_samples(run_id).unwrap();
    let turns = &samples[0].turns;
    assert_eq!(turns.len(), 3);
    for t in turns {
        let thought = t.thinking.as_deref().unwrap_or_default();
        assert!(thought.starts_with("Thinking about request"), "{thought:?}");
        assert!(!t
            .text
            .as_deref()
            .unwrap_or_default()
            .contains("Thinking about"));
    }
    let manifest = store.run(run_id).unwrap().manifest;
    assert_eq!(manifest.params["thinking_budget"], 2048);
    let adjusted = manifest.params_adjusted.expect("recorded");
    assert!(
        adjusted["no_temperature"].contains("extended thinking"),
        "{adjusted:?}"
    );
}

#[test]
fn a_budget_the_api_would_refuse_is_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let server = server(Config::default());
    let anthropic = model_spec(Wire::Anthropic, &server);
    let openai = model_spec(Wire::OpenAi, &server);
    for (model, extra, says) in [
        (
            &anthropic,
            vec!["--thinking-budget", "512"],
            "below Anthropic's minimum of 1024",
        ),
        (
            &anthropic,
            vec!["--thinking-budget", "2048", "--max-tokens", "2048"],
            "must be less than --max-tokens (2048)",
        ),
        (
            &openai,
            vec!["--thinking-budget", "2048"],
            "takes no thinking budget",
        ),
    ] {
        let out = nmb_command(&runs)
            .args(quiet_eval("sample", model, &extra))
            .output()
            .unwrap();
        assert!(!out.status.success(), "{extra:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("cannot take --thinking-budget") && err.contains(says),
            "{err}"
        );
    }
    assert_eq!(server.request_count(), 0);
}
