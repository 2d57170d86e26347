//! Multiple-choice JSONL in the MedQA / MedMCQA (MedAgentsBench) shape:
//! `{realidx, question, options: {"A": ..., "B": ...}, answer_idx: "B", answer: "...", meta_info}` per line.
//!
//! One case per row (id = `realidx`, else `row<line>`), one `multiple_choice` task with the options in letter
//! order, `reference.choice = answer_idx` and `reference.answer = answer`.

use std::collections::HashSet;
use std::path::Path;

use serde_json::{Map, Value};

use super::json::{self, in_file, kind};
use super::{file_name, Loaded};
use crate::{Case, Family, Level, Metadata, Problem, Reference, Suite, SuiteError, Task};

/// Directory names that say nothing about the dataset, skipped when naming the suite.
const GENERIC_DIRS: &[&str] = &["medagentsbench", "data", "jsonl", "."];

/// Whether the first row has `question` and `options`.
pub(super) fn looks_like(path: &Path) -> Result<bool, SuiteError> {
    let bytes = json::read_bytes(path)?;
    let first = json::jsonl_lines(&bytes).next();
    Ok(first
        .and_then(|(_, line)| json::jsonl_object(line).ok())
        .is_some_and(|o| o.contains_key("question") && o.contains_key("options")))
}

pub(super) fn load(path: &Path) -> Result<Loaded, SuiteError> {
    let bytes = json::read_bytes(path)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(json::fatal(
            path,
            "the file is empty; expected one JSON object per line",
        ));
    }
    let file = file_name(path);
    let mut loaded = Loaded::new(empty_suite(path));
    let mut seen = HashSet::new();
    for (line_no, line) in json::jsonl_lines(&bytes) {
        let loc = format!("{file}:{line_no}");
        match row_case(line_no, line) {
            Ok((case, warnings)) if seen.insert(case.id.clone()) => {
                loaded
                    .problems
                    .extend(warnings.into_iter().map(|w| in_file(w, &loc)));
                loaded.suite.cases.push(case);
            }
            Ok((case, _)) => {
                let msg = format!(
                    "duplicate case id {:?} (from realidx); this row is skipped",
                    case.id
                );
                loaded
                    .problems
                    .push(Problem::error(&loc, msg).case(&case.id).field("realidx"));
            }
            Err(problem) => loaded.problems.push(in_file(problem, &loc)),
        }
    }
    Ok(loaded)
}

fn empty_suite(path: &Path) -> Suite {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dataset = path
        .ancestors()
        .skip(1)
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .find(|n| !GENERIC_DIRS.contains(&n.to_ascii_lowercase().as_str()));
    Suite {
        id: dataset.map_or(stem.clone(), |d| format!("{d}-{stem}")),
        version: "unversioned".into(),
        description: format!("multiple-choice questions from {}", path.display()),
        format: "mcq".into(),
        defaults: Default::default(),
        cases: Vec::new(),
        empty_cases: Vec::new(),
    }
}

/// A row's case, plus warnings. Problems are returned with an empty file name; the caller sets `file:line`.
fn row_case(line_no: usize, line: &[u8]) -> Result<(Case, Vec<Problem>), Problem> {
    let obj = json::jsonl_object(line).map_err(|m| Problem::error("", m))?;
    let id = json::opt_scalar(&obj, "realidx")
        .map_err(|m| Problem::error("", m).field("realidx"))?
        .unwrap_or_else(|| format!("row{line_no}"));
    let fail = |field: &str, msg: String| Problem::error("", msg).case(&id).field(field);
    let question = json::req_str(&obj, "question").map_err(|m| fail("question", m))?;
    let options = options(&obj).map_err(|m| fail("options", m))?;
    let (reference, warnings) = reference(&obj, &options).map_err(|(f, m)| fail(f, m))?;
    let metadata = match json::opt_scalar(&obj, "meta_info").map_err(|m| fail("meta_info", m))? {
        Some(info) => Metadata::from([("meta_info".to_string(), info)]),
        None => Metadata::new(),
    };
    let task = Task {
        id: format!("{id}/mc"),
        family: Family::MultipleChoice,
        level: Level::Direct,
        question: question.to_string(),
        options,
        turns: Vec::new(),
        reference,
        metadata,
    };
    let warnings = warnings.into_iter().map(|w| w.case(&id)).collect();
    let case = Case {
        language: Some("en".into()),
        images: Vec::new(),
        ehr: Vec::new(),
        notes: String::new(),
        metadata: Metadata::new(),
        tasks: vec![task],
        id,
    };
    Ok((case, warnings))
}

/// Options in letter order (serde_json's map is sorted by key).
fn options(obj: &Map<String, Value>) -> Result<Vec<(String, String)>, String> {
    let map = match obj.get("options") {
        Some(Value::Object(map)) if !map.is_empty() => map,
        Some(Value::Object(_)) => {
            return Err("no options; expected an object {\"A\": text, ...}".into())
        }
        None | Some(Value::Null) => {
            return Err("missing; expected an object {\"A\": text, ...}".into())
        }
        Some(other) => {
            return Err(format!(
                "expected an object {{\"A\": text, ...}}, found {}",
                kind(other)
            ))
        }
    };
    map.iter()
        .map(|(letter, text)| match json::scalar_text(text) {
            Some(t) => Ok((letter.clone(), t)),
            None => Err(format!(
                "option {letter}: expected a string, found {}",
                kind(text)
            )),
        })
        .collect()
}

type FieldError = (&'static str, String);

fn reference(
    obj: &Map<String, Value>,
    options: &[(String, String)],
) -> Result<(Option<Reference>, Vec<Problem>), FieldError> {
    let choice = json::opt_scalar(obj, "answer_idx").map_err(|m| ("answer_idx", m))?;
    let answer = json::opt_scalar(obj, "answer").map_err(|m| ("answer", m))?;
    let choice = choice.map(|c| c.trim().to_string());
    let mut warnings = Vec::new();
    if let Some(c) = &choice {
        let Some((_, text)) = options.iter().find(|(letter, _)| letter == c) else {
            let letters: Vec<&str> = options.iter().map(|(l, _)| l.as_str()).collect();
            return Err((
                "answer_idx",
                format!(
                    "{c:?} is not an option; expected one of {}",
                    letters.join(", ")
                ),
            ));
        };
        if answer.as_ref().is_some_and(|a| a.trim() != text.trim()) {
            let msg = format!(
                "answer text differs from option {c} ({text:?}); answer_idx is used for scoring"
            );
            warnings.push(Problem::warning("", msg).field("answer"));
        }
    }
    let reference = Reference {
        choice,
        answer,
        ..Reference::default()
    };
    Ok(((!reference.is_empty()).then_some(reference), warnings))
}
