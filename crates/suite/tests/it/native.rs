//! The native hand-written format: suite.toml + cases.jsonl with relative image paths.

use crate::common;

use common::*;
use nmb_suite::{check_images, Family, Level, Plane, Sequence};
use serde_json::json;

fn full_case() -> serde_json::Value {
    // Written as raw text below too: the EHR order must survive, and it is not alphabetical.
    json!({
        "case_id": "c1",
        "language": "en",
        "images": [{"path": "img/a.png", "modality": "MRI", "sequence": "FLAIR", "plane": "axial", "caption": "FLAIR"}],
        "notes": "Sudden weakness.",
        "metadata": {"disease_group": "vascular", "synthetic": true},
        "tasks": [
            {"id": "c1/dx", "family": "differential", "level": "direct", "question": "Diagnosis?",
             "reference": {"diagnosis": "Stroke", "synonyms": ["CVA"], "differential": ["Stroke", "Tumour"]}},
            {"family": "multiple_choice", "question": "Which?", "options": ["Stroke", "MS"],
             "reference": {"choice": "A"}},
            {"family": "lesion", "question": "What do you see?",
             "turns": [{"text": "DWI now.", "images": [{"path": "img/b.png", "sequence": "DWI"}], "question": "Now?"}]}
        ]
    })
}

#[test]
fn loads_every_field_and_keeps_ehr_order() {
    let dir = tempfile::tempdir().unwrap();
    native_suite(dir.path(), &[]);
    let mut line = serde_json::to_string(&full_case()).unwrap();
    line.insert_str(1, r#""ehr": {"Zeta": "last alphabetically", "Age": 77, "Blood pressure": "172/94", "AF": true}, "#);
    write(dir.path(), "cases.jsonl", format!("{line}\n"));
    let loaded = load_path(dir.path());
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    let suite = &loaded.suite;
    assert_eq!(
        (
            suite.id.as_str(),
            suite.version.as_str(),
            suite.format.as_str()
        ),
        ("t", "1", "native")
    );
    assert_eq!(suite.defaults.get("samples"), Some(&json!(3)));
    let case = &suite.cases[0];
    let keys: Vec<&str> = case.ehr.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, vec!["Zeta", "Age", "Blood pressure", "AF"]);
    assert_eq!(case.ehr[1].1, "77");
    assert_eq!(case.images[0].sequence, Some(Sequence::Flair));
    assert_eq!(case.images[0].plane, Some(Plane::Axial));
    assert!(matches!(
        case.images[0].source,
        nmb_imaging::ImageSource::File(_)
    ));
    assert_eq!(
        case.metadata.get("synthetic").map(String::as_str),
        Some("true")
    );
    let tasks = &case.tasks;
    assert_eq!(tasks[1].id, "c1/t2");
    assert_eq!(tasks[1].options[1], ("B".to_string(), "MS".to_string()));
    assert_eq!(tasks[2].family, Family::Lesion);
    assert_eq!(tasks[2].level, Level::MultiTurn);
    assert_eq!(tasks[2].turns[0].images[0].sequence, Some(Sequence::Dwi));
    assert_eq!(check_images(suite).formats, [("png".to_string(), 2)].into());
}

#[test]
fn detected_from_the_directory_and_named_explicitly() {
    let dir = tempfile::tempdir().unwrap();
    native_suite(dir.path(), &[full_case()]);
    let a = load_path(dir.path());
    let b = nmb_suite::load(
        &format!("native:{}", dir.path().display()),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(a.suite.task_count(), 3);
    assert_eq!(b.suite.task_count(), 3);
}

#[test]
fn a_bad_line_does_not_hide_the_good_ones() {
    let dir = tempfile::tempdir().unwrap();
    native_suite(
        dir.path(),
        &[
            json!({"case_id": "bad", "tasks": [{"family": 3, "question": "q"}]}),
            full_case(),
        ],
    );
    let loaded = load_path(dir.path());
    assert_eq!(loaded.suite.cases.len(), 1);
    let p = &loaded.problems[0];
    assert!(p.file.ends_with("cases.jsonl:1"), "{p}");
    assert_eq!(p.case_id.as_deref(), Some("bad"));
    assert_eq!(p.field.as_deref(), Some("tasks[0].family"));
}
