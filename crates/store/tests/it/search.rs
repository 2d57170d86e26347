//! The text search over a run's answers (`SampleFilter::text`), on both engines, and SQLite's trigram index
//! behind it (schema v10): what it finds, that every way of reading the answers finds the same, and that the
//! index follows every write of `turns`.

use crate::common;
use crate::pages::{key, keys};

use common::*;
use nmb_store::{SampleFilter, SampleStatus, Store};

/// Records `text` (or, for `None`, a server error) as the answer of sample `sample` of `task` at `turn`.
fn answer(store: &Store, id: &str, task: &str, sample: u32, turn: u32, text: Option<&str>) {
    let prompt = put_text_prompt(store, task, turn);
    let mut call = call(id, task, turn, &prompt);
    let choice = match text {
        Some(t) => ok_choice(sample, t, true),
        None => {
            call.error = error("server_error", "it failed");
            failed_choice(sample)
        }
    };
    store.record_call(&call, &[choice]).unwrap();
}

/// A run for the text search: `t/0`..`t/3`, two samples each, answers as below (`t/1` sample 1 errored, so its
/// turn has no text; `t/3` sample 0 answered twice, on turns 0 and 1).
fn search_fixture(store: &Store) -> String {
    let id = store.create_run("cfg", &manifest()).unwrap().run_id;
    let answers: [(&str, u32, u32, Option<&str>); 8] = [
        ("t/0", 0, 0, Some("Glioblastoma, WHO grade 4")),
        ("t/0", 1, 0, Some("50%_done: low-grade glioma")),
        (
            "t/1",
            0,
            0,
            Some(r#"he said "meningioma" AND NEAR(x*) ^start"#),
        ),
        ("t/1", 1, 0, None),
        ("t/2", 0, 0, Some("a_b, _bc")),
        ("t/2", 1, 0, Some("axb")),
        ("t/3", 0, 0, Some("first look: a glioma?")),
        ("t/3", 0, 1, Some("then an abscess, not a gliom")),
    ];
    for (task, sample, turn, text) in answers {
        answer(store, &id, task, sample, turn, text);
    }
    answer(store, &id, "t/3", 1, 0, Some("ABSCESS"));
    id
}

/// The samples of run `id` whose answers contain `text`, as `(task, sample)` (all on one page).
fn search(store: &Store, id: &str, text: &str) -> Vec<(String, u32)> {
    let filter = SampleFilter {
        text: Some(text.into()),
        ..Default::default()
    };
    let page = store.sample_page(id, &filter, 0, 100).unwrap();
    assert_eq!(page.total as usize, page.samples.len(), "{text:?}");
    keys(&page.samples)
}

#[test]
fn the_text_search_finds_substrings_ignoring_ascii_case_with_wildcards_literal() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = search_fixture(&store);
        let other = search_fixture(&store);
        let s = |text: &str| search(&store, &id, text);
        assert_eq!(s("GLIOBLASTOMA"), [key("t/0", 0)], "case is ignored");
        assert_eq!(s("Grade"), [key("t/0", 0), key("t/0", 1)]);
        assert_eq!(
            s("gliom"),
            [key("t/0", 1), key("t/3", 0)],
            "any turn's answer; a sample counts once; the other run's samples are not this run's"
        );
        assert_eq!(s("abscess"), [key("t/3", 0), key("t/3", 1)]);
        assert_eq!(s("0%_d"), [key("t/0", 1)], "% and _ are literal");
        assert_eq!(s("a_b"), [key("t/2", 0)], "an _ matches itself only");
        assert_eq!(s("%x"), Vec::<(String, u32)>::new());
        assert_eq!(s("%_"), [key("t/0", 1)], "two characters");
        assert_eq!(s("_"), [key("t/0", 1), key("t/2", 0)], "one character");
        assert_eq!(s("%"), [key("t/0", 1)]);
        assert_eq!(s("gr"), [key("t/0", 0), key("t/0", 1)]);
        assert_eq!(s("!"), Vec::<(String, u32)>::new(), "the escape character");
        assert_eq!(
            s(r#""meningioma" AND NEAR(x*) ^"#),
            [key("t/1", 0)],
            "quotes and query syntax are plain text"
        );
        assert_eq!(s("x*"), [key("t/1", 0)]);
        assert_eq!(s(r#"""#), [key("t/1", 0)]);
        assert_eq!(
            s("50%_done: low-grade glioma"),
            [key("t/0", 1)],
            "a long search, the whole answer"
        );
        assert_eq!(
            s("50%_done: low-grade gliomas"),
            Vec::<(String, u32)>::new(),
            "every character of a long search counts"
        );
        assert_eq!(s("50%_done: LOW-GRADE"), [key("t/0", 1)]);
        assert_eq!(s("x_b"), Vec::<(String, u32)>::new());
        assert_eq!(
            s("a_bc"),
            Vec::<(String, u32)>::new(),
            "its trigrams are all in t/2's answer, but not together"
        );
        assert_eq!(
            s(" "),
            [
                key("t/0", 0),
                key("t/0", 1),
                key("t/1", 0),
                key("t/2", 0),
                key("t/3", 0)
            ],
            "an errored turn has no text and matches nothing"
        );
        let both = store
            .sample_page(
                &id,
                &SampleFilter {
                    text: Some("abscess".into()),
                    status: Some(SampleStatus::Ok),
                    task_prefix: Some("t/3".into()),
                    ..Default::default()
                },
                1,
                1,
            )
            .unwrap();
        assert_eq!(
            (both.total, keys(&both.samples)),
            (2, vec![key("t/3", 1)]),
            "the text search combines with other filters and pages"
        );
        assert_eq!(search(&store, &other, "gliom").len(), 2);
    });
}

#[test]
fn the_text_search_follows_answers_written_replaced_and_removed_later() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = search_fixture(&store);
        let s = |text: &str| search(&store, &id, text);
        assert_eq!(s("meningioma"), [key("t/1", 0)]);
        // The errored turn (no text) succeeds on a retry: the same turn row, now with text.
        answer(&store, &id, "t/1", 1, 0, Some("Meningioma after all"));
        assert_eq!(s("meningioma"), [key("t/1", 0), key("t/1", 1)]);
        // A new answer on turn 0 replaces the old one and removes the later turn (1).
        answer(&store, &id, "t/3", 0, 0, Some("second look"));
        assert_eq!(s("first look"), Vec::<(String, u32)>::new());
        assert_eq!(s("second look"), [key("t/3", 0)]);
        assert_eq!(s("abscess"), [key("t/3", 1)], "turn 1 is gone");
        // A succeeded turn that errors on a retry loses its text.
        answer(&store, &id, "t/2", 1, 0, None);
        assert_eq!(s("axb"), Vec::<(String, u32)>::new());
        // Samples answered later, in a task planned later.
        answer(&store, &id, "t/9", 0, 0, Some("late Glioblastoma"));
        assert_eq!(s("glioblastoma"), [key("t/0", 0), key("t/9", 0)]);
        assert_eq!(s("LATE"), [key("t/9", 0)]);
    });
}

#[test]
fn copying_a_run_keeps_its_answers_searchable() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = search_fixture(&store);
        answer(&store, &id, "t/3", 0, 0, Some("second look"));
        let (_dir2, to) = temp_store();
        store.copy_runs_to(&to, std::slice::from_ref(&id)).unwrap();
        for text in ["gliom", "0%_d", "second look", "first look", "abscess", "_"] {
            assert_eq!(
                search(&to, &id, text),
                search(&store, &id, text),
                "{text:?}"
            );
        }
        assert_eq!(search(&to, &id, "second look"), [key("t/3", 0)]);
    });
}

/// The trigram index's own check against `turns` (SQLite): every answer indexed, nothing else.
fn check_text_index(store: &Store) {
    store
        .with_conn("check the text index", |c| {
            c.execute(
                "INSERT INTO turns_text (turns_text, rank) VALUES ('integrity-check', 1)",
                [],
            )
        })
        .unwrap();
    assert_eq!(store.integrity_check().unwrap(), ["ok"]);
}

#[test]
fn the_sqlite_text_index_stays_in_step_with_the_answers() {
    let (_dir, store) = temp_store();
    let id = search_fixture(&store);
    check_text_index(&store);
    answer(&store, &id, "t/1", 1, 0, Some("Meningioma after all"));
    answer(&store, &id, "t/3", 0, 0, Some("second look"));
    answer(&store, &id, "t/2", 1, 0, None);
    check_text_index(&store);
    let (_dir2, to) = temp_store();
    store.copy_runs_to(&to, std::slice::from_ref(&id)).unwrap();
    check_text_index(&to);
    // Case beyond ASCII is not ignored, as with LIKE (the index folds it; the search does not).
    answer(&store, &id, "t/5", 0, 0, Some("Ödem im Marklager"));
    assert_eq!(search(&store, &id, "ödem"), Vec::<(String, u32)>::new());
    assert_eq!(search(&store, &id, "Ödem IM"), [key("t/5", 0)]);
}

#[test]
fn migrating_to_v10_indexes_the_answers_already_stored() {
    let (dir, store) = temp_store();
    let id = search_fixture(&store);
    let before: Vec<_> = ["gliom", "abscess", "0%_d", "Grade"]
        .iter()
        .map(|t| search(&store, &id, t))
        .collect();
    drop(store);
    let path = dir.path().join("runs").join(nmb_store::DB_FILE_NAME);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP TABLE review_votes; DROP TABLE review_pairs;
             DROP TRIGGER turns_text_insert; DROP TRIGGER turns_text_delete; DROP TRIGGER turns_text_update;
             DROP TABLE turns_text; DROP INDEX sample_scores_by_outcome; DROP INDEX turns_cached;
             DROP TABLE batch_items; DROP TABLE batches; ALTER TABLE calls DROP COLUMN batch_id;
             ALTER TABLE turns DROP COLUMN thinking; ALTER TABLE turns DROP COLUMN finish_reason;
             ALTER TABLE calls DROP COLUMN tokens_reasoning;
             ALTER TABLE calls DROP COLUMN tokens_cached_in; ALTER TABLE calls DROP COLUMN tokens_cache_write;
             ALTER TABLE review_sets DROP COLUMN show_thinking;
             ALTER TABLE review_sets DROP COLUMN criteria_name; ALTER TABLE review_sets DROP COLUMN criteria;
             ALTER TABLE review_grades DROP COLUMN criteria;
             DELETE FROM migrations WHERE version >= 10;
             PRAGMA user_version = 9;",
        )
        .unwrap();
        // Written at v9: no trigger indexes it.
        conn.execute(
            "UPDATE turns SET text = 'Abscess, written at v9' WHERE task_id = 't/2' AND sample_index = 1",
            [],
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), nmb_store::latest_version());
    let after: Vec<_> = ["gliom", "abscess", "0%_d", "Grade"]
        .iter()
        .map(|t| search(&store, &id, t))
        .collect();
    assert_eq!(after[0], before[0]);
    assert_eq!(
        after[1],
        [key("t/2", 1), key("t/3", 0), key("t/3", 1)],
        "the answer written at v9 is found"
    );
    assert_eq!(after[2..], before[2..]);
    check_text_index(&store);
}

/// A sample's task and index.
type Key = (String, u32);

/// The samples of run `id` that `text` finds, read `limit` at a time from the first page to past the last, and
/// the totals the pages gave.
fn search_in_pages(
    store: &Store,
    id: &str,
    text: &str,
    limit: u64,
) -> (Vec<(String, u32)>, Vec<u64>) {
    let filter = SampleFilter {
        text: Some(text.into()),
        ..Default::default()
    };
    let (mut found, mut totals) = (Vec::new(), Vec::new());
    for page in 0.. {
        let p = store.sample_page(id, &filter, page * limit, limit).unwrap();
        totals.push(p.total);
        if p.samples.is_empty() {
            break;
        }
        assert!(p.samples.len() as u64 <= limit);
        found.extend(keys(&p.samples));
    }
    (found, totals)
}

#[test]
fn every_way_of_searching_finds_what_reading_every_answer_finds() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        // Another run where "meningioma" is in 200 answers: on SQLite the index names more turns for it than the
        // searched run has samples, so the search reads the run's turns instead.
        let other = store.create_run("cfg", &manifest()).unwrap().run_id;
        for t in 0..20 {
            let task = format!("m/{t:02}");
            let texts: Vec<String> = (0..10).map(|s| format!("Meningioma {t} {s}")).collect();
            let choices: Vec<_> = (0..10u32)
                .map(|s| nmb_store::ChoiceRecord {
                    thinking: None,
                    finish_reason: None,
                    sample_index: s,
                    choice_index: s,
                    text: Some(texts[s as usize].as_str()),
                    error: None,
                    final_turn: true,
                })
                .collect();
            let prompt = put_text_prompt(&store, &task, 0);
            store
                .record_call(&call(&other, &task, 0, &prompt), &choices)
                .unwrap();
        }
        // The searched run: 40 samples, three words each from a small vocabulary, some with a second turn, some
        // errored.
        let id = store.create_run("cfg", &manifest()).unwrap().run_id;
        const WORDS: [&str; 8] = [
            "Glioma",
            "glioblastoma",
            "MENINGIOMA",
            "abscess",
            "50%",
            "a_b",
            "lymphoma",
            "oedema",
        ];
        let mut x: u64 = 7;
        let mut word = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            WORDS[(x >> 33) as usize % WORDS.len()]
        };
        let mut answers: Vec<(Key, Vec<Option<String>>)> = Vec::new();
        for t in 0..20 {
            let task = format!("w/{t:02}");
            for s in 0..2u32 {
                let n = (t + s as usize) % 7;
                let mut turns = vec![match n {
                    0 => None,
                    _ => Some(format!("{} {} {}", word(), word(), word())),
                }];
                if n == 3 {
                    turns.push(Some(format!("then {}", word())));
                }
                for (turn, text) in turns.iter().enumerate() {
                    answer(&store, &id, &task, s, turn as u32, text.as_deref());
                }
                answers.push(((task.clone(), s), turns));
            }
        }
        let expected = |text: &str| -> Vec<Key> {
            let needle = text.to_ascii_lowercase();
            answers
                .iter()
                .filter(|(_, turns)| {
                    turns
                        .iter()
                        .flatten()
                        .any(|t| t.to_ascii_lowercase().contains(&needle))
                })
                .map(|(k, _)| k.clone())
                .collect()
        };
        for text in [
            "glioma",
            "GLIOB",
            "meningioma",
            "ma",
            "m",
            "50%",
            "0%",
            "a_b",
            "_",
            "then",
            "oedema",
            "lymphoma oedema",
            "zzz",
        ] {
            let want = expected(text);
            for limit in [1, 3, 7, 100] {
                let (found, totals) = search_in_pages(&store, &id, text, limit);
                assert_eq!(found, want, "{text:?}, {limit} a page");
                assert!(
                    totals.iter().all(|&t| t == want.len() as u64),
                    "{text:?}, {limit} a page: {totals:?}"
                );
            }
        }
        assert!(expected("glioma").len() > 10 && expected("meningioma").len() > 5);
    });
}

/// A search stops counting at `TEXT_COUNT_CAP` matches (the page says "over N"), or at the end of the page asked
/// for when that is further; other filters count exactly.
#[test]
fn a_search_counts_up_to_the_cap_or_the_page_asked_for() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let id = store.create_run("cfg", &manifest()).unwrap().run_id;
        for t in 0..101 {
            let task = format!("t/{t:03}");
            let prompt = put_text_prompt(&store, &task, 0);
            let choices: Vec<_> = (0..10)
                .map(|s| ok_choice(s, "a needle here", true))
                .collect();
            store
                .record_call(&call(&id, &task, 0, &prompt), &choices)
                .unwrap();
        }
        let search = SampleFilter {
            text: Some("needle".into()),
            ..SampleFilter::default()
        };
        let first = store.sample_page(&id, &search, 0, 50).unwrap();
        assert_eq!(
            (first.total, first.total_exact),
            (nmb_store::TEXT_COUNT_CAP, false)
        );
        assert_eq!(first.samples.len(), 50);
        let deep = store.sample_page(&id, &search, 1000, 50).unwrap();
        assert_eq!(
            (deep.total, deep.total_exact, deep.samples.len()),
            (1010, true, 10)
        );
        let narrow = SampleFilter {
            text: Some("needle".into()),
            task_prefix: Some("t/00".into()),
            ..SampleFilter::default()
        };
        let few = store.sample_page(&id, &narrow, 0, 50).unwrap();
        assert_eq!((few.total, few.total_exact), (100, true));
        let all = store
            .sample_page(&id, &SampleFilter::default(), 0, 50)
            .unwrap();
        assert_eq!((all.total, all.total_exact), (1010, true));
    });
}
