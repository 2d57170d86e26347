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
    /// The bytes it holds.
    pub(super) fn size(&self) -> u64 {
        match self {
            Cell::Null => 0,
            Cell::Text(t) => t.len() as u64,
            Cell::Bytes(b) => b.len() as u64,
            Cell::List(items) => items.iter().map(|i| i.len() as u64 + 8).sum(),
        }
    }

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
    let mut lines = Lines::new(&bytes);
    for record in reader.records() {
        match record {
            Ok(r) => {
                let line = r.position().map_or(0, |p| lines.at(p.byte()));
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
                let line = e.position().map_or(0, |p| lines.at(p.byte()));
                let msg = format!("not a row of {} columns: {e}", header.len());
                problems.push(Problem::error(format!("{file}:{line}"), msg));
            }
        }
    }
    Ok(rows)
}

/// Line numbers of byte offsets that come in increasing order (the starts of a file's records), counted in one
/// pass: each call counts only the line ends between the previous offset and this one.
///
/// The csv reader's own line count is one short after a CRLF line end (a record is said to start at the `\n`
/// of the `\r\n` before it), so lines are counted here, past the line-end bytes a record's start may point at.
struct Lines<'a> {
    bytes: &'a [u8],
    /// How far line ends have been counted, and the 1-based line there.
    counted: usize,
    line: usize,
}

impl<'a> Lines<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Lines {
            bytes,
            counted: 0,
            line: 1,
        }
    }

    /// The 1-based line of the record that starts at byte `at`.
    fn at(&mut self, at: u64) -> usize {
        let bytes = self.bytes;
        let mut at = usize::try_from(at).unwrap_or(bytes.len()).min(bytes.len());
        while at < bytes.len() && (bytes[at] == b'\n' || bytes[at] == b'\r') {
            at += 1;
        }
        // An offset before one already seen (not expected) is counted from the start again.
        if at < self.counted {
            (self.counted, self.line) = (0, 1);
        }
        self.line += bytes[self.counted..at]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        self.counted = at;
        self.line
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What `Lines` must agree with: the line ends before `at`, counted from the start every time.
    fn counted_from_the_start(bytes: &[u8], at: u64) -> usize {
        let mut at = usize::try_from(at).unwrap().min(bytes.len());
        while at < bytes.len() && matches!(bytes[at], b'\n' | b'\r') {
            at += 1;
        }
        1 + bytes[..at].iter().filter(|&&b| b == b'\n').count()
    }

    #[test]
    fn lines_counted_in_one_pass_match_lines_counted_from_the_start() {
        let text = b"a,b\r\n1,2\r\n\r\n3,\"x\ny\"\n4,5\n\n6,7";
        let mut lines = Lines::new(text);
        let mut reader = csv::ReaderBuilder::new().from_reader(&text[..]);
        let mut seen = Vec::new();
        for record in reader.records() {
            let at = record.unwrap().position().unwrap().byte();
            let line = lines.at(at);
            assert_eq!(
                line,
                counted_from_the_start(text, at),
                "record at byte {at}"
            );
            seen.push(line);
        }
        assert_eq!(seen, [2, 4, 6, 8]);
        // An earlier offset (not expected from the csv reader) is still right.
        assert_eq!(lines.at(0), 1);
    }
}
