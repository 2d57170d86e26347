use crate::common;

use std::sync::Arc;

use common::*;
use nmb_store::{cache_key, SampleStatus, Store};

#[test]
fn threads_sharing_one_store_lose_nothing() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let store = Arc::new(store);
        let run = store.create_run("cfg", &manifest()).unwrap();
        let images: Arc<Vec<Vec<u8>>> = Arc::new((0..3).map(|i| fake_png(i, 20_000)).collect());
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let store = Arc::clone(&store);
                let images = Arc::clone(&images);
                let run_id = run.run_id.clone();
                std::thread::spawn(move || {
                    for i in 0..40 {
                        let task = format!("th{t}-{i}");
                        let prompt = put_image_prompt(&store, &task, &images);
                        let key = cache_key(MODEL, PARAMS, &prompt, 0);
                        assert!(store.lookup_cache(&key).unwrap().is_none());
                        store
                            .record_call(
                                &call(&run_id, &task, 0, &prompt),
                                &[ok_choice(0, &task, true)],
                            )
                            .unwrap();
                        assert_eq!(store.lookup_cache(&key).unwrap().unwrap().text, task);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().expect("writer thread");
        }
        let s = store.summary(&run.run_id).unwrap();
        assert_eq!((s.samples_total, s.samples_ok, s.calls), (320, 320, 320));
        assert_eq!(store.image_count().unwrap(), 3);
    });
}

#[test]
fn several_connections_to_one_file_wait_for_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nmb.sqlite");
    let run_id = Store::open(&path)
        .unwrap()
        .create_run("cfg", &manifest())
        .unwrap()
        .run_id;
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let path = path.clone();
            let run_id = run_id.clone();
            std::thread::spawn(move || {
                // Each thread is like a separate process: its own connection.
                let store = Store::open(&path).unwrap();
                for i in 0..30 {
                    let task = format!("c{t}-{i}");
                    record_ok(&store, &run_id, &task, 0, "a");
                    store.summary(&run_id).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("connection thread");
    }
    let store = Store::open(&path).unwrap();
    let states = store.sample_states(&run_id).unwrap();
    assert_eq!(states.len(), 120);
    assert!(states.iter().all(|s| s.status == SampleStatus::Ok));
    assert_eq!(store.integrity_check().unwrap(), vec!["ok".to_string()]);
}
