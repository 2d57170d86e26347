//! NeuroVLM-Bench manifests (`neurovlm:PATH`) as JSONL: numbers and nulls in cells, mapped columns, and the
//! errors of a bad `--map` and of duplicate ids.

use crate::common::*;

use nmb_suite::{Family, LoadOptions};
use serde_json::json;

fn load(
    path: &std::path::Path,
    map: &[(&str, &str)],
) -> Result<nmb_suite::Loaded, nmb_suite::SuiteError> {
    let opts = LoadOptions {
        map: map
            .iter()
            .map(|(f, c)| (f.to_string(), c.to_string()))
            .collect(),
        ..LoadOptions::default()
    };
    nmb_suite::load(&format!("neurovlm:{}", path.display()), &opts)
}

#[test]
fn a_jsonl_manifest_reads_numbers_nulls_and_mapped_columns() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.png", png(8, 8, 1));
    write(dir.path(), "b.png", png(8, 8, 2));
    let rows = [
        json!({"file": "a.png", "diagnosis_name": "Tumour", "diagnosis_detailed": "pituitary adenoma",
               "severity": 0.25, "plane": null, "case_id": "p1"}),
        json!({"file": "b.png", "diagnosis_name": "normal", "modality": "mr", "severity": null}),
    ];
    let path = write(dir.path(), "m.jsonl", jsonl(&rows));
    let loaded = load(&path, &[("image", "file")]).unwrap();
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    let cases = &loaded.suite.cases;
    assert_eq!(cases.len(), 2);
    let task = &cases[0].tasks[0];
    assert_eq!(task.family, Family::Structured);
    let r = task.reference.as_ref().unwrap();
    assert_eq!(r.diagnosis.as_deref(), Some("tumor"));
    assert_eq!(
        r.diagnosis_detailed.as_deref(),
        Some("pituitary_tumor"),
        "aliases apply"
    );
    assert_eq!(r.severity.as_deref(), Some("0.25"));
    assert_eq!(r.plane, None, "null is not labelled");
    assert_eq!(cases[1].id, "row2", "an id from the line number");
    let r = cases[1].tasks[0].reference.as_ref().unwrap();
    assert_eq!(r.modality.as_deref(), Some("MRI"));
}

#[test]
fn a_bad_map_and_duplicate_ids_are_errors_that_say_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.png", png(8, 8, 1));
    let rows = [
        json!({"image": "a.png", "diagnosis_name": "stroke", "case_id": "x"}),
        json!({"image": "a.png", "diagnosis_name": "stroke", "case_id": "x"}),
    ];
    let path = write(dir.path(), "m.jsonl", jsonl(&rows));
    let err = load(&path, &[("diagnosis", "label")]).expect_err("unknown field");
    let msg = err.to_string();
    assert!(
        msg.contains("unknown field \"diagnosis\"") && msg.contains("diagnosis_name"),
        "{msg}"
    );
    let loaded = load(&path, &[]).unwrap();
    assert_eq!(loaded.suite.cases.len(), 1);
    let dup = loaded
        .problems
        .iter()
        .map(|p| p.to_string())
        .find(|p| p.contains("duplicate"));
    let dup = dup.expect("the second row is reported");
    assert!(
        dup.contains("m.jsonl:2") && dup.contains("case_id"),
        "{dup}"
    );
}

#[test]
fn the_papers_class_name_and_its_dataset_spellings_load() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.png", png(8, 8, 1));
    // The spellings of the authors' image_mapping.csv, and the class name their normalisation accepts.
    let labels = [
        ("other abnormalities", None, "other abnormality", None),
        ("Other_Abnormalities", None, "other abnormality", None),
        ("tumor", Some("papiloma"), "tumor", Some("papilloma")),
        ("tumor", Some("neurocitoma"), "tumor", Some("neurocytoma")),
        (
            "tumor",
            Some("meduloblastoma"),
            "tumor",
            Some("medulloblastoma"),
        ),
        ("tumor", Some("glioblastoma"), "tumor", Some("glioma")),
        ("multiplesclerosis", None, "multiple sclerosis", None),
    ];
    let rows: Vec<_> = labels
        .iter()
        .enumerate()
        .map(|(i, (class, detail, _, _))| {
            json!({"image": "a.png", "diagnosis_name": class, "diagnosis_detailed": detail,
                   "case_id": format!("c{i}")})
        })
        .collect();
    let path = write(dir.path(), "m.jsonl", jsonl(&rows));
    let loaded = load(&path, &[]).unwrap();
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    for (case, (given, _, class, detail)) in loaded.suite.cases.iter().zip(labels) {
        let r = case.tasks[0].reference.as_ref().unwrap();
        assert_eq!(r.diagnosis.as_deref(), Some(class), "{given}");
        assert_eq!(r.diagnosis_detailed.as_deref(), detail, "{given}");
    }
}
