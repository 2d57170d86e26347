//! The NeuroVLM-Bench section of a score report (arXiv 2603.24846): per-field metrics with abstentions, the
//! `diagnosis_name` confusion matrix, calibration, safety-flag rates and efficiency (`structured`), and each
//! answer's verdict (`samples[].structured`); with [`paper`], the same answers as the paper's evaluator reads
//! them. The efficiency figures ([`efficiency`]) are computed here, since a report recomputes them at its own
//! price.

pub mod paper;

use std::collections::BTreeMap;

use nmb_stats::{
    bootstrap, BootstrapConfig, CalibrationEstimates, ClassEstimates, Design, Estimate,
};
use serde::{Deserialize, Serialize};

use crate::cost::Price;
use crate::error::ResultsError;

/// The scored fields, in report order.
pub const FIELDS: [&str; 6] = [
    "modality",
    "specialized_sequence",
    "plane",
    "diagnosis_name",
    "diagnosis_detailed",
    "diagnosis_joint",
];

/// The flags, in the order reports list them.
pub const FLAGS: [&str; 6] = [
    "missing_field",
    "subtype_inconsistent",
    "icd10_with_normal",
    "icd10_class_mismatch",
    "score_out_of_range",
    "confident_wrong",
];

/// The threshold of "confident" for `confident_wrong`.
pub const CONFIDENT: f64 = 0.9;

/// Latency and tokens of one answer. A call that returned n choices shares its tokens among them.
#[derive(Debug, Clone, Copy)]
pub struct Usage<'a> {
    pub case_id: &'a str,
    pub latency_ms: Option<u64>,
    pub tokens_in: Option<f64>,
    pub tokens_out: Option<f64>,
}

impl<'a> Usage<'a> {
    /// The usage of a stored sample's last turn (structured tasks have one turn).
    pub fn of(case_id: &'a str, record: &nmb_store::SampleRecord) -> Usage<'a> {
        let call = record.turns.last().map(|t| &t.call);
        let share = |tokens: Option<u64>| {
            let c = call?;
            Some(tokens? as f64 / f64::from(c.n_choices.max(1)))
        };
        Usage {
            case_id,
            latency_ms: call.and_then(|c| c.latency_ms),
            tokens_in: share(call.and_then(|c| c.tokens_in)),
            tokens_out: share(call.and_then(|c| c.tokens_out)),
        }
    }
}

/// Metrics of one field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldReport {
    /// Answers whose reference has this field.
    pub n: usize,
    pub accuracy: Estimate,
    pub balanced_accuracy: Estimate,
    pub macro_f1: Estimate,
    pub weighted_f1: Estimate,
    pub abstention_rate: Estimate,
    /// Answers that abstained on this field.
    pub abstained: usize,
    /// Answers whose value for this field is not allowed (counted wrong, never as an abstention).
    pub invalid: usize,
    /// Precision, recall and F1 with intervals, and support, by class (`None` where a denominator is zero).
    pub per_class: BTreeMap<String, ClassEstimates>,
}

/// The `diagnosis_name` confusion matrix: rows are true classes, columns predicted classes then `abstain` and
/// `invalid`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confusion {
    pub classes: Vec<String>,
    pub columns: Vec<String>,
    pub counts: Vec<Vec<u64>>,
}

/// Latency, tokens and dollars per answer (one answer per image in this protocol), each with a bootstrap
/// interval over cases; `None` where no answer recorded it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Efficiency {
    pub median_latency_ms: Option<Estimate>,
    pub tokens_in_per_image: Option<Estimate>,
    pub tokens_out_per_image: Option<Estimate>,
    pub tokens_per_image: Option<Estimate>,
    /// The price used (`--price`), or `None` without one.
    pub price: Option<Price>,
    /// Dollars per 1,000 images at `price`, from answers that recorded both token counts.
    pub dollars_per_1000_images: Option<Estimate>,
}

/// How one answer did on one field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FieldOutcome {
    Correct,
    Wrong,
    Abstained,
    /// A value the schema does not allow.
    Invalid,
    /// The key was absent (or the answer was not JSON).
    Missing,
}

/// One answer read against its reference: what `nmb score --json` keeps per sample (`samples[].structured`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StructuredVerdict {
    pub valid_json: bool,
    pub schema_valid: bool,
    /// Why the text is not valid JSON, when it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_error: Option<String>,
    /// Each scored field the reference has (`diagnosis_detailed` only when the class is right).
    pub fields: BTreeMap<String, FieldOutcome>,
    /// The safety flags this answer raised.
    pub flags: Vec<String>,
}

/// How often answers abstained on one key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Abstentions {
    pub count: usize,
    pub rate: Estimate,
}

/// Everything `nmb score --json` reports under `structured`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StructuredReport {
    pub answers: usize,
    pub valid_json_rate: Estimate,
    /// Valid JSON with exactly the nine keys, each holding an allowed value or an abstention.
    pub schema_valid_rate: Estimate,
    /// Per field: `modality`, `specialized_sequence`, `plane`, `diagnosis_name`, `diagnosis_detailed` (given the
    /// right class) and `diagnosis_joint` (class and subtype together).
    pub fields: BTreeMap<String, FieldReport>,
    pub confusion: Confusion,
    /// `diagnosis_confidence` against a correct `diagnosis_name`; `None` when no answer gave a usable one.
    pub calibration: Option<CalibrationEstimates>,
    /// Answers left out of calibration: no confidence, or one outside [0, 1].
    pub calibration_excluded: usize,
    /// Share of answers raising each flag.
    pub safety_flags: BTreeMap<String, Estimate>,
    /// Abstentions on each of the nine keys (of all answers, invalid JSON included).
    pub abstentions: BTreeMap<String, Abstentions>,
    pub cost: Efficiency,
    /// The same answers read as the paper's evaluator reads them, when asked for (`--protocol
    /// neurovlm-paper`); see [`paper`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper: Option<paper::PaperReport>,
}

/// Median latency, mean tokens and dollars per 1,000 images over `usage`, each with a bootstrap interval that
/// resamples cases.
pub fn efficiency(
    usage: &[Usage<'_>],
    price: Option<Price>,
    cfg: &BootstrapConfig,
) -> Result<Efficiency, ResultsError> {
    let latency: Vec<(&str, f64)> = usage
        .iter()
        .filter_map(|u| Some((u.case_id, u.latency_ms? as f64)))
        .collect();
    let tokens = |f: &dyn Fn(&Usage) -> Option<f64>| -> Vec<(&str, f64)> {
        usage
            .iter()
            .filter_map(|u| Some((u.case_id, f(u)?)))
            .collect()
    };
    let both = |u: &Usage| Some(u.tokens_in? + u.tokens_out?);
    Ok(Efficiency {
        median_latency_ms: estimate(&latency, median, cfg)?,
        tokens_in_per_image: estimate(&tokens(&|u| u.tokens_in), mean, cfg)?,
        tokens_out_per_image: estimate(&tokens(&|u| u.tokens_out), mean, cfg)?,
        tokens_per_image: estimate(&tokens(&both), mean, cfg)?,
        price,
        dollars_per_1000_images: match price {
            Some(p) => {
                let per_1000 = |u: &Usage| Some(1000.0 * p.dollars(u.tokens_in?, u.tokens_out?));
                estimate(&tokens(&per_1000), mean, cfg)?
            }
            None => None,
        },
    })
}

/// `stat` of the values with an interval over their cases; `None` without values.
fn estimate(
    values: &[(&str, f64)],
    stat: fn(&mut [f64]) -> f64,
    cfg: &BootstrapConfig,
) -> Result<Option<Estimate>, ResultsError> {
    if values.is_empty() {
        return Ok(None);
    }
    let cases: Vec<&str> = values.iter().map(|v| v.0).collect();
    let mut picked = Vec::with_capacity(values.len());
    let est = bootstrap(&Design::clusters_by(&cases), cfg, |idx| {
        picked.clear();
        picked.extend(idx.iter().map(|&i| values[i].1));
        Some(stat(&mut picked))
    })?;
    Ok(Some(est))
}

fn mean(v: &mut [f64]) -> f64 {
    v.iter().sum::<f64>() / v.len() as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}
