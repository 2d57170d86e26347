//! Multiple-choice items that all offer the same options (PubMedQA's yes / no / maybe): beside accuracy, the
//! numbers such a dataset's official scoring reports, macro-F1 and per-label precision, recall and F1, each with
//! a bootstrap interval over cases. An answer with no recognisable choice is a false negative for its true label
//! and never a false positive.
//!
//! Runs whose multiple-choice items differ in their options (MedQA's are per question) get none of this: a
//! letter is not a label there.

use std::collections::HashMap;

use nmb_results::label_set::LabelSetReport;
use nmb_results::SampleScore;
use nmb_stats::{classification_estimates, BootstrapConfig, Design};
use nmb_suite::{Family, Task};

use crate::ScoreError;

/// The report for the scored multiple-choice samples of `samples`, when every one of their tasks offers the same
/// options; `None` otherwise or without any.
pub fn label_set_report(
    samples: &[SampleScore],
    tasks: &HashMap<&str, &Task>,
    cfg: &BootstrapConfig,
) -> Result<Option<LabelSetReport>, ScoreError> {
    let scored: Vec<(&SampleScore, &Task)> = samples
        .iter()
        .filter(|s| s.family == Family::MultipleChoice && s.status.is_scored())
        .filter_map(|s| Some((s, *tasks.get(s.task_id.as_str())?)))
        .collect();
    let Some((_, first)) = scored.first() else {
        return Ok(None);
    };
    let options = &first.options;
    if scored.iter().any(|(_, t)| t.options != *options) {
        return Ok(None);
    }
    let index = |letter: Option<&str>| options.iter().position(|(l, _)| Some(l.as_str()) == letter);
    let (mut truth, mut pred, mut cases) = (Vec::new(), Vec::new(), Vec::new());
    for (s, t) in &scored {
        let Some(want) = index(t.reference.as_ref().and_then(|r| r.choice.as_deref())) else {
            continue;
        };
        truth.push(want);
        pred.push(index(
            s.breadth.as_ref().and_then(|b| b.extracted.as_deref()),
        ));
        cases.push(s.case_id.as_str());
    }
    if truth.is_empty() {
        return Ok(None);
    }
    let est = classification_estimates(
        &truth,
        &pred,
        options.len(),
        &Design::clusters_by(&cases),
        cfg,
    )?;
    let labels: Vec<String> = options.iter().map(|(_, text)| text.clone()).collect();
    Ok(Some(LabelSetReport {
        n: truth.len(),
        accuracy: est.accuracy,
        macro_f1: est.macro_f1,
        weighted_f1: est.weighted_f1,
        extraction_failures: pred.iter().filter(|p| p.is_none()).count(),
        per_label: labels.iter().cloned().zip(est.per_class).collect(),
        labels,
    }))
}
