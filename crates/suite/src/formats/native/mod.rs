//! The native suite format, written by hand: a directory with `suite.toml` and `cases.jsonl`.
//!
//! Each line of `cases.jsonl` is one case:
//! `{case_id, language, images: [{path, modality, sequence, plane, caption}], ehr: {..in order..}, notes,
//! metadata: {..}, tasks: [{id, family, level, question, options, turns: [{text, images, question}],
//! reference: {..}, metadata}]}`. Image paths are relative to the directory and may not leave it; images are
//! read when used, not at load time (only their metadata is checked here). A path may also name a volume: a
//! DICOM file, a directory holding a DICOM series, or a NIfTI file, with optional `render` options
//! (`{view, slices, window, layout, max_side, volume, series}`); its headers fill an empty modality, sequence
//! and plane.

mod manifest;
mod raw;
mod volume;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use nmb_imaging::ImageSource;
use serde_json::Value;

use self::raw::{RawCase, RawImage, RawTask, RawTurn, Scalar};
use super::answers::{reference_from_object, REFERENCE_FIELDS};
use super::json;
use super::{paths, Loaded};
use crate::{Case, Family, Image, Level, Metadata, Problem, Reference, SuiteError, Task, Turn};

pub(super) const SUITE_TOML: &str = "suite.toml";
const CASES_JSONL: &str = "cases.jsonl";

pub(super) fn load(dir: &Path) -> Result<Loaded, SuiteError> {
    let root = paths::canonical_root(dir)?;
    let manifest = manifest::read(dir, &dir.join(SUITE_TOML))?;
    let cases_path = dir.join(CASES_JSONL);
    let bytes = json::read_bytes(&cases_path)?;
    let mut builder = Builder {
        file: cases_path.display().to_string(),
        root,
        level: manifest.level,
        language: manifest.language,
        case_ids: HashSet::new(),
        task_ids: HashSet::new(),
        problems: manifest.problems,
    };
    let mut suite = manifest.suite;
    for (line_no, line) in json::jsonl_lines(&bytes) {
        if let Some(case) = builder.line(line_no, line) {
            suite.cases.push(case);
        }
    }
    if suite.cases.is_empty() && builder.problems.iter().all(|p| !p.is_error()) {
        let msg = "no cases; expected one JSON case object per line";
        builder.problems.push(Problem::warning(&builder.file, msg));
    }
    Ok(Loaded {
        suite,
        problems: builder.problems,
    })
}

struct Builder {
    file: String,
    root: PathBuf,
    level: Option<Level>,
    language: Option<String>,
    case_ids: HashSet<String>,
    task_ids: HashSet<String>,
    problems: Vec<Problem>,
}

/// Where a problem is: `cases.jsonl:LINE`, the case id, and a field prefix such as `tasks[1].`.
struct Loc<'a> {
    file: &'a str,
    case: &'a str,
}

impl Loc<'_> {
    fn error(&self, field: impl Into<String>, msg: impl Into<String>) -> Problem {
        Problem::error(self.file, msg).case(self.case).field(field)
    }
}

impl Builder {
    fn line(&mut self, line_no: usize, line: &[u8]) -> Option<Case> {
        let file = format!("{}:{line_no}", self.file);
        let raw = match parse_line(line) {
            Ok(raw) => raw,
            Err(problem) => {
                self.problems.push(json::in_file(problem, &file));
                return None;
            }
        };
        if !self.case_ids.insert(raw.case_id.clone()) {
            let msg = format!(
                "duplicate case_id {:?}; each case must appear once (this one is skipped)",
                raw.case_id
            );
            self.problems.push(
                Problem::error(&file, msg)
                    .case(&raw.case_id)
                    .field("case_id"),
            );
            return None;
        }
        Some(self.case(&file, raw))
    }

    fn case(&mut self, file: &str, raw: RawCase) -> Case {
        let loc = Loc {
            file,
            case: &raw.case_id,
        };
        let mut problems = Vec::new();
        let images = self.images(&loc, "images", raw.images, &mut problems);
        let tasks = raw
            .tasks
            .into_iter()
            .enumerate()
            .filter_map(|(k, t)| self.task(&loc, k, t, &mut problems))
            .collect();
        self.problems.extend(problems);
        Case {
            id: raw.case_id.clone(),
            language: raw.language.or_else(|| self.language.clone()),
            images,
            ehr: raw.ehr.0,
            notes: raw.notes,
            metadata: metadata(raw.metadata),
            tasks,
        }
    }

    fn images(
        &self,
        loc: &Loc,
        field: &str,
        raw: Vec<RawImage>,
        problems: &mut Vec<Problem>,
    ) -> Vec<Image> {
        raw.into_iter()
            .enumerate()
            .filter_map(|(i, img)| self.image(loc, &format!("{field}[{i}]"), img, problems))
            .collect()
    }

    fn image(
        &self,
        loc: &Loc,
        field: &str,
        raw: RawImage,
        problems: &mut Vec<Problem>,
    ) -> Option<Image> {
        let path = paths::resolve_entry(&self.root, &raw.path)
            .map_err(|msg| problems.push(loc.error(format!("{field}.path"), msg)))
            .ok()?;
        let render = volume::render_options(loc, field, &path, raw.render, problems)?;
        let mut image = Image::new(
            raw.id.unwrap_or_else(|| raw.path.clone()),
            ImageSource::File(path),
        );
        image.modality = parse_opt(loc, &format!("{field}.modality"), raw.modality, problems);
        image.sequence = parse_opt(loc, &format!("{field}.sequence"), raw.sequence, problems);
        image.plane = parse_opt(loc, &format!("{field}.plane"), raw.plane, problems);
        image.caption = raw.caption;
        image.render = render;
        if image.render.is_some() {
            volume::fill_from_headers(loc, field, &mut image, problems);
        }
        Some(image)
    }

    fn task(
        &mut self,
        loc: &Loc,
        k: usize,
        raw: RawTask,
        problems: &mut Vec<Problem>,
    ) -> Option<Task> {
        let field = format!("tasks[{k}]");
        let family = parse_req::<Family>(loc, &format!("{field}.family"), &raw.family, problems)?;
        let level = self.task_level(loc, &field, &raw, problems)?;
        let id = raw
            .id
            .clone()
            .unwrap_or_else(|| format!("{}/t{}", loc.case, k + 1));
        if !self.task_ids.insert(id.clone()) {
            let msg = format!("duplicate task id {id:?}; task ids must be unique in the suite (this one is skipped)");
            problems.push(loc.error(format!("{field}.id"), msg));
            return None;
        }
        if raw.question.trim().is_empty() {
            problems.push(loc.error(
                format!("{field}.question"),
                "empty; expected the question text",
            ));
        }
        let options = raw.options.0;
        check_options(loc, &field, family, &options, problems);
        let reference = raw
            .reference
            .and_then(|r| task_reference(loc, &field, &r, &options, problems));
        let turns = self.turns(loc, &field, raw.turns, problems);
        Some(Task {
            id,
            family,
            level,
            question: raw.question,
            options,
            turns,
            reference,
            metadata: metadata(raw.metadata),
        })
    }

    /// The task's own level, else the suite default, else multi-turn when it has turns and direct otherwise.
    fn task_level(
        &self,
        loc: &Loc,
        field: &str,
        raw: &RawTask,
        problems: &mut Vec<Problem>,
    ) -> Option<Level> {
        let level = match &raw.level {
            Some(text) => parse_req::<Level>(loc, &format!("{field}.level"), text, problems)?,
            None if !raw.turns.is_empty() => Level::MultiTurn,
            None => self.level.unwrap_or(Level::Direct),
        };
        if !raw.turns.is_empty() && level != Level::MultiTurn {
            let msg = format!("the task has turns but level {level}; expected level multi_turn");
            problems.push(loc.error(format!("{field}.level"), msg));
        }
        Some(level)
    }

    fn turns(
        &self,
        loc: &Loc,
        field: &str,
        raw: Vec<RawTurn>,
        problems: &mut Vec<Problem>,
    ) -> Vec<Turn> {
        let mut turns = Vec::new();
        for (t, turn) in raw.into_iter().enumerate() {
            let turn_field = format!("{field}.turns[{t}]");
            if turn.question.trim().is_empty() {
                problems.push(loc.error(
                    format!("{turn_field}.question"),
                    "empty; expected the turn's question",
                ));
            }
            let images = self.images(loc, &format!("{turn_field}.images"), turn.images, problems);
            turns.push(Turn {
                text: turn.text,
                images,
                question: turn.question,
            });
        }
        turns
    }
}

/// Parses a line, naming the field (`tasks[0].family`) when the shape is wrong.
fn parse_line(line: &[u8]) -> Result<RawCase, Problem> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let raw = serde_path_to_error::deserialize::<_, RawCase>(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let problem = Problem::error("", crate::limits::json_error(e.inner()));
        let problem = match line_case_id(line) {
            Some(id) => problem.case(id),
            None => problem,
        };
        if path == "." {
            problem
        } else {
            problem.field(path)
        }
    })?;
    de.end().map_err(|e| {
        Problem::error(
            "",
            format!("trailing characters after the case object: {e}"),
        )
    })?;
    Ok(raw)
}

/// The case id of a line that failed to parse, so the problem can still name it.
fn line_case_id(line: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(line).ok()?;
    value.get("case_id")?.as_str().map(str::to_string)
}

fn parse_req<T: std::str::FromStr<Err = String>>(
    loc: &Loc,
    field: &str,
    text: &str,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    text.parse()
        .map_err(|msg| problems.push(loc.error(field, msg)))
        .ok()
}

fn parse_opt<T: std::str::FromStr<Err = String>>(
    loc: &Loc,
    field: &str,
    text: Option<String>,
    problems: &mut Vec<Problem>,
) -> Option<T> {
    let text = text.filter(|t| !t.trim().is_empty())?;
    parse_req(loc, field, &text, problems)
}

fn check_options(
    loc: &Loc,
    field: &str,
    family: Family,
    options: &[(String, String)],
    problems: &mut Vec<Problem>,
) {
    if family == Family::MultipleChoice && options.len() < 2 {
        let msg = "a multiple_choice task needs at least two options, as {\"A\": text, ...} or [text, ...]";
        problems.push(loc.error(format!("{field}.options"), msg));
    }
}

fn task_reference(
    loc: &Loc,
    field: &str,
    obj: &serde_json::Map<String, Value>,
    options: &[(String, String)],
    problems: &mut Vec<Problem>,
) -> Option<Reference> {
    for key in obj
        .keys()
        .filter(|k| !REFERENCE_FIELDS.contains(&k.as_str()))
    {
        let msg = format!(
            "unknown reference field; expected one of {}",
            REFERENCE_FIELDS.join(", ")
        );
        problems.push(loc.error(format!("{field}.reference.{key}"), msg));
    }
    let (reference, errors) = reference_from_object(obj);
    for (key, msg) in errors {
        problems.push(loc.error(format!("{field}.reference.{key}"), msg));
    }
    if let Some(choice) = &reference.choice {
        if !options.is_empty() && !options.iter().any(|(l, _)| l == choice) {
            let letters: Vec<&str> = options.iter().map(|(l, _)| l.as_str()).collect();
            let msg = format!(
                "{choice:?} is not an option; expected one of {}",
                letters.join(", ")
            );
            problems.push(loc.error(format!("{field}.reference.choice"), msg));
        }
    }
    (!reference.is_empty()).then_some(reference)
}

fn metadata(raw: BTreeMap<String, Scalar>) -> Metadata {
    raw.into_iter().map(|(k, Scalar(v))| (k, v)).collect()
}
