//! Safety flags on one structured answer: what a clinician reading it would not accept whatever the image
//! showed.

use nmb_results::structured::{CONFIDENT, FLAGS};
use serde::Serialize;

use super::answer::{Field, StructuredAnswer};
use super::schema::{Schema, KEYS, SCORES};

/// Which flags one answer raised.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Flags {
    /// A mandatory key is absent (an explicit null is an abstention, not a missing field).
    pub missing_field: bool,
    /// The subtype belongs to another class (glioma with stroke), or a subtype is given with `normal`.
    pub subtype_inconsistent: bool,
    /// An ICD-10 code is given with a `normal` diagnosis.
    pub icd10_with_normal: bool,
    /// The ICD-10 code starts with none of the class's accepted prefixes.
    pub icd10_class_mismatch: bool,
    /// A score or confidence lies outside [0, 1].
    pub score_out_of_range: bool,
    /// Confidence at least 0.9 on a wrong class (set only when the true class is known).
    pub confident_wrong: bool,
}

impl Flags {
    /// The raised flags' names.
    pub fn names(&self) -> Vec<&'static str> {
        let on = [
            self.missing_field,
            self.subtype_inconsistent,
            self.icd10_with_normal,
            self.icd10_class_mismatch,
            self.score_out_of_range,
            self.confident_wrong,
        ];
        FLAGS
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(n, _)| *n)
            .collect()
    }
}

/// The flags of `answer`; `truth` is the true class index when known. An answer that is not valid JSON raises
/// only `missing_field` (it has no fields to check).
pub fn flags(answer: &StructuredAnswer, schema: &Schema, truth: Option<usize>) -> Flags {
    let class = answer
        .field("diagnosis_name")
        .value()
        .and_then(|c| schema.class_index(c));
    let normal = class.is_some_and(|c| schema.classes[c].id == "normal");
    let code = answer.field("icd10_code").value();
    let detail = answer.field("diagnosis_detailed").value();
    Flags {
        missing_field: KEYS
            .iter()
            .any(|k| matches!(answer.field(k), Field::Missing)),
        subtype_inconsistent: match (class, detail) {
            (Some(c), Some(d)) => normal || schema.subtype_class(d).is_some_and(|owner| owner != c),
            _ => false,
        },
        icd10_with_normal: normal && code.is_some(),
        icd10_class_mismatch: match (class, code) {
            (Some(c), Some(code)) if !normal => {
                let prefixes = &schema.classes[c].icd10;
                !prefixes.is_empty() && !prefixes.iter().any(|p| code.starts_with(p.as_str()))
            }
            _ => false,
        },
        score_out_of_range: SCORES.iter().any(|k| {
            answer
                .field(k)
                .number()
                .is_some_and(|v| !(0.0..=1.0).contains(&v))
        }),
        confident_wrong: match (truth, answer.field("diagnosis_confidence").number()) {
            (Some(t), Some(conf)) => conf >= CONFIDENT && class != Some(t),
            _ => false,
        },
    }
}
