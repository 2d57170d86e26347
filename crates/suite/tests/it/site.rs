//! The Neural-MedBench site format: the shared example file, generated files, answer keys.

use crate::common;

use common::*;
use nmb_suite::{check_images, load, stats, Family, Level, LoadOptions, Severity};
use serde_json::json;

#[test]
fn shared_example_matches_the_acceptance_counts() {
    let Some(shared) = shared() else { return };
    let path = shared.join("formats/neural-medbench-site.example.json");
    let loaded = load_path(&path);
    let images = check_images(&loaded.suite);
    let s = stats(&loaded, &images);
    assert_eq!(
        (s.cases, s.cases_with_content, s.empty_cases, s.images),
        (3, 2, 1, 5),
        "{s:?}"
    );
    assert_eq!(s.image_formats, [("png".to_string(), 5)].into());
    assert_eq!(s.errors, 0, "{:?}", loaded.problems);
    let warnings: Vec<_> = loaded
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Warning)
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].case_id.as_deref(), Some("case_3"));
    assert!(warnings[0]
        .message
        .contains("case_3 is an empty placeholder"));
}

#[test]
fn formats_come_from_bytes_and_placeholders_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_json(dir.path(), "direct-diagnosis.json", &small_site());
    let loaded = load_path(&path);
    let suite = &loaded.suite;
    assert_eq!(suite.format, "site");
    assert_eq!(suite.empty_cases, vec!["case_3".to_string()]);
    assert_eq!(suite.cases.len(), 2);
    let report = check_images(suite);
    assert_eq!(report.formats, [("png".to_string(), 3)].into());
    let image = &suite.cases[0].images[0];
    assert_eq!(
        image.sha256.as_deref(),
        Some(nmb_imaging::content_hash(&png(8, 8, 1)).as_str())
    );
}

#[test]
fn tasks_record_family_level_and_question_language() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_json(dir.path(), "complex-diseases.json", &small_site());
    let suite = load_path(&path).suite;
    let (case, task) = suite.tasks().next().unwrap();
    assert_eq!(task.family, Family::Differential);
    assert_eq!(task.level, Level::Complex);
    assert_eq!(task.id, "case_1/q1");
    assert_eq!(
        task.metadata.get("question_language").map(String::as_str),
        Some("zh")
    );
    assert_eq!(case.language.as_deref(), Some("en"));
    let second = &suite.cases[1].tasks[0];
    assert_eq!(
        second.metadata.get("question_language").map(String::as_str),
        Some("en")
    );
}

#[test]
fn level_comes_from_options_before_the_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let multi = write_json(dir.path(), "multi-round-dialogue.json", &small_site());
    assert_eq!(
        load_path(&multi).suite.cases[0].tasks[0].level,
        Level::MultiTurn
    );
    let opts = LoadOptions {
        level: Some(Level::Complex),
        ..LoadOptions::default()
    };
    let loaded = load(&format!("site:{}", multi.display()), &opts).unwrap();
    assert_eq!(loaded.suite.cases[0].tasks[0].level, Level::Complex);
    let plain = write_json(dir.path(), "cases.json", &small_site());
    assert_eq!(
        load_path(&plain).suite.cases[0].tasks[0].level,
        Level::Direct
    );
}

#[test]
fn answer_key_joins_by_case_id_and_question_number() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_json(dir.path(), "site.json", &small_site());
    let answers = write(
        dir.path(),
        "answers.jsonl",
        jsonl(&[
            json!({"case_id": "case_1", "question_number": 1, "diagnosis": "Right MCA stroke",
                   "synonyms": ["right middle cerebral artery infarct"], "differential": ["Right MCA stroke", "ICH"],
                   "lesion_type": "infarct", "lesion_location": "right MCA territory", "rationale": "AF, sudden onset"}),
            json!({"case_id": "case_2", "diagnosis": "Multiple sclerosis"}),
        ]),
    );
    let opts = LoadOptions {
        answers: Some(answers),
        ..LoadOptions::default()
    };
    let loaded = load(&path.display().to_string(), &opts).unwrap();
    assert!(
        loaded.problems.iter().all(|p| !p.is_error()),
        "{:?}",
        loaded.problems
    );
    let r1 = loaded.suite.cases[0].tasks[0].reference.clone().unwrap();
    assert_eq!(r1.diagnosis.as_deref(), Some("Right MCA stroke"));
    assert_eq!(r1.differential, vec!["Right MCA stroke", "ICH"]);
    assert_eq!(r1.lesion_location.as_deref(), Some("right MCA territory"));
    let r2 = loaded.suite.cases[1].tasks[0].reference.clone().unwrap();
    assert_eq!(r2.diagnosis.as_deref(), Some("Multiple sclerosis"));
}

#[test]
fn answer_key_for_a_placeholder_is_a_warning_and_typos_are_flagged() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_json(dir.path(), "site.json", &small_site());
    let answers = write(
        dir.path(),
        "answers.jsonl",
        jsonl(&[
            json!({"case_id": "case_3", "diagnosis": "x"}),
            json!({"case_id": "case_1", "diagnoses": "typo", "diagnosis": "y"}),
        ]),
    );
    let opts = LoadOptions {
        answers: Some(answers),
        ..LoadOptions::default()
    };
    let loaded = load(&path.display().to_string(), &opts).unwrap();
    assert_eq!(loaded.error_count(), 0, "{:?}", loaded.problems);
    let text: Vec<String> = loaded.problems.iter().map(|p| p.to_string()).collect();
    assert!(
        text.iter()
            .any(|t| t.contains("answers.jsonl:1") && t.contains("placeholder")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("answers.jsonl:2") && t.contains("field diagnoses")),
        "{text:?}"
    );
}

#[test]
fn filters_apply_to_built_in_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_json(dir.path(), "site.json", &small_site());
    let opts = LoadOptions {
        filters: vec!["case_id!=case_1".parse().unwrap()],
        ..LoadOptions::default()
    };
    let loaded = load(&path.display().to_string(), &opts).unwrap();
    let ids: Vec<&str> = loaded.suite.cases.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, vec!["case_2"]);
    assert_eq!(loaded.suite.empty_cases, vec!["case_3".to_string()]);
}
