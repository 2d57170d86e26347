//! A corpus of malformed inputs. Each must load or fail without panicking, with at least one error that names
//! the file and, where there is one, the case and the field, and says what was expected.

use crate::common;

use std::path::Path;

use common::*;
use nmb_suite::LoadOptions;
use serde_json::json;

/// Writes a fixture into `dir` and returns the suite spec and options to load it with.
type Setup = fn(&Path) -> (String, LoadOptions);

fn spec(path: &Path) -> (String, LoadOptions) {
    (path.display().to_string(), LoadOptions::default())
}

fn site_with(dir: &Path, cases: serde_json::Value) -> (String, LoadOptions) {
    spec(&write_json(dir, "site.json", &cases))
}

fn native_with(dir: &Path, case: serde_json::Value) -> (String, LoadOptions) {
    native_suite(dir, &[case]);
    spec(dir)
}

fn image_case(path: &str) -> serde_json::Value {
    json!({"case_id": "c1", "images": [{"path": path}], "tasks": [{"family": "differential", "question": "q"}]})
}

/// Runs one corpus entry: the outcome must contain "error" and every expected fragment.
fn check(setup: Setup, expected: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (spec, opts) = setup(dir.path());
    let out = outcome(&spec, &opts);
    assert!(
        out.starts_with("FATAL") || out.contains("error: "),
        "no error reported:\n{out}"
    );
    for fragment in expected {
        assert!(out.contains(fragment), "expected {fragment:?} in:\n{out}");
    }
}

macro_rules! corpus {
    ($($name:ident: $setup:expr => [$($frag:expr),* $(,)?];)+) => {
        $(#[test] fn $name() { check($setup, &[$($frag),*]); })+
        #[test]
        fn the_corpus_has_at_least_15_entries() {
            assert!([$(stringify!($name)),+].len() >= 15);
        }
    };
}

/// A PNG's signature and IHDR chunk (valid CRC), then nothing: the header says 16 x 16, there are no pixels.
fn header_only_png() -> Vec<u8> {
    png(16, 16, 7)[..8 + 25].to_vec()
}

/// A PNG cut in the middle of its image data.
fn png_cut_in_idat() -> Vec<u8> {
    let whole = png(64, 64, 5);
    whole[..whole.len() / 2].to_vec()
}

fn jpeg_cut_in_half() -> Vec<u8> {
    let img = image::RgbImage::from_fn(64, 64, |x, y| image::Rgb([x as u8 * 4, y as u8 * 4, 90]));
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Jpeg).unwrap();
    let whole = out.into_inner();
    whole[..whole.len() / 2].to_vec()
}

corpus! {
    truncated_json: |d| spec(&write(d, "site.json", &serde_json::to_string(&small_site()).unwrap()[..200]))
        => ["FATAL", "site.json", "not valid JSON", "line 1"];
    empty_file: |d| spec(&write(d, "site.json", ""))
        => ["FATAL", "site.json", "empty"];
    non_array_top_level: |d| (format!("site:{}", write(d, "s.json", r#"{"case_id": "case_1"}"#).display()), LoadOptions::default())
        => ["FATAL", "s.json", "expected a JSON array", "found an object"];
    invalid_base64: |d| site_with(d, json!([{"case_id": "case_1", "text": "t", "images": ["data:image/png;base64,@@@@"], "questions": [{"question_text": "q"}]}]))
        => ["site.json", "case case_1", "field images[0]", "invalid base64"];
    bad_data_url_prefix: |d| site_with(d, json!([{"case_id": "case_1", "text": "t", "images": ["http://example.org/a.png"], "questions": [{"question_text": "q"}]}]))
        => ["case case_1", "field images[0]", "expected a data URL"];
    unknown_image_bytes: |d| site_with(d, json!([{"case_id": "case_1", "text": "t", "images": ["data:image/jpeg;base64,aGVsbG8gd29ybGQ="], "questions": [{"question_text": "q"}]}]))
        => ["case case_1", "field images[0]", "unrecognised image bytes", "expected PNG, JPEG"];
    header_only_png_in_site_file: |d| site_with(d, json!([site_case("case_1", "t", &[png(4, 4, 1), header_only_png()], "q")]))
        => ["site.json", "case case_1", "field images[1]", "cannot decode png image", "expected a complete image that decodes"];
    png_cut_in_its_data_in_site_file: |d| site_with(d, json!([site_case("case_1", "t", &[png_cut_in_idat()], "q")]))
        => ["site.json", "case case_1", "field images[0]", "cannot decode png image"];
    truncated_png_in_native_suite: |d| { write(d, "cut.png", header_only_png()); native_with(d, image_case("cut.png")) }
        => ["cut.png", "case c1", "field images[0]", "cannot decode png image", "expected a complete image"];
    truncated_jpeg_in_native_suite: |d| { write(d, "cut.jpg", jpeg_cut_in_half()); native_with(d, image_case("cut.jpg")) }
        => ["cut.jpg", "case c1", "field images[0]", "cannot decode jpeg image"];
    missing_case_id: |d| site_with(d, json!([{"text": "t", "images": [], "questions": [{"question_text": "q"}]}]))
        => ["site.json", "field [0].case_id", "missing", "expected a case id"];
    duplicate_case_id: |d| site_with(d, json!([site_case("case_1", "a", &[png(2, 2, 1)], "q"), site_case("case_1", "b", &[png(2, 2, 2)], "q")]))
        => ["case case_1", "field [1].case_id", "duplicate case_id"];
    wrong_type_text: |d| site_with(d, json!([{"case_id": "case_1", "text": 5, "images": [], "questions": [{"question_text": "q"}]}]))
        => ["case case_1", "field text", "expected a string, found a number"];
    wrong_type_question: |d| site_with(d, json!([{"case_id": "case_1", "text": "t", "images": [], "questions": [{"question_text": ["q"]}]}]))
        => ["case case_1", "field questions[0].question_text", "expected a string, found an array"];
    answer_key_unknown_case: |d| {
        let path = write_json(d, "site.json", &small_site());
        let answers = write(d, "answers.jsonl", jsonl(&[json!({"case_id": "case_99", "diagnosis": "x"})]));
        (path.display().to_string(), LoadOptions { answers: Some(answers), ..LoadOptions::default() })
    } => ["answers.jsonl:1", "case case_99", "field case_id", "unknown case"];
    answer_key_wrong_types: |d| {
        let path = write_json(d, "site.json", &small_site());
        let answers = write(d, "answers.jsonl", "{\"case_id\": \"case_1\", \"synonyms\": \"MS\", \"diagnosis\": \"MS\"}\n{not json\n");
        (path.display().to_string(), LoadOptions { answers: Some(answers), ..LoadOptions::default() })
    } => ["answers.jsonl:1", "field synonyms", "expected an array of strings", "answers.jsonl:2", "not valid JSON"];
    answer_key_bad_question_number: |d| {
        let path = write_json(d, "site.json", &small_site());
        let answers = write(d, "answers.jsonl", jsonl(&[json!({"case_id": "case_1", "question_number": 7, "diagnosis": "x"})]));
        (path.display().to_string(), LoadOptions { answers: Some(answers), ..LoadOptions::default() })
    } => ["case case_1", "field question_number", "matches no task", "case_1/q1"];
    image_path_escaping: |d| native_with(d, image_case("../outside.png"))
        => ["cases.jsonl:1", "case c1", "field images[0].path", "escapes the suite directory"];
    absolute_image_path: |d| native_with(d, image_case("/etc/passwd"))
        => ["case c1", "field images[0].path", "absolute path", "relative to the suite directory"];
    symlink_escaping: |d| {
        let outside = tempfile::tempdir().unwrap().keep();
        write(&outside, "x.png", png(2, 2, 9));
        std::os::unix::fs::symlink(outside.join("x.png"), d.join("link.png")).unwrap();
        native_with(d, image_case("link.png"))
    } => ["case c1", "field images[0].path", "escapes the suite directory through a symlink"];
    zero_byte_image: |d| { write(d, "zero.png", ""); native_with(d, image_case("zero.png")) }
        => ["case c1", "field images[0].path", "empty (0 bytes)"];
    missing_image_file: |d| native_with(d, image_case("img/nope.png"))
        => ["case c1", "field images[0].path", "not found"];
    unknown_bytes_in_image_file: |d| { write(d, "note.png", "not an image at all"); native_with(d, image_case("note.png")) }
        => ["note.png", "case c1", "field images[0]", "unrecognised image bytes"];
    bad_family: |d| native_with(d, json!({"case_id": "c1", "tasks": [{"family": "guessing", "question": "q"}]}))
        => ["case c1", "field tasks[0].family", "unknown family \"guessing\"", "expected one of: differential"];
    bad_level: |d| native_with(d, json!({"case_id": "c1", "tasks": [{"family": "lesion", "level": "hard", "question": "q"}]}))
        => ["case c1", "field tasks[0].level", "expected one of: direct, complex, multi_turn"];
    wrong_type_in_native: |d| native_with(d, json!({"case_id": "c1", "tasks": [{"family": "lesion", "question": 12}]}))
        => ["cases.jsonl:1", "case c1", "field tasks[0].question", "expected a string"];
    unknown_native_field: |d| native_with(d, json!({"case_id": "c1", "tasks": [{"family": "lesion", "question_text": "q"}]}))
        => ["case c1", "field tasks[0]", "unknown field `question_text`"];
    duplicate_ehr_field: |d| {
        native_suite(d, &[]);
        write(d, "cases.jsonl", "{\"case_id\": \"c1\", \"ehr\": {\"Age\": 1, \"Age\": 2}}\n");
        spec(d)
    } => ["case c1", "field ehr", "duplicate EHR field \"Age\""];
    choice_not_an_option: |d| native_with(d, json!({"case_id": "c1", "tasks": [{"family": "mcq", "question": "q", "options": ["x", "y"], "reference": {"choice": "E"}}]}))
        => ["case c1", "field tasks[0].reference.choice", "not an option", "expected one of A, B"];
    bad_utf8_line: |d| {
        native_suite(d, &[image_case("img/a.png")]);
        let mut bytes = std::fs::read(d.join("cases.jsonl")).unwrap();
        bytes.extend_from_slice(b"{\"case_id\": \"c2\", \"notes\": \"\xff\xfe\"}\n");
        write(d, "cases.jsonl", bytes);
        spec(d)
    } => ["cases.jsonl:2", "invalid unicode"];
    malformed_suite_toml: |d| { native_suite(d, &[]); write(d, "suite.toml", "id = \"x\nversion = 1\n"); spec(d) }
        => ["FATAL", "suite.toml", "not valid TOML"];
    missing_cases_jsonl: |d| { native_suite(d, &[]); std::fs::remove_file(d.join("cases.jsonl")).unwrap(); spec(d) }
        => ["FATAL", "cases.jsonl"];
    mcq_answer_not_an_option: |d| spec(&write(d, "q.jsonl", jsonl(&[json!({"realidx": 1, "question": "q", "options": {"A": "a", "B": "b"}, "answer_idx": "Z"})])))
        => ["q.jsonl:1", "case 1", "field answer_idx", "expected one of A, B"];
    mcq_empty_file: |d| (format!("mcq:{}", write(d, "q.jsonl", "\n\n").display()), LoadOptions::default())
        => ["FATAL", "q.jsonl", "empty"];
    vqa_rad_bad_answer_type: |d| {
        write(d, "images/x.jpg", [0xFF, 0xD8, 0xFF, 0xE0, 0, 0]);
        spec(&write_json(d, "train.json", &json!([{"qid": 1, "image_name": "x.jpg", "question": "q", "answer": "yes", "answer_type": "MAYBE"}])))
    } => ["train.json", "case x.jpg", "field [0].answer_type", "expected CLOSED or OPEN"];
    vqa_rad_missing_image: |d| {
        std::fs::create_dir_all(d.join("images")).unwrap();
        spec(&write_json(d, "train.json", &json!([{"qid": 1, "image_name": "gone.jpg", "question": "q", "answer": "yes", "answer_type": "OPEN"}])))
    } => ["train.json", "case gone.jpg", "field image_name", "not found"];
    unknown_format_prefix: |_| ("dicom:/tmp/x".to_string(), LoadOptions::default())
        => ["FATAL", "unknown suite format \"dicom\"", "site, native, vqa-rad, mcq"];
    undetectable_json: |d| spec(&write(d, "other.json", "[{\"a\": 1}]"))
        => ["FATAL", "cannot tell the format", "FORMAT:PATH"];
}
