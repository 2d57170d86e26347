//! Subgroups (`--by`) end to end: two runs of a native suite of 24 cases (sex, age and two metadata fields set
//! per case; case5 lacks `scanner`) against loopback servers that give one answer each, scored with `--by sex
//! --by age:0-40,40-65,65-`. Every expectation is computed here from the stored samples and the suite as
//! written: each subgroup's cases, answers and mean, the marks of small subgroups, the gap between the best and
//! the worst; the Subgroups section in report.json, Markdown and HTML (rendered by Chromium); `nmb report --by`
//! at report time; `nmb compare`'s paired rows per subgroup. And the clear errors before scoring (and before
//! asking): a field a case lacks, bands that overlap, leave a gap or miss a case's value.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::common;

use common::*;
use nmb_test_support::browser;
use serde_json::Value;

const CASES: usize = 24;

fn sex(i: usize) -> &'static str {
    if i.is_multiple_of(2) {
        "female"
    } else {
        "male"
    }
}

fn age(i: usize) -> usize {
    20 + 2 * i
}

fn site(i: usize) -> &'static str {
    ["north", "south", "east"][i % 3]
}

/// The reference diagnosis: multiple sclerosis for two thirds of the women and a third of the men, so that the
/// server answering "Multiple sclerosis" is right at different rates by sex.
fn reference(i: usize) -> &'static str {
    let ms = if sex(i) == "female" {
        !i.is_multiple_of(3)
    } else {
        i.is_multiple_of(3)
    };
    if ms {
        "Multiple sclerosis"
    } else {
        "Glioblastoma"
    }
}

fn suite(dir: &Path) -> PathBuf {
    let root = dir.join("suite");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        root.join("suite.toml"),
        "id = \"subgroups\"\nversion = \"1\"\n[defaults]\nlevel = \"direct\"\n",
    )
    .unwrap();
    let lines: Vec<String> = (0..CASES)
        .map(|i| {
            let mut metadata = serde_json::json!({"site": site(i)});
            if i != 5 {
                metadata["scanner"] = Value::from("1.5T");
            }
            serde_json::json!({
                "case_id": format!("case{i}"),
                "ehr": {"Age": age(i), "Sex": sex(i)},
                "notes": "Subacute headache and confusion.",
                "metadata": metadata,
                "tasks": [{"id": format!("case{i}/dx"), "family": "differential",
                           "question": "What is the most likely diagnosis?",
                           "reference": {"diagnosis": reference(i)}}],
            })
            .to_string()
        })
        .collect();
    std::fs::write(root.join("cases.jsonl"), lines.join("\n") + "\n").unwrap();
    root
}

fn answering(diagnosis: &str) -> nmb_fake_server::FakeServer {
    let content =
        serde_json::json!({"differential": [{"rank": 1, "diagnosis": diagnosis, "evidence": "e"}]});
    let body = serde_json::json!({
        "id": "c", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content.to_string()}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    });
    always(200, body.to_string())
}

fn case_index(case_id: &str) -> usize {
    case_id.trim_start_matches("case").parse().unwrap()
}

/// The subgroup of case `i` under `spec`, from the suite as written.
fn label(spec: &str, i: usize) -> String {
    match spec {
        "sex" => sex(i).into(),
        "site" => site(i).into(),
        "age:0-40,40-65,65-" => match age(i) {
            a if a < 40 => "0-40".into(),
            a if a < 65 => "40-65".into(),
            _ => "65-".into(),
        },
        other => panic!("no labels for {other}"),
    }
}

fn eval(runs: &Path, suite: &Path, spec: &str, extra: &[&str]) -> std::process::Output {
    let suite = suite.to_str().unwrap();
    let head = ["eval", "--suite", suite, "--model", spec, "--samples", "5"];
    let tail = ["--no-bertscore", "--json", "-q"];
    nmb_command(runs)
        .args(head.iter().chain(&tail).chain(extra))
        .output()
        .unwrap()
}

fn score(runs: &Path, run: &str, by: &[&str]) -> std::process::Output {
    let mut cmd = nmb_command(runs);
    cmd.args(["score", run, "--no-bertscore", "--json"]);
    for b in by {
        cmd.args(["--by", b]);
    }
    cmd.output().unwrap()
}

/// (value, case) of every scored answer in a score report.
fn answers(report: &Value) -> Vec<(f64, usize)> {
    report["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| matches!(s["status"].as_str(), Some("ok" | "parse_failed")))
        .map(|s| {
            let v = if s["correct"] == Value::Bool(true) {
                1.0
            } else {
                0.0
            };
            (v, case_index(s["case_id"].as_str().unwrap()))
        })
        .collect()
}

/// (value, case) of every task's pass@5.
fn pass_at_5(report: &Value) -> Vec<(f64, usize)> {
    report["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| {
            let v = t["pass_at_k_unbiased"]["pass_at_5"].as_f64()?;
            Some((v, case_index(t["case_id"].as_str().unwrap())))
        })
        .collect()
}

/// Checks one number's breakdown against `units`, computed here: each subgroup's cases, units, mean (inside its
/// interval) and mark, and the gap between the best and the worst subgroup of 10 cases or more.
fn check_number(spec: &str, number: &Value, units: &[(f64, usize)]) {
    let mut want: BTreeMap<String, (Vec<f64>, BTreeSet<usize>)> = BTreeMap::new();
    for &(v, i) in units {
        let e = want.entry(label(spec, i)).or_default();
        e.0.push(v);
        e.1.insert(i);
    }
    let groups = number["subgroups"]["groups"].as_array().unwrap();
    assert_eq!(groups.len(), want.len(), "{spec}: {number}");
    let mut means = BTreeMap::new();
    for g in groups {
        let name = g["group"].as_str().unwrap();
        let (values, cases) = &want[name];
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        assert_eq!(
            g["cases"].as_u64(),
            Some(cases.len() as u64),
            "{spec} {name}"
        );
        assert_eq!(
            g["units"].as_u64(),
            Some(values.len() as u64),
            "{spec} {name}"
        );
        let e = &g["estimate"];
        assert!(
            (e["value"].as_f64().unwrap() - mean).abs() < 1e-12,
            "{spec} {name}: {e}"
        );
        assert!(e["ci_low"].as_f64().unwrap() <= mean && mean <= e["ci_high"].as_f64().unwrap());
        assert_eq!(
            g["few_cases"].as_bool(),
            Some(cases.len() < 10),
            "{spec} {name}"
        );
        if cases.len() >= 10 {
            means.insert(name.to_string(), mean);
        }
    }
    let gap = &number["subgroups"]["gap"];
    if means.len() < 2 {
        assert!(
            gap.is_null(),
            "{spec}: no gap without two subgroups of 10 cases: {gap}"
        );
        return;
    }
    let best = means.values().cloned().fold(f64::MIN, f64::max);
    let worst = means.values().cloned().fold(f64::MAX, f64::min);
    assert!(
        (gap["gap"]["value"].as_f64().unwrap() - (best - worst)).abs() < 1e-12,
        "{gap}"
    );
    assert_eq!(means[gap["best"].as_str().unwrap()], best, "{gap}");
    assert_eq!(means[gap["worst"].as_str().unwrap()], worst, "{gap}");
    assert_eq!(gap["compared"].as_u64(), Some(means.len() as u64));
    let (low, high) = (
        gap["gap"]["ci_low"].as_f64().unwrap(),
        gap["gap"]["ci_high"].as_f64().unwrap(),
    );
    assert!(low <= best - worst && best - worst <= high, "{gap}");
}

/// Checks a score report's `subgroups` for `specs` against its own samples and tasks.
fn check_breakdown(report: &Value, specs: &[&str]) {
    let fields = report["subgroups"]["fields"].as_array().unwrap();
    assert_eq!(fields.len(), specs.len());
    for (field, spec) in fields.iter().zip(specs) {
        assert_eq!(field["spec"], *spec);
        for (task, group) in field["tasks"].as_object().unwrap() {
            let i = case_index(task.trim_end_matches("/dx"));
            assert_eq!(group.as_str().unwrap(), label(spec, i), "{task}");
        }
        let numbers = field["numbers"].as_array().unwrap();
        let named = |n: &str| {
            let names: Vec<&Value> = numbers.iter().map(|x| &x["number"]).collect();
            numbers
                .iter()
                .find(|x| x["number"] == n)
                .unwrap_or_else(|| panic!("no {n} in {names:?}"))
        };
        check_number(spec, named("accuracy"), &answers(report));
        check_number(spec, named("pass@5"), &pass_at_5(report));
    }
}

#[test]
fn each_headline_number_is_broken_down_by_subgroup_in_scores_reports_and_compare() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let suite = suite(dir.path());
    let (ms, glioma) = (answering("Multiple sclerosis"), answering("Glioblastoma"));
    let mut ids = Vec::new();
    for (model, server) in [("alpha", &ms), ("beta", &glioma)] {
        let out = eval(
            &runs,
            &suite,
            &format!("openai:{model}@{}/v1", server.url()),
            &[],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        ids.push(json_of(&out)["run_id"].as_str().unwrap().to_string());
    }
    let specs = ["sex", "age:0-40,40-65,65-"];
    let plain = json_of(&score(&runs, &ids[0], &[]));
    assert!(plain.get("subgroups").is_none() && plain["config"].get("by").is_none());
    let mut reports = Vec::new();
    for id in &ids {
        let out = score(&runs, id, &specs);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let report = json_of(&out);
        assert_eq!(report["config"]["by"], serde_json::json!(specs));
        assert_ne!(
            report["config"]["config_hash"],
            plain["config"]["config_hash"]
        );
        check_breakdown(&report, &specs);
        reports.push(report);
    }
    // Women and men have 12 cases each: a gap, with the women (right two times in three) the best for alpha.
    let sex_accuracy = &reports[0]["subgroups"]["fields"][0]["numbers"][0];
    assert_eq!(sex_accuracy["subgroups"]["gap"]["best"], "female");
    // The 65- band has one case: shown and marked, never dropped.
    let age_groups = &reports[0]["subgroups"]["fields"][1]["numbers"][0]["subgroups"]["groups"];
    assert_eq!(age_groups[2]["group"], "65-");
    assert_eq!(age_groups[2]["few_cases"], true);

    // The report: the section in report.json, Markdown and HTML.
    let out_dir = dir.path().join("report");
    let out = nmb_command(&runs)
        .args([
            "report",
            &ids[0],
            &ids[1],
            "--format",
            "html,md,json",
            "--out",
        ])
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    let rows = json["sections"]["subgroups"].as_array().unwrap();
    let mut want_rows = 0;
    for r in &reports {
        for f in r["subgroups"]["fields"].as_array().unwrap() {
            for n in f["numbers"].as_array().unwrap() {
                want_rows += n["subgroups"]["groups"].as_array().unwrap().len();
                want_rows += usize::from(!n["subgroups"]["gap"].is_null());
            }
        }
    }
    assert_eq!(rows.len(), want_rows);
    let first = &rows[0];
    let group = &sex_accuracy["subgroups"]["groups"][0];
    assert_eq!(
        (&first["by"], &first["number"], &first["subgroup"]),
        (
            &Value::from("sex"),
            &Value::from("accuracy"),
            &group["group"]
        )
    );
    assert_eq!(first["estimate"], group["estimate"]);
    assert!(rows.iter().any(|r| r["gap"]["best"] == "female"));
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("### Subgroups"), "{md}");
    assert!(
        md.contains("| 65- |") && md.contains("under 10 cases"),
        "{md}"
    );
    assert!(md.contains("gap: female − male"), "{md}");
    let page = out_dir.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"subgroups\"") && html.contains("gap: female − male"));

    // At report time, by a field the scorings did not use.
    let late = dir.path().join("late");
    let out = nmb_command(&runs)
        .args([
            "report", &ids[0], "--by", "site", "--format", "json", "--out",
        ])
        .arg(&late)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(late.join("report.json")).unwrap()).unwrap();
    let rows = json["sections"]["subgroups"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["by"] == "site"), "{rows:?}");
    let sites: BTreeSet<&str> = rows.iter().filter_map(|r| r["subgroup"].as_str()).collect();
    assert_eq!(sites, BTreeSet::from(["east", "north", "south"]));

    check_compare(&runs, &ids, &reports);

    let Some(chromium) = browser::chromium() else {
        return;
    };
    let (dom, log) = browser::dump_dom(&chromium, &page);
    assert!(dom.contains("id=\"subgroups\""), "rendered; log:\n{log}");
    assert!(dom.contains("gap: female − male"), "rendered; log:\n{log}");
    let png = browser::screenshot_dir().join("report-subgroups.png");
    browser::screenshot(&chromium, &page, &png, 1280, 2400);
}

/// `nmb compare`: per subgroup of each field, the paired items, both runs' accuracy and their difference.
fn check_compare(runs: &Path, ids: &[String], reports: &[Value]) {
    let out = nmb_command(runs)
        .args(["compare", &ids[0], &ids[1], "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let cmp = json_of(&out);
    let fields = cmp["subgroups"].as_array().unwrap();
    assert_eq!(fields.len(), 2);
    let key = |s: &Value| {
        (
            s["task_id"].as_str().unwrap().to_string(),
            s["sample_index"].as_u64().unwrap(),
        )
    };
    let scored = |r: &Value| -> BTreeMap<(String, u64), (f64, usize)> {
        r["samples"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| matches!(s["status"].as_str(), Some("ok" | "parse_failed")))
            .map(|s| {
                let v = if s["correct"] == Value::Bool(true) {
                    1.0
                } else {
                    0.0
                };
                (key(s), (v, case_index(s["case_id"].as_str().unwrap())))
            })
            .collect()
    };
    let (a, b) = (scored(&reports[0]), scored(&reports[1]));
    for f in fields {
        let spec = f["by"].as_str().unwrap();
        for row in f["subgroups"].as_array().unwrap() {
            let name = row["subgroup"].as_str().unwrap();
            let pairs: Vec<(f64, f64, usize)> = a
                .iter()
                .filter_map(|(k, &(va, i))| Some((va, b.get(k)?.0, i)))
                .filter(|&(_, _, i)| label(spec, i) == name)
                .collect();
            let cases: BTreeSet<usize> = pairs.iter().map(|p| p.2).collect();
            assert_eq!(
                row["items"].as_u64(),
                Some(pairs.len() as u64),
                "{spec} {name}"
            );
            assert_eq!(row["cases"].as_u64(), Some(cases.len() as u64));
            assert_eq!(row["few_cases"].as_bool(), Some(cases.len() < 10));
            let mean = |f: fn(&(f64, f64, usize)) -> f64| {
                pairs.iter().map(f).sum::<f64>() / pairs.len() as f64
            };
            let (ma, mb) = (mean(|p| p.0), mean(|p| p.1));
            let p = &row["paired"];
            assert!((p["mean_a"].as_f64().unwrap() - ma).abs() < 1e-12, "{row}");
            assert!((p["mean_b"].as_f64().unwrap() - mb).abs() < 1e-12, "{row}");
            assert!((p["diff"]["value"].as_f64().unwrap() - (ma - mb)).abs() < 1e-12);
        }
        // The field's subgroups are one family: their p-values adjusted together, as nmb-stats adjusts them.
        let rows = f["subgroups"].as_array().unwrap();
        let raw: Vec<f64> = rows
            .iter()
            .filter_map(|r| r["paired"]["p_value"].as_f64())
            .collect();
        let want = nmb_stats::adjust_family(&raw).unwrap();
        let got: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r["paired"].is_object())
            .map(|r| {
                let a = &r["p_adjusted"];
                (a["holm"].as_f64().unwrap(), a["bh"].as_f64().unwrap())
            })
            .collect();
        assert_eq!(got.len(), want.len(), "{spec}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(*g, (w.holm, w.bh), "{spec}");
        }
    }
    let out = nmb_command(runs)
        .args(["compare", &ids[0], &ids[1]])
        .output()
        .unwrap();
    let table = text(&out.stdout);
    assert!(
        table.contains("by sex") && table.contains("by age:0-40,40-65,65-"),
        "{table}"
    );
    assert!(table.contains("gap in A - B between"), "{table}");
    assert!(
        table.contains("adjust the p-values of this field's subgroups as one family"),
        "{table}"
    );
}

#[test]
fn a_field_cases_lack_and_bad_bands_stop_before_scoring_and_before_asking() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let suite = suite(dir.path());
    let server = answering("Multiple sclerosis");
    let spec = format!("openai:alpha@{}/v1", server.url());
    let out = eval(&runs, &suite, &spec, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run = json_of(&out)["run_id"].as_str().unwrap().to_string();
    let stored = |runs: &Path| store(runs).latest_score_report(&run).unwrap();
    let before = stored(&runs);
    let refused = |by: &str, words: &[&str]| {
        let out = score(&runs, &run, &[by]);
        assert_eq!(out.status.code(), Some(1), "--by {by}");
        let err = text(&out.stderr);
        for w in words {
            assert!(err.contains(w), "--by {by}: `{w}` missing from: {err}");
        }
    };
    refused(
        "scanner",
        &[
            "`scanner`",
            "1 of 24 cases",
            "`case5`",
            "expected every case",
        ],
    );
    refused("age:0-40,30-65,65-", &["`30-65`", "`0-40`", "overlap"]);
    refused("age:0-40,45-", &["`0-40`", "`45-`", "from 40 to 45"]);
    refused("age:30-", &["`case0`", "age = 20", "none of the bands 30-"]);
    refused("sex:0-1,1-", &["`case0`", "expected a number"]);
    assert!(stored(&runs) == before, "nothing was scored");

    // An evaluation with a field its cases lack stops before it asks anything.
    let fresh = answering("Multiple sclerosis");
    let asked = fresh.request_count();
    let out = eval(
        &runs,
        &suite,
        &format!("openai:beta@{}/v1", fresh.url()),
        &["--by", "scanner"],
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("`case5`"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(fresh.request_count(), asked, "no request was sent");
}
