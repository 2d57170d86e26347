//! BERTScore of answered rationales against the reference rationale.

use super::Work;
use crate::semantic::{score_pairs, BertScoreSetting};
use crate::ScoreError;

pub(super) fn bertscore(
    setting: &BertScoreSetting,
    work: &mut [Work<'_>],
) -> Result<nmb_results::BertScoreConfig, ScoreError> {
    let mut targets = Vec::new();
    let mut pairs = Vec::new();
    for (i, w) in work.iter().enumerate() {
        let reference = w.task.reference.as_ref().and_then(|r| r.rationale.clone());
        let answer = w
            .score
            .parsed
            .as_ref()
            .and_then(|p| p.rationale.clone())
            .filter(|r| !r.trim().is_empty());
        if let (true, Some(r), Some(a)) = (w.score.status.is_scored(), reference, answer) {
            targets.push(i);
            pairs.push((a, r));
        }
    }
    let (scores, config) = score_pairs(setting, &pairs)?;
    if let Some(scores) = scores {
        for (i, s) in targets.into_iter().zip(scores) {
            work[i].score.bertscore = Some(s);
        }
    }
    Ok(config)
}
