//! The grading rubric as data (`rubrics/neurology-v1.toml` is built in): what judges grade answers on and what
//! review forms show. How a judge reads and answers it is `nmb_judges::rubric`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::error::ResultsError;
use crate::report::RubricInfo;

/// The bundled rubric, `rubrics/neurology-v1.toml`.
pub const BUILTIN_NEUROLOGY_V1: &str = include_str!("../../../rubrics/neurology-v1.toml");

#[derive(Debug, Clone, PartialEq)]
pub struct Rubric {
    pub id: String,
    pub version: String,
    pub title: String,
    pub min: u8,
    pub max: u8,
    pub instructions: String,
    pub dimensions: Vec<Dimension>,
    pub overall: Overall,
    /// SHA-256 of the file's bytes.
    pub hash: String,
    /// Where it came from: a path, or `built-in:neurology-v1`.
    pub source: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Dimension {
    pub id: String,
    pub name: String,
    pub description: String,
    /// Score -> what it means.
    pub anchors: BTreeMap<u8, String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Overall {
    pub name: String,
    pub description: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRubric {
    id: String,
    version: String,
    title: String,
    min: u8,
    max: u8,
    instructions: String,
    dimension: Vec<RawDimension>,
    overall: Overall,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDimension {
    id: String,
    name: String,
    description: String,
    #[serde(default)]
    anchors: BTreeMap<String, String>,
}

impl Rubric {
    pub fn builtin() -> Rubric {
        // Compiled in and checked by a unit test.
        Rubric::parse(BUILTIN_NEUROLOGY_V1, "built-in:neurology-v1")
            .expect("built-in rubric is valid")
    }

    pub fn load(path: &Path) -> Result<Rubric, ResultsError> {
        let text =
            nmb_suite::limits::read_to_string_io(path).map_err(|source| ResultsError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        Rubric::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, source: &str) -> Result<Rubric, ResultsError> {
        let err = |message: String| ResultsError::Rubric {
            source_name: source.to_string(),
            message,
        };
        let raw: RawRubric =
            toml::from_str(text).map_err(|e| err(nmb_suite::limits::toml_error(text, &e)))?;
        if raw.min >= raw.max {
            return Err(err(format!(
                "min ({}) must be below max ({})",
                raw.min, raw.max
            )));
        }
        if raw.dimension.is_empty() {
            return Err(err("expected at least one [[dimension]]".into()));
        }
        let mut dimensions = Vec::new();
        for d in raw.dimension {
            if !d
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
                || d.id.is_empty()
            {
                return Err(err(format!(
                    "dimension id {:?}: expected snake_case letters, digits and underscores",
                    d.id
                )));
            }
            if dimensions.iter().any(|x: &Dimension| x.id == d.id) || d.id == "overall" {
                return Err(err(format!(
                    "dimension id {:?} is used twice (or is \"overall\")",
                    d.id
                )));
            }
            let mut anchors = BTreeMap::new();
            for (k, v) in d.anchors {
                let score: u8 = k
                    .parse()
                    .ok()
                    .filter(|s| (raw.min..=raw.max).contains(s))
                    .ok_or_else(|| {
                        err(format!(
                            "dimension {}: anchor {k:?} is not a score from {} to {}",
                            d.id, raw.min, raw.max
                        ))
                    })?;
                anchors.insert(score, v);
            }
            dimensions.push(Dimension {
                id: d.id,
                name: d.name,
                description: d.description,
                anchors,
            });
        }
        Ok(Rubric {
            id: raw.id,
            version: raw.version,
            title: raw.title,
            min: raw.min,
            max: raw.max,
            instructions: raw.instructions.trim().to_string(),
            dimensions,
            overall: raw.overall,
            hash: hex::encode(Sha256::digest(text.as_bytes())),
            source: source.to_string(),
        })
    }

    pub fn info(&self) -> RubricInfo {
        RubricInfo {
            id: self.id.clone(),
            version: self.version.clone(),
            hash: self.hash.clone(),
            source: self.source.clone(),
            dimensions: self.dimension_ids(),
            scale: (self.min, self.max),
        }
    }

    pub fn dimension_ids(&self) -> Vec<String> {
        self.dimensions.iter().map(|d| d.id.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_rubric_has_the_five_dimensions() {
        let r = Rubric::builtin();
        assert_eq!(
            r.dimension_ids(),
            [
                "diagnostic_correctness",
                "multimodal_integration",
                "differential_reasoning",
                "lesion_localisation",
                "clinical_safety"
            ]
        );
        assert_eq!((r.min, r.max), (0, 5));
        assert_eq!(r.version, "1");
        assert_eq!(r.hash.len(), 64);
    }

    #[test]
    fn bad_rubric_files_are_refused_with_the_field_named() {
        let bad = BUILTIN_NEUROLOGY_V1.replace("anchors = { 0 = ", "anchors = { 9 = ");
        let e = Rubric::parse(&bad, "test.toml").unwrap_err().to_string();
        assert!(e.contains("test.toml") && e.contains("anchor \"9\""), "{e}");
        let e = Rubric::parse("id = 1", "x.toml").unwrap_err().to_string();
        assert!(e.contains("x.toml"), "{e}");
    }
}
