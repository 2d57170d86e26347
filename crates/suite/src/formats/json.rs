//! JSON helpers shared by the loaders: reading a file into a value, and typed field access whose errors say
//! which type was expected and which was found.

use std::path::Path;

use serde_json::{Map, Value};

use crate::limits::json_error;
use crate::{Problem, SuiteError};

/// Reads and parses a whole JSON file. Unreadable, empty, unparseable or too large files are fatal.
pub(super) fn read(path: &Path) -> Result<Value, SuiteError> {
    let bytes = read_bytes(path)?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(fatal(path, "the file is empty; expected a JSON array"));
    }
    serde_json::from_slice(&bytes)
        .map_err(|e| fatal(path, format!("not valid JSON: {}", json_error(&e))))
}

/// The whole file, refused over the size cap ([`crate::limits::read`]).
pub(super) fn read_bytes(path: &Path) -> Result<Vec<u8>, SuiteError> {
    Ok(crate::limits::read(path)?)
}

pub(super) fn fatal(path: &Path, message: impl Into<String>) -> SuiteError {
    SuiteError::Invalid(Box::new(Problem::error(
        path.display().to_string(),
        message,
    )))
}

/// "a string", "an array", ...: for messages like "expected a string, found a number".
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub(super) fn describe_shape(v: &Value) -> &'static str {
    match v {
        Value::Array(a) if a.is_empty() => "an empty JSON array",
        Value::Array(a) if a.iter().all(Value::is_object) => {
            "a JSON array of objects of another shape"
        }
        Value::Array(_) => "a JSON array that is not all objects",
        Value::Object(_) => "a JSON object",
        _ => "a JSON scalar",
    }
}

/// An optional string field: missing or null is `None`; any other type is an error message.
pub(super) fn opt_str<'a>(
    obj: &'a Map<String, Value>,
    key: &str,
) -> Result<Option<&'a str>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(format!("expected a string, found {}", kind(other))),
    }
}

/// A required string field.
pub(super) fn req_str<'a>(obj: &'a Map<String, Value>, key: &str) -> Result<&'a str, String> {
    opt_str(obj, key)?.ok_or_else(|| "missing; expected a string".to_string())
}

/// A string, number or boolean as text (ids and answers are sometimes numbers). Other types are errors.
pub(super) fn opt_scalar(obj: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => scalar_text(v)
            .map(Some)
            .ok_or_else(|| format!("expected a string or number, found {}", kind(v))),
    }
}

pub(super) fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// An optional list of strings.
pub(super) fn opt_str_list(obj: &Map<String, Value>, key: &str) -> Result<Vec<String>, String> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!("[{i}]: expected a string, found {}", kind(other))),
            })
            .collect(),
        Some(other) => Err(format!(
            "expected an array of strings, found {}",
            kind(other)
        )),
    }
}

/// Attaches an optional case id and a field to a problem.
pub(super) fn at(problem: Problem, case: Option<&str>, field: impl Into<String>) -> Problem {
    let problem = problem.field(field);
    match case {
        Some(c) => problem.case(c),
        None => problem,
    }
}

/// Splits a JSONL file into (1-based line number, line) pairs, skipping blank lines.
pub(super) fn jsonl_lines(bytes: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    bytes
        .split(|b| *b == b'\n')
        .enumerate()
        .map(|(i, line)| (i + 1, line.strip_suffix(b"\r").unwrap_or(line)))
        .filter(|(_, line)| !line.iter().all(u8::is_ascii_whitespace))
}

/// Parses one JSONL line into an object, or says what is wrong with it.
pub(super) fn jsonl_object(line: &[u8]) -> Result<Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(line) {
        Ok(Value::Object(obj)) => Ok(obj),
        Ok(other) => Err(format!("expected a JSON object, found {}", kind(&other))),
        Err(e) => Err(format!("not valid JSON: {}", json_error(&e))),
    }
}

/// Sets a problem's file (helpers build problems before they know the `file:line` location).
pub(super) fn in_file(mut problem: Problem, file: &str) -> Problem {
    problem.file = file.to_string();
    problem
}
