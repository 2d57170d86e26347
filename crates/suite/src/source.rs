//! Where a suite comes from and how it is loaded: the typed form of `--suite`, `--answers`, `--filter`, `--level`
//! and `--map`, as an evaluation records it and as scoring loads the same suite again.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{
    group_problems, load, Filter, Level, LoadOptions, Loaded, Problem, ProblemGroup, SuiteError,
};

/// A suite and its load options. Serialised with filters and map entries as the strings a user types
/// (`family=differential`, `diagnosis_name=label`), so a recorded source reads like the command that made it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// `sample`, a path whose format is detected, or `FORMAT:PATH`.
    pub spec: String,
    /// An answer-key JSONL joined by `case_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answers: Option<PathBuf>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "display_all",
        deserialize_with = "parse_all"
    )]
    pub filters: Vec<Filter>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<Level>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "maps_as_strings",
        deserialize_with = "maps_from_strings"
    )]
    pub map: Vec<(String, String)>,
    /// The folder a `neurovlm:` manifest's image paths are relative to, where it is not the manifest's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images_root: Option<PathBuf>,
    /// The split of a Hugging Face `datasets` folder or cached dataset (`hf-disk:`, `hf-cache:`), where it has
    /// several.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<String>,
}

/// Why a suite cannot be evaluated: it could not be read, it has errors, or nothing is left to ask.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot load suite {spec}: {source}")]
    Load {
        spec: String,
        #[source]
        source: Box<SuiteError>,
    },
    #[error(
        "suite {spec} has {count} error(s); fix them first (`nmb suite validate {spec}` lists every one):{}",
        grouped(.groups)
    )]
    HasErrors {
        spec: String,
        count: usize,
        /// The errors counted by kind, with the first few of each.
        groups: Vec<ProblemGroup>,
    },
    #[error("suite {spec} has no tasks to run (check --filter){}", listed(.problems, .problems.len()))]
    NoTasks {
        spec: String,
        problems: Vec<Problem>,
    },
}

/// How many problems an error lists before it says how many more there are.
const LISTED: usize = 20;

/// How many examples of each kind of error are listed.
const EXAMPLES: usize = 3;

/// One line per kind of error with its count, then its first examples.
fn grouped(groups: &[ProblemGroup]) -> String {
    let mut out = String::new();
    for g in groups {
        out.push_str(&format!("\n  {} × {}, e.g.", g.count, g.group));
        for p in &g.examples {
            out.push_str(&format!("\n    {p}"));
        }
    }
    out
}

fn listed(problems: &[Problem], count: usize) -> String {
    let mut out: String = problems
        .iter()
        .take(LISTED)
        .map(|p| format!("\n  {p}"))
        .collect();
    if count > LISTED {
        out.push_str(&format!("\n  ... and {} more", count - LISTED));
    }
    out
}

impl Source {
    pub fn new(spec: impl Into<String>) -> Self {
        Source {
            spec: spec.into(),
            ..Source::default()
        }
    }

    /// The options the loaders take. `text_only`: the suite will be asked without images, so SLAKE keeps the
    /// questions of a missing image.
    pub fn options(&self, text_only: bool) -> LoadOptions {
        LoadOptions {
            filters: self.filters.clone(),
            answers: self.answers.clone(),
            level: self.level,
            map: self.map.clone(),
            images_root: self.images_root.clone(),
            text_only,
            split: self.split.clone(),
        }
    }

    /// Loads the suite with every problem found; only an unreadable or unparseable file is an error.
    pub fn load(&self, text_only: bool) -> Result<Loaded, SourceError> {
        load(&self.spec, &self.options(text_only)).map_err(|source| SourceError::Load {
            spec: self.spec.clone(),
            source: Box::new(source),
        })
    }

    /// Loads a suite to evaluate: one with errors is refused (a run on a half-read suite gives numbers nobody can
    /// trust), and so is one left without tasks, with the problems that say why.
    pub fn load_checked(&self, text_only: bool) -> Result<Loaded, SourceError> {
        let loaded = self.load(text_only)?;
        let errors: Vec<Problem> = loaded
            .problems
            .iter()
            .filter(|p| p.is_error())
            .cloned()
            .collect();
        if !errors.is_empty() {
            return Err(SourceError::HasErrors {
                spec: self.spec.clone(),
                count: errors.len(),
                groups: group_problems(&errors, EXAMPLES),
            });
        }
        if loaded.suite.task_count() == 0 {
            // A loader may have dropped every task on purpose (SLAKE without its images); its warnings say why.
            return Err(SourceError::NoTasks {
                spec: self.spec.clone(),
                problems: loaded.problems,
            });
        }
        Ok(loaded)
    }

    /// The same source with its paths made absolute where they exist here, so that a worker or a later scoring
    /// started from another directory finds them. `sample` and paths that do not exist stay as typed.
    pub fn absolute(&self) -> Source {
        Source {
            spec: absolute_spec(&self.spec),
            answers: self
                .answers
                .as_ref()
                .map(|a| std::path::absolute(a).unwrap_or_else(|_| a.clone())),
            images_root: self
                .images_root
                .as_ref()
                .map(|a| std::path::absolute(a).unwrap_or_else(|_| a.clone())),
            ..self.clone()
        }
    }
}

/// The spec with its path made absolute (`FORMAT:PATH` or `PATH`).
pub fn absolute_spec(spec: &str) -> String {
    let absolute = |p: &str| {
        let path = Path::new(p);
        path.exists()
            .then(|| std::path::absolute(path).ok())
            .flatten()
            .map(|a| a.display().to_string())
    };
    if let Some(a) = absolute(spec) {
        return a;
    }
    match spec.split_once(':') {
        Some((format, rest)) => match absolute(rest) {
            Some(a) => format!("{format}:{a}"),
            None => spec.to_string(),
        },
        None => spec.to_string(),
    }
}

/// `FIELD=COLUMN`.
pub fn parse_map(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((f, c)) if !f.trim().is_empty() && !c.trim().is_empty() => {
            Ok((f.trim().to_string(), c.trim().to_string()))
        }
        _ => Err(format!(
            "bad --map {s:?}; expected FIELD=COLUMN, e.g. diagnosis_name=label"
        )),
    }
}

fn display_all<S: Serializer>(filters: &[Filter], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(filters.iter().map(|f| f.to_string()))
}

fn parse_all<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Filter>, D::Error> {
    let strings = Vec::<String>::deserialize(d)?;
    strings
        .iter()
        .map(|f| f.parse().map_err(serde::de::Error::custom))
        .collect()
}

fn maps_as_strings<S: Serializer>(map: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(map.iter().map(|(f, c)| format!("{f}={c}")))
}

fn maps_from_strings<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, String)>, D::Error> {
    let strings = Vec::<String>::deserialize(d)?;
    strings
        .iter()
        .map(|m| parse_map(m).map_err(serde::de::Error::custom))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_source_round_trips_through_json_as_typed_strings() {
        let source = Source {
            spec: "sample".into(),
            answers: Some(PathBuf::from("/a/answers.jsonl")),
            filters: vec!["family=differential".parse().unwrap()],
            level: Some(Level::Complex),
            map: vec![("diagnosis_name".into(), "label".into())],
            images_root: Some(PathBuf::from("/data/neurovlm")),
            split: Some("test".into()),
        };
        let text = serde_json::to_string(&source).unwrap();
        assert!(
            text.contains(r#""filters":["family=differential"]"#),
            "{text}"
        );
        assert!(text.contains(r#""map":["diagnosis_name=label"]"#), "{text}");
        let back: Source = serde_json::from_str(&text).unwrap();
        assert_eq!(back, source);
        let bare: Source = serde_json::from_str(r#"{"spec":"sample"}"#).unwrap();
        assert_eq!(bare, Source::new("sample"));
    }

    #[test]
    fn a_suite_left_without_tasks_is_refused_with_the_reason() {
        let mut source = Source::new("sample");
        source.filters = vec!["family=no-such-family".parse().unwrap()];
        let err = source.load_checked(false).unwrap_err();
        assert!(matches!(err, SourceError::NoTasks { .. }), "{err}");
        assert!(err.to_string().contains("no tasks to run"), "{err}");
    }
}
