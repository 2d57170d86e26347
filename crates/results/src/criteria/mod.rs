//! Criterion rubrics in the form HealthBench made common: per task, a list of criteria, each with an id, a
//! description, points (negative for harms) and tags (`axis:accuracy`, `theme:emergency`, ...). A judge decides
//! each criterion met or not met; the score of an answer is the points of the criteria it meets over the
//! positive points it could get ([`score`]). `nmb rubric lint` checks the signs and points (`nmb_score::criteria::lint`).
//!
//! Two file forms, told apart by extension (`docs/formats.md` has both):
//! - TOML (`.toml`), written like nmb's grading rubric: `id`, `version`, then `[[task]]` tables with an `id`
//!   and `[[task.criterion]]` tables with `id`, `criterion`, `points` and `tags`;
//! - JSON lines (`.jsonl`): one criterion per line (`{"task", "id"?, "criterion", "points", "tags"}`), or one
//!   task per line in HealthBench's own form (`{"prompt_id" or "task", "rubrics": [{"criterion", "points",
//!   "tags"}]}`, other fields ignored). Criteria without an `id` are numbered `c1`, `c2`, ... within their task.
//!
//! Every criterion keeps the line it was written on, so errors and lint findings name file and line.

pub mod score;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::ResultsError;

/// The criterion rubric of the bundled `sample` suite, `rubrics/sample-criteria-v1.toml`.
pub const SAMPLE_CRITERIA_V1: &str = include_str!("../../../../rubrics/sample-criteria-v1.toml");

/// A criterion rubric file, loaded.
#[derive(Debug, Clone, PartialEq)]
pub struct CriterionRubric {
    pub id: String,
    pub version: String,
    /// Task id -> its criteria, in file order.
    pub tasks: BTreeMap<String, Vec<Criterion>>,
    /// SHA-256 of the file's bytes.
    pub hash: String,
    /// Where it came from (a path).
    pub source: String,
}

/// One criterion of one task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criterion {
    pub id: String,
    /// What the answer must do (or, with negative points, must not do).
    pub criterion: String,
    pub points: f64,
    pub tags: Vec<String>,
    /// 1-based line in the file where the criterion is written.
    pub line: usize,
}

/// What identifies the criterion rubric a score used; recorded in the scoring configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriteriaInfo {
    pub id: String,
    pub version: String,
    pub hash: String,
    pub source: String,
    pub tasks: usize,
    pub criteria: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    id: String,
    version: String,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    task: Vec<RawTask>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    id: String,
    #[serde(default)]
    criterion: Vec<toml::Spanned<RawCriterion>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCriterion {
    #[serde(default)]
    id: Option<String>,
    criterion: String,
    points: f64,
    #[serde(default)]
    tags: Vec<String>,
}

impl CriterionRubric {
    /// The sample suite's criteria.
    pub fn sample() -> CriterionRubric {
        // Compiled in and checked by a unit test.
        CriterionRubric::parse(SAMPLE_CRITERIA_V1, "built-in:sample-criteria-v1.toml")
            .expect("the sample criteria are valid")
    }

    pub fn load(path: &Path) -> Result<CriterionRubric, ResultsError> {
        let text =
            nmb_suite::limits::read_to_string_io(path).map_err(|source| ResultsError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        CriterionRubric::parse(&text, &path.display().to_string())
    }

    /// Parses TOML, or JSON lines when `source` ends in `.jsonl`.
    pub fn parse(text: &str, source: &str) -> Result<CriterionRubric, ResultsError> {
        let (id, version, entries) = if source.ends_with(".jsonl") {
            parse_jsonl(text, source)?
        } else {
            parse_toml(text, source)?
        };
        let mut tasks: BTreeMap<String, Vec<Criterion>> = BTreeMap::new();
        for (task, mut c) in entries {
            let list = tasks.entry(task.clone()).or_default();
            if c.id.is_empty() {
                c.id = format!("c{}", list.len() + 1);
            }
            check_criterion(&task, &c, list, source)?;
            list.push(c);
        }
        if tasks.is_empty() {
            return Err(invalid(
                source,
                1,
                "expected at least one task with criteria".into(),
            ));
        }
        Ok(CriterionRubric {
            id,
            version,
            tasks,
            hash: hex::encode(Sha256::digest(text.as_bytes())),
            source: source.to_string(),
        })
    }

    pub fn info(&self) -> CriteriaInfo {
        CriteriaInfo {
            id: self.id.clone(),
            version: self.version.clone(),
            hash: self.hash.clone(),
            source: self.source.clone(),
            tasks: self.tasks.len(),
            criteria: self.tasks.values().map(Vec::len).sum(),
        }
    }

    /// The criteria of a task; empty when the rubric has none for it.
    pub fn for_task(&self, task_id: &str) -> &[Criterion] {
        self.tasks.get(task_id).map(Vec::as_slice).unwrap_or(&[])
    }
}

fn invalid(source: &str, line: usize, message: String) -> ResultsError {
    ResultsError::Criteria {
        source_name: source.to_string(),
        line,
        message,
    }
}

/// What makes a file unusable (as opposed to what lint warns about): ids, points that are numbers, a repeated
/// id within a task.
fn check_criterion(
    task: &str,
    c: &Criterion,
    before: &[Criterion],
    source: &str,
) -> Result<(), ResultsError> {
    let err = |m: String| {
        invalid(
            source,
            c.line,
            format!("task {task}, criterion {}: {m}", c.id),
        )
    };
    if task.trim().is_empty() {
        return Err(invalid(source, c.line, "a task id is empty".into()));
    }
    if !c
        .id
        .chars()
        .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
    {
        return Err(err("expected an id of letters, digits, '_' and '-'".into()));
    }
    if let Some(first) = before.iter().find(|b| b.id == c.id) {
        return Err(err(format!(
            "the id is used twice in this task (first on line {})",
            first.line
        )));
    }
    if c.criterion.trim().is_empty() {
        return Err(err(
            "\"criterion\" is empty; expected what the answer must (not) do".into(),
        ));
    }
    if !c.points.is_finite() {
        return Err(err(format!(
            "\"points\" is {}, expected a finite number",
            c.points
        )));
    }
    if let Some(t) = c
        .tags
        .iter()
        .find(|t| t.trim().is_empty() || t.contains(char::is_whitespace))
    {
        return Err(err(format!(
            "tag {t:?}: expected a word such as \"axis:accuracy\""
        )));
    }
    Ok(())
}

type Entries = Vec<(String, Criterion)>;

fn parse_toml(text: &str, source: &str) -> Result<(String, String, Entries), ResultsError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| line_of(text, s.start));
        let written =
            nmb_table::terminal::excerpt(text.lines().nth(line - 1).unwrap_or_default().trim());
        let message = nmb_table::terminal::excerpt_of(e.message().trim_end(), 500);
        invalid(source, line, format!("{message} (at `{written}`)"))
    })?;
    let _ = raw.title;
    let mut out = Vec::new();
    for task in raw.task {
        for c in task.criterion {
            let line = line_of(text, c.span().start);
            let c = c.into_inner();
            out.push((
                task.id.clone(),
                Criterion {
                    id: c.id.unwrap_or_default(),
                    criterion: c.criterion,
                    points: c.points,
                    tags: c.tags,
                    line,
                },
            ));
        }
    }
    Ok((raw.id, raw.version, out))
}

/// The 1-based line holding byte `offset`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

fn parse_jsonl(text: &str, source: &str) -> Result<(String, String, Entries), ResultsError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let row: Value = serde_json::from_str(line).map_err(|e| {
            invalid(
                source,
                n,
                format!("not valid JSON ({})", nmb_suite::limits::json_error(&e)),
            )
        })?;
        let Value::Object(obj) = row else {
            return Err(invalid(source, n, "expected a JSON object".into()));
        };
        let task = ["task", "task_id", "prompt_id"]
            .iter()
            .find_map(|k| obj.get(*k).and_then(Value::as_str))
            .ok_or_else(|| {
                invalid(
                    source,
                    n,
                    "expected \"task\" (or HealthBench's \"prompt_id\") naming the task".into(),
                )
            })?
            .to_string();
        match obj.get("rubrics") {
            Some(Value::Array(items)) => {
                for (k, item) in items.iter().enumerate() {
                    let c = jsonl_criterion(item, n).map_err(|m| {
                        invalid(source, n, format!("task {task}, rubrics[{k}]: {m}"))
                    })?;
                    out.push((task.clone(), c));
                }
            }
            Some(_) => return Err(invalid(source, n, "\"rubrics\" must be an array".into())),
            None => {
                let c = jsonl_criterion(&Value::Object(obj), n)
                    .map_err(|m| invalid(source, n, format!("task {task}: {m}")))?;
                out.push((task, c));
            }
        }
    }
    let stem = Path::new(source)
        .file_stem()
        .map_or_else(|| source.to_string(), |s| s.to_string_lossy().into_owned());
    Ok((stem, "1".into(), out))
}

fn jsonl_criterion(v: &Value, line: usize) -> Result<Criterion, String> {
    let criterion = v
        .get("criterion")
        .and_then(Value::as_str)
        .ok_or("expected \"criterion\": the text of the criterion")?;
    let points = v
        .get("points")
        .and_then(Value::as_f64)
        .ok_or("expected \"points\": a number, negative for harms")?;
    let tags = match v.get("tags") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|t| {
                t.as_str()
                    .map(str::to_string)
                    .ok_or("\"tags\" must be strings")
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err("\"tags\" must be an array of strings".into()),
    };
    let id = match v.get("id") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(_) => return Err("\"id\" must be a string".into()),
    };
    Ok(Criterion {
        id,
        criterion: criterion.to_string(),
        points,
        tags,
        line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sample_criteria_cover_every_sample_task() {
        let r = CriterionRubric::sample();
        let suite = nmb_suite::sample::build();
        for (_, task) in suite.tasks() {
            assert!(
                !r.for_task(&task.id).is_empty(),
                "no criteria for {}",
                task.id
            );
        }
        for id in r.tasks.keys() {
            assert!(
                suite.tasks().any(|(_, t)| &t.id == id),
                "{id} is not a sample task"
            );
        }
    }

    #[test]
    fn toml_criteria_keep_their_lines() {
        let text = "id = \"x\"\nversion = \"1\"\n\n[[task]]\nid = \"a/dx\"\n\n[[task.criterion]]\nid = \"one\"\n\
                    criterion = \"Names the diagnosis\"\npoints = 5\ntags = [\"axis:accuracy\"]\n\n\
                    [[task.criterion]]\ncriterion = \"Fails to mention the emergency\"\npoints = -3\n";
        let r = CriterionRubric::parse(text, "x.toml").unwrap();
        let c = r.for_task("a/dx");
        assert_eq!((c[0].id.as_str(), c[0].line), ("one", 7));
        assert_eq!((c[1].id.as_str(), c[1].line, c[1].points), ("c2", 13, -3.0));
    }

    #[test]
    fn healthbench_rows_and_single_criteria_read_the_same() {
        let hb = r#"{"prompt_id": "p1", "prompt": [], "rubrics": [{"criterion": "States X", "points": 5, "tags": ["axis:accuracy"]}, {"criterion": "Fails to say Y", "points": -2, "tags": []}], "example_tags": []}"#;
        let one = "{\"task\": \"p1\", \"criterion\": \"States X\", \"points\": 5, \"tags\": [\"axis:accuracy\"]}\n\
                   {\"task\": \"p1\", \"criterion\": \"Fails to say Y\", \"points\": -2}";
        let a = CriterionRubric::parse(hb, "hb.jsonl").unwrap();
        let b = CriterionRubric::parse(one, "one.jsonl").unwrap();
        assert_eq!(a.for_task("p1")[1].id, "c2");
        assert_eq!(a.for_task("p1")[1].line, 1);
        assert_eq!(b.for_task("p1")[1].line, 2);
        let strip = |r: &CriterionRubric| -> Vec<(String, f64)> {
            r.for_task("p1")
                .iter()
                .map(|c| (c.criterion.clone(), c.points))
                .collect()
        };
        assert_eq!(strip(&a), strip(&b));
    }

    #[test]
    fn bad_files_name_file_and_line() {
        let cases = [
            ("x.jsonl", "{\"task\": \"a\", \"criterion\": \"S\", \"points\": 1}\n{\"task\": \"a\", \"criterion\": \"T\"}", "x.jsonl, line 2", "points"),
            ("x.jsonl", "{\"task\": \"a\"\n", "x.jsonl, line 1", "JSON"),
            ("x.toml", "id = \"x\"\nversion = \"1\"\n[[task]]\nid = \"a\"\n[[task.criterion]]\ncriterion = \"S\"\npoints = \"five\"\n", "x.toml, line 7", "points"),
            ("x.toml", "id = \"x\"\nversion = \"1\"\n[[task]]\nid = \"a\"\n[[task.criterion]]\nid = \"k\"\ncriterion = \"S\"\npoints = 1\n[[task.criterion]]\nid = \"k\"\ncriterion = \"T\"\npoints = 1\n", "x.toml, line 9", "used twice"),
            ("x.toml", "id = \"x\"\nversion = \"1\"\n", "x.toml, line 1", "at least one task"),
        ];
        for (name, text, place, what) in cases {
            let e = CriterionRubric::parse(text, name).unwrap_err().to_string();
            assert!(e.contains(place) && e.contains(what), "{name}: {e}");
        }
    }
}
