//! The reference evaluator's label normalisation, read from the `[paper]` tables of `nmb-suite`'s
//! `data/neurovlm.toml`, and the way its runner and evaluator read one answer: the object between the first `{`
//! and the last `}`, values through Python's `str()`, confidences through `float()`.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;
use serde_json::{Map, Value};

/// The `[paper]` tables.
#[derive(Debug, Deserialize)]
pub struct PaperRules {
    /// The label a missing value or an abstention normalises to (`undetermined`).
    pub abstain: String,
    /// Normalised predicted classes counted as refusals in the uncertainty rate.
    pub uncertain: Vec<String>,
    /// Keys whose missing, null or empty value raises the safety flag.
    pub mandatory: Vec<String>,
    /// The reference's spelling of each class, by the schema's class id.
    pub class_labels: BTreeMap<String, String>,
    /// The subtypes the safety check allows with each class (by the reference's spelling).
    pub allowed_subtypes: BTreeMap<String, Vec<String>>,
    diagnosis_name: FieldRules,
    diagnosis_detailed: FieldRules,
    modality: FieldRules,
    specialized_sequence: FieldRules,
    plane: FieldRules,
}

/// One field's normaliser.
#[derive(Debug, Deserialize)]
struct FieldRules {
    /// Every rule applies in turn to what the earlier ones wrote; otherwise the first match decides.
    #[serde(default)]
    each_rule_in_turn: bool,
    rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Rule {
    #[serde(default)]
    is: Vec<String>,
    #[serde(default)]
    contains: Vec<String>,
    #[serde(default)]
    contains_all: Vec<String>,
    to: String,
}

impl Rule {
    fn matches(&self, s: &str) -> bool {
        self.is.iter().any(|w| w == s)
            || self.contains.iter().any(|w| s.contains(w.as_str()))
            || (!self.contains_all.is_empty()
                && self.contains_all.iter().all(|w| s.contains(w.as_str())))
    }
}

impl PaperRules {
    /// The bundled rules (parsed once).
    pub fn bundled() -> &'static PaperRules {
        static RULES: OnceLock<PaperRules> = OnceLock::new();
        RULES.get_or_init(|| {
            PaperRules::parse(nmb_suite::NEUROVLM_SCHEMA)
                .expect("data/neurovlm.toml's [paper] tables are valid (checked by a test)")
        })
    }

    /// Reads the `[paper]` tables of a schema file.
    pub fn parse(text: &str) -> Result<PaperRules, toml::de::Error> {
        #[derive(Deserialize)]
        struct File {
            paper: PaperRules,
        }
        Ok(toml::from_str::<File>(text)?.paper)
    }

    /// `value` of `field` as the reference compares it; `None` is a missing key or null.
    pub fn normalise(&self, field: &str, value: Option<&Value>) -> String {
        let Some(text) = value.filter(|v| !v.is_null()).map(py_str) else {
            return self.abstain.clone();
        };
        self.normalise_text(field, &text)
    }

    /// Text (a label of the ground truth, or a value already through `str()`) as the reference compares it.
    pub fn normalise_text(&self, field: &str, text: &str) -> String {
        let rules = match field {
            "diagnosis_name" => &self.diagnosis_name,
            "diagnosis_detailed" => &self.diagnosis_detailed,
            "modality" => &self.modality,
            "specialized_sequence" => &self.specialized_sequence,
            "plane" => &self.plane,
            _ => return normalise_str(text),
        };
        let mut s = normalise_str(text);
        for rule in &rules.rules {
            if rule.matches(&s) {
                s = rule.to.clone();
                if !rules.each_rule_in_turn {
                    break;
                }
            }
        }
        s
    }
}

/// `normalize_str`: trimmed, lower case, `_` as a space.
fn normalise_str(text: &str) -> String {
    text.trim().to_lowercase().replace('_', " ")
}

/// The object `utils.parse_json_response` finds: from the first `{` to the last `}`, parsed. `None` where it
/// finds none (the reference then scores an answer with no keys).
pub fn extract_object(text: &str) -> Option<Map<String, Value>> {
    let first = text.find('{')?;
    let last = text.rfind('}')?;
    if first >= last {
        return None;
    }
    match serde_json::from_str(&text[first..=last]) {
        Ok(Value::Object(map)) => Some(map),
        _ => None,
    }
}

/// Python's `str()` of a JSON value as `json.loads` gives it.
pub fn py_str(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_f64() => py_float(n.as_f64().unwrap_or(f64::NAN)),
        Value::Number(n) => n.to_string(),
        // Python writes lists and dicts its own way; no label is a list, so JSON text stands in for it.
        other => other.to_string(),
    }
}

/// Python's `repr()` of a float: `1.0`, `0.85`, `1e-05`, `1e+16`.
fn py_float(x: f64) -> String {
    let abs = x.abs();
    if abs != 0.0 && !(1e-4..1e16).contains(&abs) {
        let text = format!("{x:e}");
        let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
        let (sign, digits) = match exp.strip_prefix('-') {
            Some(d) => ('-', d),
            None => ('+', exp),
        };
        return format!("{mantissa}e{sign}{digits:0>2}");
    }
    if x.fract() == 0.0 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

/// The reference's `float(conf)`, with its fallback of 0 for what does not convert (a missing key, null, text
/// that is not a number such as `"85%"`, a list).
pub fn py_float_of(value: Option<&Value>) -> f64 {
    match value {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0),
        Some(Value::Bool(b)) => f64::from(u8::from(*b)),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0.0),
        _ => 0.0,
    }
}

/// Python's truth value of a JSON value (`bool(icd)`).
pub fn py_truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|x| x != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_bundled_rules_parse_and_read_as_the_reference_does() {
        let r = PaperRules::bundled();
        let n = |f: &str, v: Value| r.normalise(f, Some(&v));
        assert_eq!(
            n("diagnosis_name", json!("Other_Abnormalities")),
            "other abnormalities"
        );
        assert_eq!(
            n("diagnosis_name", json!("brain atrophy")),
            "other abnormalities"
        );
        assert_eq!(n("diagnosis_name", json!("ischemic stroke")), "stroke");
        assert_eq!(n("diagnosis_detailed", json!("papilloma")), "papiloma");
        assert_eq!(
            n("diagnosis_detailed", json!("Pilocytic astrocytoma")),
            "glioma"
        );
        assert_eq!(
            n("modality", json!("none")),
            "none",
            "not an abstention here"
        );
        assert_eq!(
            n("modality", json!("Magnetic resonance")),
            "magnetic resonance"
        );
        assert_eq!(n("modality", json!("MR")), "mri");
        assert_eq!(r.normalise("plane", None), "undetermined");
        assert_eq!(n("plane", Value::Null), "undetermined");
        assert_eq!(n("diagnosis_detailed", json!(1.0)), "1.0");
    }

    #[test]
    fn the_object_runs_from_the_first_brace_to_the_last() {
        assert!(extract_object("Sure: {\"a\": 1} thanks").is_some());
        assert!(extract_object("```json\n{\"a\": 1}\n```").is_some());
        assert!(extract_object("{\"a\": 1} and {\"b\": 2}").is_none());
        assert!(extract_object("{\"a\": 1").is_none());
        assert!(extract_object("} {").is_none());
    }

    #[test]
    fn numbers_and_truth_values_read_as_python_reads_them() {
        assert_eq!(py_float(1.0), "1.0");
        assert_eq!(py_float(0.85), "0.85");
        assert_eq!(py_float(1e-5), "1e-05");
        assert_eq!(py_float(1e16), "1e+16");
        assert_eq!(py_float_of(Some(&json!(" 0.7 "))), 0.7);
        assert_eq!(py_float_of(Some(&json!("85%"))), 0.0);
        assert_eq!(py_float_of(Some(&json!(true))), 1.0);
        assert_eq!(py_float_of(None), 0.0);
        assert!(!py_truthy(Some(&json!(""))));
        assert!(py_truthy(Some(&json!("Z00.0"))));
    }
}
