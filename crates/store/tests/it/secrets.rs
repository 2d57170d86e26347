use crate::common;

use common::*;
use nmb_store::{find_bytes_in_store, SecretHit};

#[test]
fn the_secret_scan_finds_a_planted_string_and_nothing_else() {
    let (_dir, store) = temp_store();
    let run = store.create_run("cfg", &manifest()).unwrap();
    record_ok(&store, &run.run_id, "t", 0, "a harmless answer");
    let secret = b"sk-test-NMB-SECRET-0123456789abcdef";
    assert_eq!(find_bytes_in_store(store.path(), secret).unwrap(), vec![]);

    // A long value spills into overflow pages, where raw bytes can be split; the value scan still finds it.
    let long_answer = format!(
        "{}{}{}",
        "x".repeat(4090),
        String::from_utf8_lossy(secret),
        "y".repeat(9000)
    );
    record_ok(&store, &run.run_id, "leak", 0, &long_answer);
    let hits = find_bytes_in_store(store.path(), secret).unwrap();
    assert!(
        hits.iter().any(|h| matches!(h, SecretHit::Value { table, column } if table == "turns" && column == "text")),
        "{hits:?}"
    );
    assert!(find_bytes_in_store(store.path(), b"").is_err());
}

#[test]
fn the_secret_scan_looks_inside_compressed_values() {
    let (_dir, store) = temp_store();
    let run = store.create_run("cfg", &manifest()).unwrap();
    let secret = "sk-test-NMB-SECRET-in-a-raw-body";
    // The raw body is stored compressed, so the key is not in the file's bytes as is.
    let raw = format!("{{\"echo\": \"{secret}\"}}");
    let prompt = put_text_prompt(&store, "t", 0);
    let mut c = call(&run.run_id, "t", 0, &prompt);
    c.raw = Some(&raw);
    store
        .record_call(&c, &[ok_choice(0, "fine", true)])
        .unwrap();
    let hits = find_bytes_in_store(store.path(), secret.as_bytes()).unwrap();
    assert!(
        hits.iter().any(|h| matches!(h, SecretHit::Value { table, column } if table == "calls" && column == "raw")),
        "{hits:?}"
    );
}

/// A manifest stored by an nmb that still recorded credentials written into model URLs reads back without
/// them, wherever a URL sits in it.
#[test]
fn credentials_in_an_older_manifests_urls_are_cut_on_read() {
    let dir = tempfile::tempdir().unwrap();
    let store = nmb_store::Store::open_dir(dir.path()).unwrap();
    let url = "http://nmbuser:pw-old-CANARY@127.0.0.1:9/v1?api_key=old-KEY-CANARY&region=eu";
    let manifest = nmb_store::Manifest {
        model: format!("openai:m@{url}"),
        worker_args: Some(vec!["--model".into(), format!("openai:m@{url}")]),
        ..nmb_store::Manifest::default()
    };
    let run = store.create_run("cfg", &manifest).unwrap();
    let read = store.run(&run.run_id).unwrap().manifest;
    assert_eq!(read.model, "openai:m@http://127.0.0.1:9/v1?region=eu");
    let text = serde_json::to_string(&read).unwrap();
    assert!(!text.contains("CANARY"), "{text}");
    let listed = serde_json::to_string(&store.list_runs().unwrap()[0].manifest).unwrap();
    assert!(!listed.contains("CANARY"), "{listed}");
}
