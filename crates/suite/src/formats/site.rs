//! The Neural-MedBench site file: one JSON array of
//! `{case_id, text, images: ["data:image/...;base64,..."], questions: [{question_number, question_text}]}`.
//!
//! Quirks handled: the data URL labels say `image/jpeg` while the bytes are PNG (the format is taken from the
//! bytes); placeholder slots with `"text": ""` and `"images": []` are listed in `Suite::empty_cases` with a
//! warning and skipped; questions are in Chinese while case text is English (recorded as metadata).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;
use nmb_imaging::ImageSource;
use serde_json::{Map, Value};

use super::json::{self, at, kind};
use super::{file_name, Loaded};
use crate::{Case, Family, Image, Level, Metadata, Problem, Suite, SuiteError, Task};

/// Accepts payloads with or without `=` padding: both occur in hand-assembled files.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

pub(super) fn load(path: &Path, value: Value, level: Option<Level>) -> Result<Loaded, SuiteError> {
    let Value::Array(items) = value else {
        return Err(json::fatal(
            path,
            format!(
                "expected a JSON array of case objects at the top level, found {}",
                kind(&value)
            ),
        ));
    };
    let mut loader = SiteLoader {
        file: file_name(path),
        level: level.unwrap_or_else(|| level_from_name(path)),
        seen: HashSet::new(),
        loaded: Loaded::new(empty_suite(path)),
    };
    // Consuming the array drops each case's base64 text as soon as its bytes are decoded.
    for (index, item) in items.into_iter().enumerate() {
        loader.case(index, item);
    }
    Ok(loader.loaded)
}

fn empty_suite(path: &Path) -> Suite {
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
    Suite {
        id: stem.unwrap_or_else(|| "neural-medbench-site".into()),
        version: "unversioned".into(),
        description: format!("Neural-MedBench site file {}", path.display()),
        format: "site".into(),
        defaults: Default::default(),
        cases: Vec::new(),
        empty_cases: Vec::new(),
    }
}

/// `direct-diagnosis.json` → direct, `complex...` → complex, `multi...`/`dialogue` → multi-turn; else direct.
pub(super) fn level_from_name(path: &Path) -> Level {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if name.contains("multi") || name.contains("dialogue") {
        Level::MultiTurn
    } else if name.contains("complex") {
        Level::Complex
    } else {
        Level::Direct
    }
}

struct SiteLoader {
    file: String,
    level: Level,
    seen: HashSet<String>,
    loaded: Loaded,
}

impl SiteLoader {
    fn error(&mut self, case: Option<&str>, field: String, message: String) {
        let problem = at(Problem::error(&self.file, message), case, field);
        self.loaded.problems.push(problem);
    }

    fn case(&mut self, index: usize, item: Value) {
        let Value::Object(mut obj) = item else {
            let msg = format!("expected a case object, found {}", kind(&item));
            return self.error(None, format!("[{index}]"), msg);
        };
        let Some(id) = self.case_id(index, &obj) else {
            return;
        };
        let text = self.text(&id, &obj);
        let image_values = self.image_values(&id, &mut obj);
        if text.trim().is_empty() && image_values.is_empty() {
            return self.placeholder(id);
        }
        let images = self.images(&id, image_values);
        let tasks = self.tasks(&id, &obj);
        self.loaded.suite.cases.push(Case {
            language: Some(language_of(&text).into()),
            metadata: Metadata::from([("source".into(), "neural-medbench-site".into())]),
            ehr: Vec::new(),
            notes: text,
            images,
            tasks,
            id,
        });
    }

    fn placeholder(&mut self, id: String) {
        let message = format!("{id} is an empty placeholder; skipped");
        let warning = Problem::warning(&self.file, message).case(&id);
        self.loaded.problems.push(warning);
        self.loaded.suite.empty_cases.push(id);
    }

    fn case_id(&mut self, index: usize, obj: &Map<String, Value>) -> Option<String> {
        let field = format!("[{index}].case_id");
        let id = match json::opt_scalar(obj, "case_id") {
            Ok(Some(id)) if !id.trim().is_empty() => id,
            Ok(_) => {
                let msg = "missing or empty; expected a case id string such as \"case_1\"".into();
                self.error(None, field, msg);
                return None;
            }
            Err(msg) => {
                self.error(None, field, msg);
                return None;
            }
        };
        if !self.seen.insert(id.clone()) {
            let msg = format!(
                "duplicate case_id {id:?}; each case must appear once (this one is skipped)"
            );
            self.error(Some(&id), field, msg);
            return None;
        }
        Some(id)
    }

    fn text(&mut self, id: &str, obj: &Map<String, Value>) -> String {
        match json::opt_str(obj, "text") {
            Ok(Some(t)) => t.to_string(),
            Ok(None) => {
                let msg =
                    "missing; expected the case text (a string, \"\" for placeholders)".into();
                self.error(Some(id), "text".into(), msg);
                String::new()
            }
            Err(msg) => {
                self.error(Some(id), "text".into(), msg);
                String::new()
            }
        }
    }

    fn image_values(&mut self, id: &str, obj: &mut Map<String, Value>) -> Vec<Value> {
        match obj.remove("images") {
            Some(Value::Array(items)) => items,
            None | Some(Value::Null) => {
                let msg = "missing; expected an array of data URLs ([] for none)".into();
                self.error(Some(id), "images".into(), msg);
                Vec::new()
            }
            Some(other) => {
                let msg = format!("expected an array of data URLs, found {}", kind(&other));
                self.error(Some(id), "images".into(), msg);
                Vec::new()
            }
        }
    }

    fn images(&mut self, id: &str, values: Vec<Value>) -> Vec<Image> {
        let mut images = Vec::new();
        for (k, value) in values.into_iter().enumerate() {
            match inline_image(&value, k) {
                Ok(mut image) => {
                    image.origin = Some(self.file.clone());
                    images.push(image);
                }
                Err(msg) => self.error(Some(id), format!("images[{k}]"), msg),
            }
        }
        images
    }

    fn tasks(&mut self, id: &str, obj: &Map<String, Value>) -> Vec<Task> {
        let questions = match obj.get("questions") {
            Some(Value::Array(q)) if !q.is_empty() => q,
            Some(Value::Array(_)) | None | Some(Value::Null) => {
                let msg =
                    "no questions; expected an array of {question_number, question_text}".into();
                self.error(Some(id), "questions".into(), msg);
                return Vec::new();
            }
            Some(other) => {
                let msg = format!(
                    "expected an array of question objects, found {}",
                    kind(other)
                );
                self.error(Some(id), "questions".into(), msg);
                return Vec::new();
            }
        };
        let mut tasks: Vec<Task> = Vec::new();
        for (k, q) in questions.iter().enumerate() {
            match self.task(id, k, q) {
                Ok(task) if tasks.iter().any(|t| t.id == task.id) => {
                    let msg = format!("duplicate question_number; task {} already exists", task.id);
                    self.error(Some(id), format!("questions[{k}].question_number"), msg);
                }
                Ok(task) => tasks.push(task),
                Err((field, msg)) => self.error(Some(id), format!("questions[{k}]{field}"), msg),
            }
        }
        tasks
    }

    fn task(&self, id: &str, k: usize, q: &Value) -> Result<Task, (String, String)> {
        let obj = q.as_object().ok_or_else(|| {
            (
                String::new(),
                format!("expected a question object, found {}", kind(q)),
            )
        })?;
        let number = question_number(obj, k).map_err(|m| (".question_number".to_string(), m))?;
        let text =
            json::req_str(obj, "question_text").map_err(|m| (".question_text".to_string(), m))?;
        let metadata = Metadata::from([
            ("question_number".to_string(), number.to_string()),
            (
                "question_language".to_string(),
                language_of(text).to_string(),
            ),
        ]);
        Ok(Task {
            id: format!("{id}/q{number}"),
            family: Family::Differential,
            level: self.level,
            question: text.to_string(),
            options: Vec::new(),
            turns: Vec::new(),
            reference: None,
            metadata,
        })
    }
}

/// The 1-based question number; the position is used when the field is absent.
fn question_number(obj: &Map<String, Value>, k: usize) -> Result<u64, String> {
    match obj.get("question_number") {
        None | Some(Value::Null) => Ok(k as u64 + 1),
        Some(Value::Number(n)) => n
            .as_u64()
            .ok_or_else(|| format!("expected a positive integer, found {n}")),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| format!("expected a positive integer, found {s:?}")),
        Some(other) => Err(format!(
            "expected a positive integer, found {}",
            kind(other)
        )),
    }
}

fn inline_image(value: &Value, k: usize) -> Result<Image, String> {
    let url = value
        .as_str()
        .ok_or_else(|| format!("expected a data URL string, found {}", kind(value)))?;
    let bytes = decode_data_url(url)?;
    let info = nmb_imaging::inspect(&bytes).map_err(|e| format!("decoded data URL: {e}"))?;
    let mut image = Image::new(
        format!("img{}", k + 1),
        ImageSource::Bytes(Arc::from(bytes)),
    );
    image.sha256 = Some(info.sha256);
    Ok(image)
}

/// Decodes `data:<mime>;base64,<payload>`. The MIME label is ignored: it is often wrong.
pub(super) fn decode_data_url(url: &str) -> Result<Vec<u8>, String> {
    let shown: String = url.chars().take(32).collect();
    let rest = url.strip_prefix("data:").ok_or_else(|| {
        format!("expected a data URL starting with \"data:image/...;base64,\", found {shown:?}")
    })?;
    let (header, payload) = rest
        .split_once(',')
        .ok_or_else(|| format!("data URL has no ',' before its payload: {shown:?}"))?;
    if !header.to_ascii_lowercase().ends_with(";base64") {
        return Err(format!(
            "data URL is not base64-encoded (header {header:?}); expected \"data:image/...;base64,\""
        ));
    }
    let decoded = if payload.bytes().any(|b| b.is_ascii_whitespace()) {
        let compact: Vec<u8> = payload
            .bytes()
            .filter(|b| !b.is_ascii_whitespace())
            .collect();
        BASE64.decode(compact)
    } else {
        BASE64.decode(payload)
    };
    decoded.map_err(|e| format!("invalid base64 in data URL: {e}"))
}

/// `zh` when the text contains CJK ideographs, else `en`.
pub(super) fn language_of(text: &str) -> &'static str {
    let cjk = |c: char| matches!(c, '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}');
    if text.chars().any(cjk) {
        "zh"
    } else {
        "en"
    }
}
