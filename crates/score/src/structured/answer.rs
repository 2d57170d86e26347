//! One model answer read strictly against the schema: valid JSON or not (never repaired into a guess), and for
//! each of the nine keys a value, an abstention, an invalid value (with why), or nothing at all.

use serde::Serialize;
use serde_json::{Map, Value};

use super::schema::{norm, Schema, KEYS, SCORES};

/// What one key of an answer held.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Field {
    /// A valid value, in canonical form (`MRI`, `stroke`, `glioma`, `I63.9`).
    Value { value: String },
    /// A number (the three scores), as given; it may lie outside [0, 1] (a safety flag, not a parse error).
    Number { value: f64 },
    /// null, "none", "unknown", "" and the other abstention spellings.
    Abstain,
    /// Present but not a valid value for this key.
    Invalid { reason: String },
    /// The key is not in the object.
    Missing,
}

impl Field {
    pub fn value(&self) -> Option<&str> {
        match self {
            Field::Value { value } => Some(value),
            _ => None,
        }
    }

    pub fn number(&self) -> Option<f64> {
        match self {
            Field::Number { value } => Some(*value),
            _ => None,
        }
    }
}

/// A parsed answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StructuredAnswer {
    /// The text was one JSON object (optionally inside one ```json fence and nothing else).
    pub valid_json: bool,
    /// Why the text is not valid JSON, when it is not.
    pub json_error: Option<String>,
    /// Each of [`KEYS`], in order.
    pub fields: Vec<(String, Field)>,
    /// Keys the schema does not have.
    pub unexpected_keys: Vec<String>,
}

impl StructuredAnswer {
    pub fn field(&self, key: &str) -> &Field {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, f)| f)
            .unwrap_or(&Field::Missing)
    }

    /// Valid JSON, no unexpected key, and every key present with a valid value or an abstention.
    pub fn schema_valid(&self) -> bool {
        self.valid_json
            && self.unexpected_keys.is_empty()
            && self
                .fields
                .iter()
                .all(|(_, f)| !matches!(f, Field::Invalid { .. } | Field::Missing))
    }
}

/// Reads `text` as a NeuroVLM-Bench answer.
pub fn parse_answer(text: &str, schema: &Schema) -> StructuredAnswer {
    let object = match json_object(text) {
        Ok(object) => object,
        Err(reason) => {
            return StructuredAnswer {
                valid_json: false,
                json_error: Some(reason),
                fields: KEYS
                    .iter()
                    .map(|k| (k.to_string(), Field::Missing))
                    .collect(),
                unexpected_keys: Vec::new(),
            }
        }
    };
    let fields = KEYS
        .iter()
        .map(|&k| (k.to_string(), read_field(k, object.get(k), schema)))
        .collect();
    let unexpected_keys = object
        .keys()
        .filter(|k| !KEYS.contains(&k.as_str()))
        .cloned()
        .collect();
    StructuredAnswer {
        valid_json: true,
        json_error: None,
        fields,
        unexpected_keys,
    }
}

/// The one JSON object the text is. A single surrounding Markdown fence is allowed (it changes no content);
/// anything else around or inside the object makes the answer invalid.
fn json_object(text: &str) -> Result<Map<String, Value>, String> {
    let trimmed = text.trim();
    let inner = unfence(trimmed).unwrap_or(trimmed);
    match serde_json::from_str::<Value>(inner) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!("expected a JSON object, got {}", kind(&other))),
        Err(e) => Err(format!(
            "not valid JSON: {}",
            nmb_suite::limits::json_error(&e)
        )),
    }
}

fn unfence(text: &str) -> Option<&str> {
    let body = text.strip_prefix("```")?.strip_suffix("```")?;
    let body = body.strip_prefix("json").unwrap_or(body);
    Some(body.trim())
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

fn read_field(key: &str, value: Option<&Value>, schema: &Schema) -> Field {
    let Some(value) = value else {
        return Field::Missing;
    };
    if value.is_null() {
        return Field::Abstain;
    }
    if SCORES.contains(&key) {
        return read_score(value, schema);
    }
    let Value::String(text) = value else {
        return Field::Invalid {
            reason: format!("expected a string or null, got {}", kind(value)),
        };
    };
    if schema.is_abstention(text) {
        return Field::Abstain;
    }
    match key {
        "diagnosis_name" => match schema.class_index(text) {
            Some(i) => Field::Value {
                value: schema.classes[i].id.clone(),
            },
            None => invalid(text, &class_names(schema)),
        },
        "diagnosis_detailed" => Field::Value {
            value: schema.canonical(text),
        },
        "icd10_code" => read_icd10(text),
        field => match schema.field_value(field, text) {
            Some(v) => Field::Value { value: v },
            None => invalid(
                text,
                &schema
                    .fields
                    .get(field)
                    .cloned()
                    .unwrap_or_default()
                    .join(", "),
            ),
        },
    }
}

fn read_score(value: &Value, schema: &Schema) -> Field {
    match value {
        Value::Number(n) => match n.as_f64() {
            Some(v) if v.is_finite() => Field::Number { value: v },
            _ => Field::Invalid {
                reason: format!("{n} is not a finite number"),
            },
        },
        // A number written as a string ("0.8") is not repaired: the schema says number.
        Value::String(s) if schema.is_abstention(s) => Field::Abstain,
        other => Field::Invalid {
            reason: format!("expected a number in [0, 1] or null, got {}", kind(other)),
        },
    }
}

fn read_icd10(text: &str) -> Field {
    let code = text.trim().to_uppercase();
    let bytes = code.as_bytes();
    let shape = bytes.len() >= 3
        && bytes[0].is_ascii_uppercase()
        && bytes[1].is_ascii_digit()
        && bytes[2].is_ascii_alphanumeric()
        && match code.get(3..) {
            None | Some("") => true,
            Some(rest) => {
                rest.starts_with('.')
                    && (2..=5).contains(&rest.len())
                    && rest[1..].bytes().all(|b| b.is_ascii_alphanumeric())
            }
        };
    if shape {
        Field::Value { value: code }
    } else {
        Field::Invalid {
            reason: format!("{text:?} is not an ICD-10 code; expected a letter, two characters and an optional .suffix, e.g. I63.9"),
        }
    }
}

fn invalid(text: &str, expected: &str) -> Field {
    Field::Invalid {
        reason: format!(
            "{:?} is not allowed here; expected one of: {expected}, or null",
            norm(text)
        ),
    }
}

fn class_names(schema: &Schema) -> String {
    schema
        .classes
        .iter()
        .map(|c| {
            c.names
                .first()
                .cloned()
                .unwrap_or_else(|| c.id.clone())
                .replace('_', " ")
        })
        .collect::<Vec<_>>()
        .join(", ")
}
