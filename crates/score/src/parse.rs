//! Reading answers: the ranked differential, the lesion description and the rationale, from JSON answers and
//! from free text.
//!
//! Models asked for JSON still wrap it in code fences, put prose around it, rename keys or give up on JSON and
//! write a numbered list; small local models do all of these. The parser tries, in order:
//! 1. a JSON object anywhere in the text (the whole text, a fenced block, or the first balanced `{...}`), with
//!    tolerant key names (`differential`, `differential_diagnosis`, `diagnoses`; entries as objects or strings,
//!    ordered by `rank` when given);
//! 2. a numbered or bulleted list (the one under a "differential" heading when there are several), each item
//!    split into diagnosis and evidence at the first `:`, ` - `, ` – ` or ` — `;
//! 3. labelled lines (`Final diagnosis:`, `Diagnosis:`, `Lesion type:`, `Location:`, `Findings:`,
//!    `Rationale:`), markdown emphasis removed;
//! 4. for diagnoses only, a phrase in prose ("the most likely diagnosis is X").
//!
//! What a family needs and did not get is a [`ParseError`]: the sample is then recorded as `parse_failed`,
//! which counts as a wrong answer (and is counted separately).

use std::cell::Cell;

use nmb_results::{AnswerFormat, ParsedAnswer, RankedDiagnosis};
use nmb_suite::Family;
use serde::Deserialize;
use serde_json::{Map, Value};

/// Why an answer could not be read into the shape its family needs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("the answer is empty")]
    Empty,
    #[error("no diagnosis found (expected JSON with \"differential\" or \"final_diagnosis\", a numbered list, or a \"Diagnosis:\" line)")]
    NoDiagnosis,
    #[error("no lesion description found (expected JSON with \"lesion_type\" and \"location\", or \"Lesion type:\" and \"Location:\" lines)")]
    NoLesion,
    #[error("not the structured answer's one JSON object: {0}")]
    InvalidJson(String),
}

/// What was read from an answer, and why it falls short of what the family needs (if it does). A failed parse
/// keeps whatever it could read, so a report can show it.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub answer: ParsedAnswer,
    pub error: Option<ParseError>,
}

impl Parsed {
    /// The answer when nothing the family needs is missing.
    pub fn ok(self) -> Option<ParsedAnswer> {
        self.error.is_none().then_some(self.answer)
    }
}

type Outcome = Result<ParsedAnswer, Box<(ParsedAnswer, ParseError)>>;

/// Parses `text` as an answer to a task of `family`.
pub fn parse_answer(family: Family, text: &str) -> Parsed {
    let outcome = parse_family(family, text);
    match outcome {
        Ok(answer) => Parsed {
            answer,
            error: None,
        },
        Err(failed) => {
            let (answer, error) = *failed;
            Parsed {
                answer,
                error: Some(error),
            }
        }
    }
}

fn parse_family(family: Family, text: &str) -> Outcome {
    if text.trim().is_empty() {
        return fail(ParsedAnswer::default(), ParseError::Empty);
    }
    match family {
        Family::Differential => parse_differential(text),
        Family::Lesion => parse_lesion(text),
        Family::Rationale => parse_rationale(text),
        Family::Structured => parse_structured(text),
        Family::ClosedVqa | Family::OpenVqa | Family::MultipleChoice => Ok(ParsedAnswer {
            format: Some(AnswerFormat::Verbatim),
            ..ParsedAnswer::default()
        }),
    }
}

/// NeuroVLM-Bench answers are read strictly (see [`crate::structured`]): invalid JSON is a parse failure, and the
/// final diagnosis is the class named (none when the model abstained, which is valid but wrong).
fn parse_structured(text: &str) -> Outcome {
    let schema = crate::structured::Schema::bundled();
    let answer = crate::structured::parse_answer(text, schema);
    if let Some(error) = answer.json_error {
        return fail(ParsedAnswer::default(), ParseError::InvalidJson(error));
    }
    Ok(ParsedAnswer {
        format: Some(AnswerFormat::Json),
        final_diagnosis: answer.field("diagnosis_name").value().map(str::to_string),
        ..ParsedAnswer::default()
    })
}

fn fail(answer: ParsedAnswer, error: ParseError) -> Outcome {
    Err(Box::new((answer, error)))
}

/// The ranked list the diagnosis matchers examine: the differential, else the final diagnosis alone.
pub fn ranked_diagnoses(parsed: &ParsedAnswer) -> Vec<RankedDiagnosis> {
    if !parsed.differential.is_empty() {
        return parsed.differential.clone();
    }
    parsed
        .final_diagnosis
        .iter()
        .map(|d| RankedDiagnosis {
            rank: 1,
            diagnosis: d.clone(),
            evidence: None,
        })
        .collect()
}

fn parse_differential(text: &str) -> Outcome {
    let mut parsed = ParsedAnswer::default();
    if let Some(obj) = find_json_object(text) {
        parsed.format = Some(AnswerFormat::Json);
        parsed.differential = json_differential(&obj);
        parsed.final_diagnosis = json_str(&obj, FINAL_KEYS);
        parsed.rationale = json_str(&obj, RATIONALE_KEYS);
    }
    if parsed.differential.is_empty() && parsed.final_diagnosis.is_none() {
        let list = find_list(text);
        let labels = labelled(text);
        parsed.final_diagnosis = label(&labels, FINAL_LABELS);
        parsed.rationale = parsed
            .rationale
            .or_else(|| label(&labels, &["rationale", "reasoning"]));
        if !list.is_empty() {
            parsed.format = Some(AnswerFormat::NumberedList);
            parsed.differential = list;
        } else if parsed.final_diagnosis.is_some() {
            parsed.format = Some(AnswerFormat::LabelledLines);
        } else if let Some(d) = prose_diagnosis(text) {
            parsed.format = Some(AnswerFormat::FreeText);
            parsed.final_diagnosis = Some(d);
        }
    }
    if parsed.differential.is_empty() && parsed.final_diagnosis.is_none() {
        return fail(parsed, ParseError::NoDiagnosis);
    }
    Ok(parsed)
}

fn parse_lesion(text: &str) -> Outcome {
    let mut parsed = ParsedAnswer::default();
    if let Some(obj) = find_json_object(text) {
        parsed.format = Some(AnswerFormat::Json);
        parsed.lesion_type = json_str(&obj, &["lesion_type", "type", "lesion"]);
        parsed.lesion_location = json_str(
            &obj,
            &["location", "lesion_location", "anatomical_location"],
        );
        parsed.findings = json_str(&obj, &["findings", "imaging_findings", "evidence"]);
    }
    if parsed.lesion_type.is_none() && parsed.lesion_location.is_none() {
        let labels = labelled(text);
        parsed.lesion_type = label(&labels, &["lesion type", "type", "lesion"]);
        parsed.lesion_location = label(
            &labels,
            &["location", "lesion location", "anatomical location", "site"],
        );
        parsed.findings = label(&labels, &["findings", "imaging findings"]);
        if parsed.lesion_type.is_some() || parsed.lesion_location.is_some() {
            parsed.format = Some(AnswerFormat::LabelledLines);
        }
    }
    if parsed.lesion_type.is_none() || parsed.lesion_location.is_none() {
        return fail(parsed, ParseError::NoLesion);
    }
    Ok(parsed)
}

fn parse_rationale(text: &str) -> Outcome {
    let mut parsed = ParsedAnswer::default();
    if let Some(obj) = find_json_object(text) {
        parsed.format = Some(AnswerFormat::Json);
        parsed.final_diagnosis = json_str(&obj, FINAL_KEYS).or_else(|| {
            json_differential(&obj)
                .into_iter()
                .next()
                .map(|d| d.diagnosis)
        });
        parsed.rationale = json_str(&obj, RATIONALE_KEYS);
    }
    if parsed.final_diagnosis.is_none() {
        let labels = labelled(text);
        if let Some(d) = label(&labels, FINAL_LABELS) {
            parsed.format = Some(AnswerFormat::LabelledLines);
            parsed.final_diagnosis = Some(d);
            parsed.rationale = label(&labels, &["rationale", "reasoning", "explanation"]);
        } else if let Some(d) = prose_diagnosis(text) {
            parsed.format = Some(AnswerFormat::FreeText);
            parsed.final_diagnosis = Some(d);
        }
    }
    if parsed.rationale.is_none() && parsed.format != Some(AnswerFormat::Json) {
        // Prose answers are their own rationale (BERTScore compares the whole explanation).
        parsed.rationale = Some(strip_markdown(text.trim()));
    }
    parsed.differential = ranked_diagnoses(&parsed);
    if parsed.final_diagnosis.is_none() {
        return fail(parsed, ParseError::NoDiagnosis);
    }
    Ok(parsed)
}

// ---------------------------------------------------------------------------------------------------------------
// JSON

const FINAL_KEYS: &[&str] = &[
    "final_diagnosis",
    "diagnosis",
    "most_likely_diagnosis",
    "primary_diagnosis",
    "final",
];
const RATIONALE_KEYS: &[&str] = &["rationale", "reasoning", "explanation", "justification"];
const DIFFERENTIAL_KEYS: &[&str] = &[
    "differential",
    "differential_diagnosis",
    "differential_diagnoses",
    "ranked_differential",
    "diagnoses",
    "ddx",
];

/// The first JSON object in `text`: the whole text, else the object that starts at each `{` in turn.
///
/// Each try parses from its `{` only as far as the object goes (or as far as it is valid JSON), so an object
/// followed by prose is found without looking for its end first. The tries share a budget of
/// 64 bytes read per byte of text, so that answers built to make every try read far (a
/// hundred thousand nested braces) are read in time linear in their length; serde_json's nesting limit (128)
/// ends each try through nested braces early, so the budget is only reached by such answers.
pub fn find_json_object(text: &str) -> Option<Map<String, Value>> {
    let trimmed = text.trim();
    if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(trimmed) {
        return Some(m);
    }
    let budget = Cell::new(text.len().saturating_mul(SCAN_BUDGET_PER_BYTE));
    let mut start = 0;
    while let Some(offset) = text[start..].find('{') {
        let open = start + offset;
        let reader = Budgeted {
            bytes: &text.as_bytes()[open..],
            budget: &budget,
        };
        let mut de = serde_json::Deserializer::from_reader(reader);
        if let Ok(Value::Object(m)) = Value::deserialize(&mut de) {
            return Some(m);
        }
        if budget.get() == 0 {
            return None;
        }
        start = open + 1;
    }
    None
}

/// Bytes the tries of [`find_json_object`] may read per byte of the text, together.
const SCAN_BUDGET_PER_BYTE: usize = 64;

/// The bytes from one `{` on, read against a budget shared by every try: reading stops (as the end of the
/// text would) once the budget is spent.
struct Budgeted<'a> {
    bytes: &'a [u8],
    budget: &'a Cell<usize>,
}

impl std::io::Read for Budgeted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf.len().min(self.bytes.len()).min(self.budget.get());
        buf[..n].copy_from_slice(&self.bytes[..n]);
        self.bytes = &self.bytes[n..];
        self.budget.set(self.budget.get() - n);
        Ok(n)
    }
}

/// Looks up the first of `keys` (case-insensitive, spaces or dashes for underscores) holding a non-empty string
/// (or a number, as text).
fn json_str(obj: &Map<String, Value>, keys: &[&str]) -> Option<String> {
    keys.iter()
        .find_map(|k| get_key(obj, k))
        .and_then(value_text)
}

fn get_key<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.iter().find(|(k, _)| key_norm(k) == key).map(|(_, v)| v)
}

fn key_norm(k: &str) -> String {
    k.trim().to_ascii_lowercase().replace([' ', '-'], "_")
}

fn value_text(v: &Value) -> Option<String> {
    let s = match v {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    (!s.is_empty()).then_some(s)
}

fn json_differential(obj: &Map<String, Value>) -> Vec<RankedDiagnosis> {
    let Some(Value::Array(items)) = DIFFERENTIAL_KEYS.iter().find_map(|k| get_key(obj, k)) else {
        return Vec::new();
    };
    let mut entries: Vec<(Option<f64>, usize, String, Option<String>)> = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| match item {
            Value::String(s) => {
                let (dx, ev) = split_item(s);
                (!dx.is_empty()).then_some((None, i, dx, ev))
            }
            Value::Object(o) => {
                let dx = json_str(o, &["diagnosis", "name", "condition", "dx", "disease"])?;
                let ev = json_str(
                    o,
                    &["evidence", "supporting_evidence", "reason", "rationale"],
                );
                let rank = get_key(o, "rank").and_then(Value::as_f64);
                Some((rank, i, clean_diagnosis(&dx), ev))
            }
            _ => None,
        })
        .filter(|(_, _, dx, _)| !dx.is_empty())
        .collect();
    // Explicit ranks win; entries without one keep their place after the ranked ones.
    entries.sort_by(|a, b| {
        let ra = a.0.unwrap_or(f64::INFINITY);
        let rb = b.0.unwrap_or(f64::INFINITY);
        ra.total_cmp(&rb).then(a.1.cmp(&b.1))
    });
    entries
        .into_iter()
        .enumerate()
        .map(|(i, (_, _, diagnosis, evidence))| RankedDiagnosis {
            rank: i as u32 + 1,
            diagnosis,
            evidence,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------------------------
// Free text

const FINAL_LABELS: &[&str] = &[
    "final diagnosis",
    "most likely diagnosis",
    "primary diagnosis",
    "diagnosis",
    "working diagnosis",
    "leading diagnosis",
];

/// Removes markdown emphasis and inline code markers.
fn strip_markdown(s: &str) -> String {
    s.replace("**", "")
        .replace("__", "")
        .replace('`', "")
        .trim()
        .to_string()
}

/// A list item's marker: `1.`, `1)`, `(1)`, `#1`, `-`, `*`, `•`. Returns the rest of the line.
fn list_item(line: &str) -> Option<&str> {
    let t = line.trim_start();
    for bullet in ["- ", "* ", "• ", "– "] {
        if let Some(rest) = t.strip_prefix(bullet) {
            return Some(rest);
        }
    }
    let t = t.strip_prefix('(').unwrap_or(t);
    let t = t.strip_prefix('#').unwrap_or(t);
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || digits > 2 {
        return None;
    }
    let rest = &t[digits..];
    let rest = rest
        .strip_prefix('.')
        .or_else(|| rest.strip_prefix(')'))
        .or_else(|| rest.strip_prefix(':'))?;
    rest.starts_with(char::is_whitespace).then(|| rest.trim())
}

/// Lists in the text as runs of item lines; the one after a line mentioning "differential" wins, else the first.
fn find_list(text: &str) -> Vec<RankedDiagnosis> {
    let mut lists: Vec<(bool, Vec<String>)> = Vec::new();
    let mut heading_seen = false;
    let mut current: Option<(bool, Vec<String>)> = None;
    for line in text.lines() {
        match list_item(line) {
            Some(item) => current
                .get_or_insert_with(|| (heading_seen, Vec::new()))
                .1
                .push(item.to_string()),
            None => {
                if line.trim().is_empty() {
                    continue; // blank lines inside a list do not end it
                }
                if let Some(list) = current.take() {
                    lists.push(list);
                }
                heading_seen = line.to_ascii_lowercase().contains("differential");
            }
        }
    }
    lists.extend(current);
    let chosen = lists
        .iter()
        .find(|(after_heading, _)| *after_heading)
        .or_else(|| lists.first());
    let Some((_, items)) = chosen else {
        return Vec::new();
    };
    items
        .iter()
        .map(|s| split_item(s))
        .filter(|(dx, _)| !dx.is_empty())
        .enumerate()
        .map(|(i, (diagnosis, evidence))| RankedDiagnosis {
            rank: i as u32 + 1,
            diagnosis,
            evidence,
        })
        .collect()
}

/// Splits "diagnosis: evidence" (or ` - `, ` – `, ` — `) and cleans the diagnosis.
fn split_item(item: &str) -> (String, Option<String>) {
    let item = strip_markdown(item);
    let cut = [": ", " - ", " – ", " — ", " -- "]
        .iter()
        .filter_map(|sep| item.find(sep).map(|i| (i, sep.len())))
        .min_by_key(|(i, _)| *i);
    let (dx, ev) = match cut {
        Some((i, len)) => (&item[..i], Some(item[i + len..].trim().to_string())),
        None => (item.trim_end_matches(':'), None),
    };
    (clean_diagnosis(dx), ev.filter(|e| !e.is_empty()))
}

/// Drops labels and trailing punctuation around a diagnosis ("Diagnosis: X." -> "X").
fn clean_diagnosis(dx: &str) -> String {
    let mut d = strip_markdown(dx);
    let lower = d.to_ascii_lowercase();
    for l in FINAL_LABELS {
        if lower.starts_with(l) && lower[l.len()..].trim_start().starts_with(':') {
            d = d[l.len()..].trim_start()[1..].trim().to_string();
            break;
        }
    }
    d.trim()
        .trim_end_matches(['.', ';', ','])
        .trim_matches('"')
        .trim()
        .to_string()
}

/// `label: value` lines, with the label lowercased and markdown removed. A value may continue on following
/// lines that carry no label (for rationales).
fn labelled(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for raw in text.lines() {
        let line = strip_markdown(raw);
        let line = line.trim_start_matches('#').trim();
        let label_end = line.find(':').filter(|&i| {
            let l = &line[..i];
            i > 0 && i <= 40 && l.chars().all(|c| c.is_alphabetic() || c == ' ' || c == '-')
        });
        match label_end {
            Some(i) => out.push((
                line[..i].trim().to_ascii_lowercase(),
                line[i + 1..].trim().to_string(),
            )),
            None => {
                if let Some(last) = out.last_mut() {
                    if !line.is_empty() {
                        if !last.1.is_empty() {
                            last.1.push(' ');
                        }
                        last.1.push_str(line);
                    }
                }
            }
        }
    }
    out
}

fn label(labels: &[(String, String)], names: &[&str]) -> Option<String> {
    names.iter().find_map(|n| {
        labels
            .iter()
            .find(|(l, v)| l == n && !v.trim().is_empty())
            .map(|(_, v)| clean_diagnosis_or_text(n, v))
    })
}

fn clean_diagnosis_or_text(label: &str, value: &str) -> String {
    if label.contains("diagnosis") {
        // A labelled diagnosis line may run on into prose: keep its first sentence.
        clean_diagnosis(first_clause(value))
    } else {
        value.trim().to_string()
    }
}

/// Up to the first sentence end (". " or end of line), keeping abbreviations like "e.g." whole.
fn first_clause(s: &str) -> &str {
    let mut search = 0;
    while let Some(i) = s[search..].find(". ") {
        let at = search + i;
        let word_start = s[..at].rfind(' ').map_or(0, |j| j + 1);
        let word = &s[word_start..at];
        if word.len() <= 2 || word.contains('.') {
            search = at + 2; // "e.g. ", "Dr. ", "vs. "
            continue;
        }
        return &s[..at];
    }
    s
}

/// "the most likely diagnosis is X", "consistent with X", "diagnosis of X" in prose.
fn prose_diagnosis(text: &str) -> Option<String> {
    const CUES: &[&str] = &[
        "most likely diagnosis is",
        "most likely diagnosis:",
        "final diagnosis is",
        "the diagnosis is",
        "diagnosis is most likely",
        "most consistent with",
        "is consistent with",
        "most likely has",
        "most likely represents",
        "diagnosis of",
    ];
    let lower = text.to_lowercase();
    // `to_lowercase` can change byte lengths for some scripts; only use positions when it did not.
    if lower.len() != text.len() {
        return None;
    }
    for cue in CUES {
        if let Some(i) = lower.find(cue) {
            let rest = text[i + cue.len()..].trim_start();
            let rest = rest.strip_prefix(':').unwrap_or(rest).trim_start();
            let end = rest.find(['\n', ';', '(', ',']).unwrap_or(rest.len());
            let clause = first_clause(&rest[..end]);
            let dx = strip_articles(&clean_diagnosis(clause));
            if !dx.is_empty() && dx.split_whitespace().count() <= 12 {
                return Some(dx);
            }
        }
    }
    None
}

fn strip_articles(s: &str) -> String {
    let lower = s.to_ascii_lowercase();
    for a in ["an ", "a ", "the "] {
        if lower.starts_with(a) {
            return s[a.len()..].trim().to_string();
        }
    }
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dx_names(p: &ParsedAnswer) -> Vec<&str> {
        p.differential
            .iter()
            .map(|d| d.diagnosis.as_str())
            .collect()
    }

    #[test]
    fn nested_braces_are_tried_once_each_and_an_object_after_them_is_found() {
        // Each `{` used to be scanned to its balance: quadratic in the depth (100,000 braces did not finish).
        let deep = format!("{}{}", "{".repeat(100_000), "}".repeat(100_000));
        let parsed = parse_answer(Family::Differential, &deep);
        assert_eq!(parsed.error, Some(ParseError::NoDiagnosis));
        let after = format!(
            "{} then {{\"final_diagnosis\": \"Stroke\"}}",
            "{".repeat(100_000)
        );
        let obj = find_json_object(&after).expect("the object after the braces");
        assert_eq!(obj["final_diagnosis"], "Stroke");
        // Nested objects that never close stop at serde_json's nesting limit, then at the shared budget.
        let open = "{\"a\":".repeat(20_000);
        assert_eq!(find_json_object(&open), None);
    }

    #[test]
    fn json_in_a_fence_with_prose_around_it() {
        let text = "Sure! Here is my assessment.\n```json\n{\"differential\": [{\"diagnosis\": \"Multiple \
                    sclerosis\", \"evidence\": \"periventricular {ovoid} lesions\"}, {\"diagnosis\": \"ADEM\", \
                    \"evidence\": \"less likely\"}], \"final_diagnosis\": \"Relapsing-remitting MS\", \
                    \"rationale\": \"Dawson fingers.\"}\n```\nLet me know.";
        let p = parse_answer(Family::Differential, text).ok().unwrap();
        assert_eq!(p.format, Some(AnswerFormat::Json));
        assert_eq!(dx_names(&p), ["Multiple sclerosis", "ADEM"]);
        assert_eq!(p.differential[0].rank, 1);
        assert_eq!(
            p.differential[0].evidence.as_deref(),
            Some("periventricular {ovoid} lesions")
        );
        assert_eq!(p.final_diagnosis.as_deref(), Some("Relapsing-remitting MS"));
        assert_eq!(p.rationale.as_deref(), Some("Dawson fingers."));
    }

    #[test]
    fn json_with_other_keys_ranks_and_plain_strings() {
        let text = r#"{"Differential Diagnosis": [{"rank": 2, "name": "Glioma"}, {"rank": 1, "name": "Abscess"}, {"name": "Metastasis"}]}"#;
        let p = parse_answer(Family::Differential, text).ok().unwrap();
        assert_eq!(dx_names(&p), ["Abscess", "Glioma", "Metastasis"]);
        assert_eq!(
            p.differential.iter().map(|d| d.rank).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        let p = parse_answer(
            Family::Differential,
            r#"{"diagnoses": ["CJD: cortical ribboning", "Hashimoto encephalopathy"]}"#,
        )
        .ok()
        .unwrap();
        assert_eq!(dx_names(&p), ["CJD", "Hashimoto encephalopathy"]);
        assert_eq!(
            p.differential[0].evidence.as_deref(),
            Some("cortical ribboning")
        );
    }

    #[test]
    fn numbered_list_with_markdown_and_a_final_line() {
        let text = "Based on the images:\n\n1. **Acute ischaemic stroke (left MCA)** - DWI bright, ADC dark\n\
                    2) Intracerebral haemorrhage: no blood on CT argues against\n\n3. Todd's paresis.\n\n\
                    Final diagnosis: Left MCA infarct.";
        let p = parse_answer(Family::Differential, text).ok().unwrap();
        assert_eq!(p.format, Some(AnswerFormat::NumberedList));
        assert_eq!(
            dx_names(&p),
            [
                "Acute ischaemic stroke (left MCA)",
                "Intracerebral haemorrhage",
                "Todd's paresis"
            ]
        );
        assert_eq!(p.final_diagnosis.as_deref(), Some("Left MCA infarct"));
    }

    #[test]
    fn the_list_under_the_differential_heading_wins() {
        let text = "Reasoning:\n1. The patient is young: relevant\n2. Lesions are ovoid\n\n\
                    Differential diagnosis:\n1. Multiple sclerosis\n2. NMOSD\n";
        let p = parse_answer(Family::Differential, text).ok().unwrap();
        assert_eq!(dx_names(&p), ["Multiple sclerosis", "NMOSD"]);
    }

    #[test]
    fn labelled_line_and_prose() {
        let p = parse_answer(
            Family::Differential,
            "Diagnosis: PRES. Blood pressure was high.",
        )
        .ok()
        .unwrap();
        assert_eq!(p.format, Some(AnswerFormat::LabelledLines));
        assert_eq!(ranked_diagnoses(&p)[0].diagnosis, "PRES");
        let p = parse_answer(
            Family::Differential,
            "Taken together, the most likely diagnosis is herpes simplex encephalitis, given the temporal \
             involvement.",
        )
        .ok()
        .unwrap();
        assert_eq!(p.format, Some(AnswerFormat::FreeText));
        assert_eq!(
            p.final_diagnosis.as_deref(),
            Some("herpes simplex encephalitis")
        );
    }

    #[test]
    fn parse_failures_say_why() {
        let e = parse_answer(Family::Differential, "   ").error;
        assert_eq!(e, Some(ParseError::Empty));
        let e = parse_answer(Family::Differential, "I cannot help with that.").error;
        assert_eq!(e, Some(ParseError::NoDiagnosis));
        let partial = parse_answer(Family::Lesion, "Lesion type: ring-enhancing lesion");
        assert_eq!(partial.error, Some(ParseError::NoLesion));
        assert_eq!(
            partial.answer.lesion_type.as_deref(),
            Some("ring-enhancing lesion")
        );
    }

    #[test]
    fn lesion_from_json_and_lines() {
        let p = parse_answer(
            Family::Lesion,
            "{\"lesion_type\": \"Acute infarct\", \"location\": \"Left MCA territory\", \"findings\": \"DWI+\"}",
        )
        .ok()
        .unwrap();
        assert_eq!(p.lesion_type.as_deref(), Some("Acute infarct"));
        assert_eq!(p.lesion_location.as_deref(), Some("Left MCA territory"));
        let p = parse_answer(
            Family::Lesion,
            "**Lesion type:** ring-enhancing abscess\n**Location:** right frontal lobe\nFindings: DWI \
             restriction\nin the core",
        )
        .ok()
        .unwrap();
        assert_eq!(p.lesion_type.as_deref(), Some("ring-enhancing abscess"));
        assert_eq!(p.lesion_location.as_deref(), Some("right frontal lobe"));
        assert_eq!(p.findings.as_deref(), Some("DWI restriction in the core"));
    }

    #[test]
    fn rationale_from_json_labels_or_prose() {
        let p = parse_answer(
            Family::Rationale,
            r#"{"diagnosis": "CJD", "rationale": "Rapid dementia, myoclonus, cortical ribboning."}"#,
        )
        .ok()
        .unwrap();
        assert_eq!(ranked_diagnoses(&p)[0].diagnosis, "CJD");
        assert_eq!(
            p.rationale.as_deref(),
            Some("Rapid dementia, myoclonus, cortical ribboning.")
        );
        let text =
            "Diagnosis: Sporadic CJD\nRationale: rapidly progressive dementia\nwith myoclonus.";
        let p = parse_answer(Family::Rationale, text).ok().unwrap();
        assert_eq!(p.final_diagnosis.as_deref(), Some("Sporadic CJD"));
        assert_eq!(
            p.rationale.as_deref(),
            Some("rapidly progressive dementia with myoclonus.")
        );
        let text = "The picture is most consistent with posterior reversible encephalopathy syndrome. The \
                    oedema is parieto-occipital.";
        let p = parse_answer(Family::Rationale, text).ok().unwrap();
        assert_eq!(
            p.final_diagnosis.as_deref(),
            Some("posterior reversible encephalopathy syndrome")
        );
        assert_eq!(p.rationale.as_deref(), Some(text));
    }

    #[test]
    fn abbreviations_do_not_end_a_labelled_diagnosis() {
        let p = parse_answer(
            Family::Differential,
            "Final diagnosis: Vascular dementia, e.g. SIVD. Next steps follow.",
        )
        .ok()
        .unwrap();
        assert_eq!(
            p.final_diagnosis.as_deref(),
            Some("Vascular dementia, e.g. SIVD")
        );
    }
}
