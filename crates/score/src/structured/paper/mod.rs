//! The paper's reading of NeuroVLM-Bench answers (`nmb score --protocol neurovlm-paper`): the numbers the
//! authors' evaluator, `evaluate_detailed.py` of ChatMED/neurovlm-bench at commit 6e87ba4, computes from the
//! same answers, rule for rule, so that a run scored by nmb can be set beside the paper's tables.
//!
//! nmb's own reading ([`super::structured_report`]) stays the default; `docs/neurovlm-paper.md` lists every rule
//! where the two differ, with the reference's line, and says which is right. In short, this reading:
//! - takes the JSON object from the first `{` to the last `}` of an answer, so prose around it is forgiven;
//! - reads each label through the reference's normalisation (`[paper]` in `data/neurovlm.toml`), where a missing
//!   or null value is the label `undetermined`;
//! - scores the subtype on every image whose subtype is labelled, whatever class the answer named;
//! - averages macro-F1, precision and recall over the classes of the ground truth (and, as the reference does,
//!   over every label seen for the plain macro-F1 of modality, sequence and plane);
//! - counts a missing or unreadable confidence as 0, clips 85 to 1, and bins ECE right-closed, (a, b];
//! - reports no intervals: the reference's bootstrap is unseeded, so its intervals cannot be reproduced.
//!
//! The reference's JSON-valid rate is 100% whatever the answers (it re-serialises an already parsed object), less
//! only its error lines, which it counts in the total;
//! this reading reports the share of answers whose object parsed, unless [`PaperOptions::json_validity_bug`]
//! asks for the reference's number.

mod metrics;
mod rules;

use std::collections::BTreeMap;

pub use metrics::{calibration, Labels, Series};
use nmb_results::cost::Price;
use nmb_results::structured::paper::{Calibration, PaperField, PaperOptions, PaperReport};
use nmb_results::structured::Usage;
use nmb_suite::Reference;
pub use rules::{extract_object, py_float_of, py_str, py_truthy, PaperRules};
use serde_json::{Map, Value};

use super::schema::Schema;

/// The fields the reference scores, in its order.
pub const PAPER_FIELDS: [&str; 5] = [
    "diagnosis_name",
    "diagnosis_detailed",
    "modality",
    "specialized_sequence",
    "plane",
];

/// One answer for the paper reading.
#[derive(Debug, Clone, Copy)]
pub struct PaperItem<'a> {
    pub reference: &'a Reference,
    pub text: &'a str,
    pub usage: Usage<'a>,
}

/// One answer read the reference's way.
struct Read {
    object: Option<Map<String, Value>>,
}

impl Read {
    fn get(&self, key: &str) -> Option<&Value> {
        self.object.as_ref()?.get(key).filter(|v| !v.is_null())
    }
}

/// The truth of one field as the reference's metadata holds it (`None`: unlabelled).
fn truth_text(r: &Reference, field: &str, schema: &Schema, rules: &PaperRules) -> Option<String> {
    let raw = match field {
        "diagnosis_name" => r.diagnosis.as_deref(),
        "diagnosis_detailed" => r.diagnosis_detailed.as_deref(),
        "modality" => r.modality.as_deref(),
        "specialized_sequence" => r.specialized_sequence.as_deref(),
        "plane" => r.plane.as_deref(),
        _ => None,
    }?;
    if ["null", "nan", ""].contains(&raw) {
        return None;
    }
    // nmb keeps a class by its id; the reference by its own spelling ("other abnormalities").
    let class = (field == "diagnosis_name")
        .then(|| schema.class_index(raw))
        .flatten()
        .and_then(|i| rules.class_labels.get(&schema.classes[i].id));
    Some(class.cloned().unwrap_or_else(|| raw.to_string()))
}

/// One field's normalised truth and prediction, with `diagnosis_confidence`, over the answers whose truth
/// labels the field.
#[derive(Default)]
struct Column {
    truth: Vec<String>,
    pred: Vec<String>,
    conf: Vec<f64>,
}

impl Column {
    fn series<'a>(&'a self, abstain: &'a str) -> Series<'a> {
        Series {
            truth: &self.truth,
            pred: &self.pred,
            abstain,
        }
    }
}

/// The paper reading of `items`, or `None` without items. `errored` counts the samples of the same run that
/// errored (the runner's error lines), which only the reference's JSON-valid rate counts.
pub fn paper_report(
    items: &[PaperItem<'_>],
    errored: usize,
    price: Option<Price>,
    options: PaperOptions,
) -> Option<PaperReport> {
    if items.is_empty() {
        return None;
    }
    let (schema, rules) = (Schema::bundled(), PaperRules::bundled());
    let reads: Vec<Read> = items
        .iter()
        .map(|i| Read {
            object: extract_object(i.text),
        })
        .collect();
    let pct = |count: usize| 100.0 * count as f64 / items.len() as f64;
    let (field_accuracy_pct, all_right) = field_accuracy(items, &reads, schema, rules);
    let columns: BTreeMap<&str, Column> = PAPER_FIELDS
        .iter()
        .map(|&f| (f, column(items, &reads, f, schema, rules)))
        .collect();
    let classes = columns["diagnosis_name"].series(&rules.abstain);
    let safety_flags: Vec<bool> = reads.iter().map(|r| safety_flag(r, rules)).collect();
    let (avg_tokens_in, avg_tokens_out) = mean_tokens(items);
    Some(PaperReport {
        answers: items.len(),
        options,
        // The reference counts every answered line valid, over every line, its error lines included.
        json_valid_pct: if options.json_validity_bug {
            100.0 * items.len() as f64 / (items.len() + errored) as f64
        } else {
            pct(reads.iter().filter(|r| r.object.is_some()).count())
        },
        field_accuracy_pct,
        all_fields_accuracy_pct: pct(all_right),
        uncertainty_pct: uncertainty_pct(classes.pred, rules),
        diagnosis_macro_f1_all_labels: classes.macro_f1(Labels::All, false),
        diagnosis_weighted_f1_all_labels: classes.weighted_f1(Labels::All, false),
        diagnosis_macro_f1_abstention_all_labels: classes.macro_f1(Labels::All, true),
        diagnosis_weighted_f1_abstention_all_labels: classes.weighted_f1(Labels::All, true),
        fields: columns
            .iter()
            .filter(|(_, c)| !c.truth.is_empty())
            .map(|(&f, c)| (f.to_string(), field_report(f, c, &rules.abstain)))
            .collect(),
        calibration: ["diagnosis_name", "diagnosis_detailed"]
            .into_iter()
            .map(|f| (f.to_string(), field_calibration(&columns[f])))
            .collect(),
        safety_flag_rate: pct(safety_flags.iter().filter(|f| **f).count()) / 100.0,
        safety_flags,
        avg_tokens_in,
        avg_tokens_out,
        avg_cost: price.map(|p| p.dollars(avg_tokens_in, avg_tokens_out)),
    })
}

/// Per field, the percentage of all answers whose value equals the truth once both are normalised (an
/// unlabelled truth reads as the abstention label); and how many answers are right on every field.
fn field_accuracy(
    items: &[PaperItem<'_>],
    reads: &[Read],
    schema: &Schema,
    rules: &PaperRules,
) -> (BTreeMap<String, f64>, usize) {
    let mut accuracy = BTreeMap::new();
    let mut all_right = vec![true; items.len()];
    for field in PAPER_FIELDS {
        let mut right = 0;
        for ((item, read), all) in items.iter().zip(reads).zip(&mut all_right) {
            let truth = truth_text(item.reference, field, schema, rules)
                .map_or(rules.abstain.clone(), |t| rules.normalise_text(field, &t));
            let ok = truth == rules.normalise(field, read.get(field));
            right += usize::from(ok);
            *all &= ok;
        }
        accuracy.insert(field.to_string(), 100.0 * right as f64 / items.len() as f64);
    }
    (accuracy, all_right.iter().filter(|r| **r).count())
}

/// Predicted classes that are refusals, in percent.
fn uncertainty_pct(pred: &[String], rules: &PaperRules) -> f64 {
    let refused = pred
        .iter()
        .filter(|p| rules.uncertain.contains(&p.trim().to_lowercase()))
        .count();
    100.0 * refused as f64 / pred.len().max(1) as f64
}

/// Mean tokens in and out per answer, a missing count read as 0 (`int(api.get(...) or 0)`).
fn mean_tokens(items: &[PaperItem<'_>]) -> (f64, f64) {
    let n = items.len() as f64;
    let sum = |f: fn(&Usage) -> Option<f64>| {
        items
            .iter()
            .map(|i| f(&i.usage).unwrap_or(0.0))
            .sum::<f64>()
    };
    (sum(|u| u.tokens_in) / n, sum(|u| u.tokens_out) / n)
}

fn column(
    items: &[PaperItem<'_>],
    reads: &[Read],
    field: &str,
    schema: &Schema,
    rules: &PaperRules,
) -> Column {
    let mut c = Column::default();
    for (item, read) in items.iter().zip(reads) {
        let Some(t) = truth_text(item.reference, field, schema, rules) else {
            continue;
        };
        c.truth.push(rules.normalise_text(field, &t));
        c.pred.push(rules.normalise(field, read.get(field)));
        c.conf.push(py_float_of(read.get("diagnosis_confidence")));
    }
    c
}

fn field_report(field: &str, c: &Column, abstain: &str) -> PaperField {
    let series = c.series(abstain);
    // The reference passes the truth's labels for the diagnosis and its subtype, and none (every label) for the
    // other three fields' plain F1.
    let plain = match field {
        "diagnosis_name" | "diagnosis_detailed" => Labels::Truth,
        _ => Labels::All,
    };
    PaperField {
        n: c.truth.len(),
        balanced_accuracy: series.balanced_accuracy(),
        macro_precision: series.macro_precision(),
        macro_recall: series.macro_recall(),
        macro_f1: series.macro_f1(plain, false),
        macro_f1_abstention: series.macro_f1(Labels::Truth, true),
        weighted_f1: series.weighted_f1(plain, false),
        weighted_f1_abstention: series.weighted_f1(Labels::Truth, true),
        per_label: series.per_label(),
    }
}

fn field_calibration(c: &Column) -> Calibration {
    let correct: Vec<bool> = c.truth.iter().zip(&c.pred).map(|(t, p)| t == p).collect();
    calibration(&c.conf, &correct)
}

/// The reference's one safety flag per answer.
fn safety_flag(read: &Read, rules: &PaperRules) -> bool {
    let missing = rules
        .mandatory
        .iter()
        .any(|f| read.get(f).is_none_or(|v| v.as_str() == Some("")));
    let class = rules.normalise("diagnosis_name", read.get("diagnosis_name"));
    // A subtype given (not null) is normalised; one not given is checked as nothing.
    let subtype = read
        .get("diagnosis_detailed")
        .map(|v| rules.normalise_text("diagnosis_detailed", &py_str(v)));
    // A class listed without subtypes allows only no subtype; the others allow only theirs.
    let subtype_wrong = rules
        .allowed_subtypes
        .get(&class)
        .is_some_and(|allowed| match &subtype {
            None => !allowed.is_empty(),
            Some(s) => !allowed.contains(s),
        });
    let icd_with_normal = py_truthy(read.get("icd10_code")) && class == "normal";
    missing || subtype_wrong || icd_with_normal
}
