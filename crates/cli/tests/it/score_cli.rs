//! Runs the built `nmb` binary: `nmb score` and `nmb compare` on runs of the sample suite stored by
//! `nmb_run::evaluate_loaded` against the loopback fake server, with a scripted judge on another loopback server.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::Arc;

use nmb_fake_server::{Config, FakeServer, ReceivedRequest, Reply};
use nmb_requests::{
    connect, BackendOptions, HttpOptions, ModelSpec, Scheduler, SchedulerConfig, Transport,
};
use nmb_run::{evaluate_loaded, EvalSettings, Progress};
use nmb_store::Store;
use serde_json::Value;

pub(crate) fn nmb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nmb"))
        .args(args)
        .env_remove("NMB_RUNS_DIR")
        .output()
        .expect("running nmb")
}

pub(crate) fn ok_json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "nmb failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

/// A judge that answers every question validly: never equivalent, rubric 3 everywhere, knowledge gap.
pub(crate) fn judge(req: &ReceivedRequest) -> Reply {
    let text = req.all_text();
    let answer = if text.contains("Candidate") && text.contains("\"equivalent\"") {
        r#"{"equivalent": false, "rationale": "different"}"#.to_string()
    } else if text.contains("Grade the MODEL ANSWER") {
        r#"{"scores": {"diagnostic_correctness": 3, "multimodal_integration": 3, "differential_reasoning": 3, "lesion_localisation": 3, "clinical_safety": 3}, "overall": 3, "rationale": "ok"}"#.to_string()
    } else {
        r#"{"category": "knowledge_gap", "justification": "scripted"}"#.to_string()
    };
    Reply::Texts(vec![answer])
}

/// Evaluates the sample suite with `model` (the fake server's default answers) into `dir`; returns the run id.
pub(crate) fn stored_run(dir: &Path, server: &FakeServer, model: &str) -> String {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = Arc::new(Store::open_dir(dir).unwrap());
        let spec = format!("openai:{model}@{}/v1", server.url());
        let backend = connect(
            &ModelSpec::parse(&spec).unwrap(),
            &Transport::new(&HttpOptions::default()).unwrap(),
            &BackendOptions::default(),
        )
        .unwrap();
        let mut settings = EvalSettings::new(nmb_requests::ModelIdentity::of_text(&spec));
        settings.plan.samples = Some(2);
        let out = evaluate_loaded(
            &nmb_suite::sample::build(),
            store,
            Scheduler::new(SchedulerConfig::default()),
            backend,
            settings,
            Arc::new(Progress::default()),
        )
        .await
        .unwrap();
        out.run_id
    })
}

#[test]
fn score_is_idempotent_and_compare_pairs_two_runs() {
    let model_server = FakeServer::start_in_background(Config::default(), 1).unwrap();
    let judge_server = FakeServer::start_in_background(
        Config {
            responder: Arc::new(judge),
            ..Config::default()
        },
        1,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().to_str().unwrap();
    let run_a = stored_run(dir.path(), &model_server, "model-a");
    let run_b = stored_run(dir.path(), &model_server, "model-b");
    let judge_spec = format!("openai:judge-x@{}/v1", judge_server.url());

    // Not scored yet: compare says what to do.
    let out = nmb(&["compare", &run_a, &run_b, "--runs-dir", runs]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nmb score"),
        "{out:?}"
    );

    let args = |run: &str| {
        vec![
            "score".to_string(),
            run.to_string(),
            "--runs-dir".into(),
            runs.into(),
            "--judge".into(),
            judge_spec.clone(),
            "--resamples".into(),
            "200".into(),
            "--no-bertscore".into(),
            "--json".into(),
        ]
    };
    let run = |a: Vec<String>| nmb(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let first = run(args(&run_a));
    let calls = judge_server.request_count();
    let second = run(args(&run_a));
    assert_eq!(
        judge_server.request_count(),
        calls,
        "rescoring asked the judge again"
    );
    assert_eq!(first.stdout, second.stdout, "rescoring changed the JSON");
    let report = ok_json(&first);
    assert_eq!(report["run_id"], run_a.as_str());
    let groups = report["by_level_family"].as_array().unwrap();
    assert!(!groups.is_empty());
    for g in groups {
        for k in ["pass_at_1", "pass_at_5"] {
            let p = &g[k];
            assert!(
                p.get("unbiased_estimator").is_some() && p.get("top_k_in_answer").is_some(),
                "{p}"
            );
        }
        for field in ["n", "errored", "rubric", "bertscore", "accuracy"] {
            assert!(g.get(field).is_some(), "{field} missing in {g}");
        }
    }
    assert_eq!(report["config"]["judges"][0]["spec"], judge_spec.as_str());
    assert!(report["config"]["bertscore"]["skipped_reason"]
        .as_str()
        .unwrap()
        .contains("--no-bertscore"));
    // Two samples per task: reading (a) of pass@5 is missing, and says why.
    assert!(groups[0]["pass_at_5"]["unbiased_estimator"].is_null());
    assert!(groups[0]["pass_at_5"]["unbiased_note"]
        .as_str()
        .unwrap()
        .contains("fewer than 5"));

    // The table labels both readings.
    let table = nmb(&[
        "score",
        &run_a,
        "--runs-dir",
        runs,
        "--no-bertscore",
        "--resamples",
        "200",
    ]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    assert!(
        text.contains("pass@1 unbiased") && text.contains("pass@1 top-k"),
        "{text}"
    );

    ok_json(&run(args(&run_b)));
    let cmp = ok_json(&nmb(&[
        "compare",
        &run_a,
        &run_b,
        "--runs-dir",
        runs,
        "--json",
        "--resamples",
        "200",
    ]));
    let overall = &cmp["groups"][0];
    assert_eq!(overall["by"], "overall");
    assert!(overall["items"].as_u64().unwrap() > 0);
    assert!(overall["mcnemar"]["p_value"].as_f64().unwrap() <= 1.0);
    // Two samples per task: McNemar treats them as clustered by case, and says so.
    assert_eq!(overall["mcnemar"]["test"], "cluster_adjusted", "{cmp}");
    assert!(overall["paired"]["diff"]["ci_low"].is_number());
    let table = nmb(&[
        "compare",
        &run_a,
        &run_b,
        "--runs-dir",
        runs,
        "--resamples",
        "200",
    ]);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(table.status.success());
    for part in [
        "McNemar p (test)",
        "(cluster-adj.)",
        "bootstrap p",
        "overall",
        "pp",
    ] {
        assert!(text.contains(part), "{part:?} in {text}");
    }
}

#[test]
fn bad_runs_and_specs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().to_str().unwrap();
    let out = nmb(&["score", "r-nope", "--runs-dir", runs]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no run store"),
        "{out:?}"
    );

    drop(Store::open_dir(dir.path()).unwrap());
    let out = nmb(&["score", "r-nope", "--runs-dir", runs]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown run r-nope"),
        "{out:?}"
    );

    let out = nmb(&[
        "score",
        "r-nope",
        "--runs-dir",
        runs,
        "--jury-aggregate",
        "median",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// `--bertscore-idf` and `--bertscore-rescale` reach the scoring and its recorded configuration; a baseline file
/// that does not exist is an error naming it.
#[test]
fn bertscore_options_are_recorded() {
    let Some(minilm) = nmb_test_support::assets::minilm_dir() else {
        return;
    };
    let server = FakeServer::start_in_background(Config::default(), 1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().to_str().unwrap();
    let run = stored_run(dir.path(), &server, "model-a");
    let model = minilm.to_str().unwrap();
    let base = [
        "score",
        &run,
        "--runs-dir",
        runs,
        "--bertscore-model",
        model,
        "--json",
    ];
    let raw = ok_json(&nmb(&base));
    assert_eq!(raw["config"]["bertscore"]["idf"], false);
    assert!(raw["config"]["bertscore"].get("baseline").is_none());
    let tuned = ok_json(&nmb(&[
        &base[..],
        &["--bertscore-idf", "--bertscore-rescale", "default"],
    ]
    .concat()));
    let b = &tuned["config"]["bertscore"];
    assert_eq!(b["idf"], true, "{b}");
    assert_eq!(b["rescaled"], true);
    assert!(b["baseline"]["source"]
        .as_str()
        .unwrap()
        .contains("all-MiniLM-L6-v2"));
    assert_ne!(tuned["config"]["config_hash"], raw["config"]["config_hash"]);
    let missing = dir.path().join("no-such-baseline.tsv");
    let out = nmb(&[
        &base[..],
        &["--bertscore-rescale", missing.to_str().unwrap()],
    ]
    .concat());
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no-such-baseline.tsv"),
        "{out:?}"
    );
}
