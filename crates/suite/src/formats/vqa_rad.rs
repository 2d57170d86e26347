//! Image-question JSON arrays, one object per question, with the images in a folder next to the file:
//!
//! - **VQA-RAD**: `{qid, image_name, image_organ, question, answer, answer_type, question_type, phrase_type}`,
//!   images in `images/`. A missing image is an error.
//! - **SLAKE**: `{qid, img_id, img_name, question, answer, answer_type, q_lang, location, modality,
//!   content_type, base_type}`, images in `imgs/` (`xmlab102/source.jpg`). English and Chinese questions share
//!   an image; each task's metadata has its `language`. SLAKE's images are often not at hand, so a missing image
//!   is a warning: its questions are skipped, unless the suite is loaded for text-only asking (`--inputs text`),
//!   when they are kept without it.
//!
//! One case per image, one task per question: `closed_vqa` or `open_vqa` from `answer_type` (trimmed: VQA-RAD's
//! file has `"CLOSED "`), with `reference.answer`.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nmb_imaging::ImageSource;
use serde_json::{Map, Value};

use super::json::{self, at, kind};
use super::{file_name, paths, Loaded};
use crate::{Case, Family, Image, Level, Metadata, Problem, Reference, Suite, SuiteError, Task};

/// How a dataset lays out its questions and images.
struct Layout {
    format: &'static str,
    /// The key holding the image's path inside `images_dir`.
    image_key: &'static str,
    images_dir: &'static str,
    /// (JSON key, metadata key) copied to each task.
    task_metadata: &'static [(&'static str, &'static str)],
    /// Task metadata keys also copied to the image's case.
    case_metadata: &'static [&'static str],
    /// A missing image skips its questions (unless asked as text) instead of being an error.
    missing_image_skips: bool,
}

const VQA_RAD: Layout = Layout {
    format: "vqa-rad",
    image_key: "image_name",
    images_dir: "images",
    task_metadata: &[
        ("image_organ", "image_organ"),
        ("question_type", "question_type"),
        ("phrase_type", "phrase_type"),
        ("qid", "qid"),
    ],
    case_metadata: &["image_organ"],
    missing_image_skips: false,
};

const SLAKE: Layout = Layout {
    format: "slake",
    image_key: "img_name",
    images_dir: "imgs",
    task_metadata: &[
        ("q_lang", "language"),
        ("location", "location"),
        ("modality", "modality"),
        ("content_type", "content_type"),
        ("base_type", "base_type"),
        ("qid", "qid"),
    ],
    case_metadata: &["location", "modality"],
    missing_image_skips: true,
};

/// Whether `value` is a SLAKE array (its objects have `img_name` and `q_lang`).
pub(super) fn looks_like_slake(value: &Value) -> bool {
    value
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .any(|o| o.contains_key("img_name") && o.contains_key("q_lang"))
}

pub(super) fn load(path: &Path, value: Value) -> Result<Loaded, SuiteError> {
    load_with(&VQA_RAD, path, value, false, None)
}

/// SLAKE; `text_only` keeps the questions of a missing image, without it.
pub(super) fn load_slake(path: &Path, value: Value, text_only: bool) -> Result<Loaded, SuiteError> {
    load_with(&SLAKE, path, value, text_only, None)
}

/// Rows read elsewhere (a Hugging Face `datasets` folder) with their images' bytes by image name, named after
/// `path`: VQA-RAD, or SLAKE when `slake`.
pub(super) fn load_rows(
    slake: bool,
    path: &Path,
    rows: Vec<Value>,
    images: HashMap<String, Arc<[u8]>>,
    text_only: bool,
) -> Result<Loaded, SuiteError> {
    let layout = if slake { &SLAKE } else { &VQA_RAD };
    load_with(layout, path, Value::Array(rows), text_only, Some(images))
}

fn load_with(
    layout: &'static Layout,
    path: &Path,
    value: Value,
    text_only: bool,
    embedded: Option<HashMap<String, Arc<[u8]>>>,
) -> Result<Loaded, SuiteError> {
    let Value::Array(rows) = value else {
        let msg = format!(
            "expected a JSON array of question objects, found {}",
            kind(&value)
        );
        return Err(json::fatal(path, msg));
    };
    let from_dataset = embedded.is_some();
    let mut builder = Builder {
        layout,
        text_only,
        file: file_name(path),
        root: None,
        index: HashMap::new(),
        qids: HashSet::new(),
        skipped: 0,
        loaded: Loaded::new(empty_suite(layout, path)),
        from_dataset,
        embedded: embedded.unwrap_or_default(),
    };
    if !from_dataset {
        builder.find_images(path);
    }
    for (i, row) in rows.iter().enumerate() {
        builder.row(i, row);
    }
    builder.finish();
    Ok(builder.loaded)
}

fn empty_suite(layout: &Layout, path: &Path) -> Suite {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = match layout.format {
        "slake" => "SLAKE",
        _ => "VQA-RAD",
    };
    Suite {
        id: format!("{}-{stem}", layout.format),
        version: "unversioned".into(),
        description: format!("{name} questions from {}", path.display()),
        format: layout.format.into(),
        defaults: Default::default(),
        cases: Vec::new(),
        empty_cases: Vec::new(),
    }
}

struct Builder {
    layout: &'static Layout,
    text_only: bool,
    file: String,
    /// The canonical images folder, when it exists.
    root: Option<PathBuf>,
    /// Case position by image name; `None` for an image whose questions are skipped.
    index: HashMap<String, Option<usize>>,
    qids: HashSet<String>,
    /// Questions skipped because their image is missing.
    skipped: usize,
    loaded: Loaded,
    /// The rows came from a Hugging Face `datasets` folder: images are the bytes in `embedded`, by image name.
    from_dataset: bool,
    embedded: HashMap<String, Arc<[u8]>>,
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
        let folder = self.layout.images_dir;
        match paths::canonical_root(&dir.join(folder)) {
            Ok(root) => self.root = Some(root),
            Err(e) if self.layout.missing_image_skips => {
                let what = if self.text_only {
                    "every question is asked without its image"
                } else {
                    "every question is skipped (ask them as text with --inputs text)"
                };
                let msg = format!("no {folder}/ folder next to the JSON file ({e}); {what}");
                let problem = Problem::warning(&self.file, msg).field(self.layout.image_key);
                self.loaded.problems.push(problem);
            }
            Err(e) => {
                let msg = format!(
                    "no {folder}/ folder next to the JSON file ({e}); every image will be missing"
                );
                let problem = Problem::error(&self.file, msg).field(self.layout.image_key);
                self.loaded.problems.push(problem);
            }
        }
    }

    /// Says how many questions a missing image cost, once.
    fn finish(&mut self) {
        if self.skipped > 0 {
            let msg = format!(
                "{} question(s) skipped because their image is missing; load with --inputs text to ask them \
                 without it",
                self.skipped
            );
            let problem = Problem::warning(&self.file, msg).field(self.layout.image_key);
            self.loaded.problems.push(problem);
        }
    }

    fn row(&mut self, i: usize, row: &Value) {
        match parse_row(self.layout, row) {
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
        let Some(case_index) = self.case_index(row.image, &row.metadata) else {
            self.skipped += 1;
            return;
        };
        let case = &mut self.loaded.suite.cases[case_index];
        let reference = row.answer.map(|answer| Reference {
            answer: Some(answer),
            ..Reference::default()
        });
        case.tasks.push(Task {
            id: format!("{}/q{}", case.id, row.qid),
            family: row.family,
            level: Level::Direct,
            question: row.question.to_string(),
            options: Vec::new(),
            turns: Vec::new(),
            reference,
            metadata: row.metadata,
        });
    }

    fn case_index(&mut self, image_name: &str, metadata: &Metadata) -> Option<usize> {
        if let Some(&i) = self.index.get(image_name) {
            return i;
        }
        let i = self.new_case(image_name, metadata);
        self.index.insert(image_name.to_string(), i);
        i
    }

    /// The case of a new image, or `None` when its image is missing and its questions are skipped.
    fn new_case(&mut self, image_name: &str, metadata: &Metadata) -> Option<usize> {
        let images: Vec<Image> = match self.image(image_name) {
            Some(image) => vec![image],
            None if self.layout.missing_image_skips && !self.text_only => return None,
            None => Vec::new(),
        };
        let mut case_meta =
            Metadata::from([("source".to_string(), self.layout.format.to_string())]);
        for key in self.layout.case_metadata {
            if let Some(v) = metadata.get(*key) {
                case_meta.insert(key.to_string(), v.clone());
            }
        }
        let language = (self.layout.format == "vqa-rad").then(|| "en".to_string());
        self.loaded.suite.cases.push(Case {
            id: case_id(image_name),
            language,
            images,
            ehr: Vec::new(),
            notes: String::new(),
            metadata: case_meta,
            tasks: Vec::new(),
        });
        Some(self.loaded.suite.cases.len() - 1)
    }

    fn image(&mut self, image_name: &str) -> Option<Image> {
        let found = if self.from_dataset {
            match self.embedded.get(image_name) {
                Some(bytes) => Ok(ImageSource::Bytes(bytes.clone())),
                None => Err(format!(
                    "no image bytes for {image_name:?} in the dataset's rows (an Image column of {{bytes, path}})"
                )),
            }
        } else {
            let root = self.root.as_ref()?;
            paths::resolve(root, image_name).map(ImageSource::File)
        };
        match found {
            Ok(source) => Some(Image::new(image_name, source)),
            Err(msg) if self.layout.missing_image_skips => {
                let what = if self.text_only {
                    "its questions are asked without it"
                } else {
                    "its questions are skipped"
                };
                let problem = Problem::warning(&self.file, format!("{msg}; {what}"))
                    .case(case_id(image_name))
                    .field(self.layout.image_key);
                self.loaded.problems.push(problem);
                None
            }
            Err(msg) => {
                let problem = Problem::error(&self.file, msg)
                    .case(image_name)
                    .field(self.layout.image_key);
                self.loaded.problems.push(problem);
                None
            }
        }
    }
}

/// The case id of an image: its path without a generic file name (SLAKE's `xmlab102/source.jpg` is
/// `xmlab102`), else the path itself (VQA-RAD's `synpic54610.jpg`).
fn case_id(image_name: &str) -> String {
    image_name
        .strip_suffix("/source.jpg")
        .unwrap_or(image_name)
        .to_string()
}

type RowError = (Option<String>, String, String);

fn parse_row<'a>(layout: &Layout, row: &'a Value) -> Result<Row<'a>, RowError> {
    let obj = row.as_object().ok_or_else(|| {
        (
            None,
            String::new(),
            format!("expected a question object, found {}", kind(row)),
        )
    })?;
    let key = layout.image_key;
    let image = json::req_str(obj, key).map_err(|m| (None, format!(".{key}"), m))?;
    let fail = |field: &str, msg: String| (Some(image.to_string()), format!(".{field}"), msg);
    let qid = json::opt_scalar(obj, "qid")
        .and_then(|q| q.ok_or_else(|| "missing; expected a question id".into()))
        .map_err(|m| fail("qid", m))?;
    let question = json::req_str(obj, "question").map_err(|m| fail("question", m))?;
    let family = answer_family(obj).map_err(|m| fail("answer_type", m))?;
    let answer = json::opt_scalar(obj, "answer").map_err(|m| fail("answer", m))?;
    let metadata = row_metadata(layout, obj).map_err(|(field, m)| fail(field, m))?;
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

fn row_metadata(
    layout: &Layout,
    obj: &Map<String, Value>,
) -> Result<Metadata, (&'static str, String)> {
    let mut metadata = Metadata::new();
    for &(key, name) in layout.task_metadata {
        if let Some(v) = json::opt_scalar(obj, key).map_err(|m| (key, m))? {
            metadata.insert(name.to_string(), v.trim().to_string());
        }
    }
    Ok(metadata)
}
