//! The paper reading against the authors' own evaluator: `fixtures/neurovlm_parity.json` holds answers that
//! exercise every rule of ChatMED/neurovlm-bench's `evaluate_detailed.py` and the numbers that evaluator printed
//! for them (written by `fixtures/neurovlm_parity.py`, which runs it at the pinned commit). Every number must
//! agree within 1e-9. The ground truth goes through the `neurovlm:` loader in image_mapping.csv's own columns, so
//! the dataset's spellings are checked on the way.

use std::path::Path;

use nmb_results::cost::Price;
use nmb_results::structured::paper::{PaperOptions, PaperReport};
use nmb_results::structured::Usage;
use nmb_score::structured::paper::{paper_report, PaperItem};
use nmb_suite::{LoadOptions, Reference};
use serde_json::Value;

const TOLERANCE: f64 = 1e-9;

fn fixture() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/neurovlm_parity.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The ground truths of one answer set, loaded as a `neurovlm:` manifest in image_mapping.csv's columns.
fn references(answers: &[Value]) -> Vec<Reference> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.png"),
        nmb_test_support::images::png(8, 1),
    )
    .unwrap();
    let mut csv = String::from(
        "dataset,file_path,class,original_class,subclass,modality,modality_subtype,plane\n",
    );
    for a in answers {
        let t = &a["truth"];
        let cell = |k: &str| t[k].as_str().unwrap().to_string();
        csv += &format!(
            "parity,a.png,{},,{},{},{},{}\n",
            cell("class"),
            cell("subclass"),
            cell("modality"),
            cell("modality_subtype"),
            cell("plane")
        );
    }
    std::fs::write(dir.path().join("image_mapping.csv"), csv).unwrap();
    let map = [
        ("image", "file_path"),
        ("diagnosis_name", "class"),
        ("diagnosis_detailed", "subclass"),
        ("specialized_sequence", "modality_subtype"),
    ];
    let opts = LoadOptions {
        map: map
            .iter()
            .map(|(f, c)| (f.to_string(), c.to_string()))
            .collect(),
        ..LoadOptions::default()
    };
    let spec = format!(
        "neurovlm:{}",
        dir.path().join("image_mapping.csv").display()
    );
    let loaded = nmb_suite::load(&spec, &opts).unwrap();
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    loaded
        .suite
        .cases
        .iter()
        .map(|c| c.tasks[0].reference.clone().unwrap())
        .collect()
}

fn report(set: &Value, price: Price, options: PaperOptions) -> PaperReport {
    let answers = set["answers"].as_array().unwrap();
    let refs = references(answers);
    let items: Vec<PaperItem<'_>> = answers
        .iter()
        .zip(&refs)
        .map(|(a, r)| PaperItem {
            reference: r,
            text: a["text"].as_str().unwrap(),
            usage: Usage {
                case_id: "c",
                latency_ms: None,
                tokens_in: a["tokens_in"].as_f64(),
                tokens_out: a["tokens_out"].as_f64(),
            },
        })
        .collect();
    paper_report(&items, 0, Some(price), options).unwrap()
}

/// Compares numbers, lists and nulls (the reference's NaN); records the largest difference.
struct Check {
    worst: f64,
    failures: Vec<String>,
}

impl Check {
    fn num(&mut self, what: &str, want: &Value, got: Option<f64>) {
        match (want.as_f64(), got) {
            (None, None) => {}
            (Some(w), Some(g)) => {
                let d = (w - g).abs();
                self.worst = self.worst.max(d);
                if d > TOLERANCE {
                    self.failures
                        .push(format!("{what}: reference {w}, nmb {g}"));
                }
            }
            (w, g) => self
                .failures
                .push(format!("{what}: reference {w:?}, nmb {g:?}")),
        }
    }

    fn list(&mut self, what: &str, want: &Value, got: &[f64]) {
        let want = want.as_array().unwrap();
        if want.len() != got.len() {
            self.failures
                .push(format!("{what}: {} values, nmb {}", want.len(), got.len()));
            return;
        }
        for (i, (w, g)) in want.iter().zip(got).enumerate() {
            self.num(&format!("{what}[{i}]"), w, Some(*g));
        }
    }

    fn same<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, want: T, got: T) {
        if want != got {
            self.failures
                .push(format!("{what}: reference {want:?}, nmb {got:?}"));
        }
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

fn compare(name: &str, want: &Value, got: &PaperReport, check: &mut Check) {
    let top = [
        ("all_fields_accuracy_pct", got.all_fields_accuracy_pct),
        ("json_valid_pct_reference", got.json_valid_pct),
        ("uncertainty_pct", got.uncertainty_pct),
        (
            "diagnosis_macro_f1_all_labels",
            got.diagnosis_macro_f1_all_labels,
        ),
        (
            "diagnosis_weighted_f1_all_labels",
            got.diagnosis_weighted_f1_all_labels,
        ),
        (
            "diagnosis_macro_f1_abstention_all_labels",
            got.diagnosis_macro_f1_abstention_all_labels,
        ),
        (
            "diagnosis_weighted_f1_abstention_all_labels",
            got.diagnosis_weighted_f1_abstention_all_labels,
        ),
        ("avg_input_tokens", got.avg_tokens_in),
        ("avg_output_tokens", got.avg_tokens_out),
    ];
    for (key, value) in top {
        check.num(&format!("{name}.{key}"), &want[key], Some(value));
    }
    check.num(&format!("{name}.avg_cost"), &want["avg_cost"], got.avg_cost);
    for (field, pct) in &got.field_accuracy_pct {
        check.num(
            &format!("{name}.field_accuracy_pct.{field}"),
            &want["field_accuracy_pct"][field],
            Some(*pct),
        );
    }
    for (field, c) in &got.calibration {
        let w = &want["calibration"][field];
        check.num(&format!("{name}.{field}.ece"), &w["ece"], c.ece);
        check.num(&format!("{name}.{field}.brier"), &w["brier"], c.brier);
        check.num(&format!("{name}.{field}.auroc"), &w["auc"], c.auroc);
    }
    let flags: Vec<bool> = want["safety_flags"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_i64() == Some(1))
        .collect();
    check.same(
        &format!("{name}.safety_flags"),
        flags,
        got.safety_flags.clone(),
    );
    let wanted_fields: Vec<String> = want["fields"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    check.same(
        &format!("{name}.fields"),
        wanted_fields,
        got.fields.keys().cloned().collect(),
    );
    for (field, f) in &got.fields {
        let w = &want["fields"][field];
        let at = |k: &str| format!("{name}.{field}.{k}");
        let numbers = [
            ("balanced_accuracy", f.balanced_accuracy),
            ("macro_precision", f.macro_precision),
            ("macro_recall", f.macro_recall),
            ("macro_f1", f.macro_f1),
            ("macro_f1_abstention", f.macro_f1_abstention),
            ("weighted_f1", f.weighted_f1),
            ("weighted_f1_abstention", f.weighted_f1_abstention),
        ];
        for (key, value) in numbers {
            check.num(&at(key), &w[key], Some(value));
        }
        let p = &f.per_label;
        check.same(&at("labels"), strings(&w["labels"]), p.labels.clone());
        check.same(
            &at("abstention_labels"),
            strings(&w["abstention_labels"]),
            p.abstention_labels.clone(),
        );
        let support: Vec<u64> = w["support"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_u64().unwrap())
            .collect();
        check.same(&at("support"), support, p.support.clone());
        check.list(&at("f1"), &w["f1"], &p.f1);
        check.list(
            &at("per_label_balanced_accuracy"),
            &w["per_label_balanced_accuracy"],
            &p.balanced_accuracy,
        );
        check.list(&at("precision"), &w["precision"], &p.precision);
        check.list(&at("recall"), &w["recall"], &p.recall);
        check.list(&at("f1_abstention"), &w["f1_abstention"], &p.f1_abstention);
    }
}

fn price(fixture: &Value) -> Price {
    Price {
        input_per_mtok: fixture["price"]["input_per_mtok"].as_f64().unwrap(),
        output_per_mtok: fixture["price"]["output_per_mtok"].as_f64().unwrap(),
        ..Price::default()
    }
}

#[test]
fn the_paper_reading_reproduces_the_reference_evaluator_on_both_answer_sets() {
    let fixture = fixture();
    assert_eq!(
        fixture["reference"]["commit"],
        "6e87ba48ed7df921a4ca4040836f580add264549"
    );
    let mut check = Check {
        worst: 0.0,
        failures: Vec::new(),
    };
    let bug = PaperOptions {
        json_validity_bug: true,
    };
    for set in fixture["sets"].as_array().unwrap() {
        let name = set["name"].as_str().unwrap();
        let got = report(set, price(&fixture), bug);
        compare(name, &set["numbers"], &got, &mut check);
    }
    eprintln!("largest difference from the reference: {:e}", check.worst);
    assert!(
        check.failures.is_empty(),
        "{} differences:\n{}",
        check.failures.len(),
        check.failures.join("\n")
    );
}

#[test]
fn without_the_bug_flag_the_json_valid_rate_counts_the_answers_that_parsed() {
    let fixture = fixture();
    let set = &fixture["sets"][0];
    let got = report(set, price(&fixture), PaperOptions::default());
    let answers = set["answers"].as_array().unwrap();
    let parsed = answers
        .iter()
        .filter(|a| {
            nmb_score::structured::paper::extract_object(a["text"].as_str().unwrap()).is_some()
        })
        .count();
    assert!(
        parsed < answers.len(),
        "the set holds answers that do not parse"
    );
    assert_eq!(
        got.json_valid_pct,
        100.0 * parsed as f64 / answers.len() as f64
    );
    assert_eq!(
        set["numbers"]["json_valid_pct_reference"], 100.0,
        "the reference's bug"
    );
}
