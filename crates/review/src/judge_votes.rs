//! Judges voting on a pairwise set's pairs, beside the clinicians: the pairs as judges are asked them
//! ([`pairs_to_judge`]; `nmb_judges::pairwise` asks each in both orders), and how each judge's votes compare
//! with the clinicians' ([`judges_beside_clinicians`], or [`stored_judge_pairwise`] for the votes already in the
//! store): its position bias and how often its verdict matches the clinicians' majority.
//!
//! A judge's verdict on a pair is the one it gives in both orders; a verdict that flips with the order counts as
//! a tie. The clinicians' verdict is their mean vote (A 1, tie ½, B 0) above, at or below ½; "neither acceptable"
//! votes are left out, as in the ranking.

use std::collections::BTreeMap;

use nmb_chat::{Role, StoredConversation, StoredPart};
use nmb_results::pairwise::{PairToJudge, PairVerdicts};
use nmb_stats::{
    bootstrap_mean, position_bias, BootstrapConfig, Design, Estimate, PositionBias, Preference,
};
use nmb_store::{RunInfo, Store};
use serde::{Deserialize, Serialize};

use crate::ReviewError;

/// One judge against the clinicians on one pairwise set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JudgePairwise {
    pub judge: String,
    /// Pairs the judge answered in both orders.
    pub pairs: usize,
    pub position_bias: Option<PositionBias>,
    /// Share of pairs (with a clinicians' verdict) where the judge's verdict is the clinicians'.
    pub agreement: Option<Estimate>,
    pub agreement_pairs: usize,
    /// Why a number is missing.
    pub notes: Vec<String>,
    pub sentence: String,
}

/// The question of a stored sample: the text of its first turn's user messages (its images, when a judge sees
/// them, are attached apart: `SetPairs::answers` says where they are).
fn question_of(store: &Store, run: &str, task: &str, sample: u32) -> Result<String, ReviewError> {
    let record = store.sample_record(run, task, sample)?;
    let Some(first) = record.as_ref().and_then(|r| r.turns.first()) else {
        return Ok(String::new());
    };
    let Some(json) = store.prompt_body(&first.call.prompt_hash)? else {
        return Ok(String::new());
    };
    let Ok(conv) = StoredConversation::parse(&json) else {
        return Ok(json);
    };
    let texts = (conv.messages.iter())
        .filter(|m| m.role == Role::User)
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            StoredPart::Text { text } => Some(text.as_str()),
            StoredPart::Image { .. } => None,
        });
    Ok(texts.collect::<Vec<_>>().join("\n"))
}

fn answer_of(store: &Store, run: &str, task: &str, sample: u32) -> Result<String, ReviewError> {
    Ok(store
        .sample_record(run, task, sample)?
        .and_then(|r| r.final_text)
        .unwrap_or_default())
}

/// The pairs of a pairwise set as judges are asked them.
#[derive(Debug, Clone)]
pub struct SetPairs {
    pub set_id: String,
    /// The set's first run: the judges' judge runs belong to it.
    pub scored: RunInfo,
    /// One per item with a pair, in item order.
    pub pairs: Vec<PairToJudge>,
    /// Each pair's item number and task, in the same order.
    tasks: Vec<(u32, String)>,
    /// Each pair's two stored answers, X then Y, in the same order (where a judge that sees the images finds
    /// what the models were shown).
    pub answers: Vec<[AnswerRef; 2]>,
}

/// A stored answer: run, task and sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerRef {
    pub run_id: String,
    pub task_id: String,
    pub sample_index: u32,
}

/// The pairs of pairwise set `set_id`, each with its question and its two answers, for judges to vote on.
pub fn pairs_to_judge(store: &Store, set_id: &str) -> Result<SetPairs, ReviewError> {
    let set = store
        .review_set(set_id)?
        .ok_or_else(|| ReviewError::Invalid(format!("no review set {set_id:?}")))?;
    if !set.pairwise {
        return Err(ReviewError::Invalid(format!(
            "review set {set_id} grades single answers; judges vote on a pairwise set (--mode pairwise)"
        )));
    }
    let pairs: BTreeMap<u32, nmb_store::ReviewPair> = (store.review_pairs(set_id)?)
        .into_iter()
        .map(|p| (p.item_no, p))
        .collect();
    let items = store.review_items(set_id)?;
    let mut asked = Vec::new();
    let mut tasks = Vec::new();
    let mut answers = Vec::new();
    for i in &items {
        let Some(p) = pairs.get(&i.item_no) else {
            continue;
        };
        asked.push(PairToJudge {
            key: format!("{set_id}:{}", i.item_no),
            question: question_of(store, &i.run_id, &i.task_id, i.sample_index)?,
            x: answer_of(store, &i.run_id, &i.task_id, i.sample_index)?,
            y: answer_of(store, &p.run_id, &i.task_id, p.sample_index)?,
        });
        tasks.push((i.item_no, i.task_id.clone()));
        let answer = |run_id: &str, sample_index: u32| AnswerRef {
            run_id: run_id.to_string(),
            task_id: i.task_id.clone(),
            sample_index,
        };
        answers.push([
            answer(&i.run_id, i.sample_index),
            answer(&p.run_id, p.sample_index),
        ]);
    }
    Ok(SetPairs {
        set_id: set_id.to_string(),
        scored: store.run(&set.runs[0])?,
        pairs: asked,
        tasks,
        answers,
    })
}

/// Each judge's votes on `set`'s pairs (`verdicts[p][j]`: judge `specs[j]` on pair `p`, as
/// `nmb_judges::pairwise::judge_pairs` gives them) set beside the clinicians'.
pub fn judges_beside_clinicians(
    store: &Store,
    set: &SetPairs,
    specs: &[String],
    verdicts: &[Vec<PairVerdicts>],
    cfg: &BootstrapConfig,
) -> Result<Vec<JudgePairwise>, ReviewError> {
    let clinicians = clinicians_verdicts(store, &set.set_id)?;
    Ok(specs
        .iter()
        .enumerate()
        .map(|(j, spec)| {
            let of_judge: Vec<PairVerdicts> = verdicts.iter().map(|v| v[j]).collect();
            measure(spec, &set.tasks, &of_judge, &clinicians, cfg)
        })
        .collect())
}

/// What judges already said about a pairwise set's pairs (asked by `nmb review judge`), beside the clinicians;
/// empty when no judge was asked.
pub fn stored_judge_pairwise(
    store: &Store,
    set: &nmb_store::ReviewSet,
    cfg: &BootstrapConfig,
) -> Result<Vec<JudgePairwise>, ReviewError> {
    let Some(scored) = set.runs.first() else {
        return Ok(Vec::new());
    };
    let items = store.review_items(&set.set_id)?;
    let keys: Vec<String> = (items.iter())
        .map(|i| format!("{}:{}", set.set_id, i.item_no))
        .collect();
    let tasks: Vec<(u32, String)> = (items.iter())
        .map(|i| (i.item_no, i.task_id.clone()))
        .collect();
    let clinicians = clinicians_verdicts(store, &set.set_id)?;
    let stored = nmb_results::pairwise::stored_verdicts(store, scored, &keys)?;
    Ok(stored
        .iter()
        .map(|(judge, verdicts)| measure(judge, &tasks, verdicts, &clinicians, cfg))
        .collect())
}

/// The clinicians' verdict on each voted item, as A against B.
fn clinicians_verdicts(
    store: &Store,
    set_id: &str,
) -> Result<BTreeMap<u32, Preference>, ReviewError> {
    let mut sums: BTreeMap<u32, (f64, usize)> = BTreeMap::new();
    for v in store.latest_votes(set_id)? {
        let score = match v.vote.choice.as_str() {
            "a" => 1.0,
            "b" => 0.0,
            "tie" => 0.5,
            _ => continue,
        };
        let e = sums.entry(v.item_no).or_default();
        e.0 += score;
        e.1 += 1;
    }
    Ok(sums
        .into_iter()
        .map(|(item, (sum, n))| {
            let mean = sum / n as f64;
            let p = if mean > 0.5 {
                Preference::AWins
            } else if mean < 0.5 {
                Preference::BWins
            } else {
                Preference::Tie
            };
            (item, p)
        })
        .collect())
}

fn measure(
    judge: &str,
    tasks: &[(u32, String)],
    verdicts: &[PairVerdicts],
    clinicians: &BTreeMap<u32, Preference>,
    cfg: &BootstrapConfig,
) -> JudgePairwise {
    let mut notes = Vec::new();
    let (mut both, mut both_tasks) = (Vec::new(), Vec::new());
    let (mut matched, mut matched_tasks) = (Vec::new(), Vec::new());
    for ((item, task), v) in tasks.iter().zip(verdicts) {
        let (Some(x_first), Some(y_first)) = (v.x_first, v.y_first) else {
            continue;
        };
        both.push((x_first, y_first));
        both_tasks.push(task.as_str());
        if let Some(c) = clinicians.get(item) {
            let judge_says = if x_first == y_first {
                x_first
            } else {
                Preference::Tie
            };
            matched.push(f64::from(u8::from(judge_says == *c)));
            matched_tasks.push(task.as_str());
        }
    }
    let position_bias = match position_bias(&both, &both_tasks, cfg) {
        Ok(b) => Some(b),
        Err(e) => {
            notes.push(format!("position bias: {e}"));
            None
        }
    };
    let agreement = match bootstrap_mean(&matched, &Design::clusters_by(&matched_tasks), cfg) {
        Ok(e) => Some(e),
        Err(e) => {
            notes.push(format!("agreement with the clinicians: {e}"));
            None
        }
    };
    let sentence = sentence(judge, &position_bias, &agreement, matched.len());
    JudgePairwise {
        judge: judge.to_string(),
        pairs: both.len(),
        position_bias,
        agreement,
        agreement_pairs: matched.len(),
        notes,
        sentence,
    }
}

fn sentence(
    judge: &str,
    bias: &Option<PositionBias>,
    agreement: &Option<Estimate>,
    n: usize,
) -> String {
    let mut s = judge.to_string();
    if let Some(b) = bias {
        let f = &b.flip_share;
        let p = &b.first_position_wins;
        s += &format!(
            " changed its verdict when the two answers swapped places on {:.0}% [{:.0}, {:.0}] of pairs and \
             favoured the answer shown first in {:.0}% [{:.0}, {:.0}] of its decisions (50% is no bias)",
            f.value * 100.0,
            f.ci_low * 100.0,
            f.ci_high * 100.0,
            p.value * 100.0,
            p.ci_low * 100.0,
            p.ci_high * 100.0
        );
    }
    if let Some(a) = agreement {
        s += &format!(
            "; it agreed with the clinicians' choice on {:.0}% [{:.0}, {:.0}] of {n} pairs",
            a.value * 100.0,
            a.ci_low * 100.0,
            a.ci_high * 100.0
        );
    }
    s + "."
}
