//! The NeuroVLM-Bench numbers of a run: valid-JSON rate, per-field metrics with abstentions, the subtype scored
//! given the right class and jointly with it, calibration of the stated diagnosis confidence, safety-flag rates
//! and efficiency. Every rate carries a bootstrap interval that resamples cases, not answers.

use std::collections::BTreeMap;

use nmb_stats::{
    bootstrap, bootstrap_mean, calibration_estimates, classification_estimates, BootstrapConfig,
    CalibrationEstimates, ClassEstimates, Design, Estimate,
};
use nmb_suite::Reference;
use serde::{Deserialize, Serialize};

use super::answer::{parse_answer, Field, StructuredAnswer};
use super::safety::{flags, FLAGS};
use super::schema::{Schema, KEYS};
use crate::cost::Price;
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
    /// neurovlm-paper`); see [`super::paper`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paper: Option<super::paper::PaperReport>,
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

/// The scored fields, in report order.
pub const FIELDS: [&str; 6] = [
    "modality",
    "specialized_sequence",
    "plane",
    "diagnosis_name",
    "diagnosis_detailed",
    "diagnosis_joint",
];

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

/// Median latency, mean tokens and dollars per 1,000 images over `usage`, each with a bootstrap interval that
/// resamples cases.
pub fn efficiency(
    usage: &[Usage<'_>],
    price: Option<Price>,
    cfg: &BootstrapConfig,
) -> Result<Efficiency, ScoreError> {
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
) -> Result<Option<Estimate>, ScoreError> {
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
