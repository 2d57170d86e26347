//! Kill test for the store: a child process writes responses in a loop and reports each committed one on stdout;
//! it is SIGKILLed part-way, and every reported response must be there afterwards in a sound file.
//!
//! The child is this same test binary, re-run with `NMB_STORE_CRASH_CHILD` set and the filter
//! `crash::crash_child_writer`, so no extra binary is needed.

use crate::common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};

use common::*;
use nmb_store::{SampleStatus, Store};

const CHILD_ENV: &str = "NMB_STORE_CRASH_CHILD";
const RUN_ENV: &str = "NMB_STORE_CRASH_RUN";
const ROUND_ENV: &str = "NMB_STORE_CRASH_ROUND";

/// The child's body. As a normal test (no env var) it does nothing.
#[test]
fn crash_child_writer() {
    let (Ok(db), Ok(run_id), Ok(round)) = (
        std::env::var(CHILD_ENV),
        std::env::var(RUN_ENV),
        std::env::var(ROUND_ENV),
    ) else {
        return;
    };
    let store = Store::open(&db).expect("child opens the store");
    let shared: Vec<Vec<u8>> = (0..3).map(|i| fake_png(i, 46_000)).collect();
    let raw = format!(
        r#"{{"id":"chatcmpl","choices":[{{"message":{{"content":"{}"}}}}]}}"#,
        "y".repeat(560)
    );
    for i in 0u64.. {
        let task = format!("r{round}-t{i}");
        let mut images = shared.clone();
        if i % 7 == 0 {
            // Now and then a bigger transaction, so the kill can land in the middle of one.
            images.push(fake_png(
                1_000 + i + 100_000 * round.parse::<u64>().unwrap_or(0),
                46_000,
            ));
        }
        let prompt = put_image_prompt(&store, &task, &images);
        let mut c = call(&run_id, &task, 0, &prompt);
        c.raw = Some(&raw);
        let text = format!("answer to {task}");
        store
            .record_call(&c, &[ok_choice(0, &text, true)])
            .expect("child records a call");
        println!("\nCOMMIT {task}");
    }
}

fn committed_ids(line: &str) -> Option<String> {
    let mut words = line.split_whitespace();
    while let Some(w) = words.next() {
        if w == "COMMIT" {
            return words.next().map(str::to_string);
        }
    }
    None
}

#[test]
fn responses_reported_committed_survive_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nmb.sqlite");
    let run_id = {
        let store = Store::open(&db).unwrap();
        store.create_run("cfg", &manifest()).unwrap().run_id
    };
    let mut reported = Vec::new();
    for round in 0..3 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "crash::crash_child_writer",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_ENV, &db)
            .env(RUN_ENV, &run_id)
            .env(ROUND_ENV, round.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut this_round = 0;
        for line in lines.by_ref() {
            if let Some(id) = committed_ids(&line.unwrap()) {
                reported.push(id);
                this_round += 1;
                if this_round == 150 + 37 * round {
                    child.kill().unwrap();
                    break;
                }
            }
        }
        // Lines the child printed before it died are still in the pipe.
        for line in lines {
            if let Some(id) = committed_ids(&line.unwrap()) {
                reported.push(id);
            }
        }
        let status = child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(9),
            "child must die by SIGKILL, not exit: {status:?}"
        );
    }

    let store = Store::open(&db).unwrap();
    assert_eq!(store.integrity_check().unwrap(), vec!["ok".to_string()]);
    let fk_problems: i64 = store
        .with_conn("foreign key check", |c| {
            c.query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
                r.get(0)
            })
        })
        .unwrap();
    assert_eq!(fk_problems, 0);
    let samples = store.run_samples(&run_id).unwrap();
    let by_task: std::collections::HashMap<&str, _> =
        samples.iter().map(|s| (s.task_id.as_str(), s)).collect();
    for id in &reported {
        let s = by_task
            .get(id.as_str())
            .unwrap_or_else(|| panic!("committed response {id} lost"));
        assert_eq!(s.status, SampleStatus::Ok);
        assert_eq!(
            s.final_text.as_deref(),
            Some(format!("answer to {id}").as_str())
        );
    }
    // At most one response per round can be committed but not yet reported.
    assert!(samples.len() >= reported.len() && samples.len() <= reported.len() + 3);
    // Images stay shared: 3 common ones plus the occasional extra, never one per request.
    let images = store.image_count().unwrap();
    assert!(
        images < 3 + samples.len() as u64 / 7 + 4,
        "{images} images for {} samples",
        samples.len()
    );
    // The store still takes writes after the crashes.
    let prompt = put_image_prompt(&store, "after", &[fake_png(0, 46_000)]);
    store
        .record_call(
            &call(&run_id, "after", 0, &prompt),
            &[ok_choice(0, "fine", true)],
        )
        .unwrap();
}
