//! `nmb store copy FROM TO`: runs made on SQLite go to PostgreSQL and back to another runs directory, and score
//! there byte for byte as they did where they started; copying again skips them; the password never shows.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::*;
use nmb_fake_server::{Config, Wire};
use nmb_test_support::postgres::cluster;
use serde_json::Value;

/// `nmb ARGS` after checking that the password is in neither stream.
fn run_checked(dir: &Path, args: &[&str]) -> Output {
    let out = nmb(dir, args);
    let password = cluster().map(|pg| pg.password()).unwrap_or_default();
    for stream in [&out.stdout, &out.stderr] {
        let shown = text(stream);
        assert!(
            password.is_empty() || !shown.contains(password),
            "the password was printed: {}",
            shown.replace(password, "<PASSWORD>")
        );
    }
    out
}

fn stored_report(dir: &Path, run_id: &str) -> Option<String> {
    store(dir).latest_score_report(run_id).unwrap()
}

#[test]
fn runs_copied_to_postgres_and_back_score_byte_for_byte_the_same() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let tmp = tempfile::tempdir().unwrap();
    let (dir, back) = (tmp.path().join("runs"), tmp.path().join("back"));
    let (dir_s, back_s) = (dir.to_str().unwrap(), back.to_str().unwrap());
    let server = server(Config::default());
    let model = model_spec(Wire::OpenAi, &server);
    let eval = [
        "eval",
        "--suite",
        "sample",
        "--model",
        &model,
        "--samples",
        "2",
        "--limit",
        "6",
        "--no-bertscore",
        "--json",
        "-q",
    ];
    let run_id = json_of(&nmb(&dir, &eval))["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The same configuration again: a second run, answered from the first one's calls.
    let rerun = json_of(&nmb(&dir, &eval));
    assert_eq!(rerun["summary"]["cache_hits"], 12);
    let rerun_id = rerun["run_id"].as_str().unwrap().to_string();

    // Only the second run is asked for; the run its answers came from comes along.
    let copy = ["store", "copy", dir_s, &url, "--run", &rerun_id];
    let to_pg = json_of(&run_checked(&dir, &[&copy[..], &["--json"]].concat()));
    assert_eq!(to_pg["runs"], 2, "{to_pg}");
    assert_eq!(to_pg["runs_added_for_cache_hits"], 1);
    assert_eq!(
        to_pg["cache_origin_run_ids"],
        Value::from(vec![run_id.clone()])
    );
    assert!(to_pg["to"].as_str().unwrap().contains("***"), "{to_pg}");
    let again = run_checked(&dir, &copy);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("copied 0 run(s)") && text(&again.stdout).contains("skipped"),
        "{}",
        text(&again.stdout)
    );
    let to_sqlite = json_of(&run_checked(
        &dir,
        &["store", "copy", &url, back_s, "--json"],
    ));
    assert_eq!(to_sqlite["runs"], 2, "{to_sqlite}");

    for id in [&run_id, &rerun_id] {
        let original = stored_report(&dir, id);
        assert!(original.is_some(), "nmb eval scored run {id}");
        assert_eq!(
            stored_report(&back, id),
            original,
            "the stored report of {id}"
        );
        // Scoring again reads the copied answers, so it must print (and store) the same bytes.
        let scored = nmb(&dir, &["score", id, "--json"]);
        let rescored = nmb(&back, &["score", id, "--json"]);
        assert!(rescored.status.success(), "{}", text(&rescored.stderr));
        assert_eq!(
            text(&rescored.stdout),
            text(&scored.stdout),
            "nmb score {id}"
        );
        assert_eq!(stored_report(&back, id), stored_report(&dir, id));
    }
}

#[test]
fn a_source_that_is_not_a_store_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("no-runs-here");
    let target = tmp.path().join("target");
    let out = nmb(
        tmp.path(),
        &[
            "store",
            "copy",
            missing.to_str().unwrap(),
            target.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no run store at"),
        "{}",
        text(&out.stderr)
    );
    assert!(!missing.exists() && !target.exists(), "nothing was created");

    let out = nmb(tmp.path(), &["store", "copy", "mysql://u:pw@h/db", "x"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("postgres://"),
        "{}",
        text(&out.stderr)
    );
    assert!(!text(&out.stderr).contains(":pw@"), "{}", text(&out.stderr));
}
