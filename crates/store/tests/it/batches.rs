//! Provider batches as stored: a batch submitted again after a refusal records why, a run finds the resubmitted
//! batches its answers came through, and batches stored before schema v17 read back unchanged, on both engines.

use crate::common;

use common::*;
use nmb_store::{BatchRecord, BatchState, Resubmission, Store};
use nmb_test_support::postgres::cluster;

const MODEL_ID: &str = "openai:m@http://127.0.0.1:9/v1";

fn ids(n: usize, tag: &str) -> Vec<String> {
    (0..n).map(|i| format!("nmb-{tag}{i}")).collect()
}

fn refusal(replaces: &str, round: u64) -> Resubmission {
    Resubmission {
        replaces: vec![replaces.to_string()],
        reason: "OpenAI failed batch batch_1: token_limit_exceeded: Enqueued token limit reached"
            .into(),
        round,
    }
}

fn by_id(store: &Store, id: &str) -> BatchRecord {
    let all = store.batches().unwrap();
    all.into_iter().find(|b| b.batch_id == id).expect("stored")
}

#[test]
fn a_resubmitted_batch_records_why_and_its_run_finds_the_chain() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        store
            .create_batch("b-first", MODEL_ID, "openai", &ids(4, "a"), None)
            .unwrap();
        store
            .set_batch_state("b-first", BatchState::Abandoned)
            .unwrap();
        let second = refusal("b-first", 2);
        store
            .create_batch("b-second", MODEL_ID, "openai", &ids(2, "a"), Some(&second))
            .unwrap();
        store
            .set_batch_state("b-second", BatchState::Abandoned)
            .unwrap();
        let third = Resubmission {
            replaces: vec!["b-second".into(), "b-other".into()],
            round: 1,
            ..refusal("", 1)
        };
        store
            .create_batch("b-third", MODEL_ID, "openai", &ids(1, "a"), Some(&third))
            .unwrap();
        assert_eq!(by_id(&store, "b-first").resubmission, None);
        assert_eq!(by_id(&store, "b-second").resubmission, Some(second.clone()));
        assert_eq!(by_id(&store, "b-third").resubmission, Some(third.clone()));

        let run = store.create_run("cfg", &manifest()).unwrap().run_id;
        let prompt = put_text_prompt(&store, "t1", 0);
        let mut answered = call(&run, "t1", 0, &prompt);
        answered.batch_id = Some("b-third");
        store
            .record_call(&answered, &[ok_choice(0, "ok", true)])
            .unwrap();
        let chain = store.run_resubmissions(&run).unwrap();
        let names: Vec<&str> = chain.iter().map(|b| b.batch_id.as_str()).collect();
        assert_eq!(names.len(), 2, "{chain:?}");
        assert!(
            names.contains(&"b-second") && names.contains(&"b-third"),
            "{names:?}"
        );
        assert_eq!(store.summary(&run).unwrap().batch_resubmissions, chain);
        // A run answered by first submissions lists none.
        let other = store.create_run("cfg2", &manifest()).unwrap().run_id;
        record_ok(&store, &other, "t2", 0, "fine");
        assert!(store
            .summary(&other)
            .unwrap()
            .batch_resubmissions
            .is_empty());
    });
}

/// A batch stored, the store taken back to schema v16 (no resubmission columns) and opened again by `reopen`:
/// the batch reads back as it was.
fn migrated_from_v16(store: Store, reopen: impl FnOnce(Store) -> Store) {
    store
        .create_batch("b-old", MODEL_ID, "anthropic", &ids(3, "o"), None)
        .unwrap();
    store.batch_submitted("b-old", "msgbatch_1").unwrap();
    let before = store.batches().unwrap();
    let store = reopen(store);
    assert_eq!(store.schema_version().unwrap(), nmb_store::latest_version());
    assert_eq!(store.batches().unwrap(), before);
    assert_eq!(by_id(&store, "b-old").resubmission, None);
    assert_eq!(
        store.batch_items("b-old").unwrap(),
        ids(3, "o"),
        "its requests in order"
    );
}

const UNDO_V17: &str = "ALTER TABLE batches DROP COLUMN resubmit_of;
     ALTER TABLE batches DROP COLUMN resubmit_reason;
     ALTER TABLE batches DROP COLUMN resubmit_round;
     DELETE FROM migrations WHERE version >= 17;";

#[test]
fn batches_stored_before_v17_read_back_unchanged_on_sqlite() {
    let (dir, store) = temp_store();
    let path = dir.path().join("runs").join(nmb_store::DB_FILE_NAME);
    migrated_from_v16(store, |store| {
        drop(store);
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(&format!("{UNDO_V17} PRAGMA user_version = 16;"))
            .unwrap();
        drop(conn);
        Store::open(&path).unwrap()
    });
}

#[test]
fn batches_stored_before_v17_read_back_unchanged_on_postgres() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let store = Store::connect(&url).unwrap();
    migrated_from_v16(store, |store| {
        drop(store);
        pg.psql(&url, UNDO_V17);
        assert_eq!(pg.psql(&url, "SELECT max(version) FROM migrations"), "16");
        Store::connect(&url).unwrap()
    });
}
