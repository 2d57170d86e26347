//! Calls record the replica (base URL) that answered them (schema v5); a store from before keeps its calls, with
//! no replica, and takes new ones with it.

use crate::common;

use common::*;
use nmb_store::{cache_key, canonical_json_str, Store};

fn contexts(store: &Store) -> i64 {
    store
        .with_conn("count contexts", |c| {
            c.query_row("SELECT count(*) FROM contexts", [], |r| r.get(0))
        })
        .unwrap()
}

#[test]
fn a_call_records_its_replica_and_the_answer_is_cached_under_the_model_alone() {
    let (_dir, store) = temp_store();
    let run = store.create_run("cfg", &manifest()).unwrap();
    let id = run.run_id.as_str();
    let (p1, p2, p3) = (
        put_text_prompt(&store, "t1", 0),
        put_text_prompt(&store, "t2", 0),
        put_text_prompt(&store, "t3", 0),
    );
    store
        .record_call_from(
            &call(id, "t1", 0, &p1),
            &[ok_choice(0, "A", true)],
            Some("http://127.0.0.1:9/v1"),
        )
        .unwrap();
    store
        .record_call_from(
            &call(id, "t2", 0, &p2),
            &[ok_choice(0, "B", true)],
            Some("http://127.0.0.2:9/v1"),
        )
        .unwrap();
    store
        .record_call(&call(id, "t3", 0, &p3), &[ok_choice(0, "C", true)])
        .unwrap();
    let calls = store.run_calls(id).unwrap();
    let replicas: Vec<Option<&str>> = calls.iter().map(|c| c.replica.as_deref()).collect();
    assert_eq!(
        replicas,
        [
            Some("http://127.0.0.1:9/v1"),
            Some("http://127.0.0.2:9/v1"),
            None
        ]
    );
    // the replica is no part of the model: one context, and the cache answers by model, parameters and prompt
    assert!(calls.iter().all(|c| c.model == MODEL));
    assert_eq!(contexts(&store), 1);
    let key = cache_key(MODEL, &canonical_json_str(PARAMS), &p2, 0);
    let hit = store.lookup_cache(&key).unwrap().expect("cached");
    assert_eq!((hit.text.as_str(), hit.call_id), ("B", calls[1].call_id));
    // what a sample's turns show
    let samples = store.run_samples(id).unwrap();
    assert_eq!(
        samples[1].turns[0].call.replica.as_deref(),
        Some("http://127.0.0.2:9/v1")
    );
    // serialised calls only mention a replica when there is one
    let json = serde_json::to_value(&calls[2]).unwrap();
    assert!(json.get("replica").is_none(), "{json}");
    assert_eq!(
        serde_json::to_value(&calls[0]).unwrap()["replica"],
        "http://127.0.0.1:9/v1"
    );
}

#[test]
fn a_store_from_schema_v4_migrates_and_keeps_its_calls() {
    let (dir, store) = temp_store();
    let run = store.create_run("cfg", &manifest()).unwrap();
    let id = run.run_id.clone();
    record_ok(&store, &id, "old", 0, "old answer");
    drop(store);
    // Take the file back to what schema v4 wrote: no replica, lease, fleet, headline, review or human answer
    // columns and tables, version 4.
    let path = dir.path().join("runs").join(nmb_store::DB_FILE_NAME);
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "ALTER TABLE calls DROP COLUMN replica;
             ALTER TABLE samples DROP COLUMN lease_owner;
             ALTER TABLE samples DROP COLUMN lease_until_ms;
             DROP TABLE fleet_slots;
             DROP TABLE fleet_pauses;
             ALTER TABLE score_reports DROP COLUMN headline;
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
             DELETE FROM migrations WHERE version >= 5;
             PRAGMA user_version = 4;",
        )
        .unwrap();
    }
    let store = Store::open(&path).unwrap();
    assert_eq!(store.schema_version().unwrap(), nmb_store::latest_version());
    let applied: String = store
        .with_conn("read migrations", |c| {
            c.query_row(
                "SELECT description FROM migrations WHERE version = 5",
                [],
                |r| r.get(0),
            )
        })
        .unwrap();
    assert!(applied.contains("replica"), "{applied}");
    let prompt = put_text_prompt(&store, "new", 0);
    store
        .record_call_from(
            &call(&id, "new", 0, &prompt),
            &[ok_choice(0, "new answer", true)],
            Some("http://127.0.0.1:9/v1"),
        )
        .unwrap();
    let calls = store.run_calls(&id).unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].task_id, "old");
    assert_eq!(calls[0].replica, None, "old rows stay NULL");
    assert_eq!(calls[1].replica.as_deref(), Some("http://127.0.0.1:9/v1"));
    let s = store.summary(&id).unwrap();
    assert_eq!((s.samples_total, s.samples_ok), (2, 2));
    assert_eq!(store.integrity_check().unwrap(), ["ok"]);
}
