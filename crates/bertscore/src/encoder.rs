//! A BERT/RoBERTa encoder forward pass up to a chosen layer, on packed token rows.
//!
//! It follows Hugging Face's `BertModel`/`RobertaModel` in eval mode (no dropout): embeddings
//! (word + position + token type 0) with LayerNorm, then post-norm layers of self-attention and a
//! GELU feed-forward. Only the first `layer` encoder layers are loaded and run, because bert-score
//! truncates the model the same way and nothing after that layer affects the hidden states it reads.
//!
//! candle loads the checkpoint (safetensors in any float dtype, converted to f32). The forward pass
//! then works on plain f32 buffers, because that is where the time goes: the sequences of a batch
//! are packed back to back with no padding, so every matrix product covers real tokens only (a
//! padded key would get attention weight exactly 0 in Hugging Face, so packing changes nothing);
//! each dense layer is one [`matmul::add_product`] with its weights packed at load, writing into
//! buffers reused from batch to batch; attention runs per sequence on rayon's threads. Written as
//! candle tensor ops (`reference.rs`, kept as the test oracle), the same computation ran at about
//! half this speed on MiniLM (23 against 44 pairs/s on the throughput bench): candle allocates a
//! fresh buffer per op and runs attention as one multi-threaded product per sequence and head.

use candle_core::{DType, Tensor};
use candle_nn::VarBuilder;
use rayon::prelude::*;

use crate::config::{Activation, EncoderConfig};
use crate::matmul::{self, PackedMatrix};
use crate::ops;

/// The dtype all weights are converted to on load.
pub const DTYPE: DType = DType::F32;

/// A dense layer `y = x W^T + b`, with `W^T` (`[in, out]`) packed for [`matmul::add_product`].
struct Dense {
    weight_t: PackedMatrix,
    bias: Vec<f32>,
}

impl Dense {
    fn tensors(vb: &VarBuilder, out: usize, inp: usize) -> candle_core::Result<(Tensor, Tensor)> {
        Ok((vb.get((out, inp), "weight")?, vb.get(out, "bias")?))
    }

    /// One dense layer from the `weight`/`bias` pairs of several that read the same input,
    /// stacked along their outputs.
    fn stacked(parts: &[(Tensor, Tensor)]) -> candle_core::Result<Self> {
        let weights: Vec<&Tensor> = parts.iter().map(|p| &p.0).collect();
        let biases: Vec<&Tensor> = parts.iter().map(|p| &p.1).collect();
        let weight = Tensor::cat(&weights, 0)?;
        let (outputs, inputs) = weight.dims2()?;
        let weight_t: Vec<f32> = weight.t()?.contiguous()?.flatten_all()?.to_vec1()?;
        Ok(Self {
            weight_t: PackedMatrix::new(&weight_t, inputs, outputs),
            bias: Tensor::cat(&biases, 0)?.to_vec1()?,
        })
    }

    fn load(vb: &VarBuilder, name: &str, out: usize, inp: usize) -> candle_core::Result<Self> {
        Self::stacked(&[Self::tensors(&vb.pp(name), out, inp)?])
    }

    /// `dst = x W^T + b (+ residual)` for `rows` rows; `dst` and `residual` are `[rows, out]`.
    fn apply(&self, x: &[f32], rows: usize, dst: &mut [f32], residual: Option<&[f32]>) {
        let out = self.weight_t.cols();
        let dst = &mut dst[..rows * out];
        match residual {
            Some(res) => dst
                .par_chunks_mut(out)
                .zip(res.par_chunks(out))
                .for_each(|(d, r)| {
                    d.iter_mut()
                        .zip(r)
                        .zip(&self.bias)
                        .for_each(|((d, r), b)| *d = r + b)
                }),
            None => dst
                .par_chunks_mut(out)
                .for_each(|d| d.copy_from_slice(&self.bias)),
        }
        matmul::add_product(&x[..rows * self.weight_t.rows()], rows, &self.weight_t, dst);
    }
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
    eps: f32,
}

impl Norm {
    fn load(vb: &VarBuilder, size: usize, eps: f64) -> candle_core::Result<Self> {
        let vb = vb.pp("LayerNorm");
        Ok(Self {
            weight: vb.get(size, "weight")?.to_vec1()?,
            bias: vb.get(size, "bias")?.to_vec1()?,
            eps: eps as f32,
        })
    }

    /// LayerNorm of every row of `xs`, in place.
    fn apply(&self, xs: &mut [f32]) {
        let h = self.weight.len();
        xs.par_chunks_mut(h)
            .for_each(|row| ops::layer_norm(row, &self.weight, &self.bias, self.eps));
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
        let qkv = Dense::stacked(&[
            Dense::tensors(&own.pp("query"), h, h)?,
            Dense::tensors(&own.pp("key"), h, h)?,
            Dense::tensors(&own.pp("value"), h, h)?,
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

/// Activation buffers, kept between batches so each batch reuses memory already paged in.
#[derive(Default)]
pub struct Scratch {
    hidden: Vec<f32>,
    qkv: Vec<f32>,
    context: Vec<f32>,
    attended: Vec<f32>,
    inner: Vec<f32>,
}

fn sized(buf: &mut Vec<f32>, len: usize) -> &mut [f32] {
    if buf.len() < len {
        buf.resize(len, 0.0);
    }
    &mut buf[..len]
}

/// Where each sequence's rows start in the packed buffers, and the total.
struct Packing {
    starts: Vec<usize>,
    lens: Vec<usize>,
    rows: usize,
}

impl Packing {
    fn new(seqs: &[&[u32]]) -> Self {
        let lens: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
        let mut starts = Vec::with_capacity(lens.len());
        let mut rows = 0;
        for len in &lens {
            starts.push(rows);
            rows += len;
        }
        Self { starts, lens, rows }
    }
}

pub struct Encoder {
    cfg: EncoderConfig,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type0: Vec<f32>,
    emb_norm: Norm,
    layers: Vec<Layer>,
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
        let flat = |t: Tensor| t.flatten_all()?.to_vec1::<f32>();
        Ok(Self {
            cfg: cfg.clone(),
            word: flat(emb.get((cfg.vocab_size, h), "word_embeddings.weight")?)?,
            position: flat(emb.get(
                (cfg.max_position_embeddings, h),
                "position_embeddings.weight",
            )?)?,
            token_type0: token_types.get(0)?.to_vec1()?,
            emb_norm: Norm::load(&emb, h, cfg.layer_norm_eps)?,
            layers,
        })
    }

    /// Runs the batch of token-id sequences and returns, for each sequence, its hidden states at
    /// the chosen layer as a row-major `len x hidden` vector.
    pub fn hidden_states(
        &self,
        seqs: &[&[u32]],
        scratch: &mut Scratch,
    ) -> candle_core::Result<Vec<Vec<f32>>> {
        let pack = Packing::new(seqs);
        let h = self.cfg.hidden_size;
        self.embed(seqs, sized(&mut scratch.hidden, pack.rows * h))?;
        for layer in &self.layers {
            self.layer_forward(layer, &pack, scratch);
        }
        let hidden = &scratch.hidden;
        Ok(pack
            .starts
            .iter()
            .zip(&pack.lens)
            .map(|(&start, &len)| hidden[start * h..(start + len) * h].to_vec())
            .collect())
    }

    /// Word + position + token-type-0 embeddings, LayerNorm'd, into `dst` (`[rows, hidden]`).
    fn embed(&self, seqs: &[&[u32]], dst: &mut [f32]) -> candle_core::Result<()> {
        let h = self.cfg.hidden_size;
        let offset = self.cfg.position_offset();
        let mut rows = dst.chunks_exact_mut(h);
        for seq in seqs {
            if offset + seq.len() > self.cfg.max_position_embeddings {
                candle_core::bail!(
                    "a sequence of {} tokens needs more than the model's {} positions",
                    seq.len(),
                    self.cfg.max_position_embeddings
                );
            }
            for (i, &id) in seq.iter().enumerate() {
                let id = id as usize;
                if id >= self.cfg.vocab_size {
                    candle_core::bail!(
                        "token id {id} is outside the vocabulary ({} entries)",
                        self.cfg.vocab_size
                    );
                }
                let row = rows.next().expect("dst holds one row per token");
                let word = &self.word[id * h..(id + 1) * h];
                let pos = &self.position[(offset + i) * h..(offset + i + 1) * h];
                for (((d, w), p), t) in row.iter_mut().zip(word).zip(pos).zip(&self.token_type0) {
                    *d = w + p + t;
                }
            }
        }
        self.emb_norm.apply(dst);
        Ok(())
    }

    fn layer_forward(&self, layer: &Layer, pack: &Packing, s: &mut Scratch) {
        let (h, rows) = (self.cfg.hidden_size, pack.rows);
        let hidden = &mut s.hidden[..rows * h];
        let qkv = sized(&mut s.qkv, rows * 3 * h);
        layer.qkv.apply(hidden, rows, qkv, None);
        let context = sized(&mut s.context, rows * h);
        self.attention(qkv, pack, context);
        let attended = sized(&mut s.attended, rows * h);
        layer.attn_out.apply(context, rows, attended, Some(hidden));
        layer.attn_norm.apply(attended);
        let inner = sized(&mut s.inner, rows * self.cfg.intermediate_size);
        layer.ffn_in.apply(attended, rows, inner, None);
        self.activate(inner);
        layer.ffn_out.apply(inner, rows, hidden, Some(attended));
        layer.ffn_norm.apply(hidden);
    }

    /// Multi-head self-attention of each packed sequence over its own tokens: reads the `[rows,
    /// 3 hidden]` query/key/value rows and writes `[rows, hidden]`, before the output projection.
    fn attention(&self, qkv: &[f32], pack: &Packing, context: &mut [f32]) {
        let h = self.cfg.hidden_size;
        let mut parts = Vec::with_capacity(pack.lens.len());
        let mut rest = context;
        for &len in &pack.lens {
            let (part, tail) = rest.split_at_mut(len * h);
            parts.push(part);
            rest = tail;
        }
        let heads = ops::Heads {
            count: self.cfg.num_heads,
            dim: h / self.cfg.num_heads,
        };
        parts
            .into_par_iter()
            .zip(pack.starts.par_iter().zip(&pack.lens))
            .for_each(|(out, (&start, &len))| {
                ops::attend(&qkv[start * 3 * h..(start + len) * 3 * h], len, heads, out)
            });
    }

    fn activate(&self, xs: &mut [f32]) {
        let f: fn(&mut [f32]) = match self.cfg.activation {
            Activation::GeluErf => ops::gelu_erf,
            Activation::GeluTanh => ops::gelu_tanh,
            Activation::Relu => |c| c.iter_mut().for_each(|x| *x = x.max(0.0)),
        };
        xs.par_chunks_mut(16 * 1024).for_each(f);
    }

    pub fn hidden_size(&self) -> usize {
        self.cfg.hidden_size
    }
}
