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
