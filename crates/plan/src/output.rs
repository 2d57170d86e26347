//! What answer shape each task family asks for, and the JSON schemas backends can enforce.
//!
//! The schemas follow the subset accepted by OpenAI structured outputs in strict mode (every property
//! required, `additionalProperties: false`, no `maxItems`); the "up to 5 diagnoses" limit is in the prompt.
//! Parsing answers, tolerantly, is `nmb-score`'s job.

use nmb_suite::Family;
use serde_json::{json, Value};

use crate::chat::OutputFormat;

/// `{"differential":[{"diagnosis","evidence"}], "final_diagnosis", "rationale"}`.
pub fn differential_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "differential": {
                "type": "array",
                "description": "Up to 5 diagnoses, most likely first.",
                "items": {
                    "type": "object",
                    "properties": {
                        "diagnosis": {"type": "string"},
                        "evidence": {"type": "string"}
                    },
                    "required": ["diagnosis", "evidence"],
                    "additionalProperties": false
                }
            },
            "final_diagnosis": {"type": "string"},
            "rationale": {"type": "string"}
        },
        "required": ["differential", "final_diagnosis", "rationale"],
        "additionalProperties": false
    })
}

/// `{"lesion_type", "location", "findings"}`.
/// A ranked differential as answer text, as a person's answer is stored: the JSON `differential_schema` asks models
/// for and the scorer reads first (`{"differential": [{"rank", "diagnosis"}], "final_diagnosis"}`), most likely
/// diagnosis first and final. Blank entries are dropped.
pub fn differential_answer(diagnoses: &[String]) -> String {
    let ranked: Vec<Value> = diagnoses
        .iter()
        .map(|d| d.trim())
        .filter(|d| !d.is_empty())
        .enumerate()
        .map(|(i, d)| json!({"rank": i + 1, "diagnosis": d}))
        .collect();
    let first = ranked.first().map(|r| r["diagnosis"].clone());
    let answer = json!({"differential": ranked, "final_diagnosis": first});
    serde_json::to_string_pretty(&answer).expect("JSON values serialise")
}

pub fn lesion_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "lesion_type": {"type": "string"},
            "location": {"type": "string"},
            "findings": {"type": "string"}
        },
        "required": ["lesion_type", "location", "findings"],
        "additionalProperties": false
    })
}

/// `{"diagnosis", "rationale"}`: the optional JSON form of a rationale answer (the output format stays text).
pub fn rationale_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "diagnosis": {"type": "string"},
            "rationale": {"type": "string"}
        },
        "required": ["diagnosis", "rationale"],
        "additionalProperties": false
    })
}

/// NeuroVLM-Bench's answer: nine keys, each nullable (null is an abstention). The allowed values are those of
/// `nmb-suite`'s `data/neurovlm.toml` (a test there checks they agree).
pub fn structured_schema() -> Value {
    let choice = |values: &[&str]| {
        let mut values: Vec<Value> = values.iter().map(|v| json!(v)).collect();
        values.push(Value::Null);
        json!({"type": ["string", "null"], "enum": values})
    };
    let unit = json!({"type": ["number", "null"], "minimum": 0, "maximum": 1});
    let text = json!({"type": ["string", "null"]});
    json!({
        "type": "object",
        "properties": {
            "modality": choice(STRUCTURED_MODALITIES),
            "specialized_sequence": choice(STRUCTURED_SEQUENCES),
            "plane": choice(STRUCTURED_PLANES),
            "diagnosis_name": choice(STRUCTURED_CLASSES),
            "diagnosis_detailed": text,
            "icd10_code": text,
            "severity_score": unit,
            "diagnosis_confidence": unit,
            "severity_confidence": unit,
        },
        "required": ["modality", "specialized_sequence", "plane", "diagnosis_name", "diagnosis_detailed",
                     "icd10_code", "severity_score", "diagnosis_confidence", "severity_confidence"],
        "additionalProperties": false
    })
}

/// Allowed values of the structured answer's categorical keys.
pub const STRUCTURED_MODALITIES: &[&str] = &["MRI", "CT"];
pub const STRUCTURED_SEQUENCES: &[&str] = &["FLAIR", "T1", "T2", "T1C+"];
pub const STRUCTURED_PLANES: &[&str] = &["axial", "sagittal", "coronal"];
pub const STRUCTURED_CLASSES: &[&str] = &[
    "multiple sclerosis",
    "stroke",
    "tumor",
    "other abnormalities",
    "normal",
];

/// The output format a family asks the backend for: JSON with a schema for differential diagnosis, lesion
/// recognition and NeuroVLM-Bench's structured answers, text for everything else (rationales are prose; VQA and
/// multiple choice are short answers).
pub fn output_format(family: Family) -> OutputFormat {
    match family {
        Family::Differential => OutputFormat::Json {
            schema: Some(differential_schema()),
        },
        Family::Lesion => OutputFormat::Json {
            schema: Some(lesion_schema()),
        },
        Family::Structured => OutputFormat::Json {
            schema: Some(structured_schema()),
        },
        Family::Rationale | Family::ClosedVqa | Family::OpenVqa | Family::MultipleChoice => {
            OutputFormat::Text
        }
    }
}

/// A short schema name for APIs that want one (OpenAI `json_schema.name`).
pub fn schema_name(family: Family) -> &'static str {
    match family {
        Family::Differential => "differential_diagnosis",
        Family::Lesion => "lesion_recognition",
        Family::Rationale => "rationale",
        Family::ClosedVqa => "closed_answer",
        Family::OpenVqa => "open_answer",
        Family::MultipleChoice => "choice",
        Family::Structured => "neurovlm_answer",
    }
}
