//! The grading rubric as data (`rubrics/neurology-v1.toml` is built in), and strict validation of a judge's
//! rubric answer against it.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{json, Map, Value};
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

/// One judge's valid rubric answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Grade {
    pub scores: BTreeMap<String, u8>,
    pub overall: u8,
    pub rationale: String,
}

impl Rubric {
    pub fn builtin() -> Rubric {
        // Compiled in and checked by a unit test.
        Rubric::parse(BUILTIN_NEUROLOGY_V1, "built-in:neurology-v1")
            .expect("built-in rubric is valid")
    }

    pub fn load(path: &Path) -> Result<Rubric, ResultsError> {
        let text = std::fs::read_to_string(path).map_err(|source| ResultsError::Read {
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
        let raw: RawRubric = toml::from_str(text).map_err(|e| err(e.to_string()))?;
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

    /// The rubric as the judge reads it.
    pub fn render(&self) -> String {
        let mut s = format!(
            "Rubric: {} (id {}, version {})\n{}\n\nDimensions (each scored {} to {}):\n",
            self.title, self.id, self.version, self.instructions, self.min, self.max
        );
        for d in &self.dimensions {
            s.push_str(&format!("- {} ({}): {}\n", d.id, d.name, d.description));
            for (score, meaning) in &d.anchors {
                s.push_str(&format!("    {score} = {meaning}\n"));
            }
        }
        s.push_str(&format!(
            "- overall ({}): {}\n",
            self.overall.name, self.overall.description
        ));
        s
    }

    /// The JSON a judge must answer with, as an example line.
    pub fn answer_example(&self) -> String {
        let dims: Vec<String> = self
            .dimensions
            .iter()
            .map(|d| format!("\"{}\": <{}-{}>", d.id, self.min, self.max))
            .collect();
        format!(
            "{{\"scores\": {{{}}}, \"overall\": <{}-{}>, \"rationale\": \"<two or three sentences>\"}}",
            dims.join(", "),
            self.min,
            self.max
        )
    }

    pub fn schema(&self) -> Value {
        let score = json!({"type": "integer", "minimum": self.min, "maximum": self.max});
        let props: Map<String, Value> = self
            .dimensions
            .iter()
            .map(|d| (d.id.clone(), score.clone()))
            .collect();
        json!({
            "type": "object",
            "properties": {
                "scores": {
                    "type": "object",
                    "properties": props,
                    "required": self.dimension_ids(),
                    "additionalProperties": false
                },
                "overall": score,
                "rationale": {"type": "string"}
            },
            "required": ["scores", "overall", "rationale"],
            "additionalProperties": false
        })
    }

    /// Strict validation of a judge's answer: one JSON object (a single code fence around it is tolerated),
    /// every dimension present exactly once as an integer within the scale, an overall score, a rationale, and
    /// nothing else.
    pub fn validate(&self, text: &str) -> Result<Grade, String> {
        let obj = strict_json_object(text)?;
        check_keys(&obj, &["scores", "overall", "rationale"])?;
        let Some(Value::Object(scores)) = obj.get("scores") else {
            return Err("\"scores\" must be an object with one integer per dimension".into());
        };
        let ids = self.dimension_ids();
        if let Some(extra) = scores.keys().find(|k| !ids.contains(k)) {
            return Err(format!(
                "\"scores\" has unknown dimension {extra:?}; the dimensions are {}",
                ids.join(", ")
            ));
        }
        let mut out = BTreeMap::new();
        for id in &ids {
            let v = scores
                .get(id)
                .ok_or_else(|| format!("\"scores\" is missing dimension {id:?}"))?;
            out.insert(id.clone(), self.score(id, v)?);
        }
        let overall = self.score("overall", &obj["overall"])?;
        let rationale = match &obj["rationale"] {
            Value::String(s) if !s.trim().is_empty() => s.trim().to_string(),
            _ => return Err("\"rationale\" must be a non-empty string".into()),
        };
        Ok(Grade {
            scores: out,
            overall,
            rationale,
        })
    }

    fn score(&self, what: &str, v: &Value) -> Result<u8, String> {
        let n = v
            .as_f64()
            .filter(|f| f.fract() == 0.0)
            .ok_or_else(|| format!("{what:?} must be an integer, got {v}"))?;
        if n < f64::from(self.min) || n > f64::from(self.max) {
            return Err(format!(
                "{what:?} is {n}, outside {}..={}",
                self.min, self.max
            ));
        }
        Ok(n as u8)
    }
}

/// The text as exactly one JSON object, allowing one surrounding ```json fence and whitespace, nothing else.
pub fn strict_json_object(text: &str) -> Result<Map<String, Value>, String> {
    let mut t = text.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let rest = rest.strip_prefix("json").unwrap_or(rest);
        t = rest
            .trim()
            .strip_suffix("```")
            .ok_or("an opening code fence without a closing one")?
            .trim();
    }
    match serde_json::from_str::<Value>(t) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!("expected a JSON object, got {}", kind(&other))),
        Err(e) => Err(format!("not valid JSON ({e})")),
    }
}

/// Every expected key present, no other key.
pub fn check_keys(obj: &Map<String, Value>, expected: &[&str]) -> Result<(), String> {
    if let Some(k) = expected.iter().find(|k| !obj.contains_key(**k)) {
        return Err(format!("missing field {k:?}"));
    }
    if let Some(k) = obj.keys().find(|k| !expected.contains(&k.as_str())) {
        return Err(format!(
            "unexpected field {k:?}; expected only {}",
            expected.join(", ")
        ));
    }
    Ok(())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid_answer() -> String {
        r#"{"scores": {"diagnostic_correctness": 5, "multimodal_integration": 4, "differential_reasoning": 3,
            "lesion_localisation": 4.0, "clinical_safety": 5}, "overall": 4, "rationale": "Good."}"#
            .to_string()
    }

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
        assert!(r.render().contains("clinical_safety"));
    }

    #[test]
    fn valid_answers_pass_and_fenced_ones_too() {
        let r = Rubric::builtin();
        let g = r.validate(&valid_answer()).unwrap();
        assert_eq!(g.scores["lesion_localisation"], 4);
        assert_eq!(g.overall, 4);
        assert!(r
            .validate(&format!("```json\n{}\n```", valid_answer()))
            .is_ok());
    }

    #[test]
    fn invalid_answers_say_what_is_wrong() {
        let r = Rubric::builtin();
        let cases = [
            ("Overall I'd give it a 4.", "not valid JSON"),
            (
                &format!("Here: {}", valid_answer()) as &str,
                "not valid JSON",
            ),
            (
                &valid_answer().replace("\"clinical_safety\": 5", "\"safety\": 5"),
                "unknown dimension",
            ),
            (
                &valid_answer().replace(", \"clinical_safety\": 5", ""),
                "missing dimension",
            ),
            (
                &valid_answer().replace("\"overall\": 4", "\"overall\": 6"),
                "outside",
            ),
            (
                &valid_answer().replace("\"overall\": 4", "\"overall\": 3.5"),
                "integer",
            ),
            (&valid_answer().replace("\"Good.\"", "\"\""), "rationale"),
            (
                &valid_answer().replace("\"overall\": 4,", "\"overall\": 4, \"extra\": 1,"),
                "unexpected field",
            ),
            ("[1, 2]", "JSON object"),
        ];
        for (text, want) in cases {
            let e = r.validate(text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
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
