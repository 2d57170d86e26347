//! Question tables: PMC-VQA's CSV, an OmniMedVQA JSON file in its folder layout, a JSONL table read through
//! `--map`, and a Hugging Face style Parquet file with the images embedded as bytes; and the errors a bad row or
//! a bad map gets.

use std::path::Path;
use std::sync::Arc;

use crate::common::*;
use nmb_suite::{Family, LoadOptions, Loaded};
use serde_json::json;

fn load_as(
    spec: &str,
    map: &[(&str, &str)],
    text_only: bool,
) -> Result<Loaded, nmb_suite::SuiteError> {
    let opts = LoadOptions {
        map: map
            .iter()
            .map(|(f, c)| (f.to_string(), c.to_string()))
            .collect(),
        text_only,
        ..LoadOptions::default()
    };
    nmb_suite::load(spec, &opts)
}

fn messages(loaded: &Loaded) -> Vec<String> {
    loaded.problems.iter().map(|p| p.to_string()).collect()
}

#[test]
fn pmc_vqa_csv_reads_lettered_choices_and_skips_a_missing_image() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "images/a.jpg", png(8, 8, 1));
    let csv = "Figure_path,Question,Answer,Choice A,Choice B,Choice C,Choice D,Answer_label\n\
               a.jpg,Which side?, Left ,A: Left ,B: Right,C: Both,D: Neither,A\n\
               images/a.jpg,Which side?,Right,A:Left,B:Right,C:Both,D:Neither,B\n\
               b.jpg,What is it?,Cyst,A:Cyst,B:Mass,C:Air,D:Fat,A\n";
    let path = write(dir.path(), "test_2.csv", csv);
    let loaded = load_as(&format!("pmc-vqa:{}", path.display()), &[], false).unwrap();
    let all = messages(&loaded);
    assert_eq!(loaded.suite.task_count(), 1, "{all:?}");
    let (case, task) = loaded.suite.tasks().next().unwrap();
    assert_eq!(case.images.len(), 1);
    assert_eq!(task.family, Family::MultipleChoice);
    assert_eq!(
        task.options[0],
        ("A".to_string(), "Left".to_string()),
        "the letter prefix is dropped"
    );
    assert_eq!(
        task.reference.as_ref().unwrap().choice.as_deref(),
        Some("B")
    );
    // "a.jpg" is not next to the CSV (it is in images/), and b.jpg is nowhere: both are warnings, not errors.
    assert_eq!(loaded.error_count(), 0, "{all:?}");
    assert!(
        all.iter()
            .any(|m| m.contains("test_2.csv:2") && m.contains("Figure_path")),
        "{all:?}"
    );
    assert!(
        all.iter().any(|m| m.contains("2 question(s) skipped")),
        "{all:?}"
    );
    let text = load_as(&format!("pmc-vqa:{}", path.display()), &[], true).unwrap();
    assert_eq!(text.suite.task_count(), 3, "asked as text, none is skipped");
}

#[test]
fn omnimedvqa_finds_images_from_the_dataset_root_and_letters_the_answer() {
    let root = tempfile::tempdir().unwrap();
    write(root.path(), "Images/Brain/x.png", png(8, 8, 2));
    let rows = json!([
        {"dataset": "BrainTumor", "question_id": "bt_1", "question_type": "Disease Diagnosis",
         "question": "What abnormality is shown?", "gt_answer": "Glioma", "image_path": "Images/Brain/x.png",
         "option_A": "Meningioma", "option_B": "Glioma", "option_C": "Normal", "modality_type": "MR"},
        {"dataset": "BrainTumor", "question_id": "bt_2", "question": "Which modality?", "gt_answer": "CT",
         "image_path": "Images/Brain/x.png", "option_A": "MR", "option_B": "X-ray"}
    ]);
    let file = write_json(
        &root.path().join("QA_information/Open-access"),
        "BrainTumor.json",
        &rows,
    );
    let loaded = load_as(&format!("omnimedvqa:{}", file.display()), &[], false).unwrap();
    let all = messages(&loaded);
    assert_eq!(loaded.suite.task_count(), 1, "{all:?}");
    let (case, task) = loaded.suite.tasks().next().unwrap();
    assert_eq!(
        (case.id.as_str(), case.images.len()),
        ("Images/Brain/x.png", 1)
    );
    assert_eq!(task.options.len(), 3, "option_D absent");
    assert_eq!(
        task.reference.as_ref().unwrap().choice.as_deref(),
        Some("B")
    );
    assert_eq!(
        task.metadata.get("modality_type").map(String::as_str),
        Some("MR")
    );
    let bad = all
        .iter()
        .find(|m| m.contains("[1]"))
        .expect("the second row is named");
    assert!(
        bad.contains("gt_answer") && bad.contains("none of the options"),
        "{bad}"
    );
}

#[test]
fn a_jsonl_table_reads_mapped_columns_and_tells_closed_from_open() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "i.png", png(8, 8, 3));
    let rows = [
        json!({"Q": "Is there a mass?", "A": "Yes", "img": "i.png", "key": "q1"}),
        json!({"Q": "Where is the mass?", "A": "left frontal lobe", "img": "i.png", "key": "q2"}),
        json!({"Q": "Pick one", "A": "T2", "img": "i.png", "key": "q3", "opts": ["T1", "T2"]}),
        json!({"Q": "", "A": "x", "key": "q4"}),
        json!({"Q": "Again?", "A": "no", "key": "q1"}),
    ];
    let path = write(dir.path(), "hf.jsonl", jsonl(&rows));
    let map = [
        ("question", "Q"),
        ("answer", "A"),
        ("image", "img"),
        ("id", "key"),
        ("options", "opts"),
    ];
    let loaded = load_as(&format!("table:{}", path.display()), &map, false).unwrap();
    let families: Vec<Family> = loaded.suite.tasks().map(|(_, t)| t.family).collect();
    assert_eq!(
        families,
        [Family::ClosedVqa, Family::OpenVqa, Family::MultipleChoice]
    );
    assert_eq!(
        loaded.suite.cases.len(),
        1,
        "rows sharing an image share a case"
    );
    let all = messages(&loaded);
    assert!(
        all.iter()
            .any(|m| m.contains("hf.jsonl:4") && m.contains("field Q")),
        "{all:?}"
    );
    assert!(
        all.iter()
            .any(|m| m.contains("hf.jsonl:5") && m.contains("duplicate")),
        "{all:?}"
    );
    let err = load_as(
        &format!("table:{}", path.display()),
        &[("prompt", "Q")],
        false,
    )
    .expect_err("unknown field");
    assert!(
        err.to_string().contains("unknown field \"prompt\""),
        "{err}"
    );
    let txt = write(dir.path(), "x.txt", "q");
    let err =
        load_as(&format!("table:{}", txt.display()), &[], false).expect_err("unknown extension");
    assert!(err.to_string().contains(".parquet"), "{err}");
}

/// Question, answer and image bytes.
type HfRow<'a> = (&'a str, &'a str, Vec<u8>);

/// A Parquet file shaped like a Hugging Face export: strings, and the image as a struct `{bytes, path}`.
fn write_parquet(path: &Path, rows: &[HfRow<'_>]) {
    use parquet::basic::Compression;
    use parquet::data_type::{ByteArray, ByteArrayType};
    use parquet::file::properties::WriterProperties;
    use parquet::file::writer::SerializedFileWriter;
    use parquet::schema::parser::parse_message_type;
    let schema = "message hf { REQUIRED BYTE_ARRAY question (UTF8); REQUIRED BYTE_ARRAY answer (UTF8); \
                  OPTIONAL group image { OPTIONAL BYTE_ARRAY bytes; OPTIONAL BYTE_ARRAY path (UTF8); } }";
    let schema = Arc::new(parse_message_type(schema).unwrap());
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .build(),
    );
    let mut writer =
        SerializedFileWriter::new(std::fs::File::create(path).unwrap(), schema, props).unwrap();
    let mut group = writer.next_row_group().unwrap();
    let strings = |pick: &dyn Fn(&HfRow<'_>) -> Vec<u8>| -> Vec<ByteArray> {
        rows.iter().map(|r| ByteArray::from(pick(r))).collect()
    };
    let columns: [(Vec<ByteArray>, Option<Vec<i16>>); 4] = [
        (strings(&|r| r.0.as_bytes().to_vec()), None),
        (strings(&|r| r.1.as_bytes().to_vec()), None),
        (strings(&|r| r.2.clone()), Some(vec![2; rows.len()])),
        (Vec::new(), Some(vec![1; rows.len()])),
    ];
    for (values, def) in columns {
        let mut col = group.next_column().unwrap().expect("a column");
        col.typed::<ByteArrayType>()
            .write_batch(&values, def.as_deref(), None)
            .unwrap();
        col.close().unwrap();
    }
    group.close().unwrap();
    writer.close().unwrap();
}

#[test]
fn a_parquet_export_with_embedded_images_loads_as_pathvqa() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("test.parquet");
    let (a, b) = (png(8, 8, 4), png(8, 8, 5));
    write_parquet(
        &path,
        &[
            ("Is this malignant?", "yes", a.clone()),
            ("What stain is used?", "H&E", b),
        ],
    );
    let loaded = load_as(&format!("pathvqa:{}", path.display()), &[], false).unwrap();
    assert!(loaded.problems.is_empty(), "{:?}", messages(&loaded));
    let tasks: Vec<_> = loaded.suite.tasks().collect();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0].1.family, Family::ClosedVqa);
    assert_eq!(tasks[1].1.family, Family::OpenVqa);
    let image = &tasks[0].0.images[0];
    assert_eq!(
        &image.source.read().unwrap()[..],
        &a[..],
        "the embedded bytes are the image"
    );
    let report = nmb_suite::check_images(&loaded.suite);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let broken = dir.path().join("broken.parquet");
    std::fs::write(&broken, b"PAR1 not really").unwrap();
    let err = load_as(&format!("table:{}", broken.display()), &[], false).expect_err("not Parquet");
    assert!(
        err.to_string().contains("broken.parquet") && err.to_string().contains("Parquet"),
        "{err}"
    );
}

#[test]
fn a_table_image_that_leads_outside_its_folder_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let outside = dir.path().join("outside.jpg");
    std::fs::write(&outside, png(8, 8, 2)).unwrap();
    let data = dir.path().join("a/b/c/d");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::symlink(&outside, data.join("link.jpg")).unwrap();
    let csv = format!(
        "Figure_path,Question,Answer,Choice A,Choice B,Choice C,Choice D,Answer_label\n\
         {},Which side?,Left,A:Left,B:Right,C:Both,D:Neither,A\n\
         link.jpg,Which side?,Left,A:Left,B:Right,C:Both,D:Neither,A\n",
        outside.display()
    );
    let path = write(&data, "test_2.csv", csv);
    let loaded = load_as(&format!("pmc-vqa:{}", path.display()), &[], false).unwrap();
    let all = messages(&loaded);
    assert_eq!(loaded.suite.task_count(), 0, "{all:?}");
    assert_eq!(loaded.error_count(), 2, "{all:?}");
    assert!(all.iter().any(|m| m.contains("absolute path")), "{all:?}");
    assert!(
        all.iter().any(|m| m.contains("through a symlink")),
        "{all:?}"
    );
}

#[test]
fn a_parquet_dictionary_that_decodes_to_far_more_than_the_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bomb.parquet");
    // One 100 KB question stored once in the dictionary, referenced by 2,000 rows: a file of about 100 KB whose
    // cells would decode to 200 MB.
    let long: String = (0..100_000u32)
        .map(|i| char::from(b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26))
        .collect();
    let rows: Vec<HfRow<'_>> = (0..2000)
        .map(|_| (long.as_str(), "yes", Vec::new()))
        .collect();
    write_parquet(&path, &rows);
    assert!(std::fs::metadata(&path).unwrap().len() < 1 << 20);
    let err =
        load_as(&format!("table:{}", path.display()), &[], true).expect_err("a dictionary bomb");
    let text = err.to_string();
    assert!(text.contains("bomb.parquet"), "{text}");
    assert!(text.contains("decode to more than"), "{text}");
}
