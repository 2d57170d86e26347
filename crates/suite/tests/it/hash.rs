//! The suite content hash: stable for the same input, different when a case, image byte or answer changes.

use crate::common;

use std::path::Path;

use common::*;
use nmb_suite::{load, suite_hash, LoadOptions};
use serde_json::{json, Value};

fn hash_of(dir: &Path, site: &Value, answers: &[Value]) -> String {
    let path = write_json(dir, "site.json", site);
    let answers = write(dir, "answers.jsonl", jsonl(answers));
    let opts = LoadOptions {
        answers: Some(answers),
        ..LoadOptions::default()
    };
    let loaded = load(&path.display().to_string(), &opts).unwrap();
    suite_hash(&loaded.suite).unwrap()
}

fn answers() -> Vec<Value> {
    vec![json!({"case_id": "case_1", "diagnosis": "Stroke", "differential": ["Stroke", "ICH"]})]
}

#[test]
fn same_input_same_hash_in_another_directory() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let h1 = hash_of(a.path(), &small_site(), &answers());
    let h2 = hash_of(b.path(), &small_site(), &answers());
    assert_eq!(h1, h2);
    assert_eq!(h1.len(), 64);
}

#[test]
fn changing_an_answer_an_image_byte_or_case_text_changes_the_hash() {
    let dir = tempfile::tempdir().unwrap();
    let base = hash_of(dir.path(), &small_site(), &answers());

    let mut other_answer = answers();
    other_answer[0]["differential"] = json!(["ICH", "Stroke"]);
    assert_ne!(
        base,
        hash_of(dir.path(), &small_site(), &other_answer),
        "answer change"
    );

    let mut site = small_site();
    site[1]["text"] = json!("A 32-year-old woman with visual loss.");
    assert_ne!(
        base,
        hash_of(dir.path(), &site, &answers()),
        "case text change"
    );

    let mut image = png(8, 8, 3);
    let last = image.len() - 13; // a byte inside the IDAT payload region, not the IEND trailer
    image[last] ^= 1;
    let mut site = small_site();
    site[1]["images"] = json!([data_url(&image)]);
    assert_ne!(
        base,
        hash_of(dir.path(), &site, &answers()),
        "image byte change"
    );
}

#[test]
fn native_file_images_are_hashed_from_their_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let case = json!({"case_id": "c1", "images": [{"path": "img/a.png"}], "tasks": [{"family": "dx", "question": "q"}]});
    native_suite(dir.path(), &[case]);
    let h1 = suite_hash(&load_path(dir.path()).suite).unwrap();
    let mut bytes = std::fs::read(dir.path().join("img/a.png")).unwrap();
    let n = bytes.len() - 1;
    bytes[n] ^= 0xff;
    write(dir.path(), "img/a.png", bytes);
    let h2 = suite_hash(&load_path(dir.path()).suite).unwrap();
    assert_ne!(h1, h2);
}
