use crate::common;

use common::*;
use nmb_store::{SampleFilter, SampleStatus, Store};

/// A run with tasks `a/0`..`a/4` and `b/0`..`b/2`, two samples each; `b/1` sample 1 errored with a timeout,
/// `a/2` sample 0 errored with a server error, `b/2` sample 1 still pending. Answers are `answer TASK SAMPLE`,
/// and `a/3` sample 1 says `100% sure_thing`.
fn fixture(store: &Store) -> String {
    let run = store.create_run("cfg", &manifest()).unwrap();
    let id = run.run_id;
    let tasks: Vec<String> = (0..5)
        .map(|i| format!("a/{i}"))
        .chain((0..3).map(|i| format!("b/{i}")))
        .collect();
    let plan: Vec<(&str, u32)> = tasks.iter().map(|t| (t.as_str(), 2)).collect();
    store.plan_samples(&id, &plan).unwrap();
    for task in &tasks {
        for sample in 0..2u32 {
            let prompt = put_text_prompt(store, task, 0);
            match (task.as_str(), sample) {
                ("b/1", 1) | ("a/2", 0) => {
                    let class = if task == "b/1" {
                        "timeout"
                    } else {
                        "server_error"
                    };
                    let mut failed = call(&id, task, 0, &prompt);
                    failed.error = error(class, "it failed");
                    store
                        .record_call(&failed, &[failed_choice(sample)])
                        .unwrap();
                }
                ("b/2", 1) => {}
                _ => {
                    let text = if (task.as_str(), sample) == ("a/3", 1) {
                        "100% sure_thing".to_string()
                    } else {
                        format!("Answer {task} {sample}")
                    };
                    store
                        .record_call(
                            &call(&id, task, 0, &prompt),
                            &[ok_choice(sample, &text, true)],
                        )
                        .unwrap();
                }
            }
        }
    }
    id
}

fn keys(samples: &[nmb_store::SampleRecord]) -> Vec<(String, u32)> {
    samples
        .iter()
        .map(|s| (s.task_id.clone(), s.sample_index))
        .collect()
}

#[test]
fn pages_cover_every_sample_once_in_order() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = fixture(&store);
        let all = store.run_samples(&id).unwrap();
        assert_eq!(all.len(), 16);
        let mut seen = Vec::new();
        for page in 0..4 {
            let p = store
                .sample_page(&id, &SampleFilter::default(), page * 5, 5)
                .unwrap();
            assert_eq!(p.total, 16);
            assert!(p.samples.len() <= 5);
            seen.extend(p.samples);
        }
        assert_eq!(
            seen, all,
            "the pages together are the run, in order, with their turns"
        );
        let past = store
            .sample_page(&id, &SampleFilter::default(), 100, 5)
            .unwrap();
        assert_eq!((past.total, past.samples.len()), (16, 0));

        let one = store.sample_record(&id, "a/3", 1).unwrap().unwrap();
        assert_eq!(one.final_text.as_deref(), Some("100% sure_thing"));
        assert_eq!(one.turns.len(), 1);
        assert_eq!(
            Some(&one),
            all.iter()
                .find(|s| s.task_id == "a/3" && s.sample_index == 1)
        );
        assert!(store.sample_record(&id, "a/3", 7).unwrap().is_none());
        assert!(store.sample_record("nope", "a/3", 1).unwrap().is_none());
        assert!(store
            .sample_page("nope", &SampleFilter::default(), 0, 5)
            .is_err());
    });
}

#[test]
fn filters_select_by_status_error_class_task_and_text() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = fixture(&store);
        let page = |f: SampleFilter| store.sample_page(&id, &f, 0, 100).unwrap();

        let errored = page(SampleFilter {
            status: Some(SampleStatus::Errored),
            ..Default::default()
        });
        assert_eq!(errored.total, 2);
        assert_eq!(
            keys(&errored.samples),
            [("a/2".to_string(), 0), ("b/1".to_string(), 1)]
        );
        let pending = page(SampleFilter {
            status: Some(SampleStatus::Pending),
            ..Default::default()
        });
        assert_eq!(keys(&pending.samples), [("b/2".to_string(), 1)]);
        assert!(pending.samples[0].turns.is_empty());

        let timeouts = page(SampleFilter {
            error_class: Some("timeout".into()),
            ..Default::default()
        });
        assert_eq!(keys(&timeouts.samples), [("b/1".to_string(), 1)]);
        assert_eq!(timeouts.samples[0].error_class.as_deref(), Some("timeout"));

        let b = page(SampleFilter {
            task_prefix: Some("B/".into()),
            ..Default::default()
        });
        assert_eq!(b.total, 6, "the task prefix ignores case");
        assert!(b.samples.iter().all(|s| s.task_id.starts_with("b/")));
        let b_ok = store
            .sample_page(
                &id,
                &SampleFilter {
                    task_prefix: Some("b/".into()),
                    status: Some(SampleStatus::Ok),
                    ..Default::default()
                },
                1,
                2,
            )
            .unwrap();
        assert_eq!(b_ok.total, 4, "filters combine");
        assert_eq!(
            keys(&b_ok.samples),
            [("b/0".to_string(), 1), ("b/1".to_string(), 0)]
        );

        let text = page(SampleFilter {
            text: Some("ANSWER a/1".into()),
            ..Default::default()
        });
        assert_eq!(
            keys(&text.samples),
            [("a/1".to_string(), 0), ("a/1".to_string(), 1)],
            "the text search ignores case"
        );
        let percent = page(SampleFilter {
            text: Some("100%".into()),
            ..Default::default()
        });
        assert_eq!(keys(&percent.samples), [("a/3".to_string(), 1)]);
        let literal = page(SampleFilter {
            text: Some("%".into()),
            ..Default::default()
        });
        assert_eq!(literal.total, 1, "a % in the search is literal");
        let underscore = page(SampleFilter {
            text: Some("e_t".into()),
            ..Default::default()
        });
        assert_eq!(underscore.total, 1, "an _ in the search is literal");
        let bang = page(SampleFilter {
            text: Some("!".into()),
            ..Default::default()
        });
        assert_eq!(bang.total, 0, "the escape character itself is literal");
        let prefix_wild = page(SampleFilter {
            task_prefix: Some("_".into()),
            ..Default::default()
        });
        assert_eq!(prefix_wild.total, 0, "an _ in the task prefix is literal");
    });
}

#[test]
fn a_samples_score_row_comes_from_the_latest_report() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = fixture(&store);
        assert!(store.latest_sample_score(&id, "a/0", 0).unwrap().is_none());
        let row = |correct| nmb_store::SampleScoreRow {
            task_id: "a/0".into(),
            sample_index: 0,
            case_id: "a".into(),
            family: "differential".into(),
            level: "L1".into(),
            status: "ok".into(),
            correct: Some(correct),
            ..Default::default()
        };
        for (hash, correct) in [("h1", false), ("h2", true)] {
            store
                .save_score_report(&nmb_store::ScoreReportRecord {
                    run_id: &id,
                    config_hash: hash,
                    schema_version: 1,
                    report_json: "{}",
                    samples: &[row(correct)],
                })
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let got = store.latest_sample_score(&id, "a/0", 0).unwrap().unwrap();
        assert_eq!(got, row(true));
        assert!(store.latest_sample_score(&id, "a/0", 1).unwrap().is_none());
    });
}

#[test]
fn a_reports_headline_is_read_without_the_report() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = fixture(&store);
        assert_eq!(store.latest_score_headline(&id).unwrap(), None);
        let reports = [
            (
                "h1",
                r#"{"samples":[{"task_id":"a/0"}],"overall":{"n":1},"by_level_family":[{"n":1}]}"#,
            ),
            (
                "h2",
                r#"{"samples":[{"task_id":"a/0"},{"task_id":"a/1"}],"overall":{"n":2,"ci":[0.1,null]},"notes":[]}"#,
            ),
        ];
        let mut heads = Vec::new();
        for (hash, report) in reports {
            store
                .save_score_report(&nmb_store::ScoreReportRecord {
                    run_id: &id,
                    config_hash: hash,
                    schema_version: 1,
                    report_json: report,
                    samples: &[],
                })
                .unwrap();
            let head: serde_json::Value =
                serde_json::from_str(&store.latest_score_headline(&id).unwrap().unwrap()).unwrap();
            heads.push(head);
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(
            heads[0],
            serde_json::json!({"overall": {"n": 1}, "by_level_family": [{"n": 1}]})
        );
        // The latest report's, with null for the member it lacks; nothing else of the report.
        assert_eq!(
            heads[1],
            serde_json::json!({"overall": {"n": 2, "ci": [0.1, null]}, "by_level_family": null})
        );
        // Saving the same configuration again replaces its headline too.
        store
            .save_score_report(&nmb_store::ScoreReportRecord {
                run_id: &id,
                config_hash: "h2",
                schema_version: 1,
                report_json: r#"{"overall":{"n":3},"by_level_family":[]}"#,
                samples: &[],
            })
            .unwrap();
        let head: serde_json::Value =
            serde_json::from_str(&store.latest_score_headline(&id).unwrap().unwrap()).unwrap();
        assert_eq!(
            head,
            serde_json::json!({"overall": {"n": 3}, "by_level_family": []})
        );
        let other = store.create_run("cfg", &manifest()).unwrap().run_id;
        assert_eq!(store.latest_score_headline(&other).unwrap(), None);
    });
}

#[test]
fn migrating_to_v8_fills_in_the_headlines_and_keeps_the_scores() {
    let (dir, store) = temp_store();
    let id = fixture(&store);
    let row = nmb_store::SampleScoreRow {
        task_id: "a/0".into(),
        sample_index: 0,
        case_id: "a".into(),
        family: "differential".into(),
        level: "L1".into(),
        status: "ok".into(),
        correct: Some(true),
        ..Default::default()
    };
    store
        .save_score_report(&nmb_store::ScoreReportRecord {
            run_id: &id,
            config_hash: "h1",
            schema_version: 1,
            report_json: r#"{"samples":[],"overall":{"n":1},"by_level_family":[{"n":1}]}"#,
            samples: std::slice::from_ref(&row),
        })
        .unwrap();
    drop(store);
    // Take the file back to schema v7: no headline column (the table's layout does not matter here).
    let path = dir.path().join("runs").join(nmb_store::DB_FILE_NAME);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "ALTER TABLE score_reports DROP COLUMN headline;
             DELETE FROM migrations WHERE version >= 8;
             PRAGMA user_version = 7;",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), nmb_store::latest_version());
    let head: serde_json::Value =
        serde_json::from_str(&store.latest_score_headline(&id).unwrap().unwrap()).unwrap();
    assert_eq!(
        head,
        serde_json::json!({"overall": {"n": 1}, "by_level_family": [{"n": 1}]})
    );
    // The per-sample rows came through the table's rebuild.
    assert_eq!(store.latest_sample_score(&id, "a/0", 0).unwrap(), Some(row));
    assert_eq!(store.integrity_check().unwrap(), ["ok"]);
}
