//! PubMedQA from its real files over the OpenAI wire: the yes / no / maybe answers are scored by accuracy and
//! macro-F1 (the dataset's official pair), with an answer that names no choice a false negative only.

use std::sync::Arc;

use crate::common::*;
use nmb_fake_server::{Config, Reply, Wire};

/// F1 of one label when the model answers `said` on every item whose truth is `truth`.
fn f1(truth: &[&str], said: &[Option<&str>], label: &str) -> f64 {
    let tp = truth
        .iter()
        .zip(said)
        .filter(|(t, s)| **t == label && **s == Some(label))
        .count() as f64;
    let predicted = said.iter().filter(|s| **s == Some(label)).count() as f64;
    let support = truth.iter().filter(|t| **t == label).count() as f64;
    let (p, r) = (tp / predicted.max(1.0), tp / support.max(1.0));
    if p + r > 0.0 {
        2.0 * p * r / (p + r)
    } else {
        0.0
    }
}

#[test]
fn pubmedqa_is_scored_by_accuracy_and_macro_f1() {
    let Some(shared) = nmb_test_support::assets::shared_dir() else {
        return;
    };
    let file = shared.join("data/pubmedqa/ori_pqal.json");
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    // "yes" to questions whose text has an even length, no recognisable choice otherwise.
    let srv = server(Config {
        responder: Arc::new(|req| {
            let answer = if req.all_text().len() % 2 == 0 {
                "Answer: A"
            } else {
                "I cannot tell."
            };
            Reply::Texts(vec![answer.to_string(); req.samples() as usize])
        }),
        ..Config::default()
    });
    let out = nmb_command(&runs)
        .env("OPENAI_API_KEY", "k")
        .args(["eval", "--suite"])
        .arg(&file)
        .args([
            "--limit",
            "60",
            "--samples",
            "1",
            "--no-bertscore",
            "--json",
            "-q",
        ])
        .args(["--model", &model_spec(Wire::OpenAi, &srv), "--report"])
        .arg(tmp.path().join("report"))
        .output()
        .unwrap();
    let result = json_of(&out);
    let labels = &result["scores"]["label_set"]["labels"];
    assert_eq!(
        *labels,
        serde_json::json!(["yes", "no", "maybe"]),
        "{result}"
    );
    let run_id = result["run_id"].as_str().unwrap();
    let scored = json_of(&nmb(&runs, &["score", run_id, "--no-bertscore", "--json"]));
    let l = &scored["label_set"];
    // The truth of each answered PMID from the file itself, and what the server said from its requests.
    let data: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let samples = scored["samples"].as_array().unwrap();
    let said_by_pmid: std::collections::BTreeMap<String, Option<&str>> = samples
        .iter()
        .map(|s| {
            let extracted = s["breadth"]["extracted"]
                .as_str()
                .map(|letter| match letter {
                    "A" => "yes",
                    "B" => "no",
                    _ => "maybe",
                });
            (s["case_id"].as_str().unwrap().to_string(), extracted)
        })
        .collect();
    let truth: Vec<&str> = said_by_pmid
        .keys()
        .map(|pmid| data[pmid]["final_decision"].as_str().unwrap())
        .collect();
    let said: Vec<Option<&str>> = said_by_pmid.values().copied().collect();
    assert_eq!(l["n"], truth.len());
    let failures = said.iter().filter(|s| s.is_none()).count();
    assert!(
        failures > 0 && failures < truth.len(),
        "both kinds of answer occur"
    );
    assert_eq!(l["extraction_failures"], failures);
    let value = |v: &serde_json::Value| v["value"].as_f64().unwrap();
    let right = truth
        .iter()
        .zip(&said)
        .filter(|(t, s)| Some(**t) == **s)
        .count() as f64;
    assert!((value(&l["accuracy"]) - right / truth.len() as f64).abs() < 1e-12);
    let seen: Vec<&str> = ["yes", "no", "maybe"]
        .into_iter()
        .filter(|label| truth.contains(label) || said.contains(&Some(*label)))
        .collect();
    let macro_f1 = seen
        .iter()
        .map(|label| f1(&truth, &said, label))
        .sum::<f64>()
        / seen.len() as f64;
    assert!((value(&l["macro_f1"]) - macro_f1).abs() < 1e-12, "{l}");
    assert!(
        l["per_label"]["no"]["precision"].is_null(),
        "never answered no: no precision, and a failed extraction is no false positive"
    );
    let table = text(
        &nmb(
            &runs,
            &[
                "score",
                result["run_id"].as_str().unwrap(),
                "--no-bertscore",
            ],
        )
        .stdout,
    );
    assert!(
        table.contains("yes / no / maybe") && table.contains("macro-F1"),
        "{table}"
    );
}
