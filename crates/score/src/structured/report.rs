//! The NeuroVLM-Bench numbers of a run: valid-JSON rate, per-field metrics with abstentions, the subtype scored
//! given the right class and jointly with it, calibration of the stated diagnosis confidence, safety-flag rates
//! and efficiency. Every rate carries a bootstrap interval that resamples cases, not answers.

use std::collections::BTreeMap;

use nmb_stats::{
    bootstrap_mean, calibration_estimates, classification, classification_estimates,
    BootstrapConfig, CalibrationEstimates, ClassMetrics, Design, Estimate,
};
use nmb_suite::Reference;
use serde::{Deserialize, Serialize};

use super::answer::{parse_answer, Field, StructuredAnswer};
use super::safety::{flags, FLAGS};
use super::schema::Schema;
use crate::ScoreError;

/// One answered sample of a structured task.
#[derive(Debug, Clone)]
pub struct StructuredItem<'a> {
    pub case_id: &'a str,
    pub reference: &'a Reference,
    pub text: &'a str,
    pub latency_ms: Option<u64>,
    /// Tokens of this answer (its call's tokens shared among the call's choices).
    pub tokens: Option<f64>,
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
    /// Answers whose value for this field is not allowed (counted wrong, never as an abstention).
    pub invalid: usize,
    pub per_class: BTreeMap<String, ClassMetrics>,
}

/// The `diagnosis_name` confusion matrix: rows are true classes, columns predicted classes then `abstain` and
/// `invalid`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Confusion {
    pub classes: Vec<String>,
    pub columns: Vec<String>,
    pub counts: Vec<Vec<u64>>,
}

/// Latency and tokens per answer (one answer per image in this protocol).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Efficiency {
    pub median_latency_ms: Option<f64>,
    pub tokens_per_image: Option<f64>,
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
    pub cost: Efficiency,
}

/// Labels of one field: its truth and prediction per answer, within a class list.
struct Labels {
    classes: Vec<String>,
    truth: Vec<usize>,
    pred: Vec<Option<usize>>,
    abstained: Vec<bool>,
    invalid: usize,
    cases: Vec<String>,
}

impl Labels {
    fn new(classes: Vec<String>) -> Labels {
        Labels {
            classes,
            truth: Vec::new(),
            pred: Vec::new(),
            abstained: Vec::new(),
            invalid: 0,
            cases: Vec::new(),
        }
    }

    fn index(&mut self, label: &str) -> usize {
        match self.classes.iter().position(|c| c == label) {
            Some(i) => i,
            None => {
                self.classes.push(label.to_string());
                self.classes.len() - 1
            }
        }
    }

    /// Adds one answer; `pred` is the predicted label (None: abstained or invalid).
    fn push(
        &mut self,
        case: &str,
        truth: &str,
        pred: Option<&str>,
        abstained: bool,
        invalid: bool,
    ) {
        let t = self.index(truth);
        let p = pred.map(|p| self.index(p));
        self.truth.push(t);
        self.pred.push(p);
        self.abstained.push(abstained);
        self.invalid += usize::from(invalid);
        self.cases.push(case.to_string());
    }

    fn report(&self, cfg: &BootstrapConfig) -> Result<Option<FieldReport>, ScoreError> {
        if self.truth.is_empty() {
            return Ok(None);
        }
        let k = self.classes.len();
        let design = Design::clusters_by(&self.cases);
        let est = classification_estimates(&self.truth, &self.pred, k, &design, cfg)?;
        let whole = classification(&self.truth, &self.pred, k)?;
        let abstained: Vec<f64> = self
            .abstained
            .iter()
            .map(|a| f64::from(u8::from(*a)))
            .collect();
        Ok(Some(FieldReport {
            n: self.truth.len(),
            accuracy: est.accuracy,
            balanced_accuracy: est.balanced_accuracy,
            macro_f1: est.macro_f1,
            weighted_f1: est.weighted_f1,
            abstention_rate: bootstrap_mean(&abstained, &design, cfg)?,
            invalid: self.invalid,
            per_class: self.classes.iter().cloned().zip(whole.per_class).collect(),
        }))
    }
}

/// A field's value as a label, whether it abstained, whether it was invalid.
fn read(field: &Field) -> (Option<String>, bool, bool) {
    match field {
        Field::Value { value } => (Some(value.clone()), false, false),
        Field::Abstain => (None, true, false),
        Field::Invalid { .. } => (None, false, true),
        Field::Number { .. } | Field::Missing => (None, false, false),
    }
}

/// The NeuroVLM-Bench report of `items`, or `None` without any.
pub fn structured_report(
    items: &[StructuredItem<'_>],
    cfg: &BootstrapConfig,
) -> Result<Option<StructuredReport>, ScoreError> {
    if items.is_empty() {
        return Ok(None);
    }
    let schema = Schema::bundled();
    let answers: Vec<StructuredAnswer> =
        items.iter().map(|i| parse_answer(i.text, schema)).collect();
    let cases: Vec<&str> = items.iter().map(|i| i.case_id).collect();
    let design = Design::clusters_by(&cases);
    let rate = |hit: &dyn Fn(usize) -> bool| -> Result<Estimate, ScoreError> {
        let values: Vec<f64> = (0..items.len())
            .map(|i| f64::from(u8::from(hit(i))))
            .collect();
        Ok(bootstrap_mean(&values, &design, cfg)?)
    };
    let truth_class: Vec<Option<usize>> = items
        .iter()
        .map(|i| {
            i.reference
                .diagnosis
                .as_deref()
                .and_then(|d| schema.class_index(d))
        })
        .collect();
    let mut fields = BTreeMap::new();
    for (key, labels) in field_labels(items, &answers, schema) {
        if let Some(report) = labels.report(cfg)? {
            fields.insert(key.to_string(), report);
        }
    }
    let mut safety_flags = BTreeMap::new();
    let raised: Vec<Vec<&str>> = answers
        .iter()
        .zip(&truth_class)
        .map(|(a, t)| flags(a, schema, *t).names())
        .collect();
    for flag in FLAGS {
        safety_flags.insert(flag.to_string(), rate(&|i| raised[i].contains(&flag))?);
    }
    let (calibration, calibration_excluded) =
        calibration(items, &answers, &truth_class, schema, cfg)?;
    Ok(Some(StructuredReport {
        answers: items.len(),
        valid_json_rate: rate(&|i| answers[i].valid_json)?,
        schema_valid_rate: rate(&|i| answers[i].schema_valid())?,
        fields,
        confusion: confusion(&answers, &truth_class, schema),
        calibration,
        calibration_excluded,
        safety_flags,
        cost: efficiency(items),
    }))
}

fn field_labels(
    items: &[StructuredItem<'_>],
    answers: &[StructuredAnswer],
    schema: &Schema,
) -> Vec<(&'static str, Labels)> {
    let allowed = |f: &str| schema.fields.get(f).cloned().unwrap_or_default();
    let class_ids: Vec<String> = schema.classes.iter().map(|c| c.id.clone()).collect();
    let mut out = vec![
        ("modality", Labels::new(allowed("modality"))),
        (
            "specialized_sequence",
            Labels::new(allowed("specialized_sequence")),
        ),
        ("plane", Labels::new(allowed("plane"))),
        ("diagnosis_name", Labels::new(class_ids)),
        ("diagnosis_detailed", Labels::new(Vec::new())),
        ("diagnosis_joint", Labels::new(Vec::new())),
    ];
    for (item, answer) in items.iter().zip(answers) {
        let r = item.reference;
        let truths = [
            r.modality
                .as_deref()
                .and_then(|v| schema.field_value("modality", v)),
            r.specialized_sequence
                .as_deref()
                .and_then(|v| schema.field_value("specialized_sequence", v)),
            r.plane
                .as_deref()
                .and_then(|v| schema.field_value("plane", v)),
            r.diagnosis
                .as_deref()
                .and_then(|d| schema.class_index(d))
                .map(|c| schema.classes[c].id.clone()),
        ];
        for (k, truth) in truths.iter().enumerate() {
            let Some(truth) = truth else { continue };
            let (pred, abstained, invalid) = read(answer.field(out[k].0));
            out[k]
                .1
                .push(item.case_id, truth, pred.as_deref(), abstained, invalid);
        }
        let detail = r
            .diagnosis_detailed
            .as_deref()
            .filter(|d| !d.trim().is_empty());
        let (Some(class), Some(detail)) = (&truths[3], detail) else {
            continue;
        };
        let detail = schema.canonical(detail);
        let (pred_class, _, _) = read(answer.field("diagnosis_name"));
        let (pred_detail, abstained, invalid) = read(answer.field("diagnosis_detailed"));
        if pred_class.as_deref() == Some(class.as_str()) {
            out[4].1.push(
                item.case_id,
                &detail,
                pred_detail.as_deref(),
                abstained,
                invalid,
            );
        }
        let joint_pred = pred_class.zip(pred_detail).map(|(c, d)| format!("{c}/{d}"));
        let joint_truth = format!("{class}/{detail}");
        out[5].1.push(
            item.case_id,
            &joint_truth,
            joint_pred.as_deref(),
            abstained,
            invalid,
        );
    }
    out
}

fn confusion(answers: &[StructuredAnswer], truth: &[Option<usize>], schema: &Schema) -> Confusion {
    let classes: Vec<String> = schema.classes.iter().map(|c| c.id.clone()).collect();
    let k = classes.len();
    let mut counts = vec![vec![0u64; k + 2]; k];
    for (a, t) in answers.iter().zip(truth) {
        let Some(t) = t else { continue };
        let col = match a.field("diagnosis_name") {
            Field::Value { value } => schema.class_index(value).unwrap_or(k + 1),
            Field::Abstain => k,
            _ => k + 1,
        };
        counts[*t][col] += 1;
    }
    let mut columns = classes.clone();
    columns.extend(["abstain".to_string(), "invalid".to_string()]);
    Confusion {
        classes,
        columns,
        counts,
    }
}

type Calibration = (Option<CalibrationEstimates>, usize);

fn calibration(
    items: &[StructuredItem<'_>],
    answers: &[StructuredAnswer],
    truth: &[Option<usize>],
    schema: &Schema,
    cfg: &BootstrapConfig,
) -> Result<Calibration, ScoreError> {
    let (mut conf, mut correct, mut cases) = (Vec::new(), Vec::new(), Vec::new());
    let mut excluded = 0;
    for ((item, a), t) in items.iter().zip(answers).zip(truth) {
        let Some(t) = t else { continue };
        match a.field("diagnosis_confidence").number() {
            Some(c) if (0.0..=1.0).contains(&c) => {
                let named = a
                    .field("diagnosis_name")
                    .value()
                    .and_then(|v| schema.class_index(v));
                conf.push(c);
                correct.push(named == Some(*t));
                cases.push(item.case_id);
            }
            _ => excluded += 1,
        }
    }
    if conf.is_empty() {
        return Ok((None, excluded));
    }
    let design = Design::clusters_by(&cases);
    Ok((
        Some(calibration_estimates(&conf, &correct, 10, &design, cfg)?),
        excluded,
    ))
}

fn efficiency(items: &[StructuredItem<'_>]) -> Efficiency {
    let mut latency: Vec<f64> = items
        .iter()
        .filter_map(|i| i.latency_ms.map(|l| l as f64))
        .collect();
    latency.sort_by(f64::total_cmp);
    let median = (!latency.is_empty()).then(|| {
        let m = latency.len() / 2;
        if latency.len() % 2 == 1 {
            latency[m]
        } else {
            (latency[m - 1] + latency[m]) / 2.0
        }
    });
    let tokens: Vec<f64> = items.iter().filter_map(|i| i.tokens).collect();
    Efficiency {
        median_latency_ms: median,
        tokens_per_image: (!tokens.is_empty())
            .then(|| tokens.iter().sum::<f64>() / tokens.len() as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(class: &str, detail: &str, conf: f64) -> String {
        serde_json::json!({
            "modality": "MRI", "specialized_sequence": "T2", "plane": "axial", "diagnosis_name": class,
            "diagnosis_detailed": detail, "icd10_code": null, "severity_score": 0.5,
            "diagnosis_confidence": conf, "severity_confidence": 0.5
        })
        .to_string()
    }

    #[test]
    fn the_subtype_is_scored_given_the_right_class_and_jointly() {
        let stroke = Reference {
            diagnosis: Some("stroke".into()),
            diagnosis_detailed: Some("ischaemic".into()),
            ..Reference::default()
        };
        let texts = [
            answer("stroke", "ischemic", 0.9),    // class and subtype right
            answer("stroke", "hemorrhagic", 0.7), // class right, subtype wrong
            answer("tumor", "ischemic", 0.95),    // class wrong: not in the given-class score
        ];
        let items: Vec<StructuredItem<'_>> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| StructuredItem {
                case_id: ["a", "b", "c"][i],
                reference: &stroke,
                text: t,
                latency_ms: Some(100 * (i as u64 + 1)),
                tokens: Some(50.0),
            })
            .collect();
        let cfg = BootstrapConfig {
            resamples: 200,
            ..BootstrapConfig::default()
        };
        let r = structured_report(&items, &cfg).unwrap().unwrap();
        let given = &r.fields["diagnosis_detailed"];
        assert_eq!((given.n, given.accuracy.value), (2, 0.5));
        let joint = &r.fields["diagnosis_joint"];
        assert_eq!(joint.n, 3);
        assert!((joint.accuracy.value - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(r.fields["diagnosis_name"].accuracy.value, 2.0 / 3.0);
        assert_eq!(r.safety_flags["confident_wrong"].value, 1.0 / 3.0);
        assert_eq!(r.cost.median_latency_ms, Some(200.0));
        assert!(r.calibration.is_some() && r.calibration_excluded == 0);
        assert_eq!(
            r.confusion.counts[r
                .confusion
                .classes
                .iter()
                .position(|c| c == "stroke")
                .unwrap()]
            .iter()
            .sum::<u64>(),
            3
        );
    }
}
