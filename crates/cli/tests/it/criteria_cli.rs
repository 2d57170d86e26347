//! Criterion rubrics through the CLI: `nmb rubric lint` on a file of deliberate mistakes, and `nmb score
//! --criteria` with the fake server playing a judge that marks criteria, the scores recomputed here from the
//! verdicts the report stores.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::common;

use common::*;
use nmb_fake_server::{Config, ReceivedRequest, Reply, Wire};
use nmb_results::criteria::CriterionRubric;
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
    // The sample criteria with one text a browser would run, to see the report escape it.
    let criteria_file = dir.path().join("criteria.toml").display().to_string();
    let sample = std::fs::read_to_string(repo_file("rubrics/sample-criteria-v1.toml")).unwrap();
    let hostile = sample.replacen(
        "Recommends starting full anticoagulation immediately",
        "Recommends <script>alert(1)</script> & full anticoagulation immediately",
        1,
    );
    assert_ne!(hostile, sample);
    std::fs::write(&criteria_file, hostile).unwrap();
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
    report_shows_each_criterion_worst_first(dir.path(), &run_id, &report, &rubric);
}

/// The report's per-criterion table, in Markdown and HTML: each criterion's met rate from the stored verdicts,
/// harms met most often first, then the criteria met least often; the texts escaped in HTML.
fn report_shows_each_criterion_worst_first(
    runs: &std::path::Path,
    run_id: &str,
    report: &Value,
    rubric: &CriterionRubric,
) {
    // (task, id) -> (met, decided), from the verdicts the score stored.
    let mut counts: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    for s in report["samples"].as_array().unwrap() {
        let Some(c) = s.get("criteria") else { continue };
        for o in c["criteria"].as_array().unwrap() {
            let key = (
                s["task_id"].as_str().unwrap().to_string(),
                o["id"].as_str().unwrap().to_string(),
            );
            let slot = counts.entry(key).or_default();
            slot.0 += usize::from(o["met"].as_bool().unwrap());
            slot.1 += 1;
        }
    }
    let mut rows: Vec<(String, &nmb_results::criteria::Criterion, f64, usize)> = counts
        .iter()
        .map(|((task, id), (met, decided))| {
            let c = rubric.for_task(task).iter().find(|c| &c.id == id).unwrap();
            (task.clone(), c, *met as f64 / *decided as f64, *decided)
        })
        .collect();
    // Harms by falling rate, then the rest by rising rate; ties to the larger points, then task and id.
    let rank = |r: &(String, &nmb_results::criteria::Criterion, f64, usize)| {
        if r.1.points < 0.0 {
            (0, -r.2)
        } else {
            (1, r.2)
        }
    };
    rows.sort_by(|a, b| {
        let (ka, kb) = (rank(a), rank(b));
        ka.0.cmp(&kb.0)
            .then(ka.1.total_cmp(&kb.1))
            .then(b.1.points.abs().total_cmp(&a.1.points.abs()))
            .then_with(|| (&a.0, &a.1.id).cmp(&(&b.0, &b.1.id)))
    });
    assert!(
        rows.iter().any(|r| r.1.points < 0.0 && r.2 > 0.0),
        "a harm met: {rows:?}"
    );
    let out = runs.join("report");
    let o = nmb(
        runs,
        &[
            "report",
            run_id,
            "--out",
            out.to_str().unwrap(),
            "--format",
            "html,md",
            "--resamples",
            "50",
        ],
    );
    assert!(o.status.success(), "{}", text(&o.stderr));
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let section = md
        .split_once("### By criterion")
        .expect("the per-criterion section")
        .1;
    // The table's rows: from its header to the first line that is not a row.
    let shown: Vec<Vec<String>> = section
        .lines()
        .skip_while(|l| !l.starts_with("| model | suite | task |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    assert_eq!(shown.len(), rows.len(), "{section}");
    for (cells, (task, c, rate, decided)) in shown.iter().zip(&rows) {
        assert_eq!(cells[2], *task);
        let text_shown = c.criterion.replace('|', "\\|");
        assert_eq!(cells[3], format!("{text_shown} ({})", c.id));
        assert_eq!(cells[4], format!("{:+}", c.points));
        assert_eq!(cells[5], c.tags.join(" "));
        assert!(
            cells[6].starts_with(&format!("{:.1}% [", 100.0 * rate)),
            "{cells:?}"
        );
        assert_eq!(cells[7], decided.to_string());
    }
    // The sentence names the harm met most often.
    let worst = &rows[0];
    assert!(
        section.contains(&format!(
            "the harm met most often was \"{}\" ({}",
            worst.1.criterion, worst.0
        )),
        "{section}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("id=\"criteria-by-criterion\""));
    assert!(
        !html.contains("<script>alert(1)"),
        "an unescaped criterion text"
    );
    assert!(html
        .contains("Recommends &lt;script&gt;alert(1)&lt;/script&gt; &amp; full anticoagulation"));
}

/// A rubric whose harms say what they are by tag or to a judge, not by their wording.
const DIRECTIONS: &str = r#"id = "directions"
version = "1"

[[task]]
id = "stroke/dx"

[[task.criterion]]
id = "names_stroke"
criterion = "Names acute ischaemic stroke"
points = 5
tags = ["axis:accuracy"]

[[task.criterion]]
id = "tagged_harm"
criterion = "Recommends thrombolysis straight away"
points = 4
tags = ["harm", "axis:safety"]

[[task.criterion]]
id = "judged_harm"
criterion = "Recommends thrombolysis before imaging"
points = 4
tags = ["axis:safety"]

[[task.criterion]]
id = "cluster_negative"
criterion = "Seeks the time the symptoms began"
points = -3
tags = ["cluster:emergency_referrals_emergent_context_seeking"]

[[task.criterion]]
id = "checked"
criterion = "Delays the scan for a full history"
points = 2
tags = ["axis:safety", "lint:sign-checked"]

[[task.criterion]]
id = "harm_right_sign"
criterion = "Withholds antiplatelets after the bleed is excluded"
points = -4
tags = ["axis:safety"]
"#;

#[test]
fn lint_reads_tags_and_with_judge_asks_which_way_each_criterion_points_once() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("directions.toml");
    std::fs::write(&file, DIRECTIONS).unwrap();
    let file = file.display().to_string();
    // A criterion's line is its `[[task.criterion]]` header's, the line before its id.
    let line = |id: &str| {
        DIRECTIONS
            .lines()
            .position(|l| l == format!("id = \"{id}\""))
            .unwrap()
    };

    // Tags alone: `harm` with points and a HealthBench cluster with a penalty are errors; the other safety
    // criteria point neither way by their tags or wording.
    let out = nmb(dir.path(), &["rubric", "lint", &file]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    for (id, code) in [
        ("tagged_harm", "error[harm-with-positive-points]"),
        ("cluster_negative", "error[desirable-with-negative-points]"),
    ] {
        assert!(
            shown.contains(&format!("{file}:{}: {code}", line(id))),
            "{id}: {shown}"
        );
    }
    assert!(shown.contains("tagged harm"), "{shown}");
    assert!(!shown.contains("judge-disagrees"), "{shown}");
    assert!(
        shown.contains("2 axis:safety criteria point neither way"),
        "{shown}"
    );

    // A judge reads the one the tags and wording missed.
    let judge_server = server(Config {
        responder: nmb_fake_server::judge::SimJudge::default().responder(),
        ..Config::default()
    });
    let judge = format!("openai:judge-x@{}/v1", judge_server.url());
    let lint = || {
        nmb(
            dir.path(),
            &["rubric", "lint", &file, "--judge", &judge, "--json"],
        )
    };
    let first = json_of_failed(&lint());
    let asked = judge_server.request_count();
    assert_eq!(asked, 6, "one question per criterion text");
    let judged: Vec<&Value> = first["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "judge-disagrees-with-sign")
        .collect();
    assert_eq!(judged.len(), 1, "{first}");
    assert_eq!(judged[0]["criterion"], "judged_harm");
    assert_eq!(judged[0]["line"].as_u64(), Some(line("judged_harm") as u64));
    assert!(judged[0]["message"].as_str().unwrap().contains("harmful"));
    assert_eq!(first["errors"], 3, "{first}");

    // Asked again, the store answers: nothing is sent and the findings are the same.
    let second = json_of_failed(&lint());
    assert_eq!(
        judge_server.request_count(),
        asked,
        "the second lint asked again"
    );
    assert_eq!(first, second);
}
