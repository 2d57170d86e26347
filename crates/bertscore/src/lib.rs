//! BERTScore (precision, recall, F1) computed in Rust with a candle encoder, matching the Python
//! `bert-score` package (0.3.12).
//!
//! This crate owns: loading a BERT- or RoBERTa-family checkpoint (`config.json`,
//! `model.safetensors`, `tokenizer.json`) from a local directory, the encoder forward pass up to a
//! chosen layer, bert-score's tokenisation rules, idf weighting from the references, greedy cosine
//! matching, baseline rescaling, and the pieces of the `nmb bertscore` subcommand (reading the
//! line files, formatting the output).
//!
//! It does not own: downloading models (directories must already exist), choosing which answers
//! to score or aggregating scores over a run (`nmb-score`), or argument parsing (`nmb` CLI).
//!
//! Parity notes (see `fixtures/parity.json` and its script): tokens are weighted as bert-score
//! does (special start/end tokens get weight 0 but still take part in the maximum), an input with
//! no tokens besides the special ones scores P = R = F = 0, and by default bert-score's matching
//! batches are reproduced, including its habit of counting padded positions as similarity 0
//! (see [`ScoreOptions::emulate_pad_zeros`]).

mod baseline;
mod cli;
mod config;
mod encoder;
mod greedy;
mod matmul;
mod ops;
#[cfg(test)]
mod reference;
mod tokenize;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};

use candle_core::Device;
use candle_nn::VarBuilder;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

pub use baseline::{baseline_from_file, baseline_row, parse_triple};
pub use cli::{format_json, format_table, read_lines, run_cli, CliArgs};
pub use config::{EncoderConfig, Family};

use encoder::{Encoder, Scratch};
use greedy::{Embedded, PadFloor, Weighting};
use tokenize::TextTokenizer;

/// Errors from loading a model or scoring texts.
#[derive(Debug, thiserror::Error)]
pub enum BertScoreError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is larger than {cap}, the most nmb reads of a text file; raise the cap with --max-file-mib (or NMB_MAX_FILE_MIB)")]
    TooLarge { path: String, cap: String },
    #[error("{path}: {msg}")]
    Config { path: String, msg: String },
    #[error("tokenizer {path}: {msg}")]
    Tokenizer { path: String, msg: String },
    #[error("weights {path}: {msg}")]
    Weights { path: String, msg: String },
    #[error("layer {layer} is out of range for {path}: it has {max} layers (0 means the embeddings, {max} the last layer)")]
    Layer {
        path: String,
        layer: usize,
        max: usize,
    },
    #[error("{cands} candidates but {refs} references: they must pair up one to one")]
    CountMismatch { cands: usize, refs: usize },
    #[error(
        "{cands_path} has {cands} lines but {refs_path} has {refs}: they must pair up line by line"
    )]
    LineMismatch {
        cands_path: String,
        cands: usize,
        refs_path: String,
        refs: usize,
    },
    #[error("batch_size must be at least 1")]
    BatchSize,
    #[error(
        "baseline value {value} for {which} must be below 1 (rescaling divides by 1 - baseline)"
    )]
    Baseline { which: &'static str, value: f64 },
    #[error("cannot tokenize text {index}: {msg}")]
    Tokenize { index: usize, msg: String },
    #[error("encoder forward pass failed: {0}")]
    Forward(#[from] candle_core::Error),
}

/// Precision, recall and F1 of one candidate against its reference.
///
/// NaN appears only where bert-score also yields NaN: with idf on, a non-empty side whose tokens
/// all occur in every reference has total weight 0 (for example a single pair with idf, where
/// R is NaN). JSON output writes NaN as `null`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Prf {
    pub p: f64,
    pub r: f64,
    pub f: f64,
}

/// How to score.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreOptions {
    /// Weight tokens by idf computed from the references (`idf=True` in bert-score).
    pub idf: bool,
    /// `[P, R, F]` baselines; each score becomes `(x - b) / (1 - b)`.
    pub baseline: Option<[f64; 3]>,
    /// Sentences per encoder batch, and pairs per matching batch (bert-score's `batch_size`).
    pub batch_size: usize,
    /// bert-score zeroes padded similarities instead of excluding them, so within a matching
    /// batch of `batch_size` consecutive pairs, a token whose best real cosine is negative
    /// scores 0 whenever the other side is shorter than the longest in that batch. `true`
    /// reproduces this (exact parity); `false` scores every pair on its own, independent of
    /// its neighbours. The two differ only when some best cosine is negative.
    pub emulate_pad_zeros: bool,
}

impl Default for ScoreOptions {
    fn default() -> Self {
        Self {
            idf: false,
            baseline: None,
            batch_size: 64,
            emulate_pad_zeros: true,
        }
    }
}

/// A loaded encoder and tokenizer, ready to score.
pub struct BertScorer {
    encoder: Encoder,
    tokenizer: TextTokenizer,
}

/// Pairs are embedded and matched this many matching batches at a time, to bound memory.
const BATCHES_PER_CHUNK: usize = 16;

/// Tokens per encoder forward pass. Batches run side by side, one per thread, and at this size
/// the activations of two of them stay in a typical L3 cache; measured on MiniLM, about 5%
/// faster than 64 texts of up to ~120 tokens each.
const ENCODER_TOKENS: usize = 1024;

impl BertScorer {
    /// Loads `config.json`, `model.safetensors` and `tokenizer.json` from `dir`, keeping the
    /// encoder up to `layer` (bert-score's `num_layers`: 0 is the embeddings, N the N-th layer).
    pub fn load(dir: &Path, layer: usize) -> Result<Self, BertScoreError> {
        let cfg = EncoderConfig::from_file(&dir.join("config.json"))?;
        if layer > cfg.num_layers {
            return Err(BertScoreError::Layer {
                path: dir.display().to_string(),
                layer,
                max: cfg.num_layers,
            });
        }
        let max_tokens = model_max_length(dir)
            .unwrap_or(usize::MAX)
            .min(cfg.max_tokens());
        let tokenizer = TextTokenizer::load(dir, max_tokens)?;
        let encoder = load_encoder(dir, &cfg, layer)?;
        Ok(Self { encoder, tokenizer })
    }

    /// The token ids (with special tokens, truncated) that `text` is scored with.
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, BertScoreError> {
        self.tokenizer
            .encode(text)
            .map_err(|msg| BertScoreError::Tokenize { index: 0, msg })
    }

    /// Scores each candidate against the reference at the same index.
    pub fn score(
        &self,
        cands: &[String],
        refs: &[String],
        opts: &ScoreOptions,
    ) -> Result<Vec<Prf>, BertScoreError> {
        check_inputs(cands, refs, opts)?;
        let texts = UniqueTexts::new(cands, refs);
        let tokens = self.tokenize_all(&texts.texts)?;
        let weighting = if opts.idf {
            Weighting::idf(texts.refs.iter().map(|&i| tokens[i].as_slice()))
        } else {
            Weighting::Uniform
        };
        let weights: Vec<Vec<f64>> = tokens
            .iter()
            .map(|ids| {
                ids.iter()
                    .map(|&id| weighting.weight(id, self.tokenizer.is_special(id)))
                    .collect()
            })
            .collect();
        let pairs: Vec<(usize, usize)> = texts
            .cands
            .iter()
            .copied()
            .zip(texts.refs.iter().copied())
            .collect();
        let chunk = opts.batch_size.saturating_mul(BATCHES_PER_CHUNK);
        let mut out = Vec::with_capacity(pairs.len());
        for chunk_pairs in pairs.chunks(chunk) {
            out.extend(self.score_chunk(chunk_pairs, &tokens, &weights, opts)?);
        }
        if let Some(b) = opts.baseline {
            out.iter_mut().for_each(|s| *s = rescale(*s, b));
        }
        Ok(out)
    }

    fn tokenize_all(&self, texts: &[&str]) -> Result<Vec<Vec<u32>>, BertScoreError> {
        texts
            .par_iter()
            .enumerate()
            .map(|(index, t)| {
                self.tokenizer
                    .encode(t)
                    .map_err(|msg| BertScoreError::Tokenize { index, msg })
            })
            .collect()
    }

    /// Embeds the texts of `pairs` and scores them; `pairs` starts at a matching-batch boundary.
    fn score_chunk(
        &self,
        pairs: &[(usize, usize)],
        tokens: &[Vec<u32>],
        weights: &[Vec<f64>],
        opts: &ScoreOptions,
    ) -> Result<Vec<Prf>, BertScoreError> {
        let mut ids: Vec<usize> = pairs.iter().flat_map(|&(c, r)| [c, r]).collect();
        ids.sort_unstable();
        ids.dedup();
        let vectors = self.embed(&ids, tokens, opts.batch_size)?;
        let dim = self.encoder.hidden_size();
        let floors = pad_floors(pairs, tokens, opts);
        Ok(pairs
            .par_iter()
            .zip(floors.par_iter())
            .map(|(&(c, r), &floor)| {
                let cand = Embedded {
                    vectors: &vectors[&c],
                    weights: &weights[c],
                };
                let reference = Embedded {
                    vectors: &vectors[&r],
                    weights: &weights[r],
                };
                greedy::score_pair(&cand, &reference, dim, floor)
            })
            .collect())
    }

    /// Unit-length hidden states per text id, encoded in length-sorted batches that run side by
    /// side on rayon's threads (each batch's own work also splits across idle threads).
    fn embed(
        &self,
        ids: &[usize],
        tokens: &[Vec<u32>],
        batch_size: usize,
    ) -> Result<HashMap<usize, Vec<f32>>, BertScoreError> {
        let mut order = ids.to_vec();
        order.sort_by_key(|&i| std::cmp::Reverse(tokens[i].len()));
        let dim = self.encoder.hidden_size();
        let batches = encoder_batches(&order, tokens, batch_size);
        // Buffers go back here after each batch for the next one to take (rayon's `map_init`
        // would make fresh ones for nearly every batch once they are split one per task).
        let spare: Mutex<Vec<Scratch>> = Mutex::new(Vec::new());
        let states = batches
            .par_iter()
            .with_max_len(1)
            .map(|batch| {
                let seqs: Vec<&[u32]> = batch.iter().map(|&i| tokens[i].as_slice()).collect();
                let mut scratch = lock(&spare).pop().unwrap_or_default();
                let states = self.encoder.hidden_states(&seqs, &mut scratch);
                lock(&spare).push(scratch);
                let mut states = states?;
                states.iter_mut().for_each(|v| greedy::normalise(v, dim));
                Ok::<_, BertScoreError>(states)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(batches
            .iter()
            .zip(states)
            .flat_map(|(batch, states)| batch.iter().copied().zip(states))
            .collect())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Splits `order` into runs of at most `max_texts` texts and, past the first text, at most
/// [`ENCODER_TOKENS`] tokens.
fn encoder_batches<'a>(
    order: &'a [usize],
    tokens: &[Vec<u32>],
    max_texts: usize,
) -> Vec<&'a [usize]> {
    let mut batches = Vec::new();
    let mut rest = order;
    while !rest.is_empty() {
        let mut count = 0;
        let mut total = 0;
        for &i in rest.iter().take(max_texts) {
            total += tokens[i].len();
            if count > 0 && total > ENCODER_TOKENS {
                break;
            }
            count += 1;
        }
        let (batch, tail) = rest.split_at(count);
        batches.push(batch);
        rest = tail;
    }
    batches
}

fn check_inputs(
    cands: &[String],
    refs: &[String],
    opts: &ScoreOptions,
) -> Result<(), BertScoreError> {
    if cands.len() != refs.len() {
        return Err(BertScoreError::CountMismatch {
            cands: cands.len(),
            refs: refs.len(),
        });
    }
    if opts.batch_size == 0 {
        return Err(BertScoreError::BatchSize);
    }
    if let Some(b) = opts.baseline {
        for (which, value) in ["P", "R", "F"].into_iter().zip(b) {
            if value.is_nan() || value >= 1.0 {
                return Err(BertScoreError::Baseline { which, value });
            }
        }
    }
    Ok(())
}

/// Distinct texts (each embedded once) and, per pair, the index of its candidate and reference.
struct UniqueTexts<'a> {
    texts: Vec<&'a str>,
    cands: Vec<usize>,
    refs: Vec<usize>,
}

impl<'a> UniqueTexts<'a> {
    fn new(cands: &'a [String], refs: &'a [String]) -> Self {
        let mut index: HashMap<&'a str, usize> = HashMap::new();
        let mut texts = Vec::new();
        let mut id_of = |s: &'a str| {
            *index.entry(s).or_insert_with(|| {
                texts.push(s);
                texts.len() - 1
            })
        };
        let cands: Vec<usize> = cands.iter().map(|s| id_of(s)).collect();
        let refs: Vec<usize> = refs.iter().map(|s| id_of(s)).collect();
        Self { texts, cands, refs }
    }
}

/// Per pair, whether bert-score's zero-padding would floor its maxima (see [`PadFloor`]).
fn pad_floors(pairs: &[(usize, usize)], tokens: &[Vec<u32>], opts: &ScoreOptions) -> Vec<PadFloor> {
    if !opts.emulate_pad_zeros {
        return vec![PadFloor::default(); pairs.len()];
    }
    let mut out = Vec::with_capacity(pairs.len());
    for batch in pairs.chunks(opts.batch_size) {
        let longest_cand = batch
            .iter()
            .map(|&(c, _)| tokens[c].len())
            .max()
            .unwrap_or(0);
        let longest_ref = batch
            .iter()
            .map(|&(_, r)| tokens[r].len())
            .max()
            .unwrap_or(0);
        out.extend(batch.iter().map(|&(c, r)| PadFloor {
            precision: tokens[r].len() < longest_ref,
            recall: tokens[c].len() < longest_cand,
        }));
    }
    out
}

fn rescale(s: Prf, b: [f64; 3]) -> Prf {
    Prf {
        p: (s.p - b[0]) / (1.0 - b[0]),
        r: (s.r - b[1]) / (1.0 - b[1]),
        f: (s.f - b[2]) / (1.0 - b[2]),
    }
}

/// `model_max_length` from `tokenizer_config.json`, when present and a real limit (Hugging Face
/// writes a huge sentinel when there is none).
fn model_max_length(dir: &Path) -> Option<usize> {
    let text = std::fs::read_to_string(dir.join("tokenizer_config.json")).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let n = value.get("model_max_length")?.as_f64()?;
    (1.0..1e9).contains(&n).then_some(n as usize)
}

fn load_encoder(dir: &Path, cfg: &EncoderConfig, layer: usize) -> Result<Encoder, BertScoreError> {
    let path = dir.join("model.safetensors");
    let werr = |msg: String| BertScoreError::Weights {
        path: path.display().to_string(),
        msg,
    };
    let data = std::fs::read(&path).map_err(|source| BertScoreError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let vb = VarBuilder::from_buffered_safetensors(data, encoder::DTYPE, &Device::Cpu)
        .map_err(|e| werr(format!("not a readable safetensors file: {e}")))?;
    let prefix = ["", "bert.", "roberta.", "model."]
        .into_iter()
        .find(|p| vb.contains_tensor(&format!("{p}embeddings.word_embeddings.weight")))
        .ok_or_else(|| werr("no tensor named embeddings.word_embeddings.weight (with or without a bert./roberta. prefix)".into()))?;
    let vb = if prefix.is_empty() {
        vb
    } else {
        vb.pp(prefix.trim_end_matches('.'))
    };
    Encoder::load(&vb, cfg, layer).map_err(|e| werr(format!("does not match config.json: {e}")))
}
