use crate::common;

use common::*;
use nmb_store::{Manifest, RunStatus, Store, StoreError};

#[test]
fn create_get_list_and_status() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let a = store.create_run("cfg-a", &manifest()).unwrap();
        let b = store.create_run("cfg-b", &manifest()).unwrap();
        assert_ne!(a.run_id, b.run_id);
        assert!(
            a.run_id.starts_with('r') && a.run_id.len() == "r20261122-153000-ab12".len(),
            "{}",
            a.run_id
        );
        assert_eq!(a.status, RunStatus::Running);

        let got = store.get_run(&a.run_id).unwrap().expect("run exists");
        assert_eq!(got.manifest.suite_id, "sample");
        assert_eq!(got.config_hash, "cfg-a");
        assert_eq!(got.manifest.samples, 5);
        assert_eq!(got.manifest.input_mode, nmb_store::InputMode::Full);
        assert_eq!(got.manifest, manifest());

        let ids: Vec<String> = store
            .list_runs()
            .unwrap()
            .into_iter()
            .map(|r| r.run_id)
            .collect();
        assert_eq!(ids.len(), 2);
        assert!(ids.contains(&a.run_id) && ids.contains(&b.run_id));

        store.set_status(&a.run_id, RunStatus::Finished).unwrap();
        assert_eq!(store.run(&a.run_id).unwrap().status, RunStatus::Finished);
        assert!(store.get_run("r-nope").unwrap().is_none());
        assert!(matches!(
            store.run("r-nope"),
            Err(StoreError::UnknownRun { .. })
        ));
        assert!(matches!(
            store.set_status("r-nope", RunStatus::Finished),
            Err(StoreError::UnknownRun { .. })
        ));
    });
}

#[test]
fn manifest_updates_and_a_corrupt_one_is_an_error() {
    let (_dir, store) = temp_store();
    let run = store.create_run("cfg", &manifest()).unwrap();
    let mut m: Manifest = manifest();
    m.dropped_inputs = vec!["images (text-only model)".into()];
    store.update_manifest(&run.run_id, &m).unwrap();
    assert_eq!(
        store.run(&run.run_id).unwrap().manifest.dropped_inputs,
        ["images (text-only model)"]
    );
    store
        .with_conn("corrupt a manifest", |c| {
            c.execute("UPDATE runs SET manifest = '[1, 2]'", [])
        })
        .unwrap();
    let err = store.run(&run.run_id).unwrap_err();
    assert!(
        matches!(err, StoreError::Json { .. }) && err.to_string().contains("run manifest"),
        "{err}"
    );
}

#[test]
fn resumable_run_is_the_latest_unfinished_with_the_same_config() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        assert!(store.find_resumable("cfg").unwrap().is_none());
        let old = store.create_run("cfg", &manifest()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let newer = store.create_run("cfg", &manifest()).unwrap();
        let _other = store.create_run("other-cfg", &manifest()).unwrap();

        assert_eq!(
            store.find_resumable("cfg").unwrap().unwrap().run_id,
            newer.run_id
        );
        store
            .set_status(&newer.run_id, RunStatus::Finished)
            .unwrap();
        store
            .set_status(&old.run_id, RunStatus::Interrupted)
            .unwrap();
        assert_eq!(
            store.find_resumable("cfg").unwrap().unwrap().run_id,
            old.run_id
        );
        store.set_status(&old.run_id, RunStatus::Finished).unwrap();
        assert!(store.find_resumable("cfg").unwrap().is_none());
    });
}

#[test]
fn runs_survive_reopening() {
    let (dir, store) = temp_store();
    let run = store.create_run("cfg", &manifest()).unwrap();
    record_ok(&store, &run.run_id, "t1", 0, "answer");
    drop(store);
    let store = Store::open_dir(dir.path().join("runs")).unwrap();
    assert_eq!(store.schema_version().unwrap(), nmb_store::latest_version());
    let s = store.summary(&run.run_id).unwrap();
    assert_eq!((s.samples_total, s.samples_ok), (1, 1));
}

#[test]
fn summary_counts_samples_calls_errors_tokens_and_latency() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let run = store.create_run("cfg", &manifest()).unwrap();
        let id = run.run_id.as_str();
        store
            .plan_samples(id, &[("t1", 2), ("t2", 2), ("t3", 1)])
            .unwrap();

        let p1 = put_text_prompt(&store, "t1", 0);
        // One call answering two samples (n = 2): one raw body, two sample rows.
        let mut c = call(id, "t1", 0, &p1);
        c.tokens_in = Some(100);
        c.tokens_out = Some(20);
        c.latency_ms = Some(10);
        let mut second = ok_choice(1, "B", true);
        second.choice_index = 1;
        store
            .record_call(&c, &[ok_choice(0, "A", true), second])
            .unwrap();

        let p2 = put_text_prompt(&store, "t2", 0);
        let mut failed = call(id, "t2", 0, &p2);
        failed.error = error("rate_limit", "429 after 4 attempts");
        failed.attempts = 4;
        failed.raw = None;
        failed.tokens_in = None;
        failed.tokens_out = None;
        failed.latency_ms = Some(5000);
        store.record_call(&failed, &[failed_choice(0)]).unwrap();
        let mut timeout = call(id, "t2", 0, &p2);
        timeout.error = error("timeout", "no answer in 60 s");
        timeout.attempts = 2;
        timeout.latency_ms = Some(60_000);
        store.record_call(&timeout, &[failed_choice(1)]).unwrap();

        let p3 = put_text_prompt(&store, "t3", 0);
        let mut c3 = call(id, "t3", 0, &p3);
        c3.tokens_in = Some(50);
        c3.tokens_out = Some(7);
        c3.latency_ms = Some(30);
        store.record_call(&c3, &[ok_choice(0, "C", true)]).unwrap();

        let s = store.summary(id).unwrap();
        assert_eq!(s.samples_total, 5);
        assert_eq!(s.samples_ok, 3);
        assert_eq!(s.samples_errored, 2);
        assert_eq!(s.samples_pending, 0);
        assert_eq!(s.calls, 4);
        assert_eq!(s.calls_errored, 2);
        assert_eq!(s.requests_sent, 1 + 4 + 2 + 1);
        assert_eq!(s.cache_hits, 0);
        assert_eq!(s.errors_by_class.get("rate_limit"), Some(&1));
        assert_eq!(s.errors_by_class.get("timeout"), Some(&1));
        assert_eq!(s.tokens_in, 100 + 10 + 50);
        assert_eq!(s.tokens_out, 20 + 3 + 7);
        // Latency stats cover successful calls only: 10 and 30.
        assert_eq!(s.latency_ms.count, 2);
        assert_eq!(s.latency_ms.max, 30);
        assert!((s.latency_ms.mean - 20.0).abs() < 1e-9);

        let json = serde_json::to_value(&s).unwrap();
        for key in [
            "run_id",
            "samples_total",
            "samples_ok",
            "samples_errored",
            "requests_sent",
            "errors_by_class",
            "tokens_in",
            "tokens_out",
        ] {
            assert!(json.get(key).is_some(), "summary JSON lacks {key}: {json}");
        }

        // The n = 2 call's raw body is stored once and both samples point at it.
        let samples = store.run_samples(id).unwrap();
        let t1: Vec<_> = samples.iter().filter(|s| s.task_id == "t1").collect();
        assert_eq!(t1.len(), 2);
        assert_eq!(t1[0].turns[0].call.call_id, t1[1].turns[0].call.call_id);
        assert_eq!(
            (t1[0].turns[0].choice_index, t1[1].turns[0].choice_index),
            (0, 1)
        );
        assert_eq!(t1[1].final_text.as_deref(), Some("B"));
        let raw = store
            .raw_response(t1[0].turns[0].call.call_id)
            .unwrap()
            .unwrap();
        assert!(raw.contains("\"choices\""));
        // Errored samples have no answer text, only their class.
        let t2: Vec<_> = samples.iter().filter(|s| s.task_id == "t2").collect();
        assert!(t2.iter().all(|s| s.final_text.is_none()));
        assert_eq!(t2[0].error_class.as_deref(), Some("rate_limit"));
        assert_eq!(t2[0].turns[0].call.attempts, 4);
        assert_eq!(store.run_calls(id).unwrap().len(), 4);
    });
}
