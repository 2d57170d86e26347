//! The NeuroVLM-Bench answer keys. The label schema itself (classes, subtypes, ICD-10 prefixes, allowed values,
//! abstention spellings, aliases) lives in `nmb-suite` ([`nmb_suite::neurovlm_schema`]), shared with the
//! manifest loader.

pub use nmb_suite::neurovlm_schema::{norm, Class, Schema};

/// The nine keys an answer must have, in the order the template asks for them.
pub const KEYS: [&str; 9] = [
    "modality",
    "specialized_sequence",
    "plane",
    "diagnosis_name",
    "diagnosis_detailed",
    "icd10_code",
    "severity_score",
    "diagnosis_confidence",
    "severity_confidence",
];

/// The numeric keys, each a number in [0, 1].
pub const SCORES: [&str; 3] = [
    "severity_score",
    "diagnosis_confidence",
    "severity_confidence",
];
