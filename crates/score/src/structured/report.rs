//! The NeuroVLM-Bench numbers of a run: valid-JSON rate, per-field metrics with abstentions, the subtype scored
//! given the right class and jointly with it, calibration of the stated diagnosis confidence, safety-flag rates
//! and efficiency. Every rate carries a bootstrap interval that resamples cases, not answers.

use std::collections::BTreeMap;

use nmb_results::cost::Price;
use nmb_results::structured::{
    efficiency, Abstentions, Confusion, FieldOutcome, FieldReport, StructuredReport,
    StructuredVerdict, Usage, FIELDS, FLAGS,
};
use nmb_stats::{
    bootstrap_mean, calibration_estimates, classification_estimates, BootstrapConfig,
    CalibrationEstimates, Design, Estimate,
};
use nmb_suite::Reference;

use super::answer::{parse_answer, Field, StructuredAnswer};
use super::safety::flags;
use super::schema::{Schema, KEYS};
use crate::ScoreError;

/// One answered sample of a structured task.
#[derive(Debug, Clone)]
pub struct StructuredItem<'a> {
    pub task_id: &'a str,
    pub sample_index: u32,
    pub case_id: &'a str,
    pub reference: &'a Reference,
    pub text: &'a str,
    pub usage: Usage<'a>,
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
            abstained: self.abstained.iter().filter(|a| **a).count(),
            invalid: self.invalid,
            per_class: self.classes.iter().cloned().zip(est.per_class).collect(),
        }))
    }
}

/// One field of one answer against its reference.
struct Obs {
    field: &'static str,
    truth: String,
    pred: Option<String>,
    abstained: bool,
    invalid: bool,
    missing: bool,
    /// Wrong without a label of its own (see [`joint_obs`]).
    wrong: bool,
}

impl Obs {
    fn new(field: &'static str, truth: String, answer: &Field) -> Obs {
        let mut o = Obs {
            field,
            truth,
            pred: None,
            abstained: false,
            invalid: false,
            missing: false,
            wrong: false,
        };
        match answer {
            Field::Value { value } => o.pred = Some(value.clone()),
            Field::Abstain => o.abstained = true,
            Field::Invalid { .. } => o.invalid = true,
            Field::Number { .. } | Field::Missing => o.missing = true,
        }
        o
    }

    fn outcome(&self) -> FieldOutcome {
        match &self.pred {
            Some(p) if *p == self.truth => FieldOutcome::Correct,
            Some(_) => FieldOutcome::Wrong,
            None if self.wrong => FieldOutcome::Wrong,
            None if self.abstained => FieldOutcome::Abstained,
            None if self.invalid => FieldOutcome::Invalid,
            None => FieldOutcome::Missing,
        }
    }
}

/// Class and subtype together. Without a joint label, a named wrong class makes the pair wrong whatever the
/// subtype says; otherwise the pair abstains, is invalid or is missing as its parts are.
fn joint_obs(class: &str, detail: &str, named: &Obs, given: &Obs) -> Obs {
    let mut joint = Obs::new(
        "diagnosis_joint",
        format!("{class}/{detail}"),
        &Field::Missing,
    );
    joint.pred = named
        .pred
        .as_ref()
        .zip(given.pred.as_ref())
        .map(|(c, d)| format!("{c}/{d}"));
    if joint.pred.is_some() {
        joint.missing = false;
    } else if named.pred.as_deref().is_some_and(|p| p != class) {
        joint.missing = false;
        joint.wrong = true;
    } else if named.abstained || given.abstained {
        joint.missing = false;
        joint.abstained = true;
    } else if named.invalid || given.invalid {
        joint.missing = false;
        joint.invalid = true;
    }
    joint
}

/// What one answer says on each field its reference has.
fn observations(r: &Reference, answer: &StructuredAnswer, schema: &Schema) -> Vec<Obs> {
    let mut out = Vec::new();
    let plain = [
        ("modality", r.modality.as_deref()),
        ("specialized_sequence", r.specialized_sequence.as_deref()),
        ("plane", r.plane.as_deref()),
    ];
    for (field, truth) in plain {
        if let Some(truth) = truth.and_then(|v| schema.field_value(field, v)) {
            out.push(Obs::new(field, truth, answer.field(field)));
        }
    }
    let class = r
        .diagnosis
        .as_deref()
        .and_then(|d| schema.class_index(d))
        .map(|c| schema.classes[c].id.clone());
    let Some(class) = class else { return out };
    let named = Obs::new(
        "diagnosis_name",
        class.clone(),
        answer.field("diagnosis_name"),
    );
    let detail = r
        .diagnosis_detailed
        .as_deref()
        .filter(|d| !d.trim().is_empty())
        .map(|d| schema.canonical(d));
    if let Some(detail) = detail {
        let given = Obs::new(
            "diagnosis_detailed",
            detail.clone(),
            answer.field("diagnosis_detailed"),
        );
        let joint = joint_obs(&class, &detail, &named, &given);
        let right_class = named.pred.as_deref() == Some(class.as_str());
        out.push(named);
        if right_class {
            out.push(given);
        }
        out.push(joint);
    } else {
        out.push(named);
    }
    out
}

/// The NeuroVLM-Bench report of `items` and each item's verdict (in the same order), or `None` without items.
pub fn structured_report(
    items: &[StructuredItem<'_>],
    price: Option<Price>,
    cfg: &BootstrapConfig,
) -> Result<Option<(StructuredReport, Vec<StructuredVerdict>)>, ScoreError> {
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
    let obs: Vec<Vec<Obs>> = items
        .iter()
        .zip(&answers)
        .map(|(i, a)| observations(i.reference, a, schema))
        .collect();
    let raised: Vec<Vec<&str>> = answers
        .iter()
        .zip(&truth_class)
        .map(|(a, t)| flags(a, schema, *t).names())
        .collect();
    let mut safety_flags = BTreeMap::new();
    for flag in FLAGS {
        safety_flags.insert(flag.to_string(), rate(&|i| raised[i].contains(&flag))?);
    }
    let (calibration, calibration_excluded) =
        calibration(items, &answers, &truth_class, schema, cfg)?;
    let mut abstentions = BTreeMap::new();
    for key in KEYS {
        let abstained = |i: usize| *answers[i].field(key) == Field::Abstain;
        abstentions.insert(
            key.to_string(),
            Abstentions {
                count: (0..items.len()).filter(|&i| abstained(i)).count(),
                rate: rate(&abstained)?,
            },
        );
    }
    let report = StructuredReport {
        answers: items.len(),
        valid_json_rate: rate(&|i| answers[i].valid_json)?,
        schema_valid_rate: rate(&|i| answers[i].schema_valid())?,
        fields: field_reports(items, &obs, schema, cfg)?,
        confusion: confusion(&answers, &truth_class, schema),
        calibration,
        calibration_excluded,
        safety_flags,
        abstentions,
        cost: efficiency(
            &items.iter().map(|i| i.usage).collect::<Vec<_>>(),
            price,
            cfg,
        )?,
        paper: None,
    };
    let verdicts = answers
        .iter()
        .zip(&obs)
        .zip(raised)
        .map(|((a, obs), raised)| StructuredVerdict {
            valid_json: a.valid_json,
            schema_valid: a.schema_valid(),
            json_error: a.json_error.clone(),
            fields: obs
                .iter()
                .map(|o| (o.field.to_string(), o.outcome()))
                .collect(),
            flags: raised.iter().map(|f| f.to_string()).collect(),
        })
        .collect();
    Ok(Some((report, verdicts)))
}

fn field_reports(
    items: &[StructuredItem<'_>],
    obs: &[Vec<Obs>],
    schema: &Schema,
    cfg: &BootstrapConfig,
) -> Result<BTreeMap<String, FieldReport>, ScoreError> {
    let allowed = |f: &str| schema.fields.get(f).cloned().unwrap_or_default();
    let mut out = BTreeMap::new();
    for field in FIELDS {
        let classes = match field {
            "diagnosis_name" => schema.classes.iter().map(|c| c.id.clone()).collect(),
            "modality" | "specialized_sequence" | "plane" => allowed(field),
            _ => Vec::new(),
        };
        let mut labels = Labels::new(classes);
        for (item, o) in items.iter().zip(obs) {
            for o in o.iter().filter(|o| o.field == field) {
                labels.push(
                    item.case_id,
                    &o.truth,
                    o.pred.as_deref(),
                    o.abstained,
                    o.invalid,
                );
            }
        }
        if let Some(report) = labels.report(cfg)? {
            out.insert(field.to_string(), report);
        }
    }
    Ok(out)
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
                task_id: ["a", "b", "c"][i],
                sample_index: 0,
                case_id: ["a", "b", "c"][i],
                reference: &stroke,
                text: t,
                usage: Usage {
                    case_id: ["a", "b", "c"][i],
                    latency_ms: Some(100 * (i as u64 + 1)),
                    tokens_in: Some(40.0),
                    tokens_out: Some(10.0),
                },
            })
            .collect();
        let cfg = BootstrapConfig {
            resamples: 200,
            ..BootstrapConfig::default()
        };
        let price = Price {
            input_per_mtok: 2.0,
            output_per_mtok: 10.0,
            ..Default::default()
        };
        let (r, verdicts) = structured_report(&items, Some(price), &cfg)
            .unwrap()
            .unwrap();
        assert_eq!(
            verdicts[1].fields["diagnosis_detailed"],
            FieldOutcome::Wrong
        );
        assert_eq!(verdicts[2].fields["diagnosis_name"], FieldOutcome::Wrong);
        assert!(!verdicts[2].fields.contains_key("diagnosis_detailed"));
        assert_eq!(
            verdicts[2].flags,
            ["subtype_inconsistent", "confident_wrong"]
        );
        let given = &r.fields["diagnosis_detailed"];
        assert_eq!((given.n, given.accuracy.value), (2, 0.5));
        let joint = &r.fields["diagnosis_joint"];
        assert_eq!(joint.n, 3);
        assert!((joint.accuracy.value - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(r.fields["diagnosis_name"].accuracy.value, 2.0 / 3.0);
        assert_eq!(r.safety_flags["confident_wrong"].value, 1.0 / 3.0);
        assert_eq!(r.cost.median_latency_ms.as_ref().unwrap().value, 200.0);
        assert_eq!(r.cost.tokens_per_image.as_ref().unwrap().value, 50.0);
        // 1,000 images of 40 tokens in at $2/M and 10 out at $10/M.
        let dollars = r.cost.dollars_per_1000_images.as_ref().unwrap().value;
        assert!((dollars - 0.18).abs() < 1e-12, "{dollars}");
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

    #[test]
    fn a_wrong_class_makes_the_pair_wrong_whatever_the_subtype_says() {
        let schema = Schema::bundled();
        let stroke = Reference {
            diagnosis: Some("stroke".into()),
            diagnosis_detailed: Some("ischemic".into()),
            ..Reference::default()
        };
        let joint = |class: serde_json::Value| {
            let text = serde_json::json!({"diagnosis_name": class, "diagnosis_detailed": null})
                .to_string();
            let obs = observations(&stroke, &parse_answer(&text, schema), schema);
            let joint = obs.iter().find(|o| o.field == "diagnosis_joint").unwrap();
            joint.outcome()
        };
        assert_eq!(joint("tumor".into()), FieldOutcome::Wrong);
        assert_eq!(joint("stroke".into()), FieldOutcome::Abstained);
        assert_eq!(joint(serde_json::Value::Null), FieldOutcome::Abstained);
    }
}
