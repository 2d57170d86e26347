//! PubMedQA's expert-labelled set (`ori_pqal.json`, PQA-L): a JSON object from PMID to
//! `{QUESTION, CONTEXTS, LABELS, final_decision, YEAR, ...}`.
//!
//! One case per PMID with one `multiple_choice` task over the fixed options A yes, B no, C maybe (as
//! MedAgentsBench asks it), whose question is the abstract's labelled sections followed by the question. The
//! reference is the expert's `final_decision`. When `test_ground_truth.json` (PMID → label, the official
//! 500-item test split) sits beside the file, only those PMIDs are loaded, and a label that disagrees with the
//! set's own or a PMID missing from it is an error.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use super::json::{self, kind};
use super::{file_name, Loaded};
use crate::{Case, Family, Level, Metadata, Problem, Reference, Suite, SuiteError, Task};

/// The file of the official test split, looked for beside `ori_pqal.json`.
pub const GROUND_TRUTH: &str = "test_ground_truth.json";

/// The three answers, in option order.
pub const LABELS: [(&str, &str); 3] = [("A", "yes"), ("B", "no"), ("C", "maybe")];

/// Whether `value` is PQA-L: an object whose entries have `QUESTION` and `final_decision`.
pub(super) fn looks_like(value: &Value) -> bool {
    value.as_object().is_some_and(|m| {
        m.values()
            .next()
            .and_then(Value::as_object)
            .is_some_and(|e| e.contains_key("QUESTION") && e.contains_key("final_decision"))
    })
}

pub(super) fn load(path: &Path, value: Value) -> Result<Loaded, SuiteError> {
    let Value::Object(entries) = value else {
        return Err(json::fatal(
            path,
            format!(
                "expected an object from PMID to {{QUESTION, CONTEXTS, final_decision}}, found {}",
                kind(&value)
            ),
        ));
    };
    let file = file_name(path);
    let truth_path = path.with_file_name(GROUND_TRUTH);
    let truth = match truth_path.is_file() {
        true => Some(ground_truth(&truth_path)?),
        false => None,
    };
    let mut loaded = Loaded::new(suite(path, truth.is_some()));
    let wanted: Vec<&String> = match &truth {
        Some(t) => t.keys().collect(),
        None => entries.keys().collect(),
    };
    for pmid in wanted {
        let Some(entry) = entries.get(pmid) else {
            loaded.problems.push(
                Problem::error(
                    &file,
                    format!("PMID {pmid} of {GROUND_TRUTH} is not in this file"),
                )
                .case(pmid),
            );
            continue;
        };
        let label = truth.as_ref().and_then(|t| t.get(pmid)).map(String::as_str);
        match case(pmid, entry, label) {
            Ok(case) => loaded.suite.cases.push(case),
            Err(p) => loaded.problems.push(json::in_file(p, &file)),
        }
    }
    Ok(loaded)
}

fn suite(path: &Path, test_split: bool) -> Suite {
    let split = if test_split { "test" } else { "pqal" };
    Suite {
        id: format!("pubmedqa-{split}"),
        version: "unversioned".into(),
        description: format!("PubMedQA (yes/no/maybe) from {}", path.display()),
        format: "pubmedqa".into(),
        defaults: Default::default(),
        cases: Vec::new(),
        empty_cases: Vec::new(),
    }
}

/// PMID → label from the test split file.
fn ground_truth(path: &Path) -> Result<BTreeMap<String, String>, SuiteError> {
    let Value::Object(map) = json::read(path)? else {
        return Err(json::fatal(
            path,
            "expected an object from PMID to yes, no or maybe",
        ));
    };
    map.into_iter()
        .map(|(pmid, v)| {
            let label = v
                .as_str()
                .filter(|l| letter(l).is_some())
                .map(str::to_string);
            label.map(|l| (pmid.clone(), l)).ok_or_else(|| {
                json::fatal(path, format!("PMID {pmid}: {v} is not yes, no or maybe"))
            })
        })
        .collect()
}

fn letter(label: &str) -> Option<&'static str> {
    LABELS
        .iter()
        .find(|(_, l)| l.eq_ignore_ascii_case(label.trim()))
        .map(|(letter, _)| *letter)
}

fn case(pmid: &str, entry: &Value, split_label: Option<&str>) -> Result<Case, Problem> {
    let fail = |field: &str, msg: String| Problem::error("", msg).case(pmid).field(field);
    let obj = entry
        .as_object()
        .ok_or_else(|| fail("", format!("expected an object, found {}", kind(entry))))?;
    let question = json::req_str(obj, "QUESTION").map_err(|m| fail("QUESTION", m))?;
    let decision = json::req_str(obj, "final_decision").map_err(|m| fail("final_decision", m))?;
    let choice = letter(decision).ok_or_else(|| {
        fail(
            "final_decision",
            format!("{decision:?} is not yes, no or maybe"),
        )
    })?;
    if let Some(label) = split_label.filter(|l| !l.eq_ignore_ascii_case(decision)) {
        return Err(fail(
            "final_decision",
            format!("{decision:?} disagrees with {GROUND_TRUTH}, which says {label:?}"),
        ));
    }
    let context = context(obj).map_err(|m| fail("CONTEXTS", m))?;
    let mut metadata = Metadata::new();
    if let Some(year) = json::opt_scalar(obj, "YEAR").map_err(|m| fail("YEAR", m))? {
        metadata.insert("year".into(), year);
    }
    let task = Task {
        id: format!("{pmid}/mc"),
        family: Family::MultipleChoice,
        level: Level::Direct,
        question: format!("{context}\n\n{question}"),
        options: LABELS
            .iter()
            .map(|(l, t)| (l.to_string(), t.to_string()))
            .collect(),
        turns: Vec::new(),
        reference: Some(Reference {
            choice: Some(choice.to_string()),
            answer: Some(decision.to_string()),
            ..Reference::default()
        }),
        metadata,
    };
    Ok(Case {
        id: pmid.to_string(),
        language: Some("en".into()),
        images: Vec::new(),
        ehr: Vec::new(),
        notes: String::new(),
        metadata: Metadata::new(),
        tasks: vec![task],
    })
}

/// The abstract's sections as `LABEL: text` paragraphs (without labels where the entry has none).
fn context(obj: &Map<String, Value>) -> Result<String, String> {
    let contexts = json::opt_str_list(obj, "CONTEXTS")?;
    if contexts.is_empty() {
        return Err(
            "missing or empty; expected the abstract's sections as a list of strings".into(),
        );
    }
    let labels = json::opt_str_list(obj, "LABELS").unwrap_or_default();
    Ok(contexts
        .iter()
        .enumerate()
        .map(|(i, text)| match labels.get(i) {
            Some(label) if labels.len() == contexts.len() => format!("{label}: {text}"),
            _ => text.clone(),
        })
        .collect::<Vec<_>>()
        .join("\n"))
}
