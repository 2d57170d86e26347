use crate::common;

use common::*;
use nmb_store::{ImageInput, StoreError};

fn file_size(store: &nmb_store::Store) -> u64 {
    store.checkpoint().unwrap();
    std::fs::metadata(store.path()).unwrap().len()
}

#[test]
fn an_image_used_by_100_requests_is_stored_once() {
    let (_dir, store) = temp_store();
    let run = store.create_run("cfg", &manifest()).unwrap();
    let image = fake_png(1, 46_000);
    let before = file_size(&store);

    for task in 0..100 {
        let task_id = format!("task-{task}");
        let prompt = put_image_prompt(&store, &task_id, std::slice::from_ref(&image));
        store
            .record_call(
                &call(&run.run_id, &task_id, 0, &prompt),
                &[ok_choice(0, "answer", true)],
            )
            .unwrap();
    }
    assert_eq!(store.image_count().unwrap(), 1);
    assert_eq!(store.prompt_count().unwrap(), 100);

    let grown = file_size(&store) - before;
    // One image (46 KB) plus 100 small prompts, calls and sample rows; 100 copies would be 4.6 MB.
    assert!(
        grown >= 46_000,
        "the image itself must be stored: grew {grown} bytes"
    );
    assert!(
        grown < 46_000 + 100 * 3_000,
        "grew {grown} bytes for one image and 100 small requests"
    );

    let stored = store.image(&sha(&image)).unwrap().expect("image stored");
    assert_eq!(stored.bytes, image);
    assert_eq!(stored.mime, "image/png");
}

#[test]
fn a_prompt_shared_by_samples_and_runs_is_stored_once() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let images = vec![fake_png(1, 4_000), fake_png(2, 4_000), fake_png(3, 4_000)];
        for _ in 0..2 {
            let run = store.create_run("cfg", &manifest()).unwrap();
            for sample in 0..5 {
                let prompt = put_image_prompt(&store, "task", &images);
                store
                    .record_call(
                        &call(&run.run_id, "task", 0, &prompt),
                        &[ok_choice(sample, "a", true)],
                    )
                    .unwrap();
            }
        }
        assert_eq!(store.prompt_count().unwrap(), 1);
        assert_eq!(store.image_count().unwrap(), 3);
        let body = store
            .prompt_body(&put_image_prompt(&store, "task", &images))
            .unwrap()
            .unwrap();
        assert!(
            body.contains(&sha(&images[0])),
            "prompt refers to images by hash"
        );
        assert!(
            body.len() < 1_000,
            "images are never inlined in prompt bodies ({} bytes)",
            body.len()
        );
    });
}

#[test]
fn an_image_whose_bytes_do_not_match_its_hash_is_refused() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let bytes = fake_png(7, 1_000);
        let wrong = sha(b"something else");
        let err = store
            .put_image(&ImageInput {
                sha256: &wrong,
                mime: "image/png",
                bytes: &bytes,
            })
            .unwrap_err();
        assert!(matches!(err, StoreError::ImageHashMismatch { .. }), "{err}");
        assert_eq!(store.image_count().unwrap(), 0);
    });
}

#[test]
fn a_prompt_body_that_is_not_json_is_refused() {
    on_each_engine(|| {
        let (_dir, store) = temp_store();
        let err = store.put_prompt("h", "not json", &[]).unwrap_err();
        assert!(err.to_string().contains("prompt h"), "{err}");
    });
}

#[test]
fn prompt_bodies_are_stored_compressed_and_plain_ones_still_read() {
    let (_dir, store) = temp_store();
    let text = "You are an experienced neurology expert. ".repeat(40);
    let body =
        serde_json::json!({"messages": [{"role": "user", "parts": [{"text": text}]}]}).to_string();
    store.put_prompt("h-new", &body, &[]).unwrap();
    assert_eq!(
        store.prompt_body("h-new").unwrap().as_deref(),
        Some(body.as_str())
    );

    let conn = rusqlite::Connection::open(store.path()).unwrap();
    let (kind, stored): (String, i64) = conn
        .query_row(
            "SELECT typeof(body), length(body) FROM prompts WHERE prompt_hash = 'h-new'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(kind, "blob");
    assert!(
        (stored as usize) < body.len() / 4,
        "{stored} bytes for {}",
        body.len()
    );

    // A body written as plain JSON text (as stores before schema v3 hold them) reads back as it is.
    conn.execute(
        "INSERT INTO prompts (prompt_hash, created_ms, body) VALUES ('h-old', 0, '{\"messages\": []}')",
        [],
    )
    .unwrap();
    assert_eq!(
        store.prompt_body("h-old").unwrap().as_deref(),
        Some("{\"messages\": []}")
    );
}
