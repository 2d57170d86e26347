//! Answer keys: a JSONL file joined onto a loaded suite by `case_id` (see the module docs of
//! [`formats`](super) for the format), and the reference-object parser shared with the native format.

use std::collections::HashSet;
use std::path::Path;

use serde_json::{Map, Value};

use super::json::{self, at, in_file};
use super::{file_name, Loaded};
use crate::{Problem, Reference, Suite, SuiteError, Task};

/// The reference fields an answer row or a native `reference` object may carry.
pub(super) const REFERENCE_FIELDS: &[&str] = &[
    "diagnosis",
    "synonyms",
    "differential",
    "lesion_type",
    "lesion_location",
    "rationale",
    "choice",
    "answer",
    "diagnosis_name",
    "modality",
    "specialized_sequence",
    "plane",
    "diagnosis_detailed",
    "icd10_code",
    "severity",
];

const SELECTOR_FIELDS: &[&str] = &["case_id", "question_number", "task_id"];

/// Joins the answer key at `path` onto `loaded.suite`, adding every problem found to `loaded.problems`.
pub(super) fn apply(path: &Path, loaded: &mut Loaded) -> Result<(), SuiteError> {
    let bytes = json::read_bytes(path)?;
    let file = file_name(path);
    let mut answered = HashSet::new();
    let mut rows = 0;
    for (line_no, line) in json::jsonl_lines(&bytes) {
        rows += 1;
        let loc = format!("{file}:{line_no}");
        let problems = apply_row(&loc, line, &mut loaded.suite, &mut answered);
        loaded.problems.extend(problems);
    }
    if rows == 0 {
        let msg = "the answer key has no rows; expected one JSON object per line";
        loaded.problems.push(Problem::warning(file, msg));
    }
    Ok(())
}

fn apply_row(
    loc: &str,
    line: &[u8],
    suite: &mut Suite,
    answered: &mut HashSet<String>,
) -> Vec<Problem> {
    let obj = match json::jsonl_object(line) {
        Ok(obj) => obj,
        Err(msg) => return vec![Problem::error(loc, msg)],
    };
    let case_id = match json::opt_scalar(&obj, "case_id") {
        Ok(Some(id)) => id,
        Ok(None) => {
            let msg = "missing; expected the case_id this answer belongs to";
            return vec![Problem::error(loc, msg).field("case_id")];
        }
        Err(msg) => return vec![Problem::error(loc, msg).field("case_id")],
    };
    let case = Some(case_id.as_str());
    let mut problems = unknown_field_warnings(loc, case, &obj);
    let (reference, errors) = reference_from_object(&obj);
    for (field, msg) in errors {
        problems.push(at(Problem::error(loc, msg), case, field));
    }
    if reference.is_empty() {
        let msg = format!(
            "no answer fields; expected at least one of {}",
            REFERENCE_FIELDS.join(", ")
        );
        problems.push(Problem::warning(loc, msg).case(&case_id));
        return problems;
    }
    match targets(suite, &case_id, &obj) {
        Ok(tasks) => problems.extend(attach(loc, &case_id, tasks, &reference, answered)),
        Err(p) => problems.push(in_file(p, loc)),
    }
    problems
}

fn unknown_field_warnings(loc: &str, case: Option<&str>, obj: &Map<String, Value>) -> Vec<Problem> {
    obj.keys()
        .filter(|k| {
            !REFERENCE_FIELDS.contains(&k.as_str()) && !SELECTOR_FIELDS.contains(&k.as_str())
        })
        .map(|k| {
            let msg = format!(
                "unknown field (ignored); expected {} or {}",
                SELECTOR_FIELDS.join(", "),
                REFERENCE_FIELDS.join(", ")
            );
            at(Problem::warning(loc, msg), case, k.as_str())
        })
        .collect()
}

fn attach(
    loc: &str,
    case_id: &str,
    tasks: Vec<&mut Task>,
    reference: &Reference,
    answered: &mut HashSet<String>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for task in tasks {
        if !answered.insert(task.id.clone()) {
            let msg = format!(
                "a second answer for task {}; the first one is kept",
                task.id
            );
            problems.push(Problem::error(loc, msg).case(case_id));
            continue;
        }
        merge(
            task.reference.get_or_insert_with(Reference::default),
            reference,
        );
    }
    problems
}

/// The tasks a row answers: the one named by `task_id` or `question_number`, else every task of the case.
fn targets<'s>(
    suite: &'s mut Suite,
    case_id: &str,
    obj: &Map<String, Value>,
) -> Result<Vec<&'s mut Task>, Problem> {
    let selector = selector(obj)?;
    if suite.empty_cases.iter().any(|c| c == case_id) {
        let msg = format!("{case_id} is an empty placeholder in the suite; its answer is ignored");
        return Err(Problem::warning("", msg).case(case_id));
    }
    let Some(case) = suite.cases.iter_mut().find(|c| c.id == case_id) else {
        let msg = format!("unknown case {case_id:?}: no case in the suite has this case_id");
        return Err(Problem::error("", msg).case(case_id).field("case_id"));
    };
    let known: Vec<String> = case.tasks.iter().map(|t| t.id.clone()).collect();
    let tasks: Vec<&mut Task> = case
        .tasks
        .iter_mut()
        .filter(|t| selector.matches(t))
        .collect();
    if tasks.is_empty() {
        let msg = format!(
            "{} matches no task of the case; its tasks are: {}",
            selector.describe(),
            known.join(", ")
        );
        return Err(Problem::error("", msg)
            .case(case_id)
            .field(selector.field()));
    }
    Ok(tasks)
}

enum Selector {
    All,
    TaskId(String),
    Question(String),
}

fn selector(obj: &Map<String, Value>) -> Result<Selector, Problem> {
    let bad = |field: &str, msg: String| Problem::error("", msg).field(field);
    if let Some(id) = json::opt_str(obj, "task_id").map_err(|m| bad("task_id", m))? {
        return Ok(Selector::TaskId(id.to_string()));
    }
    match obj.get("question_number") {
        None | Some(Value::Null) => Ok(Selector::All),
        Some(Value::Number(n)) if n.is_u64() => Ok(Selector::Question(n.to_string())),
        Some(Value::String(s)) if s.trim().parse::<u64>().is_ok() => {
            Ok(Selector::Question(s.trim().into()))
        }
        Some(other) => Err(bad(
            "question_number",
            format!("expected a positive integer, found {}", other),
        )),
    }
}

impl Selector {
    fn matches(&self, task: &Task) -> bool {
        match self {
            Selector::All => true,
            Selector::TaskId(id) => task.id == *id,
            Selector::Question(n) => task.metadata.get("question_number") == Some(n),
        }
    }

    fn describe(&self) -> String {
        match self {
            Selector::All => "the row".into(),
            Selector::TaskId(id) => format!("task_id {id:?}"),
            Selector::Question(n) => format!("question_number {n}"),
        }
    }

    fn field(&self) -> &'static str {
        match self {
            Selector::All => "case_id",
            Selector::TaskId(_) => "task_id",
            Selector::Question(_) => "question_number",
        }
    }
}

/// Fields set in `new` replace the same fields of `into`; the others stay.
fn merge(into: &mut Reference, new: &Reference) {
    let set = |into: &mut Option<String>, new: &Option<String>| {
        if new.is_some() {
            into.clone_from(new);
        }
    };
    set(&mut into.diagnosis, &new.diagnosis);
    set(&mut into.lesion_type, &new.lesion_type);
    set(&mut into.lesion_location, &new.lesion_location);
    set(&mut into.rationale, &new.rationale);
    set(&mut into.choice, &new.choice);
    set(&mut into.answer, &new.answer);
    if !new.synonyms.is_empty() {
        into.synonyms.clone_from(&new.synonyms);
    }
    if !new.differential.is_empty() {
        into.differential.clone_from(&new.differential);
    }
}

/// Reads the reference fields of an object, returning (field, message) for each field of the wrong type.
pub(super) fn reference_from_object(
    obj: &Map<String, Value>,
) -> (Reference, Vec<(String, String)>) {
    let mut errors = Vec::new();
    let mut text = |key: &str, scalar: bool| {
        let value = match scalar {
            true => json::opt_scalar(obj, key),
            false => json::opt_str(obj, key).map(|s| s.map(str::to_string)),
        };
        value.unwrap_or_else(|msg| {
            errors.push((key.to_string(), msg));
            None
        })
    };
    let mut reference = Reference {
        diagnosis: text("diagnosis", false),
        lesion_type: text("lesion_type", false),
        lesion_location: text("lesion_location", false),
        rationale: text("rationale", false),
        choice: text("choice", true),
        answer: text("answer", true),
        modality: text("modality", false),
        specialized_sequence: text("specialized_sequence", false),
        plane: text("plane", false),
        diagnosis_detailed: text("diagnosis_detailed", false),
        icd10_code: text("icd10_code", false),
        severity: text("severity", true),
        ..Reference::default()
    };
    // NeuroVLM-Bench calls its class `diagnosis_name`.
    if reference.diagnosis.is_none() {
        reference.diagnosis = text("diagnosis_name", false);
    }
    for (key, slot) in [
        ("synonyms", &mut reference.synonyms),
        ("differential", &mut reference.differential),
    ] {
        match json::opt_str_list(obj, key) {
            Ok(list) => *slot = list,
            Err(msg) => errors.push((key.to_string(), msg)),
        }
    }
    (reference, errors)
}
