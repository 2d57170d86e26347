//! Reading a Hugging Face `config.json` for the encoder families this crate runs.

use std::path::Path;

use serde::Deserialize;

use crate::BertScoreError;

/// Which embedding layout the checkpoint uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// BERT: positions start at 0.
    Bert,
    /// RoBERTa (and XLM-R, CamemBERT): positions start at `pad_token_id + 1`.
    Roberta,
}

/// The feed-forward activation named by `hidden_act`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    /// `gelu`: the exact erf form, as Hugging Face's BERT uses it.
    GeluErf,
    /// `gelu_new` / `gelu_pytorch_tanh` / `gelu_fast`: the tanh approximation.
    GeluTanh,
    Relu,
}

#[derive(Debug, Deserialize)]
struct RawConfig {
    model_type: Option<String>,
    vocab_size: usize,
    hidden_size: usize,
    num_hidden_layers: usize,
    num_attention_heads: usize,
    intermediate_size: usize,
    #[serde(default = "default_act")]
    hidden_act: String,
    max_position_embeddings: usize,
    #[serde(default = "default_type_vocab")]
    type_vocab_size: usize,
    #[serde(default = "default_eps")]
    layer_norm_eps: f64,
    pad_token_id: Option<usize>,
    position_embedding_type: Option<String>,
}

fn default_act() -> String {
    "gelu".to_string()
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}

/// The parts of `config.json` the encoder needs, validated.
#[derive(Debug, Clone)]
pub struct EncoderConfig {
    pub family: Family,
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_layers: usize,
    pub num_heads: usize,
    pub intermediate_size: usize,
    pub activation: Activation,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
    pub pad_token_id: usize,
}

impl EncoderConfig {
    /// Reads and checks `path` (a `config.json`).
    pub fn from_file(path: &Path) -> Result<Self, BertScoreError> {
        let text = std::fs::read_to_string(path).map_err(|source| BertScoreError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let raw: RawConfig = serde_json::from_str(&text).map_err(|e| BertScoreError::Config {
            path: path.display().to_string(),
            msg: format!("not a BERT/RoBERTa config.json: {e}"),
        })?;
        Self::from_raw(raw).map_err(|msg| BertScoreError::Config {
            path: path.display().to_string(),
            msg,
        })
    }

    /// Where position ids start: 0 for BERT, `pad_token_id + 1` for RoBERTa.
    pub fn position_offset(&self) -> usize {
        match self.family {
            Family::Bert => 0,
            Family::Roberta => self.pad_token_id + 1,
        }
    }

    /// The longest token sequence the position table can hold.
    pub fn max_tokens(&self) -> usize {
        self.max_position_embeddings
            .saturating_sub(self.position_offset())
    }

    fn from_raw(raw: RawConfig) -> Result<Self, String> {
        let model_type = raw.model_type.as_deref().unwrap_or("bert");
        let family = match model_type {
            "bert" => Family::Bert,
            "roberta" | "xlm-roberta" | "camembert" => Family::Roberta,
            other => {
                return Err(format!(
                "field model_type: expected bert, roberta, xlm-roberta or camembert, got {other:?}"
            ))
            }
        };
        let activation = match raw.hidden_act.as_str() {
            "gelu" => Activation::GeluErf,
            "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => Activation::GeluTanh,
            "relu" => Activation::Relu,
            other => {
                return Err(format!(
                    "field hidden_act: expected gelu, gelu_new or relu, got {other:?}"
                ))
            }
        };
        if let Some(kind) = raw.position_embedding_type.as_deref() {
            if kind != "absolute" {
                return Err(format!(
                    "field position_embedding_type: only \"absolute\" is supported, got {kind:?}"
                ));
            }
        }
        if raw.num_attention_heads == 0 || !raw.hidden_size.is_multiple_of(raw.num_attention_heads)
        {
            return Err(format!(
                "fields hidden_size/num_attention_heads: {} is not divisible into {} heads",
                raw.hidden_size, raw.num_attention_heads
            ));
        }
        let pad_token_id = raw.pad_token_id.unwrap_or(match family {
            Family::Bert => 0,
            Family::Roberta => 1,
        });
        Ok(Self {
            family,
            vocab_size: raw.vocab_size,
            hidden_size: raw.hidden_size,
            num_layers: raw.num_hidden_layers,
            num_heads: raw.num_attention_heads,
            intermediate_size: raw.intermediate_size,
            activation,
            max_position_embeddings: raw.max_position_embeddings,
            type_vocab_size: raw.type_vocab_size,
            layer_norm_eps: raw.layer_norm_eps,
            pad_token_id,
        })
    }
}
