use crate::common;

use common::*;
use nmb_store::{
    CaseLookup, SampleFilter, SampleScoreRow, SampleStatus, ScoreOutcome, ScoreReportRecord, Store,
};

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

pub(crate) fn keys(samples: &[nmb_store::SampleRecord]) -> Vec<(String, u32)> {
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
        let row = |correct| SampleScoreRow {
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
                .save_score_report(&ScoreReportRecord {
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
                .save_score_report(&ScoreReportRecord {
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
            .save_score_report(&ScoreReportRecord {
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
        // Judges asked more than once: the stability section and the configuration's judges come along, and
        // still nothing of the samples.
        std::thread::sleep(std::time::Duration::from_millis(5));
        store
            .save_score_report(&ScoreReportRecord {
                run_id: &id,
                config_hash: "h3",
                schema_version: 1,
                report_json: r#"{"samples":[{"task_id":"a/0"}],"overall":{"n":4},"config":{"judges":[{"spec":"j"}],"rubric":{}},"stability":{"repeats":3,"unstable":[{"task_id":"a/0"}]}}"#,
                samples: &[],
            })
            .unwrap();
        let head: serde_json::Value =
            serde_json::from_str(&store.latest_score_headline(&id).unwrap().unwrap()).unwrap();
        assert_eq!(
            head,
            serde_json::json!({
                "overall": {"n": 4},
                "by_level_family": null,
                "stability": {"repeats": 3, "unstable": [{"task_id": "a/0"}]},
                "judges": [{"spec": "j"}]
            })
        );
    });
}

#[test]
fn migrating_to_v8_fills_in_the_headlines_and_keeps_the_scores() {
    let (dir, store) = temp_store();
    let id = fixture(&store);
    let row = SampleScoreRow {
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
        .save_score_report(&ScoreReportRecord {
            run_id: &id,
            config_hash: "h1",
            schema_version: 1,
            report_json: r#"{"samples":[],"overall":{"n":1},"by_level_family":[{"n":1}]}"#,
            samples: std::slice::from_ref(&row),
        })
        .unwrap();
    drop(store);
    // Take the file back to schema v7: no headline column, none of v9's tables and column, none of v10's text
    // index and indexes (the table's layout does not matter here).
    let path = dir.path().join("runs").join(nmb_store::DB_FILE_NAME);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "ALTER TABLE score_reports DROP COLUMN headline;
             DROP TABLE review_votes; DROP TABLE review_pairs;
             DROP TABLE review_grades; DROP TABLE review_assignments; DROP TABLE review_items;
             DROP TABLE review_reviewers; DROP TABLE review_sets; DROP TABLE human_answers;
             ALTER TABLE sample_scores DROP COLUMN disease_group;
             DROP TRIGGER turns_text_insert; DROP TRIGGER turns_text_delete; DROP TRIGGER turns_text_update;
             DROP TABLE turns_text; DROP INDEX sample_scores_by_outcome; DROP INDEX turns_cached;
             DROP TABLE batch_items; DROP TABLE batches; ALTER TABLE calls DROP COLUMN batch_id;
             ALTER TABLE turns DROP COLUMN thinking; ALTER TABLE turns DROP COLUMN finish_reason;
             ALTER TABLE calls DROP COLUMN tokens_reasoning;
             ALTER TABLE calls DROP COLUMN tokens_cached_in; ALTER TABLE calls DROP COLUMN tokens_cache_write;
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

/// A score row of `fixture`'s run: case `a` tasks are level `direct`, family `differential`, disease group
/// `Neoplasm`; case `b` ones `consult`, `lesion`, `vascular` (but `b/2`, which has none).
fn score(
    task: &str,
    sample: u32,
    status: &str,
    correct: Option<bool>,
    category: Option<&str>,
) -> SampleScoreRow {
    let a = task.starts_with("a/");
    SampleScoreRow {
        task_id: task.into(),
        sample_index: sample,
        case_id: task[..1].into(),
        family: if a { "differential" } else { "lesion" }.into(),
        level: if a { "direct" } else { "consult" }.into(),
        status: status.into(),
        correct,
        error_category: category.map(str::to_string),
        disease_group: match task {
            "b/2" => None,
            _ if a => Some("Neoplasm".into()),
            _ => Some("vascular".into()),
        },
        ..Default::default()
    }
}

/// The latest report of `fixture`'s run (`a/4` has no rows), after an older one that called everything correct.
fn save_scores(store: &Store, id: &str) -> Vec<SampleScoreRow> {
    let (t, f) = (Some(true), Some(false));
    let rows = vec![
        score("a/0", 0, "ok", t, None),
        score("a/0", 1, "ok", f, Some("reasoning_failure")),
        score("a/1", 0, "parse_failed", f, None),
        score("a/1", 1, "ok", t, None),
        score("a/2", 0, "errored", None, None),
        score("a/2", 1, "ok", f, Some("knowledge_gap")),
        score("a/3", 0, "ok", t, None),
        score("a/3", 1, "ok", t, None),
        score("b/0", 0, "ok", f, Some("perceptual_failure")),
        score("b/0", 1, "ok", t, None),
        score("b/1", 0, "ok", t, None),
        score("b/1", 1, "errored", None, None),
        score("b/2", 0, "ok", f, Some("reasoning_failure")),
        score("b/2", 1, "pending", None, None),
    ];
    let old: Vec<SampleScoreRow> = rows
        .iter()
        .map(|r| SampleScoreRow {
            correct: Some(true),
            status: "ok".into(),
            ..r.clone()
        })
        .collect();
    for (hash, rows) in [("old", &old), ("new", &rows)] {
        store
            .save_score_report(&ScoreReportRecord {
                run_id: id,
                config_hash: hash,
                schema_version: 1,
                report_json: "{}",
                samples: rows,
            })
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    rows
}

pub(crate) fn key(task: &str, sample: u32) -> (String, u32) {
    (task.to_string(), sample)
}

#[test]
fn score_filters_read_the_latest_report() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = fixture(&store);
        let unscored = fixture(&store);
        save_scores(&store, &id);
        let page = |f: SampleFilter| store.sample_page(&id, &f, 0, 100).unwrap();
        let outcome = |o| SampleFilter {
            outcome: Some(o),
            ..Default::default()
        };

        let correct = page(outcome(ScoreOutcome::Correct));
        assert_eq!(
            keys(&correct.samples),
            [
                key("a/0", 0),
                key("a/1", 1),
                key("a/3", 0),
                key("a/3", 1),
                key("b/0", 1),
                key("b/1", 0)
            ],
            "the latest report's verdicts, not the older report's"
        );
        let wrong = page(outcome(ScoreOutcome::Wrong));
        assert_eq!(
            keys(&wrong.samples),
            [
                key("a/0", 1),
                key("a/1", 0),
                key("a/2", 1),
                key("b/0", 0),
                key("b/2", 0)
            ],
            "unparseable answers are wrong too"
        );
        let unparseable = page(outcome(ScoreOutcome::Unparseable));
        assert_eq!(keys(&unparseable.samples), [key("a/1", 0)]);

        let reasoning = page(SampleFilter {
            error_category: Some("reasoning_failure".into()),
            ..Default::default()
        });
        assert_eq!(keys(&reasoning.samples), [key("a/0", 1), key("b/2", 0)]);
        let consult = page(SampleFilter {
            level: Some("consult".into()),
            ..Default::default()
        });
        assert_eq!(consult.total, 6);
        assert!(consult.samples.iter().all(|s| s.task_id.starts_with("b/")));
        let lesion_correct = page(SampleFilter {
            family: Some("lesion".into()),
            outcome: Some(ScoreOutcome::Correct),
            ..Default::default()
        });
        assert_eq!(
            keys(&lesion_correct.samples),
            [key("b/0", 1), key("b/1", 0)]
        );
        let neoplasm = page(SampleFilter {
            disease_group: Some("NEOPLASM".into()),
            ..Default::default()
        });
        assert_eq!(
            neoplasm.total, 8,
            "the disease group ignores case; a/4 has no row"
        );
        let vascular = page(SampleFilter {
            disease_group: Some("vascular".into()),
            ..Default::default()
        });
        assert_eq!(vascular.total, 4, "b/2 has no disease group");
        let mixed = page(SampleFilter {
            status: Some(SampleStatus::Ok),
            task_prefix: Some("a/".into()),
            outcome: Some(ScoreOutcome::Wrong),
            ..Default::default()
        });
        assert_eq!(
            keys(&mixed.samples),
            [key("a/0", 1), key("a/1", 0), key("a/2", 1)],
            "score and sample filters combine"
        );
        let paged = store
            .sample_page(&id, &outcome(ScoreOutcome::Wrong), 2, 2)
            .unwrap();
        assert_eq!(paged.total, 5);
        assert_eq!(keys(&paged.samples), [key("a/2", 1), key("b/0", 0)]);
        let nothing = page(SampleFilter {
            level: Some("direc".into()),
            ..Default::default()
        });
        assert_eq!(nothing.total, 0, "levels match exactly");

        let unscored_page = store
            .sample_page(&unscored, &outcome(ScoreOutcome::Correct), 0, 100)
            .unwrap();
        assert_eq!(
            unscored_page.total, 0,
            "an unscored run matches no score filter"
        );
        assert!(store
            .sample_page(&unscored, &SampleFilter::default(), 0, 100)
            .unwrap()
            .scores
            .is_empty());
    });
}

#[test]
fn a_page_carries_its_samples_score_rows_in_order() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = fixture(&store);
        let rows = save_scores(&store, &id);
        let all = store
            .sample_page(&id, &SampleFilter::default(), 0, 100)
            .unwrap();
        assert_eq!(
            all.scores, rows,
            "every row but a/4's, in the samples' order"
        );
        let page = store
            .sample_page(&id, &SampleFilter::default(), 7, 4)
            .unwrap();
        // Samples 7..11 are a/3#1, a/4#0, a/4#1, b/0#0: a/4 has no rows.
        let got: Vec<(String, u32)> = page
            .scores
            .iter()
            .map(|r| (r.task_id.clone(), r.sample_index))
            .collect();
        assert_eq!(got, [key("a/3", 1), key("b/0", 0)]);
        assert_eq!(
            page.scores[1].error_category.as_deref(),
            Some("perceptual_failure")
        );
        let one = store.latest_sample_score(&id, "a/0", 0).unwrap().unwrap();
        assert_eq!(
            one.disease_group.as_deref(),
            Some("Neoplasm"),
            "the disease group is stored"
        );
    });
}

/// A run with tasks `c1/dx`, `c1/lesion`, `c10/dx`, `C1/dx` and `odd-task`, two answered samples each.
fn case_fixture(store: &Store) -> String {
    let id = store.create_run("cfg", &manifest()).unwrap().run_id;
    let tasks = ["c1/dx", "c1/lesion", "c10/dx", "C1/dx", "odd-task"];
    let plan: Vec<(&str, u32)> = tasks.iter().map(|t| (*t, 2)).collect();
    store.plan_samples(&id, &plan).unwrap();
    for task in tasks {
        let prompt = put_text_prompt(store, task, 0);
        for sample in 0..2 {
            let text = format!("answer {task} {sample}");
            store
                .record_call(
                    &call(&id, task, 0, &prompt),
                    &[ok_choice(sample, &text, true)],
                )
                .unwrap();
        }
    }
    id
}

#[test]
fn a_cases_samples_come_from_its_score_rows_or_else_its_task_prefix() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = case_fixture(&store);
        let case = |c: &str, offset, limit| store.case_samples(&id, c, offset, limit).unwrap();

        let unscored = case("c1", 0, 100);
        assert_eq!(unscored.found_by, CaseLookup::TaskPrefix);
        assert_eq!(
            keys(&unscored.page.samples),
            [
                key("c1/dx", 0),
                key("c1/dx", 1),
                key("c1/lesion", 0),
                key("c1/lesion", 1)
            ],
            "c10/ and C1/ are other cases"
        );
        assert_eq!(unscored.page.samples[0].turns.len(), 1, "with their turns");
        assert_eq!(
            case("c_", 0, 100).page.total,
            0,
            "an _ in a case id is literal"
        );
        assert_eq!(case("C1", 0, 100).page.total, 2);

        let row = |task: &str, sample, case: &str| SampleScoreRow {
            task_id: task.into(),
            sample_index: sample,
            case_id: case.into(),
            family: "differential".into(),
            level: "direct".into(),
            status: "ok".into(),
            correct: Some(sample == 0),
            ..Default::default()
        };
        let mut rows = Vec::new();
        for (task, case) in [
            ("C1/dx", "C1"),
            ("c1/dx", "c1"),
            ("c1/lesion", "c1"),
            ("c10/dx", "c10"),
            ("odd-task", "c1"),
        ] {
            rows.extend([row(task, 0, case), row(task, 1, case)]);
        }
        store
            .save_score_report(&ScoreReportRecord {
                run_id: &id,
                config_hash: "h",
                schema_version: 1,
                report_json: "{}",
                samples: &rows,
            })
            .unwrap();

        let scored = case("c1", 0, 100);
        assert_eq!(scored.found_by, CaseLookup::Scores);
        assert_eq!(scored.page.total, 6, "odd-task is c1's by its score rows");
        assert_eq!(
            keys(&scored.page.samples)[4..],
            [key("odd-task", 0), key("odd-task", 1)]
        );
        assert_eq!(scored.page.scores.len(), 6);
        assert!(scored.page.scores.iter().all(|r| r.case_id == "c1"));
        let paged = case("c1", 2, 3);
        assert_eq!(paged.page.total, 6);
        assert_eq!(
            keys(&paged.page.samples),
            [key("c1/lesion", 0), key("c1/lesion", 1), key("odd-task", 0)]
        );
        assert_eq!(
            paged
                .page
                .scores
                .iter()
                .map(|r| r.task_id.as_str())
                .collect::<Vec<_>>(),
            ["c1/lesion", "c1/lesion", "odd-task"]
        );
        let unknown = case("zz", 0, 100);
        assert_eq!(
            (unknown.found_by, unknown.page.total),
            (CaseLookup::TaskPrefix, 0)
        );
        assert!(store.case_samples("nope", "c1", 0, 10).is_err());
    });
}

#[test]
fn a_reports_size_is_read_without_the_report() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = fixture(&store);
        assert_eq!(store.latest_score_report_bytes(&id).unwrap(), None);
        for report in [
            r#"{"samples":[],"note":"é"}"#,
            r#"{"samples":[{"task_id":"a/0"}]}"#,
        ] {
            store
                .save_score_report(&ScoreReportRecord {
                    run_id: &id,
                    config_hash: &format!("h{}", report.len()),
                    schema_version: 1,
                    report_json: report,
                    samples: &[],
                })
                .unwrap();
            assert_eq!(
                store.latest_score_report_bytes(&id).unwrap(),
                Some(report.len() as u64),
                "bytes, not characters"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    });
}

#[test]
fn copying_a_run_keeps_its_disease_groups() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = fixture(&store);
        save_scores(&store, &id);
        let (_dir2, to) = temp_store();
        store.copy_runs_to(&to, std::slice::from_ref(&id)).unwrap();
        let vascular = to
            .sample_page(
                &id,
                &SampleFilter {
                    disease_group: Some("vascular".into()),
                    ..Default::default()
                },
                0,
                100,
            )
            .unwrap();
        assert_eq!(vascular.total, 4);
        assert_eq!(
            to.latest_sample_score(&id, "b/0", 0)
                .unwrap()
                .unwrap()
                .disease_group
                .as_deref(),
            Some("vascular")
        );
    });
}
