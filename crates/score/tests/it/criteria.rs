//! Criterion rubrics: HealthBench's scoring rule against `fixtures/healthbench_score.py`, and lint against a
//! file of deliberate mistakes.

use std::collections::BTreeMap;

use nmb_results::criteria::score::{
    answer_score, clipped_mean, criteria_report, tag_scores, CriteriaResult, CriterionOutcome,
    Scored,
};
use nmb_results::criteria::{Criterion, CriterionRubric};
use nmb_score::criteria::lint::{lint, Severity};
use nmb_stats::BootstrapConfig;
use serde_json::Value;

const ABS: f64 = 1e-9;

fn fixture(name: &str) -> String {
    let path = format!("{}/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

fn close(got: f64, want: f64, what: &str) {
    assert!((got - want).abs() <= ABS, "{what}: got {got}, want {want}");
}

fn rubric_of(case: &Value) -> Vec<Criterion> {
    case["rubric"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Criterion {
            id: c["id"].as_str().unwrap().to_string(),
            criterion: "x".into(),
            points: c["points"].as_f64().unwrap(),
            tags: c["tags"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_str().unwrap().to_string())
                .collect(),
            line: 1,
        })
        .collect()
}

#[test]
fn scores_match_healthbench_calculate_score() {
    let r: Value = serde_json::from_str(&fixture("healthbench_score.json")).unwrap();
    let cases = r["cases"].as_array().unwrap();
    assert!(cases.len() >= 8);
    for (n, case) in cases.iter().enumerate() {
        let criteria = rubric_of(case);
        let mut results = Vec::new();
        let mut overall = Vec::new();
        let mut tags: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        for (a, met) in case["answers"].as_array().unwrap().iter().enumerate() {
            let met: Vec<bool> = met
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.as_bool().unwrap())
                .collect();
            let got = answer_score(&criteria, &met).unwrap();
            close(
                got,
                case["answer_scores"][a].as_f64().unwrap(),
                &format!("case {n} answer {a}"),
            );
            overall.push(got);
            let want_tags = case["answer_tag_scores"][a].as_object().unwrap();
            let got_tags = tag_scores(&criteria, &met);
            assert_eq!(
                got_tags.len(),
                want_tags.len(),
                "case {n} answer {a}: {got_tags:?}"
            );
            for (t, v) in &got_tags {
                close(
                    *v,
                    want_tags[t].as_f64().unwrap(),
                    &format!("case {n} answer {a} tag {t}"),
                );
                tags.entry(t.clone()).or_default().push(*v);
            }
            let outcomes = criteria
                .iter()
                .zip(&met)
                .map(|(c, m)| CriterionOutcome {
                    id: c.id.clone(),
                    points: c.points,
                    met: Some(*m),
                    judges: Vec::new(),
                })
                .collect();
            results.push(CriteriaResult::new("h", &criteria, outcomes));
        }
        let agg = &case["aggregate"];
        close(
            clipped_mean(&overall).unwrap(),
            agg["overall_score"].as_f64().unwrap(),
            &format!("case {n} mean"),
        );
        // The report's numbers are the same rule, reached through the per-answer results.
        let case_ids: Vec<String> = (0..results.len())
            .map(|i| format!("case{}", i % 3))
            .collect();
        let scored: Vec<Scored> = results
            .iter()
            .zip(&case_ids)
            .map(|(result, case_id)| Scored {
                task_id: "t",
                case_id,
                result,
            })
            .collect();
        let rubric = CriterionRubric::sample();
        let cfg = BootstrapConfig {
            resamples: 200,
            ..BootstrapConfig::default()
        };
        let report = criteria_report(&rubric, &scored, &cfg).unwrap();
        let score = report.score.unwrap();
        close(
            score.value,
            agg["overall_score"].as_f64().unwrap(),
            &format!("case {n} report"),
        );
        assert!(score.ci_low <= score.value && score.value <= score.ci_high);
        assert!((0.0..=1.0).contains(&score.ci_low) && (0.0..=1.0).contains(&score.ci_high));
        for t in &report.by_tag {
            close(
                t.score.value,
                agg[&t.tag].as_f64().unwrap(),
                &format!("case {n} tag {}", t.tag),
            );
            close(
                clipped_mean(&tags[&t.tag]).unwrap(),
                t.score.value,
                &format!("case {n} tag mean {}", t.tag),
            );
        }
        let want_tags = agg
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "overall_score")
            .count();
        assert_eq!(report.by_tag.len(), want_tags, "case {n}");
    }
}

#[test]
fn lint_finds_each_deliberate_mistake_with_its_line() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/criteria_mistakes.toml"
    );
    let rubric = CriterionRubric::load(std::path::Path::new(path)).unwrap();
    let text = fixture("criteria_mistakes.toml");
    // A criterion's line is its [[task.criterion]] header, just above its id: the id's 0-based index.
    let line_of = |id: &str| {
        text.lines()
            .position(|l| l == format!("id = \"{id}\""))
            .unwrap()
    };
    let found: Vec<(Severity, &str, usize, Option<String>)> = lint(&rubric)
        .iter()
        .map(|f| (f.severity, f.code, f.line, f.criterion.clone()))
        .collect();
    let want = [
        (
            Severity::Error,
            "harm-with-positive-points",
            "harm_positive",
        ),
        (
            Severity::Error,
            "desirable-with-negative-points",
            "wanted_negative",
        ),
        (Severity::Error, "zero-points", "zero"),
        (Severity::Error, "duplicate", "again"),
        (Severity::Warning, "large-points", "huge"),
        (Severity::Warning, "no-axis-tag", "huge"),
    ];
    for (severity, code, id) in want {
        assert!(
            found.contains(&(severity, code, line_of(id), Some(id.to_string()))),
            "{code} on {id} (line {}) not in {found:#?}",
            line_of(id)
        );
    }
    let no_positive = found.iter().find(|f| f.1 == "no-positive-points").unwrap();
    assert_eq!(
        (no_positive.2, no_positive.3.clone()),
        (line_of("only_harm"), None)
    );
    // Exactly those: the right criteria and the sign-checked one raise nothing.
    assert_eq!(found.len(), want.len() + 1, "{found:#?}");
    let shown = lint(&rubric)[0].to_string();
    assert!(shown.starts_with(&format!("{path}:")), "{shown}");
}
