//! The label-set section of a score report: macro-F1 and per-label numbers when every multiple-choice item of a
//! run offers the same options (PubMedQA's yes / no / maybe).

use std::collections::BTreeMap;

use nmb_stats::{ClassEstimates, Estimate};
use serde::{Deserialize, Serialize};

/// The label-set numbers of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelSetReport {
    /// The option texts, in option order.
    pub labels: Vec<String>,
    /// Scored answers.
    pub n: usize,
    pub accuracy: Estimate,
    pub macro_f1: Estimate,
    pub weighted_f1: Estimate,
    /// Answers with no recognisable choice.
    pub extraction_failures: usize,
    /// By label.
    pub per_label: BTreeMap<String, ClassEstimates>,
}
