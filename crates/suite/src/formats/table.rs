//! Question tables: one question per row of a JSONL, CSV, JSON-array or Parquet file, with column names mapped
//! to nmb's fields. This covers Hugging Face datasets exported to files and the breadth datasets shipped as
//! tables.
//!
//! - `table:PATH` reads the fields under their own names unless `--map FIELD=COLUMN` says otherwise.
//! - `pmc-vqa:PATH` is PMC-VQA's CSV (`Figure_path, Question, Answer, Choice A..D, Answer_label`).
//! - `omnimedvqa:PATH` is one of OmniMedVQA's `QA_information` JSON files (`question_id, question, gt_answer,
//!   image_path, option_A..D, modality_type, dataset, question_type`).
//! - `pathvqa:PATH` is PathVQA as exported from Hugging Face (`image, question, answer`).
//!
//! Fields: `question` (required), `answer`, `choice` (the right option's letter), `options` (one column holding
//! a JSON list or object, or several columns separated by commas, lettered A, B, ... in order), `image` (a path
//! relative to the file's folder or one of its parents, or the image's bytes, as Parquet exports embed them),
//! `id` and `case_id`. A row with options is `multiple_choice` (its letter from `choice`, else the option whose
//! text is `answer`); without, a yes/no answer is `closed_vqa` and anything else `open_vqa`. Rows that share an
//! image path share a case. A missing image is a warning and its question is skipped, unless the suite is loaded
//! for text-only asking (`--inputs text`). Every bad row is reported with its file, line (or row), column and
//! what was expected.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nmb_imaging::ImageSource;
use serde_json::Value;

use super::columns::Columns;
use super::rows::{self, Cell, Row};
use super::{file_name, json, parquet_footer, paths, Loaded};
use crate::limits;
use crate::{Case, Family, Image, Level, Metadata, Problem, Reference, Suite, SuiteError, Task};

/// The fields a row may carry.
pub const FIELDS: &[&str] = &[
    "question", "answer", "choice", "options", "image", "id", "case_id",
];

/// A dataset whose columns have known names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Table,
    PmcVqa,
    OmniMedVqa,
    PathVqa,
}

impl Preset {
    fn name(self) -> &'static str {
        match self {
            Preset::Table => "table",
            Preset::PmcVqa => "pmc-vqa",
            Preset::OmniMedVqa => "omnimedvqa",
            Preset::PathVqa => "pathvqa",
        }
    }

    /// (field, column) pairs that differ from the field's own name.
    fn columns(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Preset::Table | Preset::PathVqa => &[],
            Preset::PmcVqa => &[
                ("image", "Figure_path"),
                ("question", "Question"),
                ("answer", "Answer"),
                ("choice", "Answer_label"),
                ("options", "Choice A,Choice B,Choice C,Choice D"),
            ],
            Preset::OmniMedVqa => &[
                ("id", "question_id"),
                ("answer", "gt_answer"),
                ("image", "image_path"),
                ("options", "option_A,option_B,option_C,option_D"),
            ],
        }
    }

    /// Columns copied into task metadata when present.
    fn metadata(self) -> &'static [&'static str] {
        match self {
            Preset::OmniMedVqa => &["dataset", "modality_type", "question_type"],
            _ => &[],
        }
    }
}

pub(super) fn load(
    preset: Preset,
    path: &Path,
    map: &[(String, String)],
    text_only: bool,
) -> Result<Loaded, SuiteError> {
    let file = file_name(path);
    let mut problems = Vec::new();
    let rows = read_rows(path, &file, &mut problems)?;
    let mut loaded = load_rows(preset, path, rows, map, text_only)?;
    loaded.problems.splice(0..0, problems);
    Ok(loaded)
}

/// Rows read elsewhere (a Hugging Face `datasets` folder), named after `path`.
pub(super) fn load_rows(
    preset: Preset,
    path: &Path,
    rows: Vec<Row>,
    map: &[(String, String)],
    text_only: bool,
) -> Result<Loaded, SuiteError> {
    let columns = Columns::new(FIELDS, preset.columns(), map)?;
    let file = file_name(path);
    let loaded = Loaded::new(suite(preset, path));
    let mut builder = Builder {
        preset,
        columns,
        text_only,
        file,
        // Canonical, so that an image found in one is checked to stay inside it by its real path.
        dirs: path
            .parent()
            .map(|p| {
                p.ancestors()
                    .take(4)
                    .filter_map(|d| d.canonicalize().ok())
                    .collect()
            })
            .unwrap_or_default(),
        cases: HashMap::new(),
        ids: HashSet::new(),
        skipped: 0,
        loaded,
    };
    for row in rows {
        builder.row(row);
    }
    builder.finish();
    Ok(builder.loaded)
}

fn suite(preset: Preset, path: &Path) -> Suite {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Suite {
        id: format!("{}-{stem}", preset.name()),
        version: "unversioned".into(),
        description: format!("questions from {} ({})", path.display(), preset.name()),
        format: preset.name().into(),
        defaults: Default::default(),
        cases: Vec::new(),
        empty_cases: Vec::new(),
    }
}

fn read_rows(path: &Path, file: &str, problems: &mut Vec<Problem>) -> Result<Vec<Row>, SuiteError> {
    let ext = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "parquet" => parquet_rows(path),
        "csv" | "tsv" => rows::csv(path, file, if ext == "tsv" { b'\t' } else { b',' }, problems),
        "jsonl" => rows::jsonl(path, file, problems),
        "json" => json_rows(path),
        other => Err(SuiteError::Spec(format!(
            "{}: cannot read a table from a .{other} file; expected .jsonl, .json (an array of objects), .csv, \
             .tsv or .parquet",
            path.display()
        ))),
    }
}

fn json_rows(path: &Path) -> Result<Vec<Row>, SuiteError> {
    let file = file_name(path);
    let Value::Array(items) = json::read(path)? else {
        return Err(json::fatal(
            path,
            "expected a JSON array of question objects",
        ));
    };
    Ok(items
        .into_iter()
        .enumerate()
        .map(|(i, v)| Row {
            at: format!("{file}: [{i}]"),
            number: i + 1,
            cells: match v {
                Value::Object(obj) => obj
                    .into_iter()
                    .map(|(k, v)| (k, rows::json_cell(v)))
                    .collect(),
                _ => BTreeMap::new(),
            },
        })
        .collect())
}

/// Rows of a Parquet file whose footer was checked first ([`parquet_footer::check`]); the cells read may add up
/// to [`limits::parquet_budget`] bytes (each row counted as [`ROW_OVERHEAD`] bytes more), and no more rows than
/// the footer claims are read.
pub(super) fn parquet_rows(path: &Path) -> Result<Vec<Row>, SuiteError> {
    let footer = parquet_footer::check(path)
        .map_err(|e| json::fatal(path, format!("not a Parquet file nmb can read safely: {e}")))?;
    parquet_footer::guard(|| read_parquet(path, footer)).unwrap_or_else(|e| {
        Err(json::fatal(
            path,
            format!("not a readable Parquet file: {e}"),
        ))
    })
}

/// The rows of a Parquet file whose footer says `footer`.
fn read_parquet(path: &Path, footer: parquet_footer::Footer) -> Result<Vec<Row>, SuiteError> {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    let file = file_name(path);
    let bad = |e: parquet::errors::ParquetError| {
        json::fatal(path, format!("not a readable Parquet file: {e}"))
    };
    let handle = std::fs::File::open(path).map_err(|source| SuiteError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let len = handle.metadata().map(|m| m.len()).unwrap_or(0);
    let budget = limits::parquet_budget(len);
    let mut spent: u64 = 0;
    let reader = SerializedFileReader::new(handle).map_err(bad)?;
    let mut rows = Vec::new();
    for (i, row) in reader.get_row_iter(None).map_err(bad)?.enumerate() {
        if i as u64 >= footer.rows {
            return Err(json::fatal(
                path,
                format!("holds more rows than the {} its footer claims", footer.rows),
            ));
        }
        let row = row.map_err(bad)?;
        let cells: BTreeMap<String, Cell> = row
            .get_column_iter()
            .map(|(name, field)| (name.clone(), parquet_cell(field)))
            .collect();
        spent += ROW_OVERHEAD
            + cells
                .iter()
                .map(|(k, c)| k.len() as u64 + c.size())
                .sum::<u64>();
        if spent > budget {
            return Err(json::fatal(
                path,
                format!(
                    "its cells decode to more than {budget} bytes by row {} (a {len}-byte file); nmb reads \
                     at most {} times a Parquet file's size, or --max-file-mib, whichever is more",
                    i + 1,
                    limits::PARQUET_DECODE_RATIO
                ),
            ));
        }
        rows.push(Row {
            at: format!("{file}: row {}", i + 1),
            number: i + 1,
            cells,
        });
    }
    Ok(rows)
}

/// What a row costs beyond its cells' bytes, as counted against a Parquet table's budget.
const ROW_OVERHEAD: u64 = 64;

/// A Parquet value as a cell. Hugging Face stores an image as a struct `{bytes, path}`: its bytes win.
fn parquet_cell(field: &parquet::record::Field) -> Cell {
    use parquet::record::Field;
    match field {
        Field::Null => Cell::Null,
        Field::Str(s) => Cell::Text(s.clone()),
        Field::Bytes(b) => match std::str::from_utf8(b.data()) {
            Ok(s) if !s.contains('\0') => Cell::Text(s.to_string()),
            _ => Cell::Bytes(Arc::from(b.data())),
        },
        Field::Group(row) => {
            let parts: HashMap<&str, &Field> = row
                .get_column_iter()
                .map(|(k, v)| (k.as_str(), v))
                .collect();
            match (parts.get("bytes"), parts.get("path")) {
                (Some(Field::Bytes(b)), _) => Cell::Bytes(Arc::from(b.data())),
                (_, Some(Field::Str(p))) => Cell::Text(p.clone()),
                _ => Cell::Null,
            }
        }
        Field::ListInternal(list) => Cell::List(
            list.elements()
                .iter()
                .filter_map(|e| match parquet_cell(e) {
                    Cell::Text(t) => Some(t),
                    _ => None,
                })
                .collect(),
        ),
        other => Cell::Text(other.to_string()),
    }
}

struct Builder {
    preset: Preset,
    columns: Columns,
    text_only: bool,
    file: String,
    /// The file's folder and up to three of its parents, where relative image paths are looked for.
    dirs: Vec<PathBuf>,
    /// Case position by image path (or row id).
    cases: HashMap<String, usize>,
    ids: HashSet<String>,
    skipped: usize,
    loaded: Loaded,
}

/// What is wrong with a row: the column and what was expected.
type RowError = (String, String);

/// A row read: its case key, image and task, or why it is skipped.
enum Read {
    Task(String, Option<Image>, Box<Task>),
    Skipped(Problem),
}

impl Builder {
    fn row(&mut self, row: Row) {
        match self.read(&row) {
            Ok(Read::Task(key, image, task)) => {
                if self.ids.insert(task.id.clone()) {
                    self.add(key, image, *task);
                } else {
                    let msg = format!("duplicate id {:?}; each question needs its own", task.id);
                    let problem = Problem::error(&row.at, msg).field(self.columns.of("id"));
                    self.loaded.problems.push(problem);
                }
            }
            Ok(Read::Skipped(problem)) => {
                self.skipped += 1;
                self.loaded.problems.push(problem);
            }
            Err((column, msg)) => {
                let problem = Problem::error(&row.at, msg).field(column);
                self.loaded.problems.push(problem);
            }
        }
    }

    fn cell(&self, row: &Row, field: &str) -> Option<String> {
        row.cells
            .get(self.columns.of(field))
            .and_then(Cell::text)
            .map(str::to_string)
    }

    /// The case key, the image (if any) and the task of a row, or why it is skipped.
    fn read(&self, row: &Row) -> Result<Read, RowError> {
        let col = |field: &str| self.columns.of(field).to_string();
        let question = self.cell(row, "question").ok_or_else(|| {
            (
                col("question"),
                "missing or empty; expected the question's text".to_string(),
            )
        })?;
        let id = self
            .cell(row, "id")
            .unwrap_or_else(|| format!("row{}", row.number));
        let options = self.options(row).map_err(|m| (col("options"), m))?;
        let answer = self.cell(row, "answer");
        let choice = self.choice(row, &options, answer.as_deref())?;
        let family = match (&options[..], answer.as_deref()) {
            ([_, ..], _) => Family::MultipleChoice,
            (_, Some(a)) if ["yes", "no"].contains(&a.to_ascii_lowercase().as_str()) => {
                Family::ClosedVqa
            }
            _ => Family::OpenVqa,
        };
        let (image, image_key) = match self.image(row, &id)? {
            Ok(found) => found,
            Err(missing) => return Ok(Read::Skipped(missing)),
        };
        let key = self
            .cell(row, "case_id")
            .or(image_key)
            .unwrap_or_else(|| id.clone());
        let mut metadata = Metadata::new();
        for &m in self.preset.metadata() {
            if let Some(v) = row.cells.get(m).and_then(Cell::text) {
                metadata.insert(m.to_string(), v.to_string());
            }
        }
        let reference = Reference {
            answer,
            choice,
            ..Reference::default()
        };
        let task = Task {
            id,
            family,
            level: Level::Direct,
            question,
            options,
            turns: Vec::new(),
            reference: (!reference.is_empty()).then_some(reference),
            metadata,
        };
        Ok(Read::Task(key, image, Box::new(task)))
    }

    /// The options, lettered A, B, ... from one list column or several columns; a leading `A:` or `A.` that
    /// repeats the letter is dropped.
    fn options(&self, row: &Row) -> Result<Vec<(String, String)>, String> {
        let spec = self.columns.of("options");
        let texts: Vec<String> = if spec.contains(',') {
            spec.split(',')
                .filter_map(|c| row.cells.get(c.trim()).and_then(Cell::text))
                .map(str::to_string)
                .collect()
        } else {
            match row.cells.get(spec) {
                Some(Cell::List(items)) => items.clone(),
                Some(Cell::Text(t)) if t.trim_start().starts_with('[') => {
                    serde_json::from_str(t)
                        .map_err(|e| format!("{t:?} is not a JSON list of option texts: {e}"))?
                }
                Some(Cell::Text(t)) if !t.trim().is_empty() => {
                    return Err(format!("{t:?}: expected a JSON list of option texts"))
                }
                _ => Vec::new(),
            }
        };
        Ok(texts
            .into_iter()
            .enumerate()
            .map(|(i, text)| {
                let letter = char::from(b'A' + (i as u8 % 26)).to_string();
                let bare = strip_letter(&text, &letter).to_string();
                (letter, bare)
            })
            .collect())
    }

    fn choice(
        &self,
        row: &Row,
        options: &[(String, String)],
        answer: Option<&str>,
    ) -> Result<Option<String>, RowError> {
        if options.is_empty() {
            return Ok(None);
        }
        let letters: Vec<&str> = options.iter().map(|(l, _)| l.as_str()).collect();
        if let Some(c) = self.cell(row, "choice") {
            let c = c
                .trim_matches(|ch: char| !ch.is_ascii_alphanumeric())
                .to_ascii_uppercase();
            return match letters.contains(&c.as_str()) {
                true => Ok(Some(c)),
                false => Err((
                    self.columns.of("choice").to_string(),
                    format!(
                        "{c:?} is not an option letter; expected one of {}",
                        letters.join(", ")
                    ),
                )),
            };
        }
        let Some(answer) = answer else {
            return Ok(None);
        };
        let found = options.iter().find(|(l, t)| {
            t.trim().eq_ignore_ascii_case(answer.trim())
                || strip_letter(answer, l).eq_ignore_ascii_case(t)
        });
        match found {
            Some((l, _)) => Ok(Some(l.clone())),
            None => Err((
                self.columns.of("answer").to_string(),
                format!("{answer:?} is none of the options ({})", letters.join(", ")),
            )),
        }
    }

    /// The row's image and its case key (its path), or the warning that skips the row when the image is missing.
    #[allow(clippy::type_complexity)]
    fn image(
        &self,
        row: &Row,
        id: &str,
    ) -> Result<Result<(Option<Image>, Option<String>), Problem>, RowError> {
        let column = self.columns.of("image").to_string();
        match row.cells.get(&column) {
            Some(Cell::Bytes(bytes)) => Ok(Ok((
                Some(Image::new(id, ImageSource::Bytes(bytes.clone()))),
                None,
            ))),
            Some(Cell::Text(p)) if !p.trim().is_empty() => {
                let p = p.trim();
                let key = Some(p.to_string());
                match self.dirs.iter().find(|d| d.join(p).is_file()) {
                    Some(dir) => {
                        // An absolute path, `..` or a symlink must not reach outside the folder it was found in.
                        let file = paths::resolve(dir, p).map_err(|msg| (column.clone(), msg))?;
                        Ok(Ok((Some(Image::new(p, ImageSource::File(file))), key)))
                    }
                    None if self.text_only => Ok(Ok((None, key))),
                    None => {
                        let msg = format!(
                            "image {p:?} not found next to {} or in its parent folders; the question is skipped \
                             (ask it as text with --inputs text)",
                            self.file
                        );
                        Ok(Err(Problem::warning(&row.at, msg).case(id).field(column)))
                    }
                }
            }
            Some(Cell::List(_)) => Err((
                column,
                "expected one image path or the image's bytes, found a list".into(),
            )),
            _ => Ok(Ok((None, None))),
        }
    }

    fn add(&mut self, key: String, image: Option<Image>, task: Task) {
        let at = match self.cases.get(&key) {
            Some(&i) => i,
            None => {
                self.loaded.suite.cases.push(Case {
                    id: key.clone(),
                    language: None,
                    images: image.into_iter().collect(),
                    ehr: Vec::new(),
                    notes: String::new(),
                    metadata: Metadata::from([(
                        "source".to_string(),
                        self.preset.name().to_string(),
                    )]),
                    tasks: Vec::new(),
                });
                self.cases.insert(key, self.loaded.suite.cases.len() - 1);
                self.loaded.suite.cases.len() - 1
            }
        };
        self.loaded.suite.cases[at].tasks.push(task);
    }

    fn finish(&mut self) {
        if self.skipped > 0 {
            let msg = format!(
                "{} question(s) skipped because their image is missing; load with --inputs text to ask them \
                 without it",
                self.skipped
            );
            let problem = Problem::warning(&self.file, msg).field(self.columns.of("image"));
            self.loaded.problems.push(problem);
        }
    }
}

/// `text` without a leading `A:`, `A.` or `A)` naming `letter`.
fn strip_letter<'a>(text: &'a str, letter: &str) -> &'a str {
    let t = text.trim();
    t.strip_prefix(letter)
        .and_then(|rest| rest.strip_prefix([':', '.', ')']))
        .map_or(t, str::trim)
}
