//! Helpers shared by the store's integration tests.
#![allow(dead_code)]

use nmb_store::{CallRecord, ChoiceRecord, ErrorInfo, ImageInput, Store};
use sha2::{Digest, Sha256};

pub const MODEL: &str = "openai:test-model@http://127.0.0.1:9";
pub const PARAMS: &str = r#"{"max_tokens":256,"temperature":0.7,"top_p":0.95}"#;
pub const TEMPLATE: &str = "depth-v1";
pub const TEMPLATE_HASH: &str = "7e3c0000000000000000000000000000000000000000000000000000000000aa";

pub fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Incompressible bytes behind a PNG signature, so stored sizes are honest.
pub fn fake_png(seed: u64, len: usize) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

thread_local! {
    static ON_POSTGRES: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A new empty store: a SQLite file in a temporary directory, or inside [`on_each_engine`]'s second pass a new
/// database on the private PostgreSQL server.
pub fn temp_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = if ON_POSTGRES.get() {
        let pg = nmb_test_support::postgres::cluster().expect("checked by on_each_engine");
        Store::connect(&pg.fresh_database()).expect("connect to PostgreSQL")
    } else {
        Store::open_dir(dir.path().join("runs")).expect("open store")
    };
    (dir, store)
}

/// Runs `body` on SQLite, then again on PostgreSQL (skipped with a message locally when no server can be
/// started, a failure under CI). The same assertions hold on both.
pub fn on_each_engine(body: impl Fn() + std::panic::RefUnwindSafe) {
    body();
    let Some(_) = nmb_test_support::postgres::cluster() else {
        return;
    };
    ON_POSTGRES.set(true);
    let result = std::panic::catch_unwind(&body);
    ON_POSTGRES.set(false);
    if let Err(panic) = result {
        eprintln!("the failure above is on PostgreSQL");
        std::panic::resume_unwind(panic);
    }
}

/// Stores a text-only prompt for `task` and returns its hash.
pub fn put_text_prompt(store: &Store, task: &str, turn: u32) -> String {
    let body =
        format!(r#"[{{"role":"user","parts":[{{"text":"question for {task} turn {turn}"}}]}}]"#);
    let hash = sha(body.as_bytes());
    store.put_prompt(&hash, &body, &[]).expect("put prompt");
    hash
}

/// Stores a prompt that references the given images by hash (never inlined).
pub fn put_image_prompt(store: &Store, task: &str, images: &[Vec<u8>]) -> String {
    let hashes: Vec<String> = images.iter().map(|b| sha(b)).collect();
    let parts: Vec<String> = hashes
        .iter()
        .map(|h| format!(r#"{{"image":{{"sha256":"{h}","mime":"image/png"}}}}"#))
        .collect();
    let body = format!(
        r#"[{{"role":"user","parts":[{},{{"text":"describe {task}"}}]}}]"#,
        parts.join(",")
    );
    let hash = sha(body.as_bytes());
    let inputs: Vec<ImageInput<'_>> = images
        .iter()
        .zip(&hashes)
        .map(|(b, h)| ImageInput {
            sha256: h,
            mime: "image/png",
            bytes: b,
        })
        .collect();
    store.put_prompt(&hash, &body, &inputs).expect("put prompt");
    hash
}

pub fn call<'a>(run_id: &'a str, task: &'a str, turn: u32, prompt_hash: &'a str) -> CallRecord<'a> {
    CallRecord {
        tokens: Default::default(),
        run_id,
        task_id: task,
        turn_index: turn,
        prompt_hash,
        model: MODEL,
        params_json: PARAMS,
        template_id: TEMPLATE,
        template_hash: TEMPLATE_HASH,
        error: None,
        attempts: 1,
        raw: Some(
            r#"{"id":"x","choices":[{"message":{"content":"ok"}}],"usage":{"prompt_tokens":10,"completion_tokens":3}}"#,
        ),
        tokens_in: Some(10),
        tokens_out: Some(3),
        latency_ms: Some(42),
        started_ms: 1_000,
        finished_ms: 1_042,
        batch_id: None,
    }
}

pub fn ok_choice(sample_index: u32, text: &str, final_turn: bool) -> ChoiceRecord<'_> {
    ChoiceRecord {
        thinking: None,
        finish_reason: None,
        sample_index,
        choice_index: 0,
        text: Some(text),
        error: None,
        final_turn,
    }
}

pub fn failed_choice(sample_index: u32) -> ChoiceRecord<'static> {
    ChoiceRecord {
        thinking: None,
        finish_reason: None,
        sample_index,
        choice_index: 0,
        text: None,
        error: None,
        final_turn: true,
    }
}

pub fn error<'a>(class: &'a str, message: &'a str) -> Option<ErrorInfo<'a>> {
    Some(ErrorInfo { class, message })
}

/// Records a successful single-turn answer for one sample.
pub fn record_ok(store: &Store, run_id: &str, task: &str, sample: u32, text: &str) -> i64 {
    let prompt = put_text_prompt(store, task, 0);
    store
        .record_call(
            &call(run_id, task, 0, &prompt),
            &[ok_choice(sample, text, true)],
        )
        .expect("record call")
}

pub fn manifest() -> nmb_store::Manifest {
    serde_json::from_value(serde_json::json!({
        "nmb_version": "0.1.0", "suite_id": "sample", "suite_hash": "abc",
        "template_id": TEMPLATE, "template_hash": TEMPLATE_HASH, "model": MODEL,
        "params": {"temperature": 0.7}, "input_mode": "full", "samples": 5, "dropped_inputs": []
    }))
    .expect("a manifest")
}
