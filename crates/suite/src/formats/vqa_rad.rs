//! VQA-RAD JSON: an array of `{qid, image_name, image_organ, question, answer, answer_type, question_type,
//! phrase_type}`, with the images in an `images/` folder next to the JSON file.
//!
//! One case per image (id = `image_name`), one task per question: `closed_vqa` or `open_vqa` from
//! `answer_type` (trimmed: the real file has `"CLOSED "`), with `reference.answer`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use nmb_imaging::ImageSource;
use serde_json::{Map, Value};

use super::json::{self, at, kind};
use super::{file_name, paths, Loaded};
use crate::{Case, Family, Image, Level, Metadata, Problem, Reference, Suite, SuiteError, Task};

const TASK_METADATA: &[&str] = &["image_organ", "question_type", "phrase_type", "qid"];

pub(super) fn load(path: &Path, value: Value) -> Result<Loaded, SuiteError> {
    let Value::Array(rows) = value else {
        let msg = format!(
            "expected a JSON array of question objects, found {}",
            kind(&value)
        );
        return Err(json::fatal(path, msg));
    };
    let mut builder = Builder {
        file: file_name(path),
        root: None,
        index: HashMap::new(),
        qids: HashSet::new(),
        loaded: Loaded::new(empty_suite(path)),
    };
    builder.find_images(path);
    for (i, row) in rows.iter().enumerate() {
        builder.row(i, row);
    }
    Ok(builder.loaded)
}

fn empty_suite(path: &Path) -> Suite {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Suite {
        id: format!("vqa-rad-{stem}"),
        version: "unversioned".into(),
        description: format!("VQA-RAD questions from {}", path.display()),
        format: "vqa-rad".into(),
        defaults: Default::default(),
        cases: Vec::new(),
        empty_cases: Vec::new(),
    }
}

struct Builder {
    file: String,
    /// The canonical `images/` folder, when it exists.
    root: Option<PathBuf>,
    /// Case position by image name.
    index: HashMap<String, usize>,
    qids: HashSet<String>,
    loaded: Loaded,
}

struct Row<'a> {
    image: &'a str,
    qid: String,
    question: &'a str,
    family: Family,
    answer: Option<String>,
    metadata: Metadata,
}

impl Builder {
    fn find_images(&mut self, path: &Path) {
        let dir = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        match paths::canonical_root(&dir.join("images")) {
            Ok(root) => self.root = Some(root),
            Err(e) => {
                let msg = format!(
                    "no images/ folder next to the JSON file ({e}); every image will be missing"
                );
                self.loaded
                    .problems
                    .push(Problem::error(&self.file, msg).field("image_name"));
            }
        }
    }

    fn row(&mut self, i: usize, row: &Value) {
        match parse_row(row) {
            Ok(row) => self.add(row),
            Err((case, field, msg)) => {
                let problem = at(
                    Problem::error(&self.file, msg),
                    case.as_deref(),
                    format!("[{i}]{field}"),
                );
                self.loaded.problems.push(problem);
            }
        }
    }

    fn add(&mut self, row: Row) {
        if !self.qids.insert(row.qid.clone()) {
            let msg = format!(
                "duplicate qid {}; each question must appear once (this one is skipped)",
                row.qid
            );
            let problem = Problem::error(&self.file, msg).case(row.image).field("qid");
            return self.loaded.problems.push(problem);
        }
        let case_index = self.case_index(row.image, &row.metadata);
        let case = &mut self.loaded.suite.cases[case_index];
        let reference = row.answer.map(|answer| Reference {
            answer: Some(answer),
            ..Reference::default()
        });
        case.tasks.push(Task {
            id: format!("{}/q{}", row.image, row.qid),
            family: row.family,
            level: Level::Direct,
            question: row.question.to_string(),
            options: Vec::new(),
            turns: Vec::new(),
            reference,
            metadata: row.metadata,
        });
    }

    fn case_index(&mut self, image_name: &str, metadata: &Metadata) -> usize {
        if let Some(&i) = self.index.get(image_name) {
            return i;
        }
        let images = self.image(image_name).into_iter().collect();
        let mut case_meta = Metadata::from([("source".to_string(), "vqa-rad".to_string())]);
        if let Some(organ) = metadata.get("image_organ") {
            case_meta.insert("image_organ".into(), organ.clone());
        }
        self.loaded.suite.cases.push(Case {
            id: image_name.to_string(),
            language: Some("en".into()),
            images,
            ehr: Vec::new(),
            notes: String::new(),
            metadata: case_meta,
            tasks: Vec::new(),
        });
        let i = self.loaded.suite.cases.len() - 1;
        self.index.insert(image_name.to_string(), i);
        i
    }

    fn image(&mut self, image_name: &str) -> Option<Image> {
        let root = self.root.as_ref()?;
        match paths::resolve(root, image_name) {
            Ok(path) => Some(Image::new(image_name, ImageSource::File(path))),
            Err(msg) => {
                let problem = Problem::error(&self.file, msg)
                    .case(image_name)
                    .field("image_name");
                self.loaded.problems.push(problem);
                None
            }
        }
    }
}

type RowError = (Option<String>, String, String);

fn parse_row(row: &Value) -> Result<Row<'_>, RowError> {
    let obj = row.as_object().ok_or_else(|| {
        (
            None,
            String::new(),
            format!("expected a question object, found {}", kind(row)),
        )
    })?;
    let image = json::req_str(obj, "image_name").map_err(|m| (None, ".image_name".into(), m))?;
    let fail = |field: &str, msg: String| (Some(image.to_string()), format!(".{field}"), msg);
    let qid = json::opt_scalar(obj, "qid")
        .and_then(|q| q.ok_or_else(|| "missing; expected a question id".into()))
        .map_err(|m| fail("qid", m))?;
    let question = json::req_str(obj, "question").map_err(|m| fail("question", m))?;
    let family = answer_family(obj).map_err(|m| fail("answer_type", m))?;
    let answer = json::opt_scalar(obj, "answer").map_err(|m| fail("answer", m))?;
    let metadata = row_metadata(obj).map_err(|(field, m)| fail(field, m))?;
    Ok(Row {
        image,
        qid,
        question,
        family,
        answer,
        metadata,
    })
}

fn answer_family(obj: &Map<String, Value>) -> Result<Family, String> {
    let raw = json::req_str(obj, "answer_type")?;
    match raw.trim().to_ascii_uppercase().as_str() {
        "CLOSED" => Ok(Family::ClosedVqa),
        "OPEN" => Ok(Family::OpenVqa),
        _ => Err(format!(
            "unknown answer_type {raw:?}; expected CLOSED or OPEN"
        )),
    }
}

fn row_metadata(obj: &Map<String, Value>) -> Result<Metadata, (&'static str, String)> {
    let mut metadata = Metadata::new();
    for &key in TASK_METADATA {
        if let Some(v) = json::opt_scalar(obj, key).map_err(|m| (key, m))? {
            metadata.insert(key.to_string(), v.trim().to_string());
        }
    }
    Ok(metadata)
}
