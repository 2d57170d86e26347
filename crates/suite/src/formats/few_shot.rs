//! NeuroVLM-Bench's few-shot examples file (`few_shot_examples.csv` of ChatMED/neurovlm-bench): one example image
//! per row, shown to the model with its class before the question.
//!
//! The file is read as the authors' `run_async_splits.py` reads it: the columns `file_path` (relative to the
//! dataset's folder, given as the images root) and `class` (the text shown, as written), in file order; the other
//! columns (`dataset`, `subclass`, `modality`, ...) are not read. Where the runner would silently do something
//! else (an empty class it would show as `nan`, two rows of one image it would fold into one), the row is refused
//! instead. Every problem names the file, its line and the column.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::{file_name, paths, rows};
use crate::{Problem, SuiteError};

/// The columns read, as the authors name them.
pub const COLUMNS: [&str; 2] = ["file_path", "class"];

/// One example: its class text as the file writes it, the image path as written and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FewShotExample {
    /// `FILE:LINE`, for errors about the example later (its image unreadable).
    pub at: String,
    pub class: String,
    /// The `file_path` cell, as written.
    pub file_path: String,
    pub image: PathBuf,
}

/// Reads the examples, their images found under `images_root` (else the file's folder). Every bad row is
/// reported, one problem a line, with its file, line and column; nothing is returned then.
pub fn read_examples(
    path: &Path,
    images_root: Option<&Path>,
) -> Result<Vec<FewShotExample>, SuiteError> {
    let file = file_name(path);
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    let root = paths::canonical_root(images_root.or(parent).unwrap_or(Path::new(".")))?;
    let mut problems = Vec::new();
    let rows = rows::csv(path, &file, b',', &mut problems)?;
    let found: BTreeSet<&str> = rows
        .iter()
        .flat_map(|r| r.cells.keys().map(String::as_str))
        .collect();
    let absent: Vec<&str> = COLUMNS.into_iter().filter(|c| !found.contains(c)).collect();
    if !absent.is_empty() && !rows.is_empty() {
        let have: Vec<&str> = found.into_iter().collect();
        problems.push(
            Problem::error(
                &file,
                format!(
                    "no column {}; a few-shot examples file needs the columns file_path and class (the \
                     authors' few_shot_examples.csv); it has {}",
                    absent.join(" and "),
                    have.join(", ")
                ),
            )
            .field(absent.join(", ")),
        );
        return Err(refused(&problems));
    }
    let mut examples: Vec<FewShotExample> = Vec::new();
    for row in rows {
        let cell = |c: &str| {
            row.cells
                .get(c)
                .and_then(rows::Cell::text)
                .map(str::to_string)
        };
        let mut bad = |column: &str, message: String| {
            problems.push(Problem::error(&row.at, message).field(column));
        };
        let class = cell("class");
        if class.is_none() {
            bad(
                "class",
                "empty; expected the example's class (tumor, stroke, multiple sclerosis, normal or other \
                 abnormalities), the text shown to the model"
                    .into(),
            );
        }
        let Some(file_path) = cell("file_path") else {
            bad(
                "file_path",
                "empty; expected the example image's path, relative to the images root".into(),
            );
            continue;
        };
        // The runner keys its examples by path: a second row of one image would replace the first's class.
        if let Some(first) = examples.iter().find(|e| e.file_path == file_path) {
            bad(
                "file_path",
                format!(
                    "{file_path:?} is already the example of {}; each example needs its own image",
                    first.at
                ),
            );
            continue;
        }
        match (paths::resolve(&root, &file_path), class) {
            (Ok(image), Some(class)) => examples.push(FewShotExample {
                at: row.at.clone(),
                class,
                file_path,
                image,
            }),
            (Err(message), _) => bad("file_path", message),
            (Ok(_), None) => {}
        }
    }
    if examples.is_empty() && problems.is_empty() {
        problems.push(Problem::error(
            &file,
            "no rows; expected a header (file_path, class, ...) and one row per example image",
        ));
    }
    match problems.is_empty() {
        true => Ok(examples),
        false => Err(refused(&problems)),
    }
}

/// One error listing every problem, a line each.
fn refused(problems: &[Problem]) -> SuiteError {
    let lines: Vec<String> = problems.iter().map(Problem::to_string).collect();
    SuiteError::Spec(format!(
        "few-shot examples refused ({} problem(s)):\n  {}",
        problems.len(),
        lines.join("\n  ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn reads_the_authors_layout_in_file_order() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "data/ms/a 1.png", "png");
        write(dir.path(), "data/Other, T2/o.jpg", "jpg");
        let csv = write(
            dir.path(),
            "few.csv",
            "class,dataset,subclass,modality,modality_subtype,plane,file_path,original_class\n\
             multiple sclerosis,ms,,MRI,FLAIR,axial,ms/a 1.png,\n\
             other abnormalities,x,,MRI,T2,axial,\"Other, T2/o.jpg\",\"Other, T2\"\n",
        );
        let got = read_examples(&csv, Some(&dir.path().join("data"))).unwrap();
        let classes: Vec<&str> = got.iter().map(|e| e.class.as_str()).collect();
        assert_eq!(classes, ["multiple sclerosis", "other abnormalities"]);
        assert_eq!(got[1].file_path, "Other, T2/o.jpg");
        assert!(got[1].image.ends_with("Other, T2/o.jpg"));
        assert!(got[0].at.ends_with("few.csv:2"));
    }

    #[test]
    fn refuses_missing_columns_absent_images_and_empty_classes() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "a.png", "png");
        let no_class = write(dir.path(), "c.csv", "file_path,label\na.png,tumor\n");
        let e = read_examples(&no_class, None).unwrap_err().to_string();
        assert!(
            e.contains("c.csv") && e.contains("no column class") && e.contains("label"),
            "{e}"
        );
        let rows = write(
            dir.path(),
            "r.csv",
            "file_path,class\na.png,tumor\nmissing.png,stroke\na.png,normal\n,normal\na.png,\n",
        );
        let e = read_examples(&rows, None).unwrap_err().to_string();
        assert!(
            e.contains("r.csv:3: field file_path") && e.contains("not found"),
            "{e}"
        );
        assert!(
            e.contains("r.csv:4: field file_path") && e.contains("r.csv:2"),
            "{e}"
        );
        assert!(e.contains("r.csv:5: field file_path: empty"), "{e}");
        assert!(e.contains("r.csv:6: field class: empty"), "{e}");
    }
}
