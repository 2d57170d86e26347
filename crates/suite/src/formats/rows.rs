//! Rows of row-per-item files, CSV/TSV or JSONL, as cells by column name, each row with its place in the file.
//! The question-table and NeuroVLM-manifest loaders read through here; what a row means is theirs.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::json;
use crate::{Problem, SuiteError};

/// One cell, whatever the file type.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Cell {
    Null,
    Text(String),
    Bytes(Arc<[u8]>),
    List(Vec<String>),
}

impl Cell {
    /// The trimmed text of a non-empty text cell.
    pub(super) fn text(&self) -> Option<&str> {
        match self {
            Cell::Text(t) if !t.trim().is_empty() => Some(t.trim()),
            _ => None,
        }
    }
}

/// One row: where it is (`file:3`, `file: row 3`), its number, and its cells by column.
pub(super) struct Row {
    pub(super) at: String,
    pub(super) number: usize,
    pub(super) cells: BTreeMap<String, Cell>,
}

/// A CSV (or, with `delimiter` b'\t', TSV) file with a header row. A row of the wrong width is a problem naming
/// its line; an unreadable header stops the load.
pub(super) fn csv(
    path: &Path,
    file: &str,
    delimiter: u8,
    problems: &mut Vec<Problem>,
) -> Result<Vec<Row>, SuiteError> {
    let bytes = json::read_bytes(path)?;
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .from_reader(bytes.as_slice());
    let header: Vec<String> = reader
        .headers()
        .map_err(|e| SuiteError::Spec(format!("{file}: cannot read the header row: {e}")))?
        .iter()
        .map(|h| h.trim().to_string())
        .collect();
    let mut rows = Vec::new();
    for record in reader.records() {
        match record {
            Ok(r) => {
                let line = r.position().map_or(0, |p| line_at(&bytes, p.byte()));
                let cells = header
                    .iter()
                    .cloned()
                    .zip(r.iter().map(|v| Cell::Text(v.to_string())))
                    .collect();
                rows.push(Row {
                    at: format!("{file}:{line}"),
                    number: line,
                    cells,
                });
            }
            Err(e) => {
                let line = e.position().map_or(0, |p| line_at(&bytes, p.byte()));
                let msg = format!("not a row of {} columns: {e}", header.len());
                problems.push(Problem::error(format!("{file}:{line}"), msg));
            }
        }
    }
    Ok(rows)
}

/// The 1-based line of the record that starts at byte `at`. The csv reader's own line count is one short after a
/// CRLF line end (a record is said to start at the `\n` of the `\r\n` before it), so lines are counted here, past
/// the line-end bytes a record's start may point at.
fn line_at(bytes: &[u8], at: u64) -> usize {
    let mut at = usize::try_from(at).unwrap_or(bytes.len()).min(bytes.len());
    while at < bytes.len() && (bytes[at] == b'\n' || bytes[at] == b'\r') {
        at += 1;
    }
    1 + bytes[..at].iter().filter(|&&b| b == b'\n').count()
}

/// One JSON object per line; a line that is not one is a problem naming it.
pub(super) fn jsonl(
    path: &Path,
    file: &str,
    problems: &mut Vec<Problem>,
) -> Result<Vec<Row>, SuiteError> {
    let bytes = json::read_bytes(path)?;
    let mut rows = Vec::new();
    for (line, text) in json::jsonl_lines(&bytes) {
        match json::jsonl_object(text) {
            Ok(obj) => rows.push(Row {
                at: format!("{file}:{line}"),
                number: line,
                cells: obj.into_iter().map(|(k, v)| (k, json_cell(v))).collect(),
            }),
            Err(msg) => problems.push(Problem::error(format!("{file}:{line}"), msg)),
        }
    }
    Ok(rows)
}

/// A JSON value as a cell: scalars as text, arrays and objects as lists of their scalar values.
pub(super) fn json_cell(v: Value) -> Cell {
    match v {
        Value::Null => Cell::Null,
        Value::String(s) => Cell::Text(s),
        Value::Array(items) => Cell::List(
            items
                .into_iter()
                .filter_map(|i| json::scalar_text(&i))
                .collect(),
        ),
        Value::Object(obj) => Cell::List(obj.values().filter_map(json::scalar_text).collect()),
        other => json::scalar_text(&other).map_or(Cell::Null, Cell::Text),
    }
}
