//! Criterion rubrics through the CLI: `nmb rubric lint` on a file of deliberate mistakes, and `nmb score
//! --criteria` with the fake server playing a judge that marks criteria, the scores recomputed here from the
//! verdicts the report stores.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::common;

use common::*;
use nmb_fake_server::{Config, ReceivedRequest, Reply, Wire};
use nmb_score::criteria::CriterionRubric;
use serde_json::Value;

pub(crate) fn repo_file(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel)
        .display()
        .to_string()
}

#[test]
fn lint_names_each_mistake_with_file_and_line_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = repo_file("crates/score/fixtures/criteria_mistakes.toml");
    let out = nmb(dir.path(), &["rubric", "lint", &file]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    for (line, code) in [
        (14, "error[harm-with-positive-points]"),
        (20, "error[desirable-with-negative-points]"),
        (26, "error[zero-points]"),
        (32, "error[duplicate]"),
        (38, "warning[large-points]"),
        (52, "error[no-positive-points]"),
    ] {
        assert!(
            shown.contains(&format!("{file}:{line}: {code}")),
            "{code}: {shown}"
        );
    }
    let v = json_of_failed(&nmb(dir.path(), &["rubric", "lint", &file, "--json"]));
    assert_eq!(
        (v["errors"].as_u64(), v["warnings"].as_u64()),
        (Some(5), Some(2)),
        "{v}"
    );

    let ok = nmb(
        dir.path(),
        &[
            "rubric",
            "lint",
            &repo_file("rubrics/sample-criteria-v1.toml"),
        ],
    );
    assert!(ok.status.success(), "{}", text(&ok.stdout));

    // Warnings alone pass; a file that does not parse fails naming its line.
    let warn = dir.path().join("warn.jsonl");
    std::fs::write(
        &warn,
        "{\"task\": \"t\", \"criterion\": \"Names it\", \"points\": 12}\n",
    )
    .unwrap();
    let out = nmb(dir.path(), &["rubric", "lint", warn.to_str().unwrap()]);
    assert!(
        out.status.success() && text(&out.stdout).contains("warning[large-points]"),
        "{out:?}"
    );
    std::fs::write(
        &warn,
        "{\"task\": \"t\", \"criterion\": \"Names it\", \"points\": 1}\n{\"task\": \"t\"}\n",
    )
    .unwrap();
    let out = nmb(dir.path(), &["rubric", "lint", warn.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("line 2"),
        "{}",
        text(&out.stderr)
    );
}

fn json_of_failed(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

/// The scripted judge's decision on a criterion: a rule of its id alone, so the test can check what was stored.
pub(crate) fn judge_says_met(id: &str) -> bool {
    id.len().is_multiple_of(2)
}

/// A judge that marks every criterion listed in the question by [`judge_says_met`], and never calls two
/// diagnoses equivalent.
pub(crate) fn judge(req: &ReceivedRequest) -> Reply {
    let text = req.all_text();
    let Some((_, listed)) = text.split_once("CRITERIA\n") else {
        return Reply::Texts(vec![
            r#"{"equivalent": false, "rationale": "different"}"#.into()
        ]);
    };
    let entries: Vec<String> = listed
        .lines()
        .take_while(|l| l.starts_with("- "))
        .map(|l| {
            let id = l[2..].split_once(' ').unwrap().0;
            format!(
                "\"{id}\": {{\"met\": {}, \"explanation\": \"scripted\"}}",
                judge_says_met(id)
            )
        })
        .collect();
    Reply::Texts(vec![format!(
        "{{\"criteria\": {{{}}}}}",
        entries.join(", ")
    )])
}

#[test]
fn score_with_criteria_stores_verdicts_and_scores_them_by_healthbench_rule() {
    let dir = tempfile::tempdir().unwrap();
    let model = server(Config::default());
    let judge_server = server(Config {
        responder: std::sync::Arc::new(judge),
        ..Config::default()
    });
    let spec = model_spec(Wire::OpenAi, &model);
    let run = json_of(&nmb(
        dir.path(),
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            &spec,
            "--samples",
            "1",
            "--limit",
            "8",
            "--json",
            "-q",
            "--no-bertscore",
        ],
    ));
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let criteria_file = repo_file("rubrics/sample-criteria-v1.toml");
    let judge_spec = format!("openai:judge-x@{}/v1", judge_server.url());
    let score = |extra: &[&str]| {
        let mut args = vec![
            "score",
            &run_id,
            "--judge",
            &judge_spec,
            "--criteria",
            &criteria_file,
            "--no-rubric",
            "--no-taxonomy",
            "--no-bertscore",
            "--resamples",
            "200",
        ];
        args.extend_from_slice(extra);
        nmb(dir.path(), &args)
    };
    let first = score(&["--json"]);
    let report = json_of(&first);
    let calls = judge_server.request_count();
    assert!(calls > 0);
    // Rescoring pays nothing again and gives the same bytes.
    let second = score(&["--json"]);
    assert_eq!(
        judge_server.request_count(),
        calls,
        "rescoring asked the judge again"
    );
    assert_eq!(first.stdout, second.stdout);

    let rubric = CriterionRubric::load(std::path::Path::new(&criteria_file)).unwrap();
    let mut scores = Vec::new();
    let mut tags: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for s in report["samples"].as_array().unwrap() {
        let task = s["task_id"].as_str().unwrap();
        let Some(c) = s.get("criteria") else {
            assert_ne!(
                s["status"], "ok",
                "answered sample of {task} without criteria"
            );
            continue;
        };
        let criteria = rubric.for_task(task);
        let outcomes = c["criteria"].as_array().unwrap();
        assert_eq!(outcomes.len(), criteria.len(), "{task}");
        let met: Vec<bool> = outcomes
            .iter()
            .map(|o| o["met"].as_bool().unwrap())
            .collect();
        for (o, want) in outcomes.iter().zip(criteria) {
            assert_eq!(o["id"], want.id.as_str());
            assert_eq!(
                o["met"].as_bool(),
                Some(judge_says_met(&want.id)),
                "{task} {}",
                want.id
            );
            assert_eq!(o["judges"][0]["judge"], judge_spec.as_str());
        }
        // HealthBench's rule, from the stored verdicts and the file's points.
        let possible: f64 = criteria.iter().map(|c| c.points).filter(|p| *p > 0.0).sum();
        let achieved: f64 = criteria
            .iter()
            .zip(&met)
            .filter(|(_, m)| **m)
            .map(|(c, _)| c.points)
            .sum();
        let want = achieved / possible;
        assert!(
            (c["score"].as_f64().unwrap() - want).abs() < 1e-12,
            "{task}"
        );
        scores.push(want);
        for tag in criteria
            .iter()
            .flat_map(|c| &c.tags)
            .collect::<std::collections::BTreeSet<_>>()
        {
            let (mut p, mut a) = (0.0, 0.0);
            for (cr, m) in criteria.iter().zip(&met) {
                if cr.tags.contains(tag) {
                    p += cr.points.max(0.0);
                    a += if *m { cr.points } else { 0.0 };
                }
            }
            if p > 0.0 {
                tags.entry(tag.clone()).or_default().push(a / p);
            }
        }
    }
    assert_eq!(
        scores.len(),
        8,
        "every answered sample of the first 8 tasks has criteria"
    );
    let clipped = |v: &[f64]| (v.iter().sum::<f64>() / v.len() as f64).clamp(0.0, 1.0);
    let overall = &report["criteria"];
    assert_eq!(overall["answers"], 8);
    let value = overall["score"]["value"].as_f64().unwrap();
    assert!(
        (value - clipped(&scores)).abs() < 1e-12,
        "{value} vs {scores:?}"
    );
    assert!(overall["score"]["ci_low"].as_f64().unwrap() <= value);
    for t in overall["by_tag"].as_array().unwrap() {
        let tag = t["tag"].as_str().unwrap();
        let got = t["score"]["value"].as_f64().unwrap();
        assert!((got - clipped(&tags[tag])).abs() < 1e-12, "{tag}");
    }
    assert_eq!(overall["by_tag"].as_array().unwrap().len(), tags.len());
    assert_eq!(report["config"]["criteria"]["hash"], rubric.hash.as_str());

    // The terminal summary shows the table with its tags.
    let table = score(&[]);
    let shown = text(&table.stdout);
    assert!(table.status.success(), "{}", text(&table.stderr));
    assert!(
        shown.contains("Criterion rubric") && shown.contains("axis:accuracy"),
        "{shown}"
    );
}
