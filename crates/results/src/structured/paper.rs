//! The paper reading of NeuroVLM-Bench answers in a score report (`structured.paper`): the numbers the
//! paper's own evaluator computes, when asked for (`--protocol neurovlm-paper`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Choices of the paper reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PaperOptions {
    /// Report the reference's JSON-valid rate, which is 100% of the answers whatever they are, over the answers
    /// and the errored samples (a bug in the reference, reproduced only when asked for).
    pub json_validity_bug: bool,
}

/// The metrics of one field.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaperField {
    /// Answers whose ground truth labels this field.
    pub n: usize,
    /// scikit-learn's balanced accuracy (the reference's "accuracy" of a field).
    pub balanced_accuracy: f64,
    /// Macro precision and recall over the truth's classes, abstentions never a false positive.
    pub macro_precision: f64,
    pub macro_recall: f64,
    /// The reference's macro-F1 of this field: over the truth's classes for the diagnosis and its subtype, over
    /// every label seen for modality, sequence and plane.
    pub macro_f1: f64,
    /// Macro-F1 over the truth's classes, abstentions never a false positive.
    pub macro_f1_abstention: f64,
    pub weighted_f1: f64,
    pub weighted_f1_abstention: f64,
    pub per_label: PerLabel,
}

/// Everything the paper reading reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaperReport {
    pub answers: usize,
    pub options: PaperOptions,
    /// Answers whose JSON object parsed, in percent (or with `json_validity_bug` the reference's: every answer,
    /// in percent of the answers and errored samples).
    pub json_valid_pct: f64,
    /// Per field, answers whose normalised value equals the normalised truth, in percent of all answers (an
    /// unlabelled truth and an abstaining answer count as equal, as in the reference).
    pub field_accuracy_pct: BTreeMap<String, f64>,
    /// Answers right on all five fields, in percent.
    pub all_fields_accuracy_pct: f64,
    /// Answers whose class is a refusal, in percent.
    pub uncertainty_pct: f64,
    /// Diagnosis macro- and weighted-F1 over every label seen (the reference's headline `macro_f1`).
    pub diagnosis_macro_f1_all_labels: f64,
    pub diagnosis_weighted_f1_all_labels: f64,
    pub diagnosis_macro_f1_abstention_all_labels: f64,
    pub diagnosis_weighted_f1_abstention_all_labels: f64,
    pub fields: BTreeMap<String, PaperField>,
    /// `diagnosis_confidence` against the class, and against the subtype.
    pub calibration: BTreeMap<String, Calibration>,
    /// Per answer, whether the reference's safety check fires (a mandatory key missing or null, a subtype not
    /// allowed with the class, an ICD-10 code with `normal`).
    pub safety_flags: Vec<bool>,
    pub safety_flag_rate: f64,
    /// Mean tokens per answer (a missing count is 0).
    pub avg_tokens_in: f64,
    pub avg_tokens_out: f64,
    /// Mean dollars per answer at `--price`, or `None` without a price.
    pub avg_cost: Option<f64>,
}

/// Per-label numbers, each a list in the order of its label list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PerLabel {
    /// Every label of truth and predictions, sorted.
    pub labels: Vec<String>,
    pub support: Vec<u64>,
    pub f1: Vec<f64>,
    pub balanced_accuracy: Vec<f64>,
    /// `labels` without the abstention label.
    pub abstention_labels: Vec<String>,
    pub precision: Vec<f64>,
    pub recall: Vec<f64>,
    pub f1_abstention: Vec<f64>,
}

/// ECE, Brier score and AUROC of a confidence against correctness; `None` where the reference gets NaN.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub ece: Option<f64>,
    pub brier: Option<f64>,
    pub auroc: Option<f64>,
}
