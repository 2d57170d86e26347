//! Review sets, append-only grades and human answers, on both engines.

use crate::common;

use common::*;
use nmb_store::{Grade, HumanAnswer, NewReviewSet, NewReviewer, ReviewItem, ReviewPair, Vote};

fn item(no: u32, run: &str, task: &str, shared: bool) -> ReviewItem {
    ReviewItem {
        item_no: no,
        run_id: run.into(),
        task_id: task.into(),
        sample_index: 0,
        shared,
    }
}

fn new_set(run: &str) -> NewReviewSet {
    NewReviewSet {
        set_id: "rv-test".into(),
        rubric_hash: "r1".into(),
        rubric: "id = \"x\"".into(),
        seed: 7,
        overlap: 0.5,
        runs: vec![run.into()],
        items: vec![
            item(1, run, "t1", true),
            item(2, run, "t2", false),
            item(3, run, "t3", false),
        ],
        reviewers: vec![
            NewReviewer {
                reviewer: "lee".into(),
                token_sha256: "hash-lee".into(),
                items: vec![2, 1],
            },
            NewReviewer {
                reviewer: "park".into(),
                token_sha256: "hash-park".into(),
                items: vec![1, 3],
            },
        ],
        show_thinking: false,
        criteria: None,
    }
}

fn grade(verdict: Option<&str>, overall: u8) -> Grade {
    Grade {
        verdict: verdict.map(str::to_string),
        scores: [("overall".to_string(), overall)].into(),
        taxonomy: None,
        comment: Some("<b>note</b>".into()),
        criteria: Default::default(),
    }
}

#[test]
fn grades_are_appended_and_the_newest_counts() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let run = store.create_run("cfg", &manifest()).unwrap();
        let id = run.run_id.as_str();
        store.create_review_set(&new_set(id)).unwrap();

        let set = store.review_set("rv-test").unwrap().unwrap();
        assert_eq!(
            (set.seed, set.overlap, set.runs.clone()),
            (7, 0.5, vec![id.to_string()])
        );
        assert_eq!(store.list_review_sets().unwrap(), vec![set]);
        assert_eq!(store.review_items("rv-test").unwrap().len(), 3);
        assert_eq!(
            store.reviewer_by_token("hash-park").unwrap(),
            Some(("rv-test".to_string(), "park".to_string()))
        );
        assert_eq!(store.reviewer_by_token("nobody").unwrap(), None);

        // Positions are each reviewer's own.
        let first = store.assigned_item("rv-test", "lee", 1).unwrap().unwrap();
        assert_eq!((first.item.item_no, first.total), (2, 2));
        assert!(store.assigned_item("rv-test", "lee", 3).unwrap().is_none());
        assert_eq!(store.first_ungraded("rv-test", "lee").unwrap(), Some(1));

        // A partial grade (no verdict yet) does not move the resume point; a verdict does.
        store
            .append_grade("rv-test", "lee", 2, "r1", &grade(None, 2))
            .unwrap();
        assert_eq!(store.first_ungraded("rv-test", "lee").unwrap(), Some(1));
        store
            .append_grade("rv-test", "lee", 2, "r1", &grade(Some("partly"), 3))
            .unwrap();
        assert_eq!(store.first_ungraded("rv-test", "lee").unwrap(), Some(2));
        store
            .append_grade("rv-test", "lee", 1, "r1", &grade(Some("skip"), 0))
            .unwrap();
        assert_eq!(store.first_ungraded("rv-test", "lee").unwrap(), None);
        store
            .append_grade("rv-test", "park", 1, "r1", &grade(Some("correct"), 5))
            .unwrap();

        let history = store.grade_history("rv-test", "lee", 2).unwrap();
        assert_eq!(history.len(), 2);
        assert!(history[0].id < history[1].id);
        assert_eq!(history[1].grade, grade(Some("partly"), 3));

        let latest = store.latest_grades("rv-test").unwrap();
        let summary: Vec<(String, u32, Option<String>)> = latest
            .iter()
            .map(|g| (g.reviewer.clone(), g.item_no, g.grade.verdict.clone()))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("lee".into(), 1, Some("skip".into())),
                ("lee".into(), 2, Some("partly".into())),
                ("park".into(), 1, Some("correct".into())),
            ]
        );

        let status = store.review_status("rv-test").unwrap();
        assert_eq!(
            (
                status[0].reviewer.as_str(),
                status[0].graded,
                status[0].skipped,
                status[0].grade_rows
            ),
            ("lee", 1, 1, 3)
        );
        assert_eq!(
            (
                status[1].reviewer.as_str(),
                status[1].graded,
                status[1].assigned
            ),
            ("park", 1, 2)
        );

        // Only assigned items can be graded.
        assert!(store
            .append_grade("rv-test", "lee", 3, "r1", &grade(Some("correct"), 5))
            .is_err());

        assert!(store.revoke_reviewer("rv-test", "park").unwrap());
        assert!(!store.revoke_reviewer("rv-test", "park").unwrap());
        assert!(!store.revoke_reviewer("rv-test", "nobody").unwrap());
        assert_eq!(store.reviewer_by_token("hash-park").unwrap(), None);
        assert!(store.review_status("rv-test").unwrap()[1]
            .revoked_ms
            .is_some());
    });
}

#[test]
fn whether_reviewers_see_the_thinking_is_kept_with_the_set() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let run = store.create_run("cfg", &manifest()).unwrap();
        let hidden = new_set(&run.run_id);
        let shown = NewReviewSet {
            set_id: "rv-shown".into(),
            show_thinking: true,
            reviewers: Vec::new(),
            ..hidden.clone()
        };
        store.create_review_set(&hidden).unwrap();
        store.create_review_set(&shown).unwrap();
        assert!(!store.review_set("rv-test").unwrap().unwrap().show_thinking);
        assert!(store.review_set("rv-shown").unwrap().unwrap().show_thinking);
        let listed: Vec<(String, bool)> = (store.list_review_sets().unwrap().into_iter())
            .map(|s| (s.set_id, s.show_thinking))
            .collect();
        assert!(listed.contains(&("rv-shown".into(), true)), "{listed:?}");
        assert!(listed.contains(&("rv-test".into(), false)), "{listed:?}");
    });
}

/// Sets stored before schema v13 were made when reviewer pages showed no thinking: they keep showing none.
#[test]
fn a_set_stored_before_v13_hides_the_thinking() {
    let (dir, store) = temp_store();
    let run = store.create_run("cfg", &manifest()).unwrap();
    let set = NewReviewSet {
        show_thinking: true,
        ..new_set(&run.run_id)
    };
    store.create_review_set(&set).unwrap();
    drop(store);
    let path = dir.path().join("runs").join(nmb_store::DB_FILE_NAME);
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "DROP TABLE review_votes; DROP TABLE review_pairs;
             ALTER TABLE review_sets DROP COLUMN show_thinking;
             ALTER TABLE review_sets DROP COLUMN criteria_name; ALTER TABLE review_sets DROP COLUMN criteria;
             ALTER TABLE review_grades DROP COLUMN criteria;
             DROP TABLE batch_items; DROP TABLE batches; ALTER TABLE calls DROP COLUMN batch_id;
             ALTER TABLE turns DROP COLUMN finish_reason;
             DELETE FROM migrations WHERE version >= 12;
             PRAGMA user_version = 11;",
        )
        .unwrap();
    let store = nmb_store::Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), nmb_store::latest_version());
    let set = store.review_set("rv-test").unwrap().unwrap();
    assert!(!set.show_thinking);
    assert_eq!(store.review_items("rv-test").unwrap().len(), 3);
}

/// A set's criterion rubric and a grade's criterion marks read back as written; a grade without marks reads
/// back empty.
#[test]
fn criteria_and_criterion_marks_round_trip() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let run = store.create_run("cfg", &manifest()).unwrap();
        let file = nmb_store::CriteriaFile {
            name: "c.toml".into(),
            text: "id = \"c\"".into(),
        };
        let set = NewReviewSet {
            criteria: Some(file.clone()),
            ..new_set(&run.run_id)
        };
        store.create_review_set(&set).unwrap();
        assert_eq!(
            store.review_set("rv-test").unwrap().unwrap().criteria,
            Some(file)
        );
        let marked = Grade {
            criteria: [("a".to_string(), true), ("b".to_string(), false)].into(),
            ..grade(Some("correct"), 4)
        };
        store
            .append_grade("rv-test", "lee", 1, "r1", &grade(Some("partly"), 3))
            .unwrap();
        store
            .append_grade("rv-test", "lee", 2, "r1", &marked)
            .unwrap();
        let grades = store.latest_grades("rv-test").unwrap();
        assert!(grades[0].grade.criteria.is_empty());
        assert_eq!(grades[1].grade, marked);
    });
}

#[test]
fn a_review_set_must_name_stored_runs() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        assert!(store.create_review_set(&new_set("no-such-run")).is_err());
        assert!(store.review_set("rv-test").unwrap().is_none());
    });
}

#[test]
fn human_answers_keep_every_version_and_read_the_newest() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let answer = |task: &str, turn: u32, text: &str| HumanAnswer {
            task_id: task.into(),
            turn_index: turn,
            created_ms: 1,
            source: "answers.jsonl".into(),
            text: text.into(),
        };
        store
            .append_human_answer("dr_lee", "suite-a", &answer("t1", 0, "first"))
            .unwrap();
        store
            .append_human_answer("dr_lee", "suite-a", &answer("t1", 0, "second"))
            .unwrap();
        store
            .append_human_answer("dr_lee", "suite-a", &answer("t1", 1, "turn two"))
            .unwrap();
        store
            .append_human_answer("dr_lee", "suite-b", &answer("t1", 0, "other suite"))
            .unwrap();
        store
            .append_human_answer("dr_kim", "suite-a", &answer("t2", 0, "someone else"))
            .unwrap();
        let got: Vec<(String, u32, String)> = store
            .human_answers("dr_lee", "suite-a")
            .unwrap()
            .into_iter()
            .map(|a| (a.task_id, a.turn_index, a.text))
            .collect();
        assert_eq!(
            got,
            vec![
                ("t1".into(), 0, "second".into()),
                ("t1".into(), 1, "turn two".into())
            ]
        );
    });
}

/// A pairwise set keeps each item's B answer beside its A row, and its votes are appended like grades: the
/// newest counts, resuming skips voted items, and progress counts votes.
#[test]
fn pairwise_votes_are_appended_and_the_newest_counts() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let a = store.create_run("cfg-a", &manifest()).unwrap().run_id;
        let b = store.create_run("cfg-b", &manifest()).unwrap().run_id;
        let mut set = new_set(&a);
        set.runs.push(b.clone());
        let pairs: Vec<ReviewPair> = (1..=3)
            .map(|item_no| ReviewPair {
                item_no,
                run_id: b.clone(),
                sample_index: 0,
            })
            .collect();
        store.create_pairwise_review_set(&set, &pairs).unwrap();
        assert!(store.review_set("rv-test").unwrap().unwrap().pairwise);
        assert_eq!(store.review_pairs("rv-test").unwrap(), pairs);
        assert_eq!(
            store.review_pair("rv-test", 2).unwrap(),
            Some(pairs[1].clone())
        );
        assert_eq!(store.review_pair("rv-test", 9).unwrap(), None);

        let vote = |choice: &str| Vote {
            choice: choice.into(),
            comment: None,
        };
        assert_eq!(store.first_ungraded("rv-test", "lee").unwrap(), Some(1));
        store.append_vote("rv-test", "lee", 2, &vote("a")).unwrap();
        store
            .append_vote("rv-test", "lee", 2, &vote("neither"))
            .unwrap();
        assert_eq!(
            store.first_ungraded("rv-test", "lee").unwrap(),
            Some(2),
            "item 1 is lee's second"
        );
        let latest = store.latest_votes("rv-test").unwrap();
        assert_eq!(latest.len(), 1);
        assert_eq!(latest[0].vote.choice, "neither");
        assert_eq!(store.vote_history("rv-test", "lee", 2).unwrap().len(), 2);
        let lee = (store.review_status("rv-test").unwrap().into_iter())
            .find(|s| s.reviewer == "lee")
            .unwrap();
        assert_eq!((lee.graded, lee.grade_rows), (1, 2));
        assert!(
            store.append_vote("rv-test", "lee", 3, &vote("a")).is_err(),
            "item 3 is not lee's"
        );
        assert!(
            store
                .append_vote("rv-test", "park", 3, &vote("maybe"))
                .is_err(),
            "not a choice"
        );

        let mut grades = new_set(&a);
        grades.set_id = "rv-grades".into();
        for r in &mut grades.reviewers {
            r.token_sha256.push_str("-grades");
        }
        store.create_review_set(&grades).unwrap();
        assert!(!store.review_set("rv-grades").unwrap().unwrap().pairwise);
    });
}
