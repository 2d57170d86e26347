//! The encoder's forward pass written as candle tensor ops, padded batch and attention mask as
//! Hugging Face runs it: the test oracle for the packed forward pass in `encoder.rs`.
//!
//! It follows Hugging Face's `BertModel`/`RobertaModel` in eval mode (no dropout): embeddings
//! (word + position + token type 0) with LayerNorm, then post-norm layers of self-attention and a
//! GELU feed-forward. Only the first `layer` encoder layers are loaded and run, because bert-score
//! truncates the model the same way and nothing after that layer affects the hidden states it reads.

use candle_core::{Device, Tensor};
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

pub struct ReferenceEncoder {
    cfg: EncoderConfig,
    word: Tensor,
    position: Tensor,
    token_type0: Tensor,
    emb_norm: Norm,
    layers: Vec<Layer>,
    device: Device,
}

impl ReferenceEncoder {
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
            Activation::GeluErf => xs.gelu_erf(),
            Activation::GeluTanh => xs.gelu(),
            Activation::Relu => xs.relu(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use candle_core::{DType, Device, Tensor};
    use candle_nn::VarBuilder;

    use super::ReferenceEncoder;
    use crate::config::{Activation, EncoderConfig, Family};
    use crate::encoder::{Encoder, Scratch};

    fn config(family: Family, activation: Activation) -> EncoderConfig {
        EncoderConfig {
            family,
            vocab_size: 50,
            hidden_size: 24,
            num_layers: 2,
            num_heads: 3,
            intermediate_size: 40,
            activation,
            max_position_embeddings: 40,
            type_vocab_size: 2,
            layer_norm_eps: 1e-12,
            pad_token_id: 1,
        }
    }

    /// Deterministic weights in [-0.5, 0.5) (SplitMix64), under the names a checkpoint uses.
    fn weights(cfg: &EncoderConfig) -> HashMap<String, Tensor> {
        let mut state = 7u64;
        let mut tensor = |shape: &[usize]| {
            let n: usize = shape.iter().product();
            let v: Vec<f32> = (0..n)
                .map(|_| {
                    state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
                    let z = (state ^ (state >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                    (z >> 40) as f32 / (1u64 << 24) as f32 - 0.5
                })
                .collect();
            Tensor::from_vec(v, shape, &Device::Cpu).unwrap()
        };
        let (h, i) = (cfg.hidden_size, cfg.intermediate_size);
        let mut w = HashMap::new();
        let e = "embeddings";
        w.insert(
            format!("{e}.word_embeddings.weight"),
            tensor(&[cfg.vocab_size, h]),
        );
        w.insert(
            format!("{e}.position_embeddings.weight"),
            tensor(&[cfg.max_position_embeddings, h]),
        );
        w.insert(format!("{e}.token_type_embeddings.weight"), tensor(&[2, h]));
        let mut dense = |w: &mut HashMap<String, Tensor>, name: String, out: usize, inp: usize| {
            w.insert(format!("{name}.weight"), tensor(&[out, inp]));
            w.insert(format!("{name}.bias"), tensor(&[out]));
        };
        for l in 0..cfg.num_layers {
            let p = format!("encoder.layer.{l}");
            for part in ["query", "key", "value"] {
                dense(&mut w, format!("{p}.attention.self.{part}"), h, h);
            }
            dense(&mut w, format!("{p}.attention.output.dense"), h, h);
            dense(&mut w, format!("{p}.intermediate.dense"), i, h);
            dense(&mut w, format!("{p}.output.dense"), h, i);
        }
        let norms: Vec<String> = std::iter::once(format!("{e}.LayerNorm"))
            .chain((0..cfg.num_layers).flat_map(|l| {
                [
                    format!("encoder.layer.{l}.attention.output.LayerNorm"),
                    format!("encoder.layer.{l}.output.LayerNorm"),
                ]
            }))
            .collect();
        for n in norms {
            let g = (tensor(&[h]) + 1.0).unwrap();
            w.insert(format!("{n}.weight"), g);
            w.insert(format!("{n}.bias"), tensor(&[h]));
        }
        w
    }

    /// The packed forward pass gives the padded-and-masked candle forward pass's hidden states, for
    /// both families and every activation, at every layer, on sequences of different lengths.
    #[test]
    fn packed_forward_matches_the_candle_reference() {
        let seqs: Vec<Vec<u32>> = vec![
            vec![2, 17, 5, 33, 3],
            vec![2, 3],
            (0..37).map(|i| (i * 13 % 48 + 2) as u32).collect(),
            vec![2, 49, 0, 1, 8, 9, 3],
        ];
        let seqs: Vec<&[u32]> = seqs.iter().map(|s| s.as_slice()).collect();
        for family in [Family::Bert, Family::Roberta] {
            for act in [Activation::GeluErf, Activation::GeluTanh, Activation::Relu] {
                let cfg = config(family, act);
                let vb = VarBuilder::from_tensors(weights(&cfg), DType::F32, &Device::Cpu);
                for layer in 0..=cfg.num_layers {
                    let fast = Encoder::load(&vb, &cfg, layer).unwrap();
                    let slow = ReferenceEncoder::load(&vb, &cfg, layer).unwrap();
                    let mut scratch = Scratch::default();
                    // Twice through the same scratch: reused buffers must not leak into results.
                    fast.hidden_states(&seqs[2..], &mut scratch).unwrap();
                    let got = fast.hidden_states(&seqs, &mut scratch).unwrap();
                    let want = slow.hidden_states(&seqs).unwrap();
                    for (s, (g, w)) in got.iter().zip(&want).enumerate() {
                        assert_eq!(g.len(), seqs[s].len() * cfg.hidden_size);
                        assert_eq!(g.len(), w.len());
                        let worst = g
                            .iter()
                            .zip(w)
                            .map(|(a, b)| (a - b).abs())
                            .fold(0f32, f32::max);
                        assert!(
                            worst < 1e-4,
                            "{family:?} {act:?} layer {layer} sequence {s}: max |difference| {worst}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn a_token_outside_the_vocabulary_is_an_error() {
        let cfg = config(Family::Bert, Activation::GeluErf);
        let vb = VarBuilder::from_tensors(weights(&cfg), DType::F32, &Device::Cpu);
        let enc = Encoder::load(&vb, &cfg, 1).unwrap();
        let err = enc
            .hidden_states(&[&[2, 50, 3]], &mut Scratch::default())
            .unwrap_err();
        assert!(err.to_string().contains("token id 50"), "{err}");
    }
}
