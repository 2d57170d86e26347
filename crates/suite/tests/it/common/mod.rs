//! Fixtures shared by the suite tests: generated PNGs, site files and native suites in temp dirs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use base64::Engine;
use nmb_suite::{check_images, load, LoadOptions, Loaded};
use serde_json::{json, Value};

/// `../shared` next to the repository, or `None` (with a printed reason) when it is absent.
pub fn shared() -> Option<PathBuf> {
    nmb_test_support::assets::shared_dir()
}

/// A small grey PNG whose pixels depend on `seed`, so different seeds give different bytes.
pub fn png(width: u32, height: u32, seed: u8) -> Vec<u8> {
    nmb_test_support::images::gray_png(width, height, seed)
}

pub fn data_url(bytes: &[u8]) -> String {
    // The label says jpeg on purpose: the real site file labels PNG payloads as JPEG.
    format!(
        "data:image/jpeg;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

pub fn site_case(id: &str, text: &str, images: &[Vec<u8>], question: &str) -> Value {
    let urls: Vec<String> = images.iter().map(|b| data_url(b)).collect();
    json!({
        "case_id": id,
        "text": text,
        "images": urls,
        "questions": [{"question_number": 1, "question_text": question}],
    })
}

/// A site file with two real cases and one empty placeholder.
pub fn small_site() -> Value {
    json!([
        site_case("case_1", "A 68-year-old man with left weakness.", &[png(8, 8, 1), png(8, 8, 2)], "根据患者的症状和图片,对疾病进行诊断"),
        site_case("case_2", "A 31-year-old woman with visual loss.", &[png(8, 8, 3)], "What is the diagnosis?"),
        {"case_id": "case_3", "text": "", "images": [], "questions": [{"question_number": 3, "question_text": "诊断"}]},
    ])
}

pub fn write(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("creating fixture dirs");
    }
    std::fs::write(&path, contents).expect("writing a fixture");
    path
}

pub fn write_json(dir: &Path, name: &str, value: &Value) -> PathBuf {
    write(
        dir,
        name,
        serde_json::to_vec(value).expect("serialising a fixture"),
    )
}

pub fn jsonl(rows: &[Value]) -> String {
    rows.iter().map(|r| format!("{r}\n")).collect()
}

/// A native suite in `dir` with the given case lines; writes `img/a.png` and `img/b.png`.
pub fn native_suite(dir: &Path, cases: &[Value]) {
    write(
        dir,
        "suite.toml",
        "id = \"t\"\nversion = \"1\"\ndescription = \"test\"\n[defaults]\nsamples = 3\n",
    );
    write(dir, "img/a.png", png(4, 4, 1));
    write(dir, "img/b.png", png(4, 4, 2));
    write(dir, "cases.jsonl", jsonl(cases));
}

pub fn load_path(path: &Path) -> Loaded {
    load(&path.display().to_string(), &LoadOptions::default()).expect("fixture loads")
}

/// Every problem of a load plus its image check, one per line, or the fatal error.
pub fn outcome(spec: &str, opts: &LoadOptions) -> String {
    match load(spec, opts) {
        Err(e) => format!("FATAL {e}"),
        Ok(loaded) => {
            let mut problems = loaded.problems;
            problems.extend(check_images(&loaded.suite).problems);
            problems
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        }
    }
}
