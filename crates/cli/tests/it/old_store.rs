//! A run store written by nmb before the run manifest was typed and model and judge calls shared one path
//! (commit d64a7b6, `fixtures/make-old-store.sh`) still opens, rescores to the same bytes, resumes without
//! asking anything twice, and reports.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use common::*;
use nmb_fake_server::Config;
use nmb_results::ScoreReport;
use serde_json::Value;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/store-nmb-0.1.0-d64a7b6.sqlite"
);
/// The fixture's runs name a server on this port: the base URL is part of a run's configuration.
const PORT: u16 = 39217;

fn copy_of_old_store() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(FIXTURE, dir.path().join("nmb.sqlite")).expect("copy the fixture");
    dir
}

/// The runs the fixture holds, by model name: `fake-model` (finished, scored), `fake-judge` (its judge run) and
/// `fake-model-b` (interrupted in the middle of two consults).
fn runs_by_model(runs: &Path) -> BTreeMap<String, Value> {
    let listed = json_of(&nmb(runs, &["runs", "list", "--json"]));
    listed
        .as_array()
        .expect("a list")
        .iter()
        .map(|r| {
            let model = r["manifest"]["model"].as_str().unwrap_or("");
            let name = model.split(['@', ':']).nth(1).unwrap_or("").to_string();
            (name, r.clone())
        })
        .collect()
}

/// The report without what nmb counts since the fixture was made: each answer's and each group's median
/// `answer_words`.
fn without_newer_numbers(r: &mut ScoreReport) {
    for s in &mut r.samples {
        s.facts = Default::default();
    }
    let groups = std::iter::once(&mut r.overall)
        .chain(&mut r.by_level_family)
        .chain(&mut r.by_family)
        .chain(&mut r.by_level)
        .chain(&mut r.by_disease_group)
        .chain(&mut r.by_modality);
    for g in groups {
        g.answer_words = None;
    }
}

fn stored_reports(runs: &Path, run_id: &str) -> BTreeMap<String, String> {
    store(runs)
        .with_conn("read score reports", |c| {
            let mut stmt =
                c.prepare("SELECT config_hash, report FROM score_reports WHERE run_id = ?1")?;
            let rows = stmt.query_map([run_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
        .expect("score reports")
}

/// (task, sample, turn) of every answered turn of a run.
fn answered_turns(runs: &Path, run_id: &str) -> Vec<(String, u32, u32)> {
    let samples = store(runs).run_samples(run_id).expect("samples");
    samples
        .iter()
        .flat_map(|s| {
            s.turns
                .iter()
                .filter(|t| t.ok)
                .map(|t| (s.task_id.clone(), s.sample_index, t.turn_index))
        })
        .collect()
}

#[test]
fn a_store_from_the_previous_version_rescores_resumes_and_reports() {
    let dir = copy_of_old_store();
    let runs = dir.path();
    let by_model = runs_by_model(runs);
    let (scored, judge, unfinished) = (
        &by_model["fake-model"],
        &by_model["fake-judge"],
        &by_model["fake-model-b"],
    );
    let scored_id = scored["run_id"].as_str().unwrap();
    assert_eq!(scored["status"], "finished");
    assert_eq!(judge["manifest"]["kind"], "judge");
    assert_eq!(judge["manifest"]["scored_run_id"], scored_id);
    assert_eq!(unfinished["status"], "interrupted");

    // Rescoring with the same options finds the same configuration and writes the same bytes, once the numbers
    // this nmb counts and the fixture's did not are set aside; the old stored report reads back to its own bytes.
    let before = stored_reports(runs, scored_id);
    let out = nmb(runs, &["score", scored_id, "--no-bertscore", "--json"]);
    let report = json_of(&out);
    let hash = report["config"]["config_hash"]
        .as_str()
        .unwrap()
        .to_string();
    let after = stored_reports(runs, scored_id);
    assert!(
        before.contains_key(&hash),
        "the scoring configuration hash changed: {hash} not among {:?}",
        before.keys()
    );
    let old = &before[&hash];
    let reread: ScoreReport = serde_json::from_str(old).expect("the old report reads");
    assert!(
        serde_json::to_string(&reread).unwrap() == *old,
        "reading the old stored report changed its bytes"
    );
    let mut rescored: ScoreReport = serde_json::from_str(&after[&hash]).expect("the report reads");
    without_newer_numbers(&mut rescored);
    assert!(
        serde_json::to_string(&rescored).unwrap() == *old,
        "rescoring changed the stored report's bytes"
    );

    // A judge run is refused, naming the run it judged.
    let out = nmb(runs, &["score", judge["run_id"].as_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains(scored_id),
        "{}",
        text(&out.stderr)
    );

    // The same command resumes the unfinished run and asks only for what was never answered.
    let server = server(Config {
        port: PORT,
        ..Config::default()
    });
    let unfinished_id = unfinished["run_id"].as_str().unwrap();
    let answered_before = answered_turns(runs, unfinished_id);
    assert!(!answered_before.is_empty());
    let url = format!("http://127.0.0.1:{PORT}/v1");
    let out = nmb(
        runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            &format!("openai:fake-model-b@{url}"),
            "--samples",
            "2",
            "--filter",
            "level=multi_turn",
            "--limit",
            "2",
            "--inputs",
            "text",
            "--no-score",
            "--json",
            "-q",
        ],
    );
    let resumed = json_of(&out);
    assert_eq!(resumed["run_id"], unfinished_id);
    assert_eq!(resumed["resumed"], true);
    assert_eq!(resumed["summary"]["samples_pending"], 0);
    // Every request brought a turn that had no answer: none re-asked a stored one.
    let answered_after = answered_turns(runs, unfinished_id);
    assert!(answered_before.iter().all(|t| answered_after.contains(t)));
    let requests = server.requests().len();
    assert!(requests > 0);
    assert_eq!(requests, answered_after.len() - answered_before.len());

    // Both model runs report.
    let out_dir = runs.join("report");
    let out = nmb(
        runs,
        &[
            "report",
            scored_id,
            unfinished_id,
            "--out",
            out_dir.to_str().unwrap(),
            "--format",
            "html,json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out_dir.join("report.html").is_file());
}

/// The configuration hash is computed from the typed evaluation configuration now; for the runs an earlier nmb
/// made, the same command must still give the hash they were stored with.
#[test]
fn the_same_command_gives_the_configuration_hash_an_older_nmb_stored() {
    let dir = copy_of_old_store();
    let runs = dir.path();
    let url = format!("http://127.0.0.1:{PORT}/v1");
    let commands: [(&str, Vec<String>); 2] = [
        (
            "fake-model",
            ["--samples", "2", "--limit", "4", "--seed", "3"]
                .map(String::from)
                .to_vec(),
        ),
        (
            "fake-model-b",
            [
                "--samples",
                "2",
                "--filter",
                "level=multi_turn",
                "--limit",
                "2",
                "--inputs",
                "text",
            ]
            .map(String::from)
            .to_vec(),
        ),
    ];
    for (model, flags) in commands {
        let old = &runs_by_model(runs)[model];
        let old_id = old["run_id"].as_str().unwrap();
        let spec = format!("openai:{model}@{url}");
        let mut args = vec!["eval", "--suite", "sample", "--model", &spec, "--fresh"];
        args.extend(flags.iter().map(String::as_str));
        args.extend(["--plan-only", "--json"]);
        let planned = json_of(&nmb(runs, &args));
        let new_id = planned["run_id"].as_str().unwrap();
        assert_ne!(new_id, old_id, "--fresh plans a new run");
        let hash_of =
            |id: &str| json_of(&nmb(runs, &["runs", "show", id, "--json"]))["config_hash"].clone();
        assert_eq!(
            hash_of(new_id),
            hash_of(old_id),
            "{model}: the configuration hash changed"
        );
        assert!(hash_of(old_id).as_str().is_some_and(|h| h.len() == 64));
    }
}
