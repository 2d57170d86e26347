//! NeuroVLM-Bench manifests: one row per image, as CSV (with a header row) or JSONL.
//!
//! Columns: `image` (a path relative to the manifest's directory, required), `diagnosis_name` (required: multiple
//! sclerosis, stroke, tumor, other abnormalities or normal), and optionally `case_id`, `modality`,
//! `specialized_sequence`, `plane`, `diagnosis_detailed`, `icd10_code` and `severity` (a number in [0, 1]).
//! `--map FIELD=COLUMN` reads a field from a column of another name. The authors' own files (`image_mapping.csv`
//! and `subsets/*.csv` of ChatMED/neurovlm-bench: `dataset,file_path,class,original_class,subclass,modality,
//! modality_subtype,plane`) are read as they are, without `--map`; their image paths are relative to the dataset's
//! folder, given once as the images root. Each row becomes a case with one image and one `structured` task. Every
//! bad row is reported with its file, line, column and what was expected (all of its faults, not only the first),
//! and skipped.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use nmb_imaging::ImageSource;

use super::columns::Columns;
use super::{file_name, paths, rows, Loaded};
use crate::neurovlm_schema::Schema;
use crate::{Case, Family, Image, Level, Metadata, Problem, Reference, Suite, SuiteError, Task};

/// The fields a row may carry, in the order they are documented.
pub const FIELDS: &[&str] = &[
    "image",
    "case_id",
    "modality",
    "specialized_sequence",
    "plane",
    "diagnosis_name",
    "diagnosis_detailed",
    "icd10_code",
    "severity",
];

/// The columns of the authors' `image_mapping.csv` and `subsets/*.csv` that hold nmb's fields under other names
/// (`modality` and `plane` share nmb's names; `dataset` and `original_class` are not read).
const AUTHORS_COLUMNS: &[(&str, &str)] = &[
    ("image", "file_path"),
    ("diagnosis_name", "class"),
    ("diagnosis_detailed", "subclass"),
    ("specialized_sequence", "modality_subtype"),
];

/// Whether a file's columns are the authors' layout: `file_path` and `class`, and no `image`.
fn authors_layout(found: &BTreeSet<String>) -> bool {
    found.contains("file_path") && found.contains("class") && !found.contains("image")
}

/// What the loader asks of the label schema, in the terms its rows use.
struct Labels(&'static Schema);

impl Labels {
    fn bundled() -> Labels {
        Labels(Schema::bundled())
    }

    fn canonical(&self, text: &str) -> String {
        self.0.canonical(text)
    }

    /// The class `text` names, spelled as the reference keeps it (`multiple sclerosis`).
    fn class(&self, text: &str) -> Option<String> {
        let i = self.0.class_index(text)?;
        Some(self.0.classes[i].id.replace('_', " "))
    }

    fn field(&self, field: &str, text: &str) -> Option<String> {
        self.0.field_value(field, text)
    }

    fn allowed(&self, field: &str) -> String {
        self.0
            .fields
            .get(field)
            .cloned()
            .unwrap_or_default()
            .join(", ")
    }

    fn is_empty_value(&self, text: &str) -> bool {
        self.0.is_abstention(text)
    }
}

/// One row: (line number, column name → value).
type Row = (usize, BTreeMap<String, String>);

pub(super) fn load(
    path: &Path,
    map: &[(String, String)],
    images_root: Option<&Path>,
) -> Result<Loaded, SuiteError> {
    // `bad.csv` has the parent "", which is the current directory.
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let root = paths::canonical_root(images_root.or(parent).unwrap_or(Path::new(".")))?;
    let file = file_name(path);
    let mut loaded = Loaded::new(Suite {
        id: path
            .file_stem()
            .map_or("neurovlm".into(), |s| s.to_string_lossy().into_owned()),
        version: "1".into(),
        description: format!("NeuroVLM-Bench manifest {file}"),
        format: "neurovlm".into(),
        defaults: Default::default(),
        cases: Vec::new(),
        empty_cases: Vec::new(),
    });
    let jsonl = path
        .extension()
        .is_some_and(|e| e == "jsonl" || e == "json");
    // A `.json` manifest is JSONL too: one row per line.
    let rows = text_rows(if jsonl {
        rows::jsonl(path, &file, &mut loaded.problems)?
    } else {
        rows::csv(path, &file, b',', &mut loaded.problems)?
    });
    let found: BTreeSet<String> = rows.iter().flat_map(|(_, r)| r.keys().cloned()).collect();
    let defaults = if map.is_empty() && authors_layout(&found) {
        AUTHORS_COLUMNS
    } else {
        &[]
    };
    let columns = Columns::new(FIELDS, defaults, map)?;
    if let Some(problem) = missing_columns(&file, &columns, &found) {
        loaded.problems.push(problem);
        return Ok(loaded);
    }
    let labels = Labels::bundled();
    let mut seen = HashSet::new();
    for (line, row) in rows {
        let loc = format!("{file}:{line}");
        let mut problems = Vec::new();
        let case = row_case(&root, &columns, &labels, &loc, line, &row, &mut problems);
        match case {
            Some(case) if seen.insert(case.id.clone()) => loaded.suite.cases.push(case),
            Some(case) => problems.push(
                Problem::error(
                    &loc,
                    format!("duplicate case_id {:?}; each row needs its own", case.id),
                )
                .field(columns.of("case_id"))
                .kind("duplicate case_id"),
            ),
            None => {}
        }
        loaded.problems.extend(problems);
    }
    if loaded.suite.cases.is_empty() && loaded.problems.iter().all(|p| !p.is_error()) {
        loaded.problems.push(Problem::warning(
            &file,
            "no rows; expected a header and one row per image",
        ));
    }
    Ok(loaded)
}

/// One error, instead of one per row, when a required field has no column: it lists the columns found and
/// suggests `--map`.
fn missing_columns(file: &str, columns: &Columns, found: &BTreeSet<String>) -> Option<Problem> {
    if found.is_empty() {
        return None;
    }
    let absent: Vec<String> = ["image", "diagnosis_name"]
        .into_iter()
        .filter(|f| !found.contains(columns.of(f)))
        .map(|f| format!("{f} (column {:?})", columns.of(f)))
        .collect();
    if absent.is_empty() {
        return None;
    }
    let have: Vec<&str> = found.iter().map(String::as_str).collect();
    Some(
        Problem::error(
            file,
            format!(
                "no column for {}; the file has the columns {}; name the right one with --map FIELD=COLUMN, e.g. \
                 --map image={}",
                absent.join(" and "),
                have.join(", "),
                have[0]
            ),
        )
        .kind("columns"),
    )
}

/// The manifest's rows as text by column: an empty cell and a JSON null are "", a list is no value.
fn text_rows(rows: Vec<rows::Row>) -> Vec<Row> {
    rows.into_iter()
        .map(|r| {
            let values = r
                .cells
                .into_iter()
                .filter_map(|(k, c)| match c {
                    rows::Cell::Text(t) => Some((k, t)),
                    rows::Cell::Null => Some((k, String::new())),
                    rows::Cell::Bytes(_) | rows::Cell::List(_) => None,
                })
                .collect();
            (r.number, values)
        })
        .collect()
}

fn row_case(
    root: &Path,
    columns: &Columns,
    labels: &Labels,
    loc: &str,
    line: usize,
    row: &BTreeMap<String, String>,
    problems: &mut Vec<Problem>,
) -> Option<Case> {
    let get = |field: &str| {
        row.get(columns.of(field))
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty() && !labels.is_empty_value(v))
    };
    // Each error is named by its column and counted with the others of its kind (`nmb eval` lists the kinds).
    let mut error = |field: &str, kind: &str, msg: String| {
        let column = columns.of(field);
        let kind = format!("{column}: {kind}");
        problems.push(Problem::error(loc, msg).field(column).kind(kind));
    };
    // The image and the labels are all checked, so that a row's unfound image does not hide its class.
    let image = match get("image") {
        None => {
            error(
                "image",
                "missing",
                "missing; expected the image's path, relative to the images root".into(),
            );
            None
        }
        Some(image_path) => match paths::resolve(root, &image_path) {
            Ok(file) => Some((image_path, file)),
            Err(msg) => {
                let kind = if msg.contains("not found") {
                    "image not found"
                } else {
                    "not a usable path"
                };
                error("image", kind, msg);
                None
            }
        },
    };
    let class = match get("diagnosis_name") {
        Some(v) => labels.class(&v).or_else(|| {
            error("diagnosis_name", "not a class", format!("{v:?} is not a class; expected multiple sclerosis, stroke, tumor, other abnormalities or normal"));
            None
        }),
        None => {
            error("diagnosis_name", "missing", "missing; expected multiple sclerosis, stroke, tumor, other abnormalities or normal".into());
            None
        }
    };
    let mut checked = |field: &str| -> Result<Option<String>, ()> {
        let Some(v) = get(field) else { return Ok(None) };
        labels.field(field, &v).map(Some).ok_or_else(|| {
            let allowed = labels.allowed(field);
            error(
                field,
                "value not allowed",
                format!("{v:?} is not allowed; expected one of {allowed}, or empty"),
            );
        })
    };
    let (modality, sequence, plane) = (
        checked("modality"),
        checked("specialized_sequence"),
        checked("plane"),
    );
    let severity = get("severity");
    if let Some(s) = &severity {
        if !s.parse::<f64>().is_ok_and(|v| (0.0..=1.0).contains(&v)) {
            error(
                "severity",
                "not a number in [0, 1]",
                format!("{s:?} is not a number in [0, 1]"),
            );
            return None;
        }
    }
    let (Ok(modality), Ok(sequence), Ok(plane), Some((image_path, image_file)), Some(class)) =
        (modality, sequence, plane, image, class)
    else {
        return None;
    };
    let id = get("case_id").unwrap_or_else(|| format!("row{line}"));
    let mut image = Image::new(image_path, ImageSource::File(image_file));
    image.modality = modality.as_deref().and_then(|m| m.parse().ok());
    image.sequence = sequence.as_deref().and_then(|s| s.parse().ok());
    image.plane = plane.as_deref().and_then(|p| p.parse().ok());
    let reference = Reference {
        diagnosis: Some(class),
        modality,
        specialized_sequence: sequence,
        plane,
        diagnosis_detailed: get("diagnosis_detailed").map(|d| labels.canonical(&d)),
        icd10_code: get("icd10_code"),
        severity,
        ..Reference::default()
    };
    Some(Case {
        id: id.clone(),
        language: None,
        images: vec![image],
        ehr: Vec::new(),
        notes: String::new(),
        metadata: Metadata::new(),
        tasks: vec![Task {
            id: format!("{id}/neurovlm"),
            family: Family::Structured,
            level: Level::Direct,
            question: "Read this brain image.".into(),
            options: Vec::new(),
            turns: Vec::new(),
            reference: Some(reference),
            metadata: Metadata::new(),
        }],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_schema_parses_and_knows_the_classes() {
        let l = Labels::bundled();
        assert_eq!(l.class("Tumour").as_deref(), Some("tumor"));
        assert_eq!(l.class("MS").as_deref(), Some("multiple sclerosis"));
        assert_eq!(
            l.field("specialized_sequence", "t1ce").as_deref(),
            Some("T1C+")
        );
        assert!(l.class("migraine").is_none());
    }
}
