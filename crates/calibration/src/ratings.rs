//! Reading ratings from CSV: `annotator,item,dimension,score`, one rating per row.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::CalibrationError;

/// The columns a ratings file must have (any order, any letter case; other columns are ignored).
pub const REQUIRED_COLUMNS: [&str; 4] = ["annotator", "item", "dimension", "score"];

/// One rating.
#[derive(Debug, Clone, PartialEq)]
pub struct Rating {
    pub annotator: String,
    pub item: String,
    pub dimension: String,
    pub score: f64,
}

/// All ratings of a file, in file order.
#[derive(Debug, Clone, Default)]
pub struct Ratings {
    pub source: PathBuf,
    pub rows: Vec<Rating>,
}

impl Ratings {
    /// Reads and checks the whole file. Every problem is collected (file, line, column, what was expected), so one
    /// run lists them all.
    pub fn read_csv(path: &Path) -> Result<Ratings, CalibrationError> {
        let file = std::fs::File::open(path).map_err(|source| CalibrationError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_reader(path, file)
    }

    /// Like [`Ratings::read_csv`], from any reader; `path` only names the source in messages.
    pub fn from_reader(
        path: &Path,
        reader: impl std::io::Read,
    ) -> Result<Ratings, CalibrationError> {
        let mut csv = csv::ReaderBuilder::new()
            .trim(csv::Trim::All)
            .flexible(true)
            .from_reader(reader);
        let columns = header_columns(path, &mut csv)?;
        let mut problems = Vec::new();
        let mut rows = Vec::new();
        let mut seen: BTreeMap<(String, String, String), u64> = BTreeMap::new();
        for record in csv.records() {
            let record = match record {
                Ok(r) => r,
                Err(e) => {
                    problems.push(format!("{}: {e}", path.display()));
                    continue;
                }
            };
            let line = record.position().map_or(0, |p| p.line());
            let at = |column: &str| format!("{}:{line}: column {column}", path.display());
            match parse_row(&record, &columns, &at) {
                Ok(rating) => {
                    let key = (
                        rating.annotator.clone(),
                        rating.item.clone(),
                        rating.dimension.clone(),
                    );
                    if let Some(first) = seen.insert(key, line) {
                        problems.push(format!(
                            "{}:{line}: annotator {:?} rated item {:?} on dimension {:?} again (first on line \
                             {first}); expected one rating per annotator, item and dimension",
                            path.display(),
                            rating.annotator,
                            rating.item,
                            rating.dimension
                        ));
                    } else {
                        rows.push(rating);
                    }
                }
                Err(mut errors) => problems.append(&mut errors),
            }
        }
        if !problems.is_empty() {
            return Err(CalibrationError::Invalid { problems });
        }
        if rows.is_empty() {
            return Err(CalibrationError::Invalid {
                problems: vec![format!(
                    "{}: no ratings; expected rows of annotator,item,dimension,score after the header",
                    path.display()
                )],
            });
        }
        Ok(Ratings {
            source: path.to_path_buf(),
            rows,
        })
    }

    /// Dimensions in first-seen order.
    pub fn dimensions(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for r in &self.rows {
            if !out.contains(&r.dimension) {
                out.push(r.dimension.clone());
            }
        }
        out
    }
}

/// Column index of each required field.
struct Columns([usize; 4]);

fn header_columns<R: std::io::Read>(
    path: &Path,
    csv: &mut csv::Reader<R>,
) -> Result<Columns, CalibrationError> {
    let header = csv.headers().map_err(|e| CalibrationError::Invalid {
        problems: vec![format!("{}: cannot read the header: {e}", path.display())],
    })?;
    let names: Vec<String> = header.iter().map(|h| h.to_ascii_lowercase()).collect();
    let mut idx = [0; 4];
    let mut missing = Vec::new();
    for (slot, want) in idx.iter_mut().zip(REQUIRED_COLUMNS) {
        match names.iter().position(|n| n == want) {
            Some(i) => *slot = i,
            None => missing.push(want),
        }
    }
    if missing.is_empty() {
        return Ok(Columns(idx));
    }
    Err(CalibrationError::Invalid {
        problems: vec![format!(
            "{}:1: header lacks column(s) {}; expected a header naming {} (found: {})",
            path.display(),
            missing.join(", "),
            REQUIRED_COLUMNS.join(","),
            header.iter().collect::<Vec<_>>().join(",")
        )],
    })
}

fn parse_row(
    record: &csv::StringRecord,
    columns: &Columns,
    at: &dyn Fn(&str) -> String,
) -> Result<Rating, Vec<String>> {
    let mut problems = Vec::new();
    let mut text = |i: usize| {
        let name = REQUIRED_COLUMNS[i];
        match record.get(columns.0[i]).filter(|v| !v.is_empty()) {
            Some(v) => v.to_string(),
            None => {
                problems.push(format!("{}: empty or missing; expected a value", at(name)));
                String::new()
            }
        }
    };
    let (annotator, item, dimension, score) = (text(0), text(1), text(2), text(3));
    let score = match score.parse::<f64>() {
        Ok(v) if v.is_finite() => v,
        _ if score.is_empty() => f64::NAN,
        _ => {
            problems.push(format!(
                "{}: {score:?} is not a number; expected a finite score such as 3 or 0.5",
                at("score")
            ));
            f64::NAN
        }
    };
    if problems.is_empty() {
        Ok(Rating {
            annotator,
            item,
            dimension,
            score,
        })
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Ratings, CalibrationError> {
        Ratings::from_reader(Path::new("r.csv"), text.as_bytes())
    }

    #[test]
    fn header_in_any_order_and_case_with_extra_columns() {
        let r = read("Score,ITEM,note,annotator,dimension\n4,i1,x,dr_a,overall\n").unwrap();
        assert_eq!(
            r.rows,
            vec![Rating {
                annotator: "dr_a".into(),
                item: "i1".into(),
                dimension: "overall".into(),
                score: 4.0
            }]
        );
    }

    #[test]
    fn every_problem_is_listed_with_line_and_column() {
        let err = read(
            "annotator,item,dimension,score\n\
             dr_a,i1,overall,4\n\
             dr_a,i1,overall,5\n\
             dr_b,,overall,3\n\
             dr_c,i2,overall,high\n",
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("r.csv:3") && err.contains("again (first on line 2)"),
            "{err}"
        );
        assert!(err.contains("r.csv:4: column item: empty"), "{err}");
        assert!(
            err.contains("r.csv:5: column score: \"high\" is not a number"),
            "{err}"
        );
    }

    #[test]
    fn missing_columns_and_empty_files_are_errors() {
        let err = read("annotator,item,score\na,b,1\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("lacks column(s) dimension"), "{err}");
        let err = read("annotator,item,dimension,score\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no ratings"), "{err}");
    }
}
