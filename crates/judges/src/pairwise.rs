//! Judges voting pairwise: an LLM judge is shown two answers to the same question and asked which is better,
//! each pair in both orders, so that a preference for whichever answer comes first shows up (position bias).
//! The calls go through the same [`Panel`] as every judge call: recorded in the judge's judge run, answered from
//! the store when asked before. What a judge answers, and reading it back from the store, is
//! `nmb_results::pairwise`.

use std::sync::Arc;

use nmb_requests::{Scheduler, SchedulerConfig};
use nmb_results::pairwise::{as_x_against_y, better, PairToJudge, PairVerdicts};
use nmb_store::{RunInfo, Store};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::error::JudgeError;
use crate::judge::{default_judge_params, Asking, Question};
use crate::judge::{JudgeModel, Panel};

const TEMPLATE_ID: &str = "pairwise-v1";
const SYSTEM: &str = "You are an experienced neurology expert comparing two answers to the same clinical \
question. Judge which answer is clinically better: correct diagnosis, sound reasoning, safety. Length and \
formatting are not merits in themselves. Reply with JSON only.";
const RULES: &str =
    "Reply {\"better\": \"1\"} if answer 1 is better, {\"better\": \"2\"} if answer 2 is \
better, or {\"better\": \"tie\"} if they are about equally good, with a short \"rationale\".";

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
        images: Vec::new(),
    }
}

/// Asks every judge about every pair in both orders; `result[p][j]` is judge `j`'s verdicts on pair `p`. The
/// judge runs belong to `scored` (the first run of the review set).
pub async fn judge_pairs(
    store: &Arc<Store>,
    judges: &[JudgeModel],
    scored: &RunInfo,
    pairs: &[PairToJudge],
) -> Result<(Vec<String>, Vec<Vec<PairVerdicts>>), JudgeError> {
    let scheduler = Scheduler::new(SchedulerConfig::default());
    let asking = Asking {
        params: default_judge_params(),
        max_reasks: 2,
        concurrency: 4,
        batch: None,
        // Each pair is asked once in each order; position bias, not repeat stability, is what pairs measure.
        repeats: 1,
        images: false,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_order_puts_its_first_answer_first() {
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
