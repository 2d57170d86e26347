//! What only PostgreSQL has to show: the schema made and recognised, foreign databases and bad credentials
//! refused without leaking the password, many connections at once, and the same run reading back identically
//! from both engines.

use crate::common;

use std::sync::Arc;

use common::*;
use nmb_store::{latest_version, SampleStatus, Store, StoreError};
use nmb_test_support::postgres::cluster;

#[test]
fn a_new_database_gets_the_schema_and_is_recognised_afterwards() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let run_id = {
        let store = Store::connect(&url).unwrap();
        assert_eq!(store.engine_name(), "postgres");
        assert_eq!(store.schema_version().unwrap(), latest_version());
        store.create_run("cfg", &manifest()).unwrap().run_id
    };
    let again = Store::connect(&url).unwrap();
    assert_eq!(again.run(&run_id).unwrap().config_hash, "cfg");
    assert_eq!(again.integrity_check().unwrap(), vec!["ok".to_string()]);
    let versions = pg.psql(
        &url,
        "SELECT string_agg(version::text, ',' ORDER BY version) FROM migrations",
    );
    let expected: Vec<String> = (1..=latest_version()).map(|v| v.to_string()).collect();
    assert_eq!(versions, expected.join(","));
}

#[test]
fn a_database_of_another_program_is_refused_and_left_alone() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    pg.psql(
        &url,
        "CREATE TABLE invoices (id int); INSERT INTO invoices VALUES (7)",
    );
    let err = Store::connect(&url).unwrap_err();
    assert!(matches!(err, StoreError::Foreign { .. }), "{err:?}");
    assert_eq!(
        pg.psql(
            &url,
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        ),
        "1"
    );
    assert_eq!(pg.psql(&url, "SELECT id FROM invoices"), "7");
}

#[test]
fn errors_name_the_database_but_never_the_password() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let wrong = url.replace(pg.password(), "not-the-password-x9");
    let err = Store::connect(&wrong).unwrap_err().to_string();
    assert!(!err.contains("not-the-password-x9"), "{err}");
    assert!(err.contains("127.0.0.1") && err.contains("***"), "{err}");

    let store = Store::connect(&url).unwrap();
    let err = store.run("no-such-run").unwrap_err().to_string();
    assert!(!err.contains(pg.password()), "{err}");
    assert!(err.contains("no-such-run"), "{err}");
    assert!(!format!("{store:?}").contains(pg.password()));
}

#[test]
fn connections_from_many_places_at_once_lose_nothing() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let run_id = Store::connect(&url)
        .unwrap()
        .create_run("cfg", &manifest())
        .unwrap()
        .run_id;
    let images: Arc<Vec<Vec<u8>>> = Arc::new((0..3).map(|i| fake_png(i, 20_000)).collect());
    let handles: Vec<_> = (0..6)
        .map(|t| {
            let (url, run_id, images) = (url.clone(), run_id.clone(), Arc::clone(&images));
            // Each thread is like a worker on another machine: its own connection.
            std::thread::spawn(move || {
                let store = Store::connect(&url).unwrap();
                for i in 0..25 {
                    let task = format!("w{t}-{i}");
                    // Every worker stores the same images and the same shared prompt: the first one wins.
                    put_image_prompt(&store, "shared", &images);
                    record_ok(&store, &run_id, &task, 0, "a");
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("worker thread");
    }
    let store = Store::connect(&url).unwrap();
    let states = store.sample_states(&run_id).unwrap();
    assert_eq!(states.len(), 150);
    assert!(states.iter().all(|s| s.status == SampleStatus::Ok));
    assert_eq!(store.image_count().unwrap(), 3);
    assert_eq!(store.summary(&run_id).unwrap().calls, 150);
}

/// The same writes, read back from each engine, give the same records (ids and times aside).
#[test]
fn one_run_reads_back_the_same_from_both_engines() {
    let Some(pg) = cluster() else { return };
    let (_dir, sqlite) = temp_store();
    let postgres = Store::connect(&pg.fresh_database()).unwrap();
    let views: Vec<_> = [&sqlite, &postgres]
        .iter()
        .map(|s| write_a_run(s))
        .collect();
    assert_eq!(views[0], views[1]);
}

fn write_a_run(store: &Store) -> String {
    let run = store.create_run("cfg", &manifest()).unwrap();
    store
        .plan_samples(&run.run_id, &[("case_1/dx", 2), ("case_2/consult", 1)])
        .unwrap();
    let images = vec![fake_png(1, 5_000)];
    let prompt = put_image_prompt(store, "case_1/dx", &images);
    let both = [
        ok_choice(0, "ischaemic stroke", true),
        ok_choice(1, "glioma", true),
    ];
    store
        .record_call(&call(&run.run_id, "case_1/dx", 0, &prompt), &both)
        .unwrap();
    let consult = put_text_prompt(store, "case_2/consult", 0);
    store
        .record_call(
            &call(&run.run_id, "case_2/consult", 0, &consult),
            &[ok_choice(0, "first turn", false)],
        )
        .unwrap();
    let mut failed = call(&run.run_id, "case_2/consult", 1, &consult);
    failed.error = error("rate_limit", "429 after 5 attempts");
    store.record_call(&failed, &[failed_choice(0)]).unwrap();
    let rows = vec![nmb_store::SampleScoreRow {
        task_id: "case_1/dx".into(),
        case_id: "case_1".into(),
        correct: Some(true),
        rubric_overall: Some(3.5),
        ..Default::default()
    }];
    store
        .save_score_report(&nmb_store::ScoreReportRecord {
            run_id: &run.run_id,
            config_hash: "score-cfg",
            schema_version: 1,
            report_json: r#"{"pass_at_1":0.5}"#,
            samples: &rows,
        })
        .unwrap();
    let mut samples = serde_json::to_value(store.run_samples(&run.run_id).unwrap()).unwrap();
    strip(
        &mut samples,
        &["call_id", "run_id", "started_ms", "finished_ms"],
    );
    let mut summary = serde_json::to_value(store.summary(&run.run_id).unwrap()).unwrap();
    strip(&mut summary, &["run_id", "created_at", "updated_at"]);
    let scores = store.sample_score_rows(&run.run_id, "score-cfg").unwrap();
    let raw = store
        .raw_response(store.run_calls(&run.run_id).unwrap()[0].call_id)
        .unwrap();
    format!(
        "{samples}\n{summary}\n{scores:?}\n{:?}\n{raw:?}\n{:?}",
        store.latest_score_report(&run.run_id).unwrap(),
        store.prompt_body(&prompt).unwrap(),
    )
}

fn strip(v: &mut serde_json::Value, keys: &[&str]) {
    match v {
        serde_json::Value::Object(map) => {
            for k in keys {
                map.remove(*k);
            }
            map.values_mut().for_each(|x| strip(x, keys));
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|x| strip(x, keys)),
        _ => {}
    }
}

/// `sslmode=require` encrypts, and checks the server's certificate: against the CA named by `sslrootcert`, it
/// connects over TLS; without it, the unknown issuer is refused (and the password still never shows).
#[test]
fn sslmode_require_connects_over_tls_and_checks_the_certificate() {
    let Some(pg) = cluster() else { return };
    let Some(ca) = pg.ca_cert() else {
        nmb_test_support::need::<()>(
            "a TLS certificate for the test server",
            "install openssl",
            None,
        );
        return;
    };
    let url = pg.fresh_database();
    let db = url.rsplit('/').next().unwrap().to_string();
    let tls_url = format!("{url}?sslmode=require&sslrootcert={}", ca.display());
    let store = Store::connect(&tls_url).unwrap();
    store.create_run("cfg", &manifest()).unwrap();
    let encrypted = pg.psql(
        &url,
        &format!(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE s.ssl AND a.datname = '{db}' AND a.application_name = ''"
        ),
    );
    assert!(
        encrypted.parse::<u32>().unwrap() >= 1,
        "no TLS connection to {db}"
    );

    let err = Store::connect(&format!("{url}?sslmode=require"))
        .unwrap_err()
        .to_string();
    assert!(
        err.to_lowercase().contains("certificate") || err.contains("UnknownIssuer"),
        "{err}"
    );
    assert!(!err.contains(pg.password()), "{err}");
}
