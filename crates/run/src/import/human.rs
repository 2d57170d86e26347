//! A file of a person's answers (`nmb import`), checked whole against the suite ([`read`], [`check_answers`]) and
//! appended to the store's human answers ([`record_answers`]), which the run of `human:NAME` answers with
//! ([`crate::stored::human`]).
//!
//! Each line is one JSON object: `{"task_id", "answer" | "differential", "turn"}`. `answer` is free text,
//! scored as a model's answer would be; `differential` is a ranked list, written into the answer as the JSON
//! the scorer reads ([`differential_answer`]); `turn` (0, the opening question, by default) answers a later
//! step of a multi-turn consult. Every problem is named with `FILE:LINE` and its field; any one of them means
//! nothing may be stored ([`Checked::answers`]).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use nmb_requests::{BackendKind, ModelSpec};
use nmb_store::{now_ms, HumanAnswer, Store, StoreError};
use nmb_suite::{Family, Suite, Task};
use serde_json::{Map, Value};

use super::{read_text, ImportError};

/// `human:NAME`, refusing any other kind of model.
pub fn human_spec(text: &str) -> Result<ModelSpec, ImportError> {
    let spec = ModelSpec::parse(text)?;
    if spec.backend != BackendKind::Human {
        return Err(ImportError::NotAPerson { text: text.into() });
    }
    Ok(spec)
}

pub use nmb_plan::output::differential_answer;

/// One answer of a file, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedAnswer {
    /// Its line in the file, from 1.
    pub line: usize,
    pub task_id: String,
    /// 0 is the opening question.
    pub turn: u32,
    /// The answer as stored and scored (a differential already written as [`differential_answer`]).
    pub text: String,
}

/// What checking a file found ([`check_answers`]).
#[derive(Debug, Default)]
pub struct Checked {
    /// The file as named in the problems.
    pub file: String,
    /// The file's name as each stored answer records it ([`record_answers`]'s `source`): without its folders
    /// when [`read`] read it.
    pub source: String,
    /// Every answer that passed, in file order.
    pub answers: Vec<CheckedAnswer>,
    /// `FILE:LINE: FIELD: what is wrong`; any one means nothing is stored.
    pub problems: Vec<String>,
    /// `FILE:LINE: answer: ...` for answers the scorer could not read: stored, but scored `parse_failed`.
    pub warnings: Vec<String>,
}

impl Checked {
    /// The answers to store, or every problem found, as one error.
    pub fn answers(&self) -> Result<&[CheckedAnswer], ImportError> {
        if self.problems.is_empty() {
            Ok(&self.answers)
        } else {
            Err(ImportError::Problems {
                file: self.file.clone(),
                problems: self.problems.clone(),
                kept: "stored",
            })
        }
    }
}

/// Reads the file at `path` and checks every line against the suite ([`check_answers`]).
pub fn read(
    path: &Path,
    suite: &Suite,
    unreadable: impl Fn(Family, &str) -> Option<String>,
) -> Result<Checked, ImportError> {
    let (file, text) = read_text(path)?;
    let mut checked = check_answers(&file, &text, suite, unreadable);
    if let Some(name) = path.file_name() {
        checked.source = name.to_string_lossy().into_owned();
    }
    Ok(checked)
}

/// Checks every line of `text`, the file named `file`, against the suite.
///
/// `unreadable` says why the scorer could not read an answer of a family into what the family needs, if it
/// could not (the CLI passes `nmb_score::parse::parse_answer`'s error; the scorer is built on this crate). It
/// is asked about the last turn of depth tasks (differential, lesion, rationale, structured), and each answer
/// it refuses is a warning, not a problem.
pub fn check_answers(
    file: &str,
    text: &str,
    suite: &Suite,
    unreadable: impl Fn(Family, &str) -> Option<String>,
) -> Checked {
    let tasks: HashMap<&str, &Task> = suite.tasks().map(|(_, t)| (t.id.as_str(), t)).collect();
    let example = suite
        .tasks()
        .next()
        .map(|(_, t)| t.id.as_str())
        .unwrap_or("");
    let mut out = Checked {
        file: file.to_string(),
        source: file.to_string(),
        ..Checked::default()
    };
    let mut seen: BTreeMap<(String, u32), usize> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let at = format!("{file}:{}", i + 1);
        if raw.trim().is_empty() {
            continue;
        }
        let line = match check_line(&at, raw, &tasks, &suite.id, example) {
            Ok(line) => line,
            Err(problems) => {
                out.problems.extend(problems);
                continue;
            }
        };
        let line = CheckedAnswer {
            line: i + 1,
            ..line
        };
        match seen.insert((line.task_id.clone(), line.turn), line.line) {
            Some(first) => out.problems.push(format!(
                "{at}: task_id: task {:?} turn {} is answered twice (first on line {first})",
                line.task_id, line.turn
            )),
            None => {
                let task = tasks[line.task_id.as_str()];
                out.warnings
                    .extend(readability(&at, task, &line, &unreadable));
                out.answers.push(line);
            }
        }
    }
    if out.answers.is_empty() && out.problems.is_empty() {
        out.problems
            .push(format!("{file}: the file holds no answers"));
    }
    out
}

/// One line: its task, turn and answer text, or every problem it has.
fn check_line(
    at: &str,
    raw: &str,
    tasks: &HashMap<&str, &Task>,
    suite_id: &str,
    example: &str,
) -> Result<CheckedAnswer, Vec<String>> {
    let obj: Map<String, Value> = match serde_json::from_str(raw) {
        Ok(Value::Object(m)) => m,
        Ok(_) => return Err(vec![format!("{at}: expected a JSON object per line")]),
        Err(e) => {
            let e = nmb_suite::limits::json_error(&e);
            return Err(vec![format!("{at}: not JSON: {e}")]);
        }
    };
    let mut problems = Vec::new();
    let task = match obj.get("task_id") {
        Some(Value::String(id)) => match tasks.get(id.as_str()) {
            Some(t) => Some(*t),
            None => {
                problems.push(format!(
                    "{at}: task_id: no task {id:?} in suite {suite_id} (task ids look like {example:?})"
                ));
                None
            }
        },
        Some(_) => {
            problems.push(format!("{at}: task_id: expected a string"));
            None
        }
        None => {
            problems.push(format!("{at}: task_id: missing"));
            None
        }
    };
    let turn = turn_of(at, &obj, task).map_err(|p| problems.push(p)).ok();
    let text = text_of(at, &obj, task).map_err(|p| problems.push(p)).ok();
    for key in obj.keys() {
        if !matches!(key.as_str(), "task_id" | "answer" | "differential" | "turn") {
            problems.push(format!(
                "{at}: {key}: unknown field (expected task_id, answer or differential, and turn)"
            ));
        }
    }
    match (task, turn, text) {
        (Some(task), Some(turn), Some(text)) if problems.is_empty() => Ok(CheckedAnswer {
            line: 0,
            task_id: task.id.clone(),
            turn,
            text,
        }),
        _ => Err(problems),
    }
}

/// `turn`: absent (0), or a turn the task has.
fn turn_of(at: &str, obj: &Map<String, Value>, task: Option<&Task>) -> Result<u32, String> {
    let turn = match obj.get("turn") {
        None | Some(Value::Null) => 0,
        Some(v) => v
            .as_u64()
            .and_then(|t| u32::try_from(t).ok())
            .ok_or_else(|| format!("{at}: turn: expected a whole number >= 0, got {v}"))?,
    };
    let turns = task.map_or(u32::MAX, |t| 1 + t.turns.len() as u32);
    if turn >= turns {
        return Err(format!(
            "{at}: turn: task {:?} has {turns} turn(s), numbered 0 to {}; there is no turn {turn}",
            task.map_or("", |t| t.id.as_str()),
            turns - 1
        ));
    }
    Ok(turn)
}

/// The answer text: `answer` as given, or `differential` written as the scorer reads it.
fn text_of(at: &str, obj: &Map<String, Value>, task: Option<&Task>) -> Result<String, String> {
    match (obj.get("answer"), obj.get("differential")) {
        (Some(_), Some(_)) => Err(format!(
            "{at}: answer: give either answer or differential, not both"
        )),
        (None, None) => Err(format!(
            "{at}: answer: missing (give answer, free text, or differential, a ranked list)"
        )),
        (Some(Value::String(s)), None) if s.trim().is_empty() => {
            Err(format!("{at}: answer: empty"))
        }
        (Some(Value::String(s)), None) => Ok(s.trim().to_string()),
        (Some(v), None) => Err(format!("{at}: answer: expected a string, got {v}")),
        (None, Some(v)) => differential_of(at, v, task),
    }
}

fn differential_of(at: &str, v: &Value, task: Option<&Task>) -> Result<String, String> {
    let list: Option<Vec<String>> = v.as_array().and_then(|items| {
        items
            .iter()
            .map(|d| d.as_str().map(str::trim).filter(|d| !d.is_empty()))
            .map(|d| d.map(str::to_string))
            .collect()
    });
    let list = match list {
        Some(l) if !l.is_empty() => l,
        _ => {
            return Err(format!(
                "{at}: differential: expected a non-empty list of diagnoses (non-empty strings), most likely \
                 first"
            ))
        }
    };
    if let Some(t) = task.filter(|t| t.family != Family::Differential) {
        return Err(format!(
            "{at}: differential: task {:?} is a {} task; a ranked differential answers differential tasks \
             only: give its answer as text",
            t.id,
            t.family.as_str()
        ));
    }
    Ok(differential_answer(&list))
}

/// A warning when the scorer could not read the answer to a task's last turn into what its family needs.
fn readability(
    at: &str,
    task: &Task,
    line: &CheckedAnswer,
    unreadable: impl Fn(Family, &str) -> Option<String>,
) -> Option<String> {
    let last = line.turn as usize == task.turns.len();
    if !last || !task.family.is_depth() {
        return None;
    }
    unreadable(task.family, &line.text).map(|e| {
        format!(
            "{at}: answer: task {:?} ({}): {e}; it would be scored as parse_failed (wrong)",
            task.id,
            task.family.as_str()
        )
    })
}

/// Appends to the store's human answers of `human:NAME` on the suite with this hash every answer that differs
/// from the one stored for its task and turn, with `source` (the file's name) and the time now; returns how
/// many were appended.
pub fn record_answers(
    store: &Store,
    spec: &ModelSpec,
    suite_hash: &str,
    answers: &[CheckedAnswer],
    source: &str,
) -> Result<usize, StoreError> {
    let stored: HashMap<(String, u32), String> = store
        .human_answers(&spec.model, suite_hash)?
        .into_iter()
        .map(|a| ((a.task_id, a.turn_index), a.text))
        .collect();
    let mut added = 0;
    let now = now_ms();
    for line in answers {
        if stored.get(&(line.task_id.clone(), line.turn)) == Some(&line.text) {
            continue;
        }
        let answer = HumanAnswer {
            task_id: line.task_id.clone(),
            turn_index: line.turn,
            created_ms: now,
            source: source.to_string(),
            text: line.text.clone(),
        };
        store.append_human_answer(&spec.model, suite_hash, &answer)?;
        added += 1;
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scorer's verdicts these tests need: a lesion answer needs its two lines.
    fn unreadable(family: Family, text: &str) -> Option<String> {
        let lesion = text.contains("Lesion type:") && text.contains("Location:");
        (family == Family::Lesion && !lesion).then(|| "no lesion type or location".to_string())
    }

    fn check(text: &str) -> Checked {
        check_answers("a.jsonl", text, &nmb_suite::sample::build(), unreadable)
    }

    #[test]
    fn every_bad_line_is_named_with_its_field() {
        let suite = nmb_suite::sample::build();
        let first = |family: Family| {
            let (_, t) = suite.tasks().find(|(_, t)| t.family == family).unwrap();
            t.id.clone()
        };
        let (dx, lesion) = (first(Family::Differential), first(Family::Lesion));
        let text = [
            format!(r#"{{"task_id": "{dx}", "differential": ["Stroke", "Bleed"]}}"#),
            r#"{"task_id": "nope", "answer": "x"}"#.to_string(),
            format!(r#"{{"task_id": "{dx}", "answer": "x"}}"#),
            format!(r#"{{"task_id": "{lesion}", "answer": "  "}}"#),
            format!(r#"{{"task_id": "{lesion}", "answer": "a", "differential": ["b"]}}"#),
            format!(r#"{{"task_id": "{lesion}"}}"#),
            "{not json".to_string(),
            String::new(),
            format!(r#"{{"task_id": "{lesion}", "differential": ["b"], "turn": 3}}"#),
        ]
        .join("\n");
        let c = check_answers("a.jsonl", &text, &suite, unreadable);
        let p = c.problems.join("\n");
        for want in [
            "a.jsonl:2: task_id: no task \"nope\"",
            "a.jsonl:3: task_id: task",
            "(first on line 1)",
            "a.jsonl:4: answer: empty",
            "a.jsonl:5: answer: give either answer or differential, not both",
            "a.jsonl:6: answer: missing",
            "a.jsonl:7: not JSON",
            "a.jsonl:9: turn: task",
            "a.jsonl:9: differential: task",
        ] {
            assert!(p.contains(want), "{want:?} not in:\n{p}");
        }
        assert_eq!(c.problems.len(), 8, "{p}");
        assert_eq!(c.answers.len(), 1);
        assert!(c.answers[0].text.contains("\"diagnosis\": \"Stroke\""));
        let e = c.answers().unwrap_err().to_string();
        assert!(
            e.starts_with("8 problem(s) in a.jsonl; nothing was stored:\n  a.jsonl:2: task_id"),
            "{e}"
        );
    }

    #[test]
    fn an_unreadable_answer_is_a_warning_and_an_empty_file_a_problem() {
        let suite = nmb_suite::sample::build();
        let lesion = suite
            .tasks()
            .find(|(_, t)| t.family == Family::Lesion && t.turns.is_empty())
            .unwrap()
            .1
            .id
            .clone();
        let c = check(&format!(
            r#"{{"task_id": "{lesion}", "answer": "a small spot"}}"#
        ));
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(c.warnings[0].contains("parse_failed"), "{:?}", c.warnings);
        assert_eq!(c.answers().unwrap().len(), 1);
        let c = check("\n  \n");
        assert_eq!(c.problems, ["a.jsonl: the file holds no answers"]);
    }

    #[test]
    fn a_differential_is_written_as_the_scorer_reads_it() {
        let text = differential_answer(&[" Stroke ".into(), String::new(), "Bleed".into()]);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["final_diagnosis"], "Stroke");
        assert_eq!(
            v["differential"][1],
            serde_json::json!({"rank": 2, "diagnosis": "Bleed"})
        );
        assert!(human_spec("human:lee").is_ok());
        let e = human_spec("openai:gpt").unwrap_err().to_string();
        assert_eq!(e, "\"openai:gpt\" is not a person: expected human:NAME");
    }
}
