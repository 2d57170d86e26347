//! The grading rubric as a judge reads and answers it: the rubric's text in the prompt ([`render`]), the answer
//! it must give ([`answer_example`], [`schema`]), and strict validation of that answer ([`validate`]), with the
//! strict JSON reading every judge answer goes through ([`strict_json_object`], [`check_keys`]). The rubric
//! itself is data (`nmb_results::rubric`).

use std::collections::BTreeMap;

use nmb_results::rubric::Rubric;
use serde_json::{json, Map, Value};

/// One judge's valid rubric answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Grade {
    pub scores: BTreeMap<String, u8>,
    pub overall: u8,
    pub rationale: String,
}

/// The rubric as the judge reads it.
pub fn render(rubric: &Rubric) -> String {
    let mut s = format!(
        "Rubric: {} (id {}, version {})\n{}\n\nDimensions (each scored {} to {}):\n",
        rubric.title, rubric.id, rubric.version, rubric.instructions, rubric.min, rubric.max
    );
    for d in &rubric.dimensions {
        s.push_str(&format!("- {} ({}): {}\n", d.id, d.name, d.description));
        for (score, meaning) in &d.anchors {
            s.push_str(&format!("    {score} = {meaning}\n"));
        }
    }
    s.push_str(&format!(
        "- overall ({}): {}\n",
        rubric.overall.name, rubric.overall.description
    ));
    s
}

/// The JSON a judge must answer with, as an example line.
pub fn answer_example(rubric: &Rubric) -> String {
    let dims: Vec<String> = rubric
        .dimensions
        .iter()
        .map(|d| format!("\"{}\": <{}-{}>", d.id, rubric.min, rubric.max))
        .collect();
    format!(
        "{{\"scores\": {{{}}}, \"overall\": <{}-{}>, \"rationale\": \"<two or three sentences>\"}}",
        dims.join(", "),
        rubric.min,
        rubric.max
    )
}

pub fn schema(rubric: &Rubric) -> Value {
    let score = json!({"type": "integer", "minimum": rubric.min, "maximum": rubric.max});
    let props: Map<String, Value> = rubric
        .dimensions
        .iter()
        .map(|d| (d.id.clone(), score.clone()))
        .collect();
    json!({
        "type": "object",
        "properties": {
            "scores": {
                "type": "object",
                "properties": props,
                "required": rubric.dimension_ids(),
                "additionalProperties": false
            },
            "overall": score,
            "rationale": {"type": "string"}
        },
        "required": ["scores", "overall", "rationale"],
        "additionalProperties": false
    })
}

/// Strict validation of a judge's answer: one JSON object (a single code fence around it is tolerated),
/// every dimension present exactly once as an integer within the scale, an overall score, a rationale, and
/// nothing else.
pub fn validate(rubric: &Rubric, text: &str) -> Result<Grade, String> {
    let obj = strict_json_object(text)?;
    check_keys(&obj, &["scores", "overall", "rationale"])?;
    let Some(Value::Object(scores)) = obj.get("scores") else {
        return Err("\"scores\" must be an object with one integer per dimension".into());
    };
    let ids = rubric.dimension_ids();
    if let Some(extra) = scores.keys().find(|k| !ids.contains(k)) {
        return Err(format!(
            "\"scores\" has unknown dimension {extra:?}; the dimensions are {}",
            ids.join(", ")
        ));
    }
    let mut out = BTreeMap::new();
    for id in &ids {
        let v = scores
            .get(id)
            .ok_or_else(|| format!("\"scores\" is missing dimension {id:?}"))?;
        out.insert(id.clone(), score(rubric, id, v)?);
    }
    let overall = score(rubric, "overall", &obj["overall"])?;
    let rationale = match &obj["rationale"] {
        Value::String(s) if !s.trim().is_empty() => s.trim().to_string(),
        _ => return Err("\"rationale\" must be a non-empty string".into()),
    };
    Ok(Grade {
        scores: out,
        overall,
        rationale,
    })
}

fn score(rubric: &Rubric, what: &str, v: &Value) -> Result<u8, String> {
    let n = v
        .as_f64()
        .filter(|f| f.fract() == 0.0)
        .ok_or_else(|| format!("{what:?} must be an integer, got {v}"))?;
    if n < f64::from(rubric.min) || n > f64::from(rubric.max) {
        return Err(format!(
            "{what:?} is {n}, outside {}..={}",
            rubric.min, rubric.max
        ));
    }
    Ok(n as u8)
}
/// The text as exactly one JSON object, allowing one surrounding ```json fence and whitespace, nothing else.
pub fn strict_json_object(text: &str) -> Result<Map<String, Value>, String> {
    let mut t = text.trim();
    if let Some(rest) = t.strip_prefix("```") {
        let rest = rest.strip_prefix("json").unwrap_or(rest);
        t = rest
            .trim()
            .strip_suffix("```")
            .ok_or("an opening code fence without a closing one")?
            .trim();
    }
    match serde_json::from_str::<Value>(t) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!("expected a JSON object, got {}", kind(&other))),
        Err(e) => Err(format!("not valid JSON ({e})")),
    }
}

/// Every expected key present, no other key.
pub fn check_keys(obj: &Map<String, Value>, expected: &[&str]) -> Result<(), String> {
    if let Some(k) = expected.iter().find(|k| !obj.contains_key(**k)) {
        return Err(format!("missing field {k:?}"));
    }
    if let Some(k) = obj.keys().find(|k| !expected.contains(&k.as_str())) {
        return Err(format!(
            "unexpected field {k:?}; expected only {}",
            expected.join(", ")
        ));
    }
    Ok(())
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid_answer() -> String {
        r#"{"scores": {"diagnostic_correctness": 5, "multimodal_integration": 4, "differential_reasoning": 3,
            "lesion_localisation": 4.0, "clinical_safety": 5}, "overall": 4, "rationale": "Good."}"#
            .to_string()
    }

    #[test]
    fn the_builtin_rubric_renders_every_dimension() {
        let text = render(&Rubric::builtin());
        assert!(text.contains("clinical_safety"), "{text}");
    }

    #[test]
    fn valid_answers_pass_and_fenced_ones_too() {
        let r = Rubric::builtin();
        let g = validate(&r, &valid_answer()).unwrap();
        assert_eq!(g.scores["lesion_localisation"], 4);
        assert_eq!(g.overall, 4);
        assert!(validate(&r, &format!("```json\n{}\n```", valid_answer())).is_ok());
    }

    #[test]
    fn invalid_answers_say_what_is_wrong() {
        let r = Rubric::builtin();
        let cases = [
            ("Overall I'd give it a 4.", "not valid JSON"),
            (
                &format!("Here: {}", valid_answer()) as &str,
                "not valid JSON",
            ),
            (
                &valid_answer().replace("\"clinical_safety\": 5", "\"safety\": 5"),
                "unknown dimension",
            ),
            (
                &valid_answer().replace(", \"clinical_safety\": 5", ""),
                "missing dimension",
            ),
            (
                &valid_answer().replace("\"overall\": 4", "\"overall\": 6"),
                "outside",
            ),
            (
                &valid_answer().replace("\"overall\": 4", "\"overall\": 3.5"),
                "integer",
            ),
            (&valid_answer().replace("\"Good.\"", "\"\""), "rationale"),
            (
                &valid_answer().replace("\"overall\": 4,", "\"overall\": 4, \"extra\": 1,"),
                "unexpected field",
            ),
            ("[1, 2]", "JSON object"),
        ];
        for (text, want) in cases {
            let e = validate(&r, text).unwrap_err();
            assert!(e.contains(want), "{text}: {e}");
        }
    }
}
