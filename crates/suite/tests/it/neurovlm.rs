//! NeuroVLM-Bench manifests (`neurovlm:PATH`) as JSONL: numbers and nulls in cells, mapped columns, and the
//! errors of a bad `--map` and of duplicate ids.

use crate::common::*;

use nmb_suite::{Family, LoadOptions};
use serde_json::json;

fn load(
    path: &std::path::Path,
    map: &[(&str, &str)],
) -> Result<nmb_suite::Loaded, nmb_suite::SuiteError> {
    load_under(path, map, None)
}

fn load_under(
    path: &std::path::Path,
    map: &[(&str, &str)],
    images_root: Option<&std::path::Path>,
) -> Result<nmb_suite::Loaded, nmb_suite::SuiteError> {
    let opts = LoadOptions {
        map: map
            .iter()
            .map(|(f, c)| (f.to_string(), c.to_string()))
            .collect(),
        images_root: images_root.map(std::path::Path::to_path_buf),
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

/// Rows in the layout of the authors' image_mapping.csv and subsets/*.csv (made-up paths), with CRLF line ends.
fn authors_file(rows: &[&str]) -> String {
    let mut text = String::from(
        "dataset,file_path,class,original_class,subclass,modality,modality_subtype,plane\r\n",
    );
    for r in rows {
        text.push_str(r);
        text.push_str("\r\n");
    }
    text
}

#[test]
fn the_authors_files_load_without_map_with_images_under_one_root() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("dataset");
    write(&data, "images-44c/Papiloma T1/p (1).jpg", png(8, 8, 1));
    write(&data, "stroke/CT/12.png", png(8, 8, 2));
    write(
        &data,
        "images-17/Other (Abscesses, Cysts) T2/o (3).jpg",
        png(8, 8, 3),
    );
    let csv = authors_file(&[
        "images-44c,images-44c/Papiloma T1/p (1).jpg,tumor,Papiloma T1,papiloma,MRI,T1,",
        "stroke,stroke/CT/12.png,stroke,Ischemic,ischemic,CT,,axial",
        "images-17,\"images-17/Other (Abscesses, Cysts) T2/o (3).jpg\",other abnormalities,\"Other (Abscesses, Cysts) T2\",,MRI,T2,axial",
    ]);
    let path = write(dir.path(), "subsets/subset_1.csv", csv.into_bytes());
    let loaded = load_under(&path, &[], Some(&data)).unwrap();
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    let refs: Vec<_> = loaded
        .suite
        .cases
        .iter()
        .map(|c| c.tasks[0].reference.clone().unwrap())
        .collect();
    assert_eq!(refs[0].diagnosis_detailed.as_deref(), Some("papilloma"));
    assert_eq!(refs[0].specialized_sequence.as_deref(), Some("T1"));
    assert_eq!(refs[1].diagnosis.as_deref(), Some("stroke"));
    assert_eq!(
        refs[1].specialized_sequence, None,
        "an empty cell is unlabelled"
    );
    assert_eq!(refs[2].diagnosis.as_deref(), Some("other abnormality"));
}

#[test]
fn a_file_whose_columns_do_not_fit_lists_them_and_suggests_map() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(
        dir.path(),
        "m.csv",
        b"path,label\na.png,stroke\nb.png,normal\n",
    );
    let loaded = load(&path, &[]).unwrap();
    assert_eq!(
        loaded.problems.len(),
        1,
        "one error, not one per row: {:?}",
        loaded.problems
    );
    let msg = loaded.problems[0].to_string();
    assert!(
        msg.contains("label, path") && msg.contains("--map") && msg.contains("image"),
        "{msg}"
    );
}

#[test]
fn errors_are_counted_by_kind_with_crlf_line_numbers_and_an_unfound_image_hides_no_class_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut rows: Vec<String> = (0..30)
        .map(|i| format!("d,gone/{i}.png,normal,,,MRI,T1,axial"))
        .collect();
    rows.push("d,gone/x.png,migraine,,,MRI,T1,axial".into());
    let rows: Vec<&str> = rows.iter().map(String::as_str).collect();
    let path = write(
        dir.path(),
        "image_mapping.csv",
        authors_file(&rows).into_bytes(),
    );
    let source = nmb_suite::Source::new(format!("neurovlm:{}", path.display()));
    let loaded = source.load(false).unwrap();
    let class = loaded
        .problems
        .iter()
        .find(|p| p.field.as_deref() == Some("class"))
        .expect("the class error behind the unfound image is reported");
    assert!(
        class.file.ends_with("image_mapping.csv:32"),
        "line 32 of a CRLF file (header, then 31 rows): {}",
        class.file
    );
    let err = source.load_checked(false).unwrap_err().to_string();
    assert!(err.contains("31 × file_path: image not found"), "{err}");
    assert!(err.contains("1 × class: not a class"), "{err}");
    assert!(err.contains("migraine"), "the class error is shown: {err}");
}

#[test]
fn an_image_symlinked_out_of_the_images_root_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("dataset");
    write(&data, "stroke/CT/1.png", png(8, 8, 1));
    let outside = write(dir.path(), "private/secret.png", png(8, 8, 2));
    std::os::unix::fs::symlink(&outside, data.join("stroke/CT/2.png")).unwrap();
    let csv = authors_file(&[
        "stroke,stroke/CT/1.png,stroke,Ischemic,ischemic,CT,,axial",
        "stroke,stroke/CT/2.png,stroke,Ischemic,ischemic,CT,,axial",
    ]);
    let path = write(dir.path(), "subsets/subset_1.csv", csv.into_bytes());
    let loaded = load_under(&path, &[], Some(&data)).unwrap();
    assert_eq!(loaded.suite.cases.len(), 1, "{:?}", loaded.problems);
    let all: Vec<String> = loaded.problems.iter().map(|p| p.to_string()).collect();
    assert!(
        all.iter()
            .any(|m| m.contains("stroke/CT/2.png") && m.contains("through a symlink")),
        "{all:?}"
    );
}
