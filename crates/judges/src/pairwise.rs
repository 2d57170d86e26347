//! Judges voting pairwise: an LLM judge is shown two answers to the same question and asked which is better,
//! each pair in both orders, so that a preference for whichever answer comes first shows up (position bias).
//! The calls go through the same [`Panel`] as every judge call: recorded in the judge's judge run, answered from
//! the store when asked before. What a judge answers, and reading it back from the store, is
//! `nmb_results::pairwise`.

use std::sync::Arc;

use nmb_requests::{Scheduler, SchedulerConfig};
use nmb_results::pairwise::{as_x_against_y, better, judge_name, PairToJudge, PairVerdicts};
use nmb_store::{RunInfo, Store};
use serde_json::json;
use sha2::{Digest, Sha256};

use crate::error::JudgeError;
use crate::judge::{default_judge_params, Asking, JudgeImage, Question};
use crate::judge::{JudgeModel, Panel};

const TEMPLATE_ID: &str = "pairwise-v1";
const SYSTEM: &str = "You are an experienced neurology expert comparing two answers to the same clinical \
question. Judge which answer is clinically better: correct diagnosis, sound reasoning, safety. Length and \
formatting are not merits in themselves. Reply with JSON only.";
const RULES: &str =
    "Reply {\"better\": \"1\"} if answer 1 is better, {\"better\": \"2\"} if answer 2 is \
better, or {\"better\": \"tie\"} if they are about equally good, with a short \"rationale\".";

/// What a pairwise question with the images attached says about them; it enters the template hash of such
/// questions only, so questions without images keep their version.
const IMAGES_ATTACHED: &str = "The images attached after this text are the exact images the models were shown \
for this question, in the order they saw them (both answers are to the same question and the same images). \
Check every claim either answer makes about the imaging against them: an answer that describes a finding the \
images do not show, or misses or misreads one they do show, is worse for it.";

fn question(pair: &PairToJudge, images: &[JudgeImage], x_first: bool) -> Question {
    let (first, second, order) = if x_first {
        (&pair.x, &pair.y, "xy")
    } else {
        (&pair.y, &pair.x, "yx")
    };
    let attached = match images.is_empty() {
        true => String::new(),
        false => format!(
            "\n\nImages shown to the models: {} attached below. {IMAGES_ATTACHED}",
            images.len()
        ),
    };
    let user = format!(
        "Question:\n{}\n\nAnswer 1:\n<<<ANSWER\n{first}\nANSWER>>>\n\nAnswer 2:\n<<<ANSWER\n{second}\nANSWER>>>\n\n{RULES}{attached}",
        pair.question
    );
    let fixed: &[&str] = match images.is_empty() {
        true => &[SYSTEM, RULES],
        false => &[SYSTEM, RULES, IMAGES_ATTACHED],
    };
    let mut h = Sha256::new();
    for p in fixed {
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
        images: images.to_vec(),
    }
}

/// Asks every judge about every pair in both orders; `result[p][j]` is judge `j`'s verdicts on pair `p`. The
/// judge runs belong to `scored` (the first run of the review set).
///
/// With `images` (`--judge-images same`: `images[p]`, the images the models were shown for pair `p`), each
/// question carries its pair's images once, after the text; the judges' runs are others than those of text-only
/// questions, their manifests say the images were sent, and a server answering `unsupported_input` stops the
/// asking.
pub async fn judge_pairs(
    store: &Arc<Store>,
    judges: &[JudgeModel],
    scored: &RunInfo,
    pairs: &[PairToJudge],
    images: Option<&[Vec<JudgeImage>]>,
) -> Result<(Vec<String>, Vec<Vec<PairVerdicts>>), JudgeError> {
    let scheduler = Scheduler::new(SchedulerConfig::default());
    let asking = Asking {
        params: default_judge_params(),
        max_reasks: 2,
        concurrency: 4,
        batch: None,
        // Each pair is asked once in each order; position bias, not repeat stability, is what pairs measure.
        repeats: 1,
        images: images.is_some(),
    };
    let panel = Panel::open(store.clone(), scheduler, judges, scored, asking)?;
    let none: &[JudgeImage] = &[];
    let shown = |p: usize| images.and_then(|i| i.get(p)).map_or(none, Vec::as_slice);
    let questions: Vec<Question> = (pairs.iter().enumerate())
        .flat_map(|(n, p)| [question(p, shown(n), true), question(p, shown(n), false)])
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
    let names = (panel.specs().iter())
        .map(|s| judge_name(s, images.is_some()))
        .collect();
    Ok((names, verdicts))
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
        let (xy, yx) = (question(&p, &[], true), question(&p, &[], false));
        assert!(xy.user.find("X answer") < xy.user.find("Y answer"));
        assert!(yx.user.find("Y answer") < yx.user.find("X answer"));
        assert_ne!(xy.item_id, yx.item_id);
    }

    #[test]
    fn images_change_the_template_only_when_sent() {
        let p = PairToJudge {
            key: "s:1".into(),
            question: "q".into(),
            x: "X".into(),
            y: "Y".into(),
        };
        let image = JudgeImage {
            caption: Some("MRI FLAIR axial".into()),
            part: nmb_chat::ImagePart {
                sha256: "ab".into(),
                mime: "image/png".into(),
                bytes: Arc::from(vec![1u8, 2]),
            },
        };
        let (plain, seeing) = (question(&p, &[], true), question(&p, &[image], true));
        assert_eq!(plain.images.len(), 0);
        assert_eq!(seeing.images.len(), 1);
        assert_ne!(plain.template_hash, seeing.template_hash);
        assert!(seeing.user.contains(IMAGES_ATTACHED) && !plain.user.contains(IMAGES_ATTACHED));
        assert_eq!(plain.item_id, seeing.item_id);
    }
}
