//! Judges voting pairwise: an LLM judge is shown two answers to the same question and asked which is better,
//! each pair in both orders, so that a preference for whichever answer comes first shows up (position bias).
//! The calls go through the same [`Panel`] as every judge call: recorded in the judge's judge run, answered from
//! the store when asked before.

use std::sync::Arc;

use nmb_requests::{Scheduler, SchedulerConfig};
use nmb_stats::Preference;
use nmb_store::{RunInfo, Store};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::judge::{default_judge_params, Asking, Question};
use crate::{JudgeModel, Panel, ScoreError};

const TEMPLATE_ID: &str = "pairwise-v1";
const SYSTEM: &str = "You are an experienced neurology expert comparing two answers to the same clinical \
question. Judge which answer is clinically better: correct diagnosis, sound reasoning, safety. Length and \
formatting are not merits in themselves. Reply with JSON only.";
const RULES: &str =
    "Reply {\"better\": \"1\"} if answer 1 is better, {\"better\": \"2\"} if answer 2 is \
better, or {\"better\": \"tie\"} if they are about equally good, with a short \"rationale\".";

/// Two answers `x` and `y` to one question; `key` names the pair in the judge run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairToJudge {
    pub key: String,
    pub question: String,
    pub x: String,
    pub y: String,
}

/// One judge's verdicts on one pair, both written as X against Y (`AWins`: X is better); `None` where the judge
/// gave no valid answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PairVerdicts {
    pub x_first: Option<Preference>,
    pub y_first: Option<Preference>,
}

fn question(pair: &PairToJudge, x_first: bool) -> Question {
    let (first, second, order) = if x_first {
        (&pair.x, &pair.y, "xy")
    } else {
        (&pair.y, &pair.x, "yx")
    };
    let user = format!(
        "Question:\n{}\n\nAnswer 1:\n<<<ANSWER\n{first}\nANSWER>>>\n\nAnswer 2:\n<<<ANSWER\n{second}\nANSWER>>>\n\n{RULES}",
        pair.question
    );
    let mut h = Sha256::new();
    for p in [SYSTEM, RULES] {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p.as_bytes());
    }
    Question {
        item_id: format!("pair:{}:{order}", pair.key),
        template_id: TEMPLATE_ID,
        template_hash: hex::encode(h.finalize()),
        system: SYSTEM.to_string(),
        user,
        schema: json!({
            "type": "object",
            "properties": {"better": {"type": "string", "enum": ["1", "2", "tie"]}, "rationale": {"type": "string"}},
            "required": ["better", "rationale"],
            "additionalProperties": false
        }),
    }
}

/// "1", "2" or "tie" from the judge's JSON answer (the first JSON object in the text).
fn better(text: &str) -> Result<&'static str, String> {
    let start = text.find('{').ok_or("expected a JSON object")?;
    let end = text.rfind('}').ok_or("expected a JSON object")?;
    let v: Value = serde_json::from_str(text.get(start..=end).unwrap_or(""))
        .map_err(|e| format!("not JSON: {e}"))?;
    match v.get("better").and_then(Value::as_str) {
        Some("1") => Ok("1"),
        Some("2") => Ok("2"),
        Some("tie") => Ok("tie"),
        other => Err(format!(
            "\"better\" is {other:?}; expected \"1\", \"2\" or \"tie\""
        )),
    }
}

/// Asks every judge about every pair in both orders; `result[p][j]` is judge `j`'s verdicts on pair `p`. The
/// judge runs belong to `scored` (the first run of the review set).
pub async fn judge_pairs(
    store: &Arc<Store>,
    judges: &[JudgeModel],
    scored: &RunInfo,
    pairs: &[PairToJudge],
) -> Result<(Vec<String>, Vec<Vec<PairVerdicts>>), ScoreError> {
    let scheduler = Scheduler::new(SchedulerConfig::default());
    let asking = Asking {
        params: default_judge_params(),
        max_reasks: 2,
        concurrency: 4,
        batch: None,
        // Each pair is asked once in each order; position bias, not repeat stability, is what pairs measure.
        repeats: 1,
    };
    let panel = Panel::open(store.clone(), scheduler, judges, scored, asking)?;
    let questions: Vec<Question> = pairs
        .iter()
        .flat_map(|p| [question(p, true), question(p, false)])
        .collect();
    let answers = panel.ask(&questions, better).await?;
    panel.finish(&[])?;
    let verdicts = answers
        .chunks(2)
        .map(|both| {
            (0..judges.len())
                .map(|j| PairVerdicts {
                    // Shown X first: "1" is X. Shown Y first: "1" is Y.
                    x_first: both[0][j].value.map(|b| as_x_against_y(b, true)),
                    y_first: both[1][j].value.map(|b| as_x_against_y(b, false)),
                })
                .collect()
        })
        .collect();
    Ok((panel.specs(), verdicts))
}

/// The pairwise verdicts judges already gave on the pairs `keys`, read from the judge runs of `scored_run_id`
/// (one entry per judge run that holds any of them, oldest first): what [`judge_pairs`] stored.
pub fn stored_verdicts(
    store: &Store,
    scored_run_id: &str,
    keys: &[String],
) -> Result<Vec<(String, Vec<PairVerdicts>)>, ScoreError> {
    let mut runs = store.list_runs()?;
    runs.reverse();
    let mut out = Vec::new();
    for run in runs
        .iter()
        .filter(|r| r.manifest.judged_run() == Some(scored_run_id))
    {
        let texts: std::collections::BTreeMap<String, String> = (store.run_samples(&run.run_id)?)
            .into_iter()
            .filter(|s| s.task_id.starts_with("pair:"))
            .filter_map(|s| Some((s.task_id, s.final_text?)))
            .collect();
        if texts.is_empty() {
            continue;
        }
        let read = |key: &str, order: &str, x_first: bool| {
            let text = texts.get(&format!("pair:{key}:{order}"))?;
            Some(as_x_against_y(better(text).ok()?, x_first))
        };
        let verdicts = keys
            .iter()
            .map(|k| PairVerdicts {
                x_first: read(k, "xy", true),
                y_first: read(k, "yx", false),
            })
            .collect();
        out.push((run.manifest.model.clone(), verdicts));
    }
    Ok(out)
}

fn as_x_against_y(better: &str, x_first: bool) -> Preference {
    match (better, x_first) {
        ("tie", _) => Preference::Tie,
        ("1", true) | ("2", false) => Preference::AWins,
        _ => Preference::BWins,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_read_in_the_order_it_was_shown() {
        assert_eq!(
            better("sure: {\"better\": \"2\", \"rationale\": \"x\"}"),
            Ok("2")
        );
        assert!(better("{\"better\": \"both\"}").is_err());
        assert_eq!(as_x_against_y("1", false), Preference::BWins);
        assert_eq!(as_x_against_y("2", false), Preference::AWins);
        let p = PairToJudge {
            key: "s:1".into(),
            question: "q".into(),
            x: "X answer".into(),
            y: "Y answer".into(),
        };
        let (xy, yx) = (question(&p, true), question(&p, false));
        assert!(xy.user.find("X answer") < xy.user.find("Y answer"));
        assert!(yx.user.find("Y answer") < yx.user.find("X answer"));
        assert_ne!(xy.item_id, yx.item_id);
    }
}
