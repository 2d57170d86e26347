//! A run file read and checked: every error names the file, and a value nmb refuses names its key and line.

use nmb_study::{read, StudyError};

use crate::common::{line_of, text, write};

/// Reads `text` as a run file; the error it gives, with the text.
fn refused(text: String) -> (StudyError, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &text);
    let e = read(&path).expect_err("the run file is refused");
    let shown = e.to_string();
    assert!(
        shown.contains(&path.display().to_string()),
        "the file is named: {shown}"
    );
    (e, text)
}

/// The run file with `from` replaced by `to` (which must be there).
fn edited(from: &str, to: &str) -> String {
    let good = text("http://127.0.0.1:9", "");
    assert!(good.contains(from), "{from}");
    good.replacen(from, to, 1)
}

#[test]
fn a_good_run_file_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &text("http://127.0.0.1:9", "max_cost = 2.5"));
    let study = read(&path).unwrap();
    assert_eq!(study.path, path);
    assert_eq!(study.name(), "two-axis");
    assert_eq!(study.max_cost(), Some(2.5));
    assert_eq!(
        study.report_dir(),
        dir.path().join("out"),
        "relative to the run file"
    );
    assert_eq!(
        study.formats(),
        Some(&["html".to_string(), "md".to_string()][..])
    );
    assert_eq!(study.file.models.len(), 2);
    assert_eq!(study.file.suites.len(), 2);
    assert_eq!(study.file.scoring.bertscore, Some(false));
}

#[test]
fn values_nmb_refuses_name_their_key_and_line() {
    // (what is replaced, by what, the key named, the start of the line named)
    let cases = [
        (
            "name = \"B\"",
            "name  = \"A\"",
            "models[1].name",
            "name  = \"A\"",
        ),
        (
            "spec = \"openai:model-b",
            "spec = \"mistral:model-b",
            "models[1].spec",
            "spec = \"mistral",
        ),
        (
            "name = \"B\"",
            "name = \"B\"\ntemperature = -1.0",
            "models[1].temperature",
            "temperature",
        ),
        (
            "price = [1.0, 4.0]",
            "price = [1.0]",
            "models[0].price",
            "price = [1.0]",
        ),
        (
            "limit = 4",
            "limit = 4\nlevel = \"expert\"",
            "suites[0].level",
            "level",
        ),
        (
            "samples = 1\n\n[scoring]",
            "samples = 101\n\n[scoring]",
            "suites[1].samples",
            "samples = 101",
        ),
        (
            "formats = [\"html\", \"md\"]",
            "formats = [\"pdf\"]",
            "study.formats",
            "formats",
        ),
        (
            "name = \"two-axis\"",
            "name = \"a/b\"",
            "study.name",
            "name = \"a/b\"",
        ),
    ];
    for (from, to, key, at) in cases {
        let (e, text) = refused(edited(from, to));
        let StudyError::Invalid { key: k, line, .. } = &e else {
            panic!("{to}: expected a checked value's error, got {e:?}");
        };
        assert_eq!((k.as_str(), *line), (key, line_of(&text, at)), "{e}");
        assert!(e.to_string().contains(&format!(":{line}: {key}: ")), "{e}");
    }
    // A template that is not there is named as the run file would find it.
    let (e, _) = refused(format!(
        "templates = [\"no-such.jinja\"]\n{}",
        text("http://127.0.0.1:9", "")
    ));
    assert!(
        matches!(&e, StudyError::Invalid { key, line: 1, .. } if key == "templates"),
        "{e}"
    );
    assert!(e.to_string().contains("no-such.jinja is not a file"), "{e}");
    // A perturbation that does not parse is named with what is accepted.
    let (e, _) = refused(format!(
        "perturb = [\"mismatch\", \"sharpen\"]\n{}",
        text("http://127.0.0.1:9", "")
    ));
    assert!(
        matches!(&e, StudyError::Invalid { key, line: 1, .. } if key == "perturb"),
        "{e}"
    );
    assert!(e.to_string().contains("accepted: blank, mismatch"), "{e}");
}

#[test]
fn a_misspelt_key_or_a_missing_table_is_named_with_its_line() {
    let (e, text) = refused(edited("limit = 4", "limt = 4"));
    let StudyError::Parse { message, .. } = &e else {
        panic!("expected a parse error, got {e:?}");
    };
    assert!(message.contains("limt"), "{message}");
    assert!(
        message.contains(&format!("line {}", line_of(&text, "limt"))),
        "{message}"
    );
    let without_models = text_without_models();
    let (e, _) = refused(without_models);
    assert!(
        matches!(&e, StudyError::Invalid { key, .. } if key == "models"),
        "{e}"
    );
    assert!(
        e.to_string()
            .contains("expected at least one [[models]] table"),
        "{e}"
    );
}

fn text_without_models() -> String {
    let good = text("http://127.0.0.1:9", "");
    let start = good.find("[[models]]").unwrap();
    let end = good.find("[[suites]]").unwrap();
    format!("{}{}", &good[..start], &good[end..])
}

#[test]
fn a_run_file_that_cannot_be_read_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nowhere.toml");
    let e = read(&path).unwrap_err();
    assert!(
        matches!(&e, StudyError::Read { path: p, .. } if *p == path),
        "{e}"
    );
    assert!(e.to_string().contains("nowhere.toml"), "{e}");
}
