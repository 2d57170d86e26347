//! Asking judges which criteria an answer meets: one call per answer listing all of its task's criteria.
//!
//! HealthBench asks its grader once per criterion. nmb asks once per answer, with every criterion listed by id,
//! because a task has several criteria and each call repeats the case, the reference and the answer: per
//! criterion would multiply the cost by the number of criteria. The price is that criteria are decided side by
//! side, which can colour one another; the instructions say to decide each on its own. The question's id is
//! `criteria:<task>#<sample>` and its prompt holds the criteria's text, so the response cache pays each answer
//! once, a killed scoring resumes where it stopped, and a changed criterion is asked again.

use nmb_results::criteria::Criterion;
use serde_json::{json, Map, Value};

use crate::judge::Question;
use crate::prompts::{hash_with_images, render_context, Context, SYSTEM};
use crate::rubric::{check_keys, strict_json_object};

pub const CRITERIA_ID: &str = "judge-criteria-v1";

const RULES: &str = "Decide, for each criterion below, whether the MODEL ANSWER meets it. Decide each criterion on \
its own. A criterion with several parts is met only when every part is; where it says \"such as\", \"for \
example\" or \"including\", the answer need not give every example. Some criteria describe something undesirable \
(they have negative points): say whether the answer does that thing, not whether the answer is good, so a good \
answer does NOT meet them. Judge only what the answer says; the reference tells you what is true of the case.";

/// The template's id and hash, for the scoring configuration; `images`: its questions carry the model's images.
pub fn template_version(images: bool) -> (String, String) {
    (
        CRITERIA_ID.to_string(),
        hash_with_images(&[SYSTEM, RULES], images),
    )
}

/// The criteria as the judge reads them.
fn render(criteria: &[Criterion]) -> String {
    let mut s = String::from("CRITERIA\n");
    for c in criteria {
        s.push_str(&format!(
            "- {} [{} points]: {}\n",
            c.id, c.points, c.criterion
        ));
    }
    s
}

fn example(criteria: &[Criterion]) -> String {
    let items: Vec<String> = criteria
        .iter()
        .map(|c| {
            format!(
                "\"{}\": {{\"met\": true or false, \"explanation\": \"<one sentence>\"}}",
                c.id
            )
        })
        .collect();
    format!("{{\"criteria\": {{{}}}}}", items.join(", "))
}

/// The question for one answer of a task with `criteria`.
pub fn question(criteria: &[Criterion], ctx: &Context, sample: u32) -> Question {
    let user = format!(
        "{}\n{}\n{RULES}\n\nReply with only this JSON object and nothing else, one entry per criterion id:\n{}",
        render_context(ctx),
        render(criteria),
        example(criteria)
    );
    let verdict = json!({
        "type": "object",
        "properties": {"met": {"type": "boolean"}, "explanation": {"type": "string"}},
        "required": ["met", "explanation"],
        "additionalProperties": false
    });
    let props: Map<String, Value> = criteria
        .iter()
        .map(|c| (c.id.clone(), verdict.clone()))
        .collect();
    let ids: Vec<&str> = criteria.iter().map(|c| c.id.as_str()).collect();
    Question {
        item_id: format!("criteria:{}#{sample}", ctx.task.id),
        template_id: CRITERIA_ID,
        template_hash: hash_with_images(&[SYSTEM, RULES], !ctx.images.is_empty()),
        system: SYSTEM.to_string(),
        user,
        schema: json!({
            "type": "object",
            "properties": {"criteria": {
                "type": "object",
                "properties": props,
                "required": ids,
                "additionalProperties": false
            }},
            "required": ["criteria"],
            "additionalProperties": false
        }),
        images: ctx.images.to_vec(),
    }
}

/// One criterion, decided by one judge.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub met: bool,
    pub explanation: String,
}

/// Strict validation: one JSON object with one decision for every criterion id, in `criteria` order, and
/// nothing else.
pub fn validate(criteria: &[Criterion], text: &str) -> Result<Vec<Decision>, String> {
    let obj = strict_json_object(text)?;
    check_keys(&obj, &["criteria"])?;
    let Some(Value::Object(given)) = obj.get("criteria") else {
        return Err("\"criteria\" must be an object with one entry per criterion id".into());
    };
    if let Some(extra) = given.keys().find(|k| !criteria.iter().any(|c| &c.id == *k)) {
        return Err(format!("\"criteria\" has unknown criterion {extra:?}"));
    }
    criteria
        .iter()
        .map(|c| {
            let Some(Value::Object(d)) = given.get(&c.id) else {
                return Err(format!(
                    "\"criteria\" is missing criterion {:?} (an object)",
                    c.id
                ));
            };
            check_keys(d, &["met", "explanation"])
                .map_err(|e| format!("criterion {:?}: {e}", c.id))?;
            let met = d["met"]
                .as_bool()
                .ok_or_else(|| format!("criterion {:?}: \"met\" must be true or false", c.id))?;
            let explanation = d["explanation"]
                .as_str()
                .unwrap_or_default()
                .trim()
                .to_string();
            Ok(Decision { met, explanation })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn criteria() -> Vec<Criterion> {
        ["a", "b"]
            .iter()
            .map(|id| Criterion {
                id: id.to_string(),
                criterion: format!("does {id}"),
                points: 1.0,
                tags: Vec::new(),
                line: 1,
            })
            .collect()
    }

    #[test]
    fn answers_are_read_strictly() {
        let cs = criteria();
        let ok = r#"{"criteria": {"b": {"met": false, "explanation": "no"}, "a": {"met": true, "explanation": "yes"}}}"#;
        let d = validate(&cs, ok).unwrap();
        assert_eq!((d[0].met, d[1].met), (true, false));
        for (bad, want) in [
            (
                r#"{"criteria": {"a": {"met": true, "explanation": ""}}}"#,
                "missing criterion \"b\"",
            ),
            (
                r#"{"criteria": {"a": {"met": "yes", "explanation": ""}, "b": {"met": true, "explanation": ""}}}"#,
                "true or false",
            ),
            (
                r#"{"criteria": {"a": {"met": true, "explanation": ""}, "b": {"met": true, "explanation": ""}, "c": {"met": true, "explanation": ""}}}"#,
                "unknown criterion",
            ),
            ("met", "not valid JSON"),
        ] {
            let e = validate(&cs, bad).unwrap_err();
            assert!(e.contains(want), "{bad}: {e}");
        }
    }
}
