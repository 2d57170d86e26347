//! Human error-taxonomy labels imported from CSV. They take precedence over judge labels.
//!
//! Format: a header row, then one row per labelled sample. Columns (any order, names case-insensitive):
//! - `task_id` (required), e.g. `stroke_left_mca/dx`;
//! - `sample_index` (or `sample`; default 0);
//! - `category` (or `label`, `class`; required): one of `perceptual_failure`, `reasoning_failure`,
//!   `knowledge_gap`, `grounding_error`, `visual_hallucination` (plain words like "Perceptual failure" work too);
//! - `justification` (optional);
//! - `annotator` (optional);
//! - `run_id` (optional): rows naming another run are skipped, so one file can hold labels for several runs.
//!
//! A row that names the same sample twice, an unknown category or a missing required value is an error naming
//! the file, the line and the field.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nmb_results::ErrorCategory;
use sha2::{Digest, Sha256};

use crate::ScoreError;

#[derive(Debug, Clone, PartialEq)]
pub struct HumanLabel {
    pub category: ErrorCategory,
    pub justification: Option<String>,
    pub annotator: Option<String>,
    /// 1-based line in the file.
    pub line: usize,
}

/// Labels of one run, keyed by (task id, sample index).
#[derive(Debug, Clone, PartialEq)]
pub struct HumanLabels {
    pub path: PathBuf,
    pub sha256: String,
    /// Rows read (for this run).
    pub rows: usize,
    pub labels: BTreeMap<(String, u32), HumanLabel>,
}

impl HumanLabels {
    /// Reads `path`, keeping rows for `run_id` (and rows without a run id).
    pub fn load(path: &Path, run_id: &str) -> Result<HumanLabels, ScoreError> {
        let bytes = nmb_suite::limits::read_io(path).map_err(|source| ScoreError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let err = |line: usize, message: String| ScoreError::Labels {
            path: path.to_path_buf(),
            line,
            message,
        };
        let mut reader = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .flexible(false)
            .from_reader(bytes.as_slice());
        let headers: Vec<String> = reader
            .headers()
            .map_err(|e| err(1, format!("cannot read the header row: {e}")))?
            .iter()
            .map(|h| h.trim_start_matches('\u{feff}').to_ascii_lowercase())
            .collect();
        let col = |names: &[&str]| headers.iter().position(|h| names.contains(&h.as_str()));
        let task_col = col(&["task_id", "task"]).ok_or_else(|| {
            err(
                1,
                format!("no task_id column; the header has: {}", headers.join(", ")),
            )
        })?;
        let cat_col = col(&["category", "label", "class"]).ok_or_else(|| {
            err(
                1,
                format!("no category column; the header has: {}", headers.join(", ")),
            )
        })?;
        let sample_col = col(&["sample_index", "sample"]);
        let just_col = col(&["justification", "reason", "comment"]);
        let who_col = col(&["annotator", "rater"]);
        let run_col = col(&["run_id", "run"]);

        let mut labels = BTreeMap::new();
        let mut rows = 0;
        for record in reader.records() {
            let record = record.map_err(|e| {
                let line = e.position().map_or(0, |p| p.line() as usize);
                err(line, format!("malformed row: {e}"))
            })?;
            let line = record.position().map_or(0, |p| p.line() as usize);
            let get = |c: Option<usize>| {
                c.and_then(|c| record.get(c))
                    .filter(|v| !v.is_empty())
                    .map(str::to_string)
            };
            if get(run_col).is_some_and(|r| r != run_id) {
                continue;
            }
            let task_id = get(Some(task_col)).ok_or_else(|| {
                err(
                    line,
                    "task_id is empty; expected a task id such as case_1/dx".into(),
                )
            })?;
            let sample = match get(sample_col) {
                None => 0,
                Some(s) => s.parse::<u32>().map_err(|_| {
                    err(
                        line,
                        format!("sample_index {s:?} is not a non-negative integer"),
                    )
                })?,
            };
            let raw = get(Some(cat_col)).ok_or_else(|| err(line, "category is empty".into()))?;
            let category = ErrorCategory::parse(&raw).ok_or_else(|| {
                err(
                    line,
                    format!(
                        "category {raw:?} is not one of {}",
                        ErrorCategory::ALL.map(|c| c.as_str()).join(", ")
                    ),
                )
            })?;
            let label = HumanLabel {
                category,
                justification: get(just_col),
                annotator: get(who_col),
                line,
            };
            if let Some(prev) = labels.insert((task_id.clone(), sample), label) {
                return Err(err(
                    line,
                    format!(
                        "task {task_id} sample {sample} is labelled twice (first on line {})",
                        prev.line
                    ),
                ));
            }
            rows += 1;
        }
        Ok(HumanLabels {
            path: path.to_path_buf(),
            sha256: hex::encode(Sha256::digest(&bytes)),
            rows,
            labels,
        })
    }

    pub fn get(&self, task_id: &str, sample: u32) -> Option<&HumanLabel> {
        self.labels.get(&(task_id.to_string(), sample))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("labels.csv");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    #[test]
    fn reads_labels_for_this_run() {
        let (_d, p) = write(
            "Task_ID,sample,Category,justification,annotator,run_id\n\
             a/dx,0,Perceptual failure,missed the DWI lesion,dr_a,r1\n\
             a/dx,1,knowledge_gap,,dr_b,\n\
             b/dx,0,reasoning_failure,x,dr_a,r2\n",
        );
        let l = HumanLabels::load(&p, "r1").unwrap();
        assert_eq!(l.rows, 2);
        assert_eq!(
            l.get("a/dx", 0).unwrap().category,
            ErrorCategory::PerceptualFailure
        );
        assert_eq!(l.get("a/dx", 1).unwrap().justification, None);
        assert!(l.get("b/dx", 0).is_none());
        assert_eq!(l.sha256.len(), 64);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let (_d, p) = write("task_id,category\na/dx,bad luck\n");
        let e = HumanLabels::load(&p, "r").unwrap_err().to_string();
        assert!(
            e.contains("labels.csv") && e.contains("line 2") && e.contains("bad luck"),
            "{e}"
        );
        let (_d, p) = write("task_id,category\na/dx,knowledge_gap\na/dx,grounding_error\n");
        let e = HumanLabels::load(&p, "r").unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("twice"), "{e}");
        let (_d, p) = write("task,what\na,b\n");
        let e = HumanLabels::load(&p, "r").unwrap_err().to_string();
        assert!(e.contains("no category column"), "{e}");
        let (_d, p) = write("task_id,sample_index,category\na/dx,-1,knowledge_gap\n");
        let e = HumanLabels::load(&p, "r").unwrap_err().to_string();
        assert!(e.contains("sample_index"), "{e}");
    }
}
