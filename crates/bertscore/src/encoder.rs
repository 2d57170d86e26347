//! A BERT/RoBERTa encoder forward pass in candle, stopping at a chosen layer.
//!
//! It follows Hugging Face's `BertModel`/`RobertaModel` in eval mode (no dropout): embeddings
//! (word + position + token type 0) with LayerNorm, then post-norm layers of self-attention and a
//! GELU feed-forward. Only the first `layer` encoder layers are loaded and run, because bert-score
//! truncates the model the same way and nothing after that layer affects the hidden states it reads.

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;

use crate::config::{Activation, EncoderConfig};

/// A dense layer kept as `weight^T` view + bias, applied to 2-D `[rows, in]` input as one GEMM.
struct Dense {
    weight: Tensor,
    bias: Tensor,
}

impl Dense {
    fn load(
        vb: &VarBuilder,
        name: &str,
        out_dim: usize,
        in_dim: usize,
    ) -> candle_core::Result<Self> {
        let vb = vb.pp(name);
        Ok(Self {
            weight: vb.get((out_dim, in_dim), "weight")?,
            bias: vb.get(out_dim, "bias")?,
        })
    }

    /// Stacks several dense layers that read the same input into one wider layer.
    fn concat(parts: &[Dense]) -> candle_core::Result<Self> {
        let weights: Vec<&Tensor> = parts.iter().map(|d| &d.weight).collect();
        let biases: Vec<&Tensor> = parts.iter().map(|d| &d.bias).collect();
        Ok(Self {
            weight: Tensor::cat(&weights, 0)?,
            bias: Tensor::cat(&biases, 0)?,
        })
    }

    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        xs.matmul(&self.weight.t()?)?.broadcast_add(&self.bias)
    }
}

struct Norm {
    weight: Tensor,
    bias: Tensor,
    eps: f32,
}

impl Norm {
    fn load(vb: &VarBuilder, size: usize, eps: f64) -> candle_core::Result<Self> {
        let vb = vb.pp("LayerNorm");
        Ok(Self {
            weight: vb.get(size, "weight")?,
            bias: vb.get(size, "bias")?,
            eps: eps as f32,
        })
    }

    fn forward(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        candle_nn::ops::layer_norm(xs, &self.weight, &self.bias, self.eps)
    }
}

struct Layer {
    qkv: Dense,
    attn_out: Dense,
    attn_norm: Norm,
    ffn_in: Dense,
    ffn_out: Dense,
    ffn_norm: Norm,
}

impl Layer {
    fn load(vb: &VarBuilder, cfg: &EncoderConfig) -> candle_core::Result<Self> {
        let h = cfg.hidden_size;
        let att = vb.pp("attention");
        let own = att.pp("self");
        let qkv = Dense::concat(&[
            Dense::load(&own, "query", h, h)?,
            Dense::load(&own, "key", h, h)?,
            Dense::load(&own, "value", h, h)?,
        ])?;
        let out = att.pp("output");
        Ok(Self {
            qkv,
            attn_out: Dense::load(&out, "dense", h, h)?,
            attn_norm: Norm::load(&out, h, cfg.layer_norm_eps)?,
            ffn_in: Dense::load(&vb.pp("intermediate"), "dense", cfg.intermediate_size, h)?,
            ffn_out: Dense::load(&vb.pp("output"), "dense", h, cfg.intermediate_size)?,
            ffn_norm: Norm::load(&vb.pp("output"), h, cfg.layer_norm_eps)?,
        })
    }
}

/// Shape of one padded batch, shared by the layer functions.
struct BatchShape {
    batch: usize,
    seq: usize,
}

pub struct Encoder {
    cfg: EncoderConfig,
    word: Tensor,
    position: Tensor,
    token_type0: Tensor,
    emb_norm: Norm,
    layers: Vec<Layer>,
    device: Device,
}

impl Encoder {
    /// Loads embeddings and the first `layer` encoder layers from `vb`. `vb` must already point at
    /// the prefix holding `embeddings.*` and `encoder.*`.
    pub fn load(vb: &VarBuilder, cfg: &EncoderConfig, layer: usize) -> candle_core::Result<Self> {
        let h = cfg.hidden_size;
        let emb = vb.pp("embeddings");
        let token_types = emb.get((cfg.type_vocab_size, h), "token_type_embeddings.weight")?;
        let layers = (0..layer)
            .map(|i| Layer::load(&vb.pp(format!("encoder.layer.{i}")), cfg))
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Self {
            cfg: cfg.clone(),
            word: emb.get((cfg.vocab_size, h), "word_embeddings.weight")?,
            position: emb.get(
                (cfg.max_position_embeddings, h),
                "position_embeddings.weight",
            )?,
            token_type0: token_types.get(0)?,
            emb_norm: Norm::load(&emb, h, cfg.layer_norm_eps)?,
            layers,
            device: vb.device().clone(),
        })
    }

    /// Runs the batch of token-id sequences and returns, for each sequence, its unpadded hidden
    /// states at the chosen layer as a row-major `len x hidden` vector.
    pub fn hidden_states(&self, seqs: &[&[u32]]) -> candle_core::Result<Vec<Vec<f32>>> {
        let shape = BatchShape {
            batch: seqs.len(),
            seq: seqs.iter().map(|s| s.len()).max().unwrap_or(0),
        };
        if shape.batch == 0 || shape.seq == 0 {
            return Ok(vec![Vec::new(); shape.batch]);
        }
        let mask = self.attention_bias(seqs, &shape)?;
        let mut xs = self.embed(seqs, &shape)?;
        for layer in &self.layers {
            xs = self.layer_forward(layer, &xs, &mask, &shape)?;
        }
        let flat: Vec<f32> = xs.flatten_all()?.to_vec1()?;
        let h = self.cfg.hidden_size;
        Ok(seqs
            .iter()
            .enumerate()
            .map(|(b, s)| {
                let start = b * shape.seq * h;
                flat[start..start + s.len() * h].to_vec()
            })
            .collect())
    }

    /// Word + position + token-type-0 embeddings, LayerNorm'd; returns `[batch*seq, hidden]`.
    fn embed(&self, seqs: &[&[u32]], shape: &BatchShape) -> candle_core::Result<Tensor> {
        let mut ids = Vec::with_capacity(shape.batch * shape.seq);
        for s in seqs {
            ids.extend_from_slice(s);
            ids.extend(std::iter::repeat_n(
                self.cfg.pad_token_id as u32,
                shape.seq - s.len(),
            ));
        }
        let ids = Tensor::from_vec(ids, shape.batch * shape.seq, &self.device)?;
        let offset = self.cfg.position_offset() as u32;
        let positions: Vec<u32> = (0..shape.seq as u32).map(|i| i + offset).collect();
        let positions = Tensor::from_vec(positions, shape.seq, &self.device)?;
        let h = self.cfg.hidden_size;
        let word = self
            .word
            .index_select(&ids, 0)?
            .reshape((shape.batch, shape.seq, h))?;
        let pos = self.position.index_select(&positions, 0)?;
        let xs = word
            .broadcast_add(&pos)?
            .broadcast_add(&self.token_type0)?
            .reshape((shape.batch * shape.seq, h))?;
        self.emb_norm.forward(&xs)
    }

    /// Additive attention bias `[batch, 1, 1, seq]`: 0 on real tokens, a large negative number on
    /// padding, as Hugging Face's extended attention mask does.
    fn attention_bias(&self, seqs: &[&[u32]], shape: &BatchShape) -> candle_core::Result<Tensor> {
        let mut bias = Vec::with_capacity(shape.batch * shape.seq);
        for s in seqs {
            bias.extend(std::iter::repeat_n(0f32, s.len()));
            bias.extend(std::iter::repeat_n(f32::MIN, shape.seq - s.len()));
        }
        Tensor::from_vec(bias, (shape.batch, 1, 1, shape.seq), &self.device)
    }

    fn layer_forward(
        &self,
        layer: &Layer,
        xs: &Tensor,
        mask: &Tensor,
        shape: &BatchShape,
    ) -> candle_core::Result<Tensor> {
        let context = self.self_attention(layer, xs, mask, shape)?;
        let attended = layer
            .attn_norm
            .forward(&(layer.attn_out.forward(&context)? + xs)?)?;
        let inner = self.activate(&layer.ffn_in.forward(&attended)?)?;
        layer
            .ffn_norm
            .forward(&(layer.ffn_out.forward(&inner)? + &attended)?)
    }

    /// Multi-head self-attention on `[batch*seq, hidden]`; returns the same shape, before the
    /// output projection.
    fn self_attention(
        &self,
        layer: &Layer,
        xs: &Tensor,
        mask: &Tensor,
        shape: &BatchShape,
    ) -> candle_core::Result<Tensor> {
        let heads = self.cfg.num_heads;
        let head_dim = self.cfg.hidden_size / heads;
        let (b, t) = (shape.batch, shape.seq);
        let qkv = layer
            .qkv
            .forward(xs)?
            .reshape((b, t, 3, heads, head_dim))?
            .permute((2, 0, 3, 1, 4))?
            .contiguous()?;
        let q = (qkv.get(0)? * (1.0 / (head_dim as f64).sqrt()))?;
        let k = qkv.get(1)?;
        let v = qkv.get(2)?;
        let scores = q.matmul(&k.t()?)?.broadcast_add(mask)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((b * t, self.cfg.hidden_size))
    }

    fn activate(&self, xs: &Tensor) -> candle_core::Result<Tensor> {
        match self.cfg.activation {
            Activation::GeluErf => crate::gelu::gelu_erf(xs),
            Activation::GeluTanh => xs.gelu(),
            Activation::Relu => xs.relu(),
        }
    }

    pub fn hidden_size(&self) -> usize {
        self.cfg.hidden_size
    }
}

/// The dtype all weights are converted to on load.
pub const DTYPE: DType = DType::F32;
