//! Reading suites from disk: naming a suite (`sample`, a path, or `FORMAT:PATH`), detecting its format, the
//! loaders for each format, answer keys, filters, image checks and counts.
//!
//! Every loader collects all the [`Problem`]s it can find (file, case, field, what was expected) and keeps going;
//! only a file that cannot be read or parsed at all stops a load with a [`SuiteError`].
//!
//! # Answer-key format
//!
//! An answer key is a JSONL file: UTF-8, one JSON object per line, blank lines ignored. Each row attaches a
//! reference answer to tasks of one case. It is joined after loading and before filtering, so it works with any
//! format (it is meant for the Neural-MedBench site file, which carries no answers).
//!
//! | field | type | required | meaning |
//! |---|---|---|---|
//! | `case_id` | string | yes | the case, as in the suite (`"case_1"`) |
//! | `question_number` | integer | no | the site file's `question_number`; without it (and without `task_id`) the row answers every task of the case |
//! | `task_id` | string | no | a task id (`"case_1/q1"`), instead of `question_number` |
//! | `diagnosis` | string | no | the final diagnosis |
//! | `synonyms` | array of strings | no | other accepted names for the diagnosis |
//! | `differential` | array of strings | no | the ranked differential, most likely first |
//! | `lesion_type` | string | no | lesion type (e.g. `"acute ischaemic infarct"`) |
//! | `lesion_location` | string | no | anatomical location (e.g. `"right MCA territory"`) |
//! | `rationale` | string | no | the reference reasoning |
//! | `choice` | string | no | multiple-choice key (`"C"`) |
//! | `answer` | string or number | no | short answer (VQA) |
//!
//! ```text
//! {"case_id": "case_1", "question_number": 1, "diagnosis": "Right MCA ischaemic stroke", "synonyms": ["right middle cerebral artery infarction"], "differential": ["Right MCA ischaemic stroke", "Intracerebral haemorrhage", "Todd paresis"], "lesion_type": "acute infarct", "lesion_location": "right MCA territory", "rationale": "Sudden left hemiparesis in atrial fibrillation; DWI bright, ADC dark."}
//! {"case_id": "case_2", "diagnosis": "Multiple sclerosis", "synonyms": ["MS"]}
//! ```
//!
//! Rules: a row naming a case that is not in the suite is an error; a row for an empty placeholder case is a
//! warning and is ignored; a second row for the same task is an error (the first is kept); a field not listed
//! above is a warning (it catches typos such as `diagnoses`); a field of the wrong type is an error; a row with
//! no answer field is a warning. Fields given in a row replace the same fields of a reference the task already
//! has; the others are kept.

mod answers;
mod check;
mod columns;
pub mod few_shot;
mod filter;
mod hf_disk;
mod json;
mod mcq;
mod native;
pub mod neurovlm;
mod parquet_footer;
mod paths;
pub mod pubmedqa;
mod rows;
mod site;
pub mod table;
mod vqa_rad;

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::{Level, Problem, Severity, Suite, SuiteError};

pub use check::{check_images, stats, ImageReport, SuiteStats};
pub use filter::Filter;

/// The on-disk formats nmb reads. `sample` is not a format: it is the suite bundled in the binary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Neural-MedBench site file: a JSON array of `{case_id, text, images: [data URL], questions}`.
    Site,
    /// A directory with `suite.toml` and `cases.jsonl`, written by hand.
    Native,
    /// VQA-RAD JSON (`trainset.json` / `testset.json`) with images in `images/` next to it.
    VqaRad,
    /// MedQA / MedMCQA JSONL rows `{question, options{A..}, answer_idx, answer}`.
    Mcq,
    /// A NeuroVLM-Bench manifest: CSV or JSONL, one row per image with its labels.
    NeuroVlm,
    /// PubMedQA's `ori_pqal.json` (with the test split when `test_ground_truth.json` is beside it).
    PubMedQa,
    /// SLAKE JSON (`test.json`, ...) with the images in `imgs/` next to it.
    Slake,
    /// A question table (JSONL, JSON array, CSV, Parquet) with `--map FIELD=COLUMN`.
    Table,
    /// PMC-VQA's CSV.
    PmcVqa,
    /// One of OmniMedVQA's `QA_information` JSON files.
    OmniMedVqa,
    /// PathVQA as exported from Hugging Face.
    PathVqa,
}

impl Format {
    pub const ALL: &'static [Format] = &[
        Format::Site,
        Format::Native,
        Format::VqaRad,
        Format::Mcq,
        Format::NeuroVlm,
        Format::PubMedQa,
        Format::Slake,
        Format::Table,
        Format::PmcVqa,
        Format::OmniMedVqa,
        Format::PathVqa,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Site => "site",
            Format::Native => "native",
            Format::VqaRad => "vqa-rad",
            Format::Mcq => "mcq",
            Format::NeuroVlm => "neurovlm",
            Format::PubMedQa => "pubmedqa",
            Format::Slake => "slake",
            Format::Table => "table",
            Format::PmcVqa => "pmc-vqa",
            Format::OmniMedVqa => "omnimedvqa",
            Format::PathVqa => "pathvqa",
        }
    }

    /// The accepted names, for error messages.
    pub fn names() -> String {
        Format::ALL
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn from_name(name: &str) -> Option<Format> {
        Format::ALL.iter().copied().find(|f| f.as_str() == name)
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How to load a suite.
#[derive(Debug, Clone, Default)]
pub struct LoadOptions {
    /// Keep only tasks matching every filter (cases left without tasks are dropped).
    pub filters: Vec<Filter>,
    /// An answer-key JSONL file joined by `case_id` (see [the format](self#answer-key-format)).
    pub answers: Option<PathBuf>,
    /// Level for site-format tasks; by default it comes from the file name.
    pub level: Option<Level>,
    /// `FIELD=COLUMN` pairs for row-per-image manifests (`neurovlm:`) whose columns have other names.
    pub map: Vec<(String, String)>,
    /// The folder a `neurovlm:` manifest's image paths are relative to (default: the manifest's folder).
    pub images_root: Option<PathBuf>,
    /// The suite will be asked as text only (`--inputs text`): SLAKE keeps the questions of a missing image.
    pub text_only: bool,
    /// The split of a Hugging Face `datasets` folder or cached dataset (`hf-disk:`, `hf-cache:`).
    pub split: Option<String>,
}

/// A loaded suite and every problem found on the way.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub suite: Suite,
    pub problems: Vec<Problem>,
}

impl Loaded {
    fn new(suite: Suite) -> Self {
        Loaded {
            suite,
            problems: Vec::new(),
        }
    }

    pub fn error_count(&self) -> usize {
        self.problems.iter().filter(|p| p.is_error()).count()
    }

    pub fn warning_count(&self) -> usize {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Warning)
            .count()
    }
}

/// Loads a suite named by `spec`: `sample`, a path whose format is detected, or `FORMAT:PATH`.
///
/// Detection: a directory with `suite.toml` is native; a `.json` array with objects having `case_id` and
/// `images` is the site format, one with objects having `qid` and `image_name` is VQA-RAD; a `.jsonl` file whose
/// rows have `question` and `options` is multiple choice. The answer key (if any) is joined before filtering.
pub fn load(spec: &str, opts: &LoadOptions) -> Result<Loaded, SuiteError> {
    let mut loaded = load_unfiltered(spec, opts)?;
    if let Some(path) = &opts.answers {
        answers::apply(path, &mut loaded)?;
    }
    filter::apply(&opts.filters, &mut loaded.suite);
    Ok(loaded)
}

fn load_unfiltered(spec: &str, opts: &LoadOptions) -> Result<Loaded, SuiteError> {
    if spec == "sample" {
        return Ok(Loaded::new(crate::sample::build()));
    }
    if spec == crate::sample::structured::SUITE_ID {
        return Ok(Loaded::new(crate::sample::structured::build()));
    }
    if let Some(rest) = spec.strip_prefix("hf-disk:") {
        return hf_disk::load(rest, opts);
    }
    if let Some(rest) = spec.strip_prefix("hf-cache:") {
        return hf_disk::load_cache(rest, opts);
    }
    let (format, path) = parse_spec(spec)?;
    match format {
        Some(format) => load_as(format, &path, opts),
        None => detect_and_load(&path, opts),
    }
}

/// Splits `FORMAT:PATH`; a spec without a known format prefix is a plain path.
fn parse_spec(spec: &str) -> Result<(Option<Format>, PathBuf), SuiteError> {
    if spec.trim().is_empty() {
        return Err(SuiteError::Spec(format!(
            "empty suite name; expected `sample`, a path, or FORMAT:PATH with FORMAT one of {}",
            Format::names()
        )));
    }
    if let Some((prefix, rest)) = spec.split_once(':') {
        if let Some(format) = Format::from_name(prefix) {
            return Ok((Some(format), PathBuf::from(rest)));
        }
        let looks_like_format = !prefix.is_empty()
            && prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if looks_like_format && !Path::new(spec).exists() {
            return Err(SuiteError::Spec(format!(
                "unknown suite format {prefix:?} in {spec:?}; expected one of {}",
                Format::names()
            )));
        }
    }
    Ok((None, PathBuf::from(spec)))
}

fn load_as(format: Format, path: &Path, opts: &LoadOptions) -> Result<Loaded, SuiteError> {
    match format {
        Format::Native => native::load(path),
        Format::Mcq => mcq::load(path),
        Format::Site => site::load(path, json::read(path)?, opts.level),
        Format::VqaRad => vqa_rad::load(path, json::read(path)?),
        Format::NeuroVlm => neurovlm::load(path, &opts.map, opts.images_root.as_deref()),
        Format::PubMedQa => pubmedqa::load(path, json::read(path)?),
        Format::Slake => vqa_rad::load_slake(path, json::read(path)?, opts.text_only),
        Format::Table => table::load(table::Preset::Table, path, &opts.map, opts.text_only),
        Format::PmcVqa => table::load(table::Preset::PmcVqa, path, &opts.map, opts.text_only),
        Format::OmniMedVqa => {
            table::load(table::Preset::OmniMedVqa, path, &opts.map, opts.text_only)
        }
        Format::PathVqa => table::load(table::Preset::PathVqa, path, &opts.map, opts.text_only),
    }
}

fn detect_and_load(path: &Path, opts: &LoadOptions) -> Result<Loaded, SuiteError> {
    let meta = std::fs::metadata(path).map_err(|source| SuiteError::Read {
        path: path.display().to_string(),
        source,
    })?;
    if meta.is_dir() {
        if path.join(native::SUITE_TOML).is_file() {
            return native::load(path);
        }
        return Err(undetected(path, "a directory without suite.toml"));
    }
    if path.extension().is_some_and(|e| e == "jsonl") {
        return match mcq::looks_like(path)? {
            true => mcq::load(path),
            false => Err(undetected(
                path,
                "JSONL whose first row lacks question/options",
            )),
        };
    }
    let value = json::read(path)?;
    match detect_json(&value) {
        Some(Format::Site) => site::load(path, value, opts.level),
        Some(Format::VqaRad) => vqa_rad::load(path, value),
        Some(Format::PubMedQa) => pubmedqa::load(path, value),
        Some(Format::Slake) => vqa_rad::load_slake(path, value, opts.text_only),
        _ => Err(undetected(path, json::describe_shape(&value))),
    }
}

/// Looks at the objects of a top-level array; one broken object (say, without `case_id`) must not hide the
/// format, so any object with the telltale keys decides.
fn detect_json(value: &Value) -> Option<Format> {
    let objects = || {
        value
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_object)
    };
    let has = |keys: &[&str]| objects().any(|o| keys.iter().all(|k| o.contains_key(*k)));
    if has(&["case_id", "images"]) || has(&["images", "questions"]) {
        return Some(Format::Site);
    }
    if has(&["qid", "image_name"]) {
        return Some(Format::VqaRad);
    }
    if vqa_rad::looks_like_slake(value) {
        return Some(Format::Slake);
    }
    pubmedqa::looks_like(value).then_some(Format::PubMedQa)
}

fn undetected(path: &Path, found: &str) -> SuiteError {
    SuiteError::Spec(format!(
        "cannot tell the format of {} (found {found}); expected a directory with suite.toml (native), a JSON \
         array of objects with case_id and images (site), a JSON array with qid and image_name (vqa-rad), one with img_name and q_lang (slake), a \
         JSON object from PMID to QUESTION and final_decision (pubmedqa), or JSONL rows with question and options \
         (mcq). Name it explicitly as FORMAT:PATH with FORMAT one of {}",
        path.display(),
        Format::names()
    ))
}

/// The file name used in problems: the path as the user gave it.
fn file_name(path: &Path) -> String {
    path.display().to_string()
}
