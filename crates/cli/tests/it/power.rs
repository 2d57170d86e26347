//! The conclusions a reader draws from paired comparisons, end to end against the fake server: two models whose
//! answers are right at different rates (three samples a task, two tasks a case) are evaluated and scored;
//! `nmb compare` shows each p-value with its Holm and Benjamini–Hochberg adjusted values and the family under the
//! table, equal to nmb-stats' adjustment of the p-values it printed; `nmb power` gives the detectable difference
//! nmb-stats computes from the stored per-case scores, and refuses an unscored run, runs on other suites and runs
//! without a common case by name; the report shows worst-at-k beside pass@k (equal to a direct computation over
//! the stored samples, never rising with k), in HTML (rendered by Chromium), Markdown and report.json.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use nmb_fake_server::{Config, FakeServer, ReceivedRequest, Reply, Wire};
use nmb_test_support::browser;
use serde_json::Value;

const REFERENCE: &str = "Multiple sclerosis";
const CASES: usize = 24;
const SAMPLES: &str = "3";

/// A native suite of `cases` cases with two differential tasks each, every reference multiple sclerosis.
fn suite(dir: &Path, id: &str, cases: usize) -> PathBuf {
    let root = dir.join(id);
    std::fs::create_dir_all(root.join("images")).unwrap();
    std::fs::write(
        root.join("suite.toml"),
        format!("id = \"{id}\"\nversion = \"1\"\n[defaults]\nlevel = \"direct\"\n"),
    )
    .unwrap();
    let mut lines = Vec::new();
    for i in 0..cases {
        let png = nmb_fake_server::support::noise_png(16, i as u64);
        let name = format!("images/case{i}.png");
        std::fs::write(root.join(&name), png).unwrap();
        let task = |t: usize| {
            serde_json::json!({"id": format!("c{i}t{t}"), "family": "differential",
                "question": format!("Case {i}, question {t}: the most likely diagnosis?"),
                "reference": {"diagnosis": REFERENCE}})
        };
        let case = serde_json::json!({
            "case_id": format!("case{i}"),
            "images": [{"path": name, "modality": "MRI", "sequence": "FLAIR", "plane": "axial"}],
            "ehr": {"Age": 40 + i, "Sex": "female"},
            "notes": "Relapsing numbness and blurred vision.",
            "tasks": [task(0), task(1)],
        });
        lines.push(case.to_string());
    }
    std::fs::write(root.join("cases.jsonl"), lines.join("\n") + "\n").unwrap();
    root
}

/// A number in [0, 1) from the model, the conversation and the sample: each model's own draws.
fn draw(req: &ReceivedRequest, i: usize, salt: &str) -> f64 {
    let key = format!("{}|{}|{i}|{salt}", req.model, req.conversation_sha256);
    let h = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Answers right with a chance that depends on the model (`strong` more often) and on the question (a hard half
/// of the questions is harder for both), so answers of a case and of the two models correlate.
fn server() -> FakeServer {
    crate::common::server(Config {
        responder: Arc::new(|req| {
            let hard = draw(req, 0, "difficulty") < 0.5;
            let base = if req.model.contains("strong") {
                0.8
            } else {
                0.55
            };
            let chance = if hard { base - 0.3 } else { base };
            let texts = (0..req.samples() as usize)
                .map(|i| {
                    let top = if draw(req, i, "answer") < chance {
                        REFERENCE
                    } else {
                        "Migraine"
                    };
                    serde_json::json!({"differential": [
                        {"rank": 1, "diagnosis": top, "evidence": "lesions"}]})
                    .to_string()
                })
                .collect();
            Reply::Texts(texts)
        }),
        ..Config::default()
    })
}

fn eval(runs: &Path, suite: &Path, spec: &str, extra: &[&str]) -> String {
    let (out, run_id) = eval_output(runs, suite, spec, extra);
    assert!(
        out.status.success(),
        "{:?} {}{}",
        out.status,
        text(&out.stderr),
        text(&out.stdout)
    );
    run_id
}

/// `nmb eval`'s output and the run id it printed (also when every sample errored, which exits 1).
fn eval_output(
    runs: &Path,
    suite: &Path,
    spec: &str,
    extra: &[&str],
) -> (std::process::Output, String) {
    let out = nmb_command(runs)
        .args(["eval", "--suite"])
        .arg(suite)
        .args(["--model", spec, "--samples", SAMPLES, "--max-retries", "0"])
        .args(["--no-bertscore", "--json", "-q"])
        .args(extra)
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let run_id = doc["run_id"].as_str().unwrap_or_default().to_string();
    (out, run_id)
}

/// Two scored runs of different models on one suite, and the store's score reports of both.
struct Fixture {
    _dir: tempfile::TempDir,
    runs: PathBuf,
    suite: PathBuf,
    server: FakeServer,
    a: String,
    b: String,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let suite = suite(dir.path(), "power-suite", CASES);
    let server = server();
    let spec = model_spec(Wire::OpenAi, &server);
    let a = eval(&runs, &suite, &spec.replace("test-model", "strong"), &[]);
    let b = eval(&runs, &suite, &spec.replace("test-model", "weak"), &[]);
    Fixture {
        _dir: dir,
        runs,
        suite,
        server,
        a,
        b,
    }
}

fn latest(runs: &Path, run: &str) -> nmb_results::ScoreReport {
    nmb_results::stored::latest(&store(runs), run)
        .unwrap()
        .expect("scored")
}

#[test]
fn compare_adjusts_every_p_value_of_its_table_and_states_the_family() {
    let f = fixture();
    let out = nmb(
        &f.runs,
        &["compare", &f.a, &f.b, "--json", "--alpha", "0.1"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc = json_of(&out);
    let groups = doc["groups"].as_array().unwrap();
    let boot: Vec<f64> = (groups.iter())
        .filter_map(|g| g["paired"]["p_value"].as_f64())
        .collect();
    let mcn: Vec<f64> = (groups.iter())
        .filter_map(|g| g["mcnemar"]["p_value"].as_f64())
        .collect();
    assert!(boot.len() >= 2, "overall and the level · family group");
    let m = &doc["multiplicity"];
    assert_eq!(m["alpha"], 0.1);
    assert_eq!(m["bootstrap_family"], boot.len());
    assert_eq!(m["mcnemar_family"], mcn.len());
    let rows = m["rows"].as_array().unwrap();
    assert_eq!(rows.len(), groups.len());
    for (values, key) in [(&boot, "bootstrap"), (&mcn, "mcnemar")] {
        let want = nmb_stats::adjust_family(values).unwrap();
        for (row, w) in rows.iter().zip(&want) {
            let got = &row[key];
            assert_eq!(got["raw"].as_f64().unwrap(), w.raw, "{key}");
            assert_eq!(got["holm"].as_f64().unwrap(), w.holm, "{key}");
            assert_eq!(got["bh"].as_f64().unwrap(), w.bh, "{key}");
            assert_eq!(got["holm_significant"], w.holm <= 0.1);
            assert_eq!(got["bh_significant"], w.bh <= 0.1);
            assert!(w.holm >= w.raw && w.bh >= w.raw);
        }
    }
    assert!(rows
        .iter()
        .any(|r| r["bootstrap"]["holm"].as_f64() != r["bootstrap"]["raw"].as_f64()));

    let out = nmb(&f.runs, &["compare", &f.a, &f.b]);
    let table = text(&out.stdout);
    for header in ["bootstrap p", "Holm", "BH", "McNemar Holm", "McNemar BH"] {
        assert!(table.contains(header), "{header}: {table}");
    }
    let family = format!(
        "{} bootstrap p-values and {} McNemar p-values, from 1 pair(s) of runs",
        boot.len(),
        mcn.len()
    );
    assert!(table.contains(&family), "{table}");
    assert!(table.contains("α = 0.05"), "{table}");
    let bad = nmb(&f.runs, &["compare", &f.a, &f.b, "--alpha", "1.5"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("between 0 and 1"));
}

/// The per-item scores of the answers both runs scored, as `nmb compare` pairs them.
fn paired_items(
    a: &nmb_results::ScoreReport,
    b: &nmb_results::ScoreReport,
) -> Vec<(f64, f64, String, String)> {
    let scored = |r: &nmb_results::ScoreReport| -> BTreeMap<(String, u32), (f64, String)> {
        (r.samples.iter())
            .filter(|s| s.status.is_scored())
            .map(|s| {
                let v = f64::from(u8::from(s.correct == Some(true)));
                ((s.task_id.clone(), s.sample_index), (v, s.case_id.clone()))
            })
            .collect()
    };
    let (sa, sb) = (scored(a), scored(b));
    (sa.iter())
        .filter_map(|(k, (x, case))| Some((*x, sb.get(k)?.0, case.clone(), k.0.clone())))
        .collect()
}

#[test]
fn power_of_two_runs_is_nmb_stats_on_the_stored_scores_and_its_errors_name_the_run() {
    let f = fixture();
    let out = nmb(&f.runs, &["power", &f.a, &f.b, "--detect", "0.1", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc = json_of(&out);
    let items = paired_items(&latest(&f.runs, &f.a), &latest(&f.runs, &f.b));
    let a: Vec<f64> = items.iter().map(|i| i.0).collect();
    let b: Vec<f64> = items.iter().map(|i| i.1).collect();
    let cases: Vec<&str> = items.iter().map(|i| i.2.as_str()).collect();
    let tasks: Vec<&str> = items.iter().map(|i| i.3.as_str()).collect();
    let v = nmb_stats::PairedVariance::estimate(&a, &b, &cases, &tasks).unwrap();
    let want = nmb_stats::power_summary(&v, nmb_stats::PairedTest::Bootstrap, 0.05, 0.8, Some(0.1))
        .unwrap();
    let got = &doc["tests"][0];
    assert_eq!(got["test"], "bootstrap");
    assert_eq!(
        got["detectable_difference"].as_f64().unwrap(),
        want.detectable_difference
    );
    assert_eq!(
        got["cases_needed"].as_u64().unwrap() as usize,
        want.cases_needed.unwrap()
    );
    assert_eq!(got["variance"]["cases"], CASES);
    assert_eq!(got["variance"]["samples_per_task"], 3.0);
    assert!(want.detectable_difference > 0.0 && want.detectable_difference < 1.0);

    let out = nmb(&f.runs, &["power", &f.a, &f.b]);
    let t = text(&out.stdout);
    let sentence = format!(
        "With {CASES} cases ({} paired answers) this suite detects differences in accuracy of {:.1} points or more \
         with 80% power at α = 0.05",
        items.len(),
        want.detectable_difference * 100.0
    );
    assert!(t.contains(&sentence), "{t}");

    // One run: the correlation assumption is stated.
    let one = json_of(&nmb(
        &f.runs,
        &["power", &f.a, "--json", "--correlation", "0.3"],
    ));
    assert!(
        one["assumption"].as_str().unwrap().contains("ρ = 0.3"),
        "{one}"
    );

    // An unscored run, a run on another suite, and a run with no scored answer in common are refused by name.
    let spec = model_spec(Wire::OpenAi, &f.server);
    let unscored = eval(
        &f.runs,
        &f.suite,
        &spec.replace("test-model", "other"),
        &["--no-score"],
    );
    let dir = tempfile::tempdir().unwrap();
    let other_suite = suite(dir.path(), "other-suite", 3);
    let elsewhere = eval(
        &f.runs,
        &other_suite,
        &spec.replace("test-model", "weak"),
        &[],
    );
    let refusing = always(400, "{\"error\": {\"message\": \"no\"}}".into());
    let (out, errored) = eval_output(&f.runs, &f.suite, &model_spec(Wire::OpenAi, &refusing), &[]);
    assert!(text(&out.stdout).contains("\"all_errored\":true"));
    for (args, words) in [
        (
            vec![f.a.as_str(), unscored.as_str()],
            vec![unscored.as_str(), "nmb score"],
        ),
        (
            vec![f.a.as_str(), elsewhere.as_str()],
            vec![f.a.as_str(), elsewhere.as_str(), "different suites"],
        ),
        (
            vec![f.a.as_str(), errored.as_str()],
            vec![errored.as_str(), "no case scored in both"],
        ),
        (
            vec![errored.as_str()],
            vec![errored.as_str(), "no scored answer"],
        ),
    ] {
        let out = nmb(&f.runs, &[&["power"], args.as_slice()].concat());
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let e = text(&out.stderr);
        for w in words {
            assert!(e.contains(w), "{args:?}: {w:?} in {e}");
        }
    }
}

/// Worst-at-k of every task straight from its samples: C(c, k) / C(n, k), averaged over tasks with n >= k.
fn direct_worst(samples: &[Value], k: usize) -> f64 {
    let mut tasks: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for s in samples
        .iter()
        .filter(|s| matches!(s["status"].as_str(), Some("ok" | "parse_failed")))
    {
        let e = tasks.entry(s["task_id"].as_str().unwrap()).or_default();
        e.0 += 1;
        e.1 += usize::from(s["correct"] == true);
    }
    let choose =
        |n: usize, k: usize| -> f64 { (0..k).map(|i| (n - i) as f64 / (k - i) as f64).product() };
    let values: Vec<f64> = (tasks.values())
        .filter(|(n, _)| *n >= k)
        .map(|&(n, c)| {
            if c < k {
                0.0
            } else {
                choose(c, k) / choose(n, k)
            }
        })
        .collect();
    values.iter().sum::<f64>() / values.len() as f64
}

#[test]
fn the_report_shows_worst_at_k_beside_pass_at_k_adjusted_p_values_and_the_power_sentence() {
    let f = fixture();
    let out_dir = f.runs.parent().unwrap().join("report");
    let o = nmb_command(&f.runs)
        .args([
            "report",
            &f.a,
            &f.b,
            "--format",
            "html,md,json",
            "--resamples",
            "200",
        ])
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("report.json")).unwrap())
            .unwrap();
    let analysis = &doc["analysis"];
    let curves = analysis["worst_at_k"].as_array().unwrap();
    assert_eq!(curves.len(), 2, "one accuracy curve per run");
    for (curve, run) in curves.iter().zip(doc["runs"].as_array().unwrap()) {
        assert_eq!(curve["run_id"], run["run_id"]);
        assert_eq!(curve["score"], "accuracy");
        let samples = run["scores"]["samples"].as_array().unwrap();
        let points = curve["points"].as_array().unwrap();
        assert_eq!(points.len(), 3, "k = 1..n with n = 3");
        let values: Vec<f64> = (points.iter())
            .map(|p| p["worst_at_k"]["value"].as_f64().unwrap())
            .collect();
        for (k, (p, v)) in points.iter().zip(&values).enumerate() {
            assert_eq!(p["k"], k + 1);
            assert!(
                (v - direct_worst(samples, k + 1)).abs() < 1e-12,
                "k={}",
                k + 1
            );
            let pass = p["pass_at_k"]["value"].as_f64().unwrap();
            assert!(pass >= *v, "pass@k is never below worst-at-k");
            let e = &p["worst_at_k"];
            assert!(e["ci_low"].as_f64().unwrap() <= *v && *v <= e["ci_high"].as_f64().unwrap());
        }
        assert!(values.windows(2).all(|w| w[1] <= w[0]), "{values:?}");
        assert!(
            values[2] < values[0],
            "three samples disagree somewhere: {values:?}"
        );
    }
    let m = &analysis["multiplicity"];
    assert_eq!(m["comparisons"], 1);
    assert!(m["family"].as_str().unwrap().contains("bootstrap p-values"));
    let power = &analysis["power"][0];
    assert_eq!(power["run_a"], doc["runs"][0]["run_id"]);

    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("## Worst-at-k beside pass@k"), "{md}");
    assert!(md.contains("| worst-at-k [95% CI] |"));
    assert!(md.contains("| McNemar Holm |"));
    assert!(md.contains("Multiple comparisons: each p-value column is one family"));
    assert!(md.contains("this suite detects differences in accuracy of"));
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.contains("id=\"worst-at-k-table\""));
    assert!(html.contains("aria-label=\"Worst-at-k and pass@k, accuracy\""));
    assert!(html.contains("<th>McNemar BH</th>"));
    assert!(html.contains("<p class=\"power\">"));
    assert!(!html.contains("<script"));

    let Some(chromium) = browser::chromium() else {
        return;
    };
    let page = out_dir.join("report.html");
    let (dom, log) = browser::dump_dom(&chromium, &page);
    assert!(
        dom.contains("id=\"worst-at-k-table\""),
        "rendered; log:\n{log}"
    );
    assert!(dom.contains("aria-label=\"Worst-at-k and pass@k, accuracy\""));
    // Per run: three worst-at-k points and three pass@k points.
    assert!(
        dom.matches("class=\"curve-point\"").count() >= 12,
        "the curves' points are rendered"
    );
    assert!(dom.contains("Multiple comparisons: each p-value column is one family"));
    let png = browser::screenshot_dir().join("report-worst-at-k.png");
    browser::screenshot(&chromium, &page, &png, 1280, 2600);
}
