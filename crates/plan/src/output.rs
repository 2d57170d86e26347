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

/// The output format a family asks the backend for: JSON with a schema for differential diagnosis and lesion
/// recognition, text for everything else (rationales are prose; VQA and multiple choice are short answers).
pub fn output_format(family: Family) -> OutputFormat {
    match family {
        Family::Differential => OutputFormat::Json {
            schema: Some(differential_schema()),
        },
        Family::Lesion => OutputFormat::Json {
            schema: Some(lesion_schema()),
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
    }
}
