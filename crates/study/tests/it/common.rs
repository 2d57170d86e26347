//! What the tests share: a run file of two models and two suites (the bundled sample suite and a small
//! multiple-choice file beside it), written into a temporary directory.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub const MCQ: &str = r#"{"realidx": "q1", "question": "Which nerve?", "options": {"A": "Facial", "B": "Vagus"}, "answer_idx": "A"}
{"realidx": "q2", "question": "Which lobe?", "options": {"A": "Frontal", "B": "Occipital"}, "answer_idx": "B"}
{"realidx": "q3", "question": "Which artery?", "options": {"A": "MCA", "B": "PCA"}, "answer_idx": "A"}
"#;

/// The run file's text: models A (priced) and B at `url`, the sample suite's first four tasks and the
/// multiple-choice file, with `extra` added to `[study]`.
pub fn text(url: &str, extra: &str) -> String {
    format!(
        r#"[study]
name = "two-axis"
report = "out"
formats = ["html", "md"]
{extra}
[[models]]
spec = "openai:model-a@{url}/v1"
name = "A"
price = [1.0, 4.0]

[[models]]
spec = "openai:model-b@{url}/v1"
name = "B"

[[suites]]
spec = "sample"
samples = 1
limit = 4

[[suites]]
spec = "mcq:data/mcq.jsonl"
samples = 1

[scoring]
bertscore = false
"#
    )
}

/// Writes the multiple-choice file and `text` as `study.toml` into `dir`; the run file's path.
pub fn write(dir: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir.join("data")).unwrap();
    std::fs::write(dir.join("data/mcq.jsonl"), MCQ).unwrap();
    let path = dir.join("study.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The 1-based line of the first line of `text` that starts with `start`.
pub fn line_of(text: &str, start: &str) -> usize {
    let at = text.lines().position(|l| l.trim_start().starts_with(start));
    at.unwrap_or_else(|| panic!("no line starts with {start:?}")) + 1
}
