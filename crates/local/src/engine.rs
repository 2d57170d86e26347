//! The forward pass over quantised weights: loading the tensors from a GGUF, and one step that runs any
//! number of token columns from any number of sequences through the model together. Llama's layer is the
//! base; what Qwen 2, Qwen 3 and Gemma 3 add to it (biases, per-head norms, post-norms, GELU, sliding windows)
//! is switched on by the [`Config`] that `crate::arch` reads for each.
//!
//! - **Weights** stay in the file's Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, F16 or BF16 blocks. A
//!   tensor in another format (Q2_K, Q3_K) is dequantised with candle and requantised to Q8_0 at load, which is close to exact;
//!   the norms are f32.
//! - **A step** takes columns `(sequence, token)`. Every matrix product runs once for all columns (a prompt's
//!   tokens, or the next token of each sequence in a batch), so weights are read once per step rather than once
//!   per sequence. Attention runs per column and head over that column's own sequence. After the last
//!   layer's attention only the columns whose logits are wanted go on, as in llama.cpp. A step's buffers
//!   come from [`crate::scratch`], so a prompt's layers reuse the same pages instead of faulting in new ones.
//! - **KV cache.** Keys and values are rounded to f16 (as llama.cpp stores them) and kept as f32. A sequence
//!   may start from a shared, read-only prefix (the prompt's cache), so n samples of one prompt are prefilled
//!   once and each keeps only its own continuation.
//! - **Numerics** follow llama.cpp's CPU path bit for bit: activations quantised per weight format (see
//!   [`crate::quant`]), RMS norm summed in f64, rotary angles built by repeated multiplication and the rotation
//!   with the multiply-add GCC contracts it to, SiLU with ggml's vectorised exp (GELU from its f16 table), and attention as
//!   [`crate::attention`] describes. Checked by dumping every intermediate tensor of llama.cpp (its eval
//!   callback, through the xllamacpp library) for a prompt and comparing them with this engine's: all equal,
//!   logits included; the logits and greedy tests in `tests/it/greedy.rs` hold the result.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use candle_core::quantized::gguf_file::{Content, TensorInfo};
use candle_core::quantized::GgmlDType;
use candle_core::Device;
use rayon::prelude::*;

use crate::activation;
use crate::arch::{self, Arch, Config};
use crate::attention::{self, Keys};
use crate::gguf::{self, Meta};
use crate::quant::{round_f16_in_place, Acts, Batch, Format, KPaths, Kernel, QMatrix, BLOCK};
use crate::scratch::{self, Buf};
use crate::LocalError;

/// Several weight matrices that read the same input, run as one product (Q, K and V; gate and up). Their
/// outputs sit side by side in each column.
struct Linear {
    parts: Vec<QMatrix>,
    rows: usize,
}

impl Linear {
    fn new(parts: Vec<QMatrix>) -> Linear {
        let rows = parts.iter().map(|p| p.rows).sum();
        Linear { parts, rows }
    }

    /// `x` is `n` columns of the input width; returns `n` columns of `self.rows`. `batch`: per column, the
    /// product llama.cpp computes it in (see [`batches`]; empty: each alone).
    fn forward(&self, x: &[f32], cols: usize, batch: &[Batch]) -> Buf<f32> {
        let n = x.len() / cols;
        // Every cell is written: each part's rows, for every column.
        let mut out = scratch::overwritten(n * self.rows);
        let mut quantized: Vec<(Format, Acts)> = Vec::new();
        for p in &self.parts {
            if !quantized.iter().any(|(f, _)| *f == p.format) {
                quantized.push((p.format, Acts::quantize_in(x, cols, p.format, batch)));
            }
        }
        let mut offset = 0;
        let mut jobs = Vec::new();
        for p in &self.parts {
            let acts = &quantized
                .iter()
                .find(|(f, _)| *f == p.format)
                .expect("quantised above")
                .1;
            jobs.push((p, acts, offset));
            offset += p.rows;
        }
        crate::quant::matmul_many(&jobs, &mut out, self.rows);
        out
    }
}

struct Layer {
    attn_norm: Vec<f32>,
    qkv: Linear,
    /// Q, K and V biases side by side, as the product's columns hold them.
    qkv_bias: Option<Vec<f32>>,
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    out: Linear,
    post_attn_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    gate_up: Linear,
    down: Linear,
    post_ffn_norm: Option<Vec<f32>>,
}

/// A loaded model: configuration and weights. Immutable and shared by every sequence.
pub(crate) struct Engine {
    pub cfg: Config,
    embed: QMatrix,
    layers: Vec<Layer>,
    norm: Vec<f32>,
    output: Linear,
    /// Llama 3's rotary frequency factors (`rope_freqs.weight`): each angle is divided by its pair's.
    rope_factors: Option<Vec<f32>>,
    pub kernel: Kernel,
    /// The threads the matrix products and attention run on.
    pool: rayon::ThreadPool,
    /// The context window, which decides (as llama.cpp's cache size does) how attention is split.
    pub context: usize,
    /// Formats as stored in the file, for the record (`Q4_1`, `Q4_K`, ..., or `Q8_0 (from Q3K)`).
    pub formats: Vec<String>,
    /// Which batch-dependent K-quant kernels the layers' products take.
    pub kpaths: KPaths,
}

/// One layer's keys and values for a run of positions: `len` rows of `kv_dim` values each.
#[derive(Clone, Default)]
pub(crate) struct LayerCache {
    k: Vec<f32>,
    v: Vec<f32>,
}

impl LayerCache {
    /// Keys and values of the first `len` of the `total` positions held.
    fn first(&self, len: usize, total: usize) -> (&[f32], &[f32]) {
        let width = self.k.len() / total.max(1);
        (&self.k[..len * width], &self.v[..len * width])
    }
}

/// The KV cache of a run of positions, every layer.
#[derive(Clone)]
pub(crate) struct Cache {
    layers: Vec<LayerCache>,
    len: usize,
}

impl Cache {
    pub(crate) fn new(layers: usize) -> Cache {
        Cache {
            layers: vec![LayerCache::default(); layers],
            len: 0,
        }
    }
}

/// A sequence being decoded: an optional shared prefix (the first `len` positions of a prompt's cache) and its
/// own positions after it.
pub(crate) struct Sequence {
    prefix: Option<(Arc<Cache>, usize)>,
    own: Cache,
}

impl Sequence {
    pub(crate) fn new(layers: usize) -> Sequence {
        Sequence {
            prefix: None,
            own: Cache::new(layers),
        }
    }

    /// A sequence continuing after `prefix`, which it shares and never changes.
    pub(crate) fn after(prefix: Arc<Cache>) -> Sequence {
        let len = prefix.len;
        Sequence::after_part(prefix, len)
    }

    /// A sequence continuing after the first `len` positions of `prefix` (a cached prompt it shares a start
    /// with).
    pub(crate) fn after_part(prefix: Arc<Cache>, len: usize) -> Sequence {
        let layers = prefix.layers.len();
        Sequence {
            prefix: Some((prefix, len)),
            own: Cache::new(layers),
        }
    }

    /// Positions held so far.
    pub(crate) fn len(&self) -> usize {
        self.prefix.as_ref().map_or(0, |p| p.1) + self.own.len
    }

    /// Every position held, as one cache to share as the prefix of others (the shared part is copied).
    pub(crate) fn into_cache(self) -> Cache {
        let Some((prefix, len)) = self.prefix else {
            return self.own;
        };
        let mut layers: Vec<LayerCache> = prefix
            .layers
            .iter()
            .map(|l| {
                let (k, v) = l.first(len, prefix.len);
                LayerCache {
                    k: k.to_vec(),
                    v: v.to_vec(),
                }
            })
            .collect();
        for (all, own) in layers.iter_mut().zip(self.own.layers) {
            all.k.extend(own.k);
            all.v.extend(own.v);
        }
        Cache {
            layers,
            len: len + self.own.len,
        }
    }

    /// Layer `l`'s keys and values as up to two runs of rows: the prefix's (cut to its shared length), then
    /// its own.
    fn segments(&self, l: usize) -> impl Iterator<Item = (&[f32], &[f32])> {
        self.prefix
            .iter()
            .map(move |(p, len)| p.layers[l].first(*len, p.len))
            .chain(std::iter::once((
                &self.own.layers[l].k[..],
                &self.own.layers[l].v[..],
            )))
    }
}

/// What columns of a step take besides their tokens: per column, an embedding to run in place of its token's
/// (an image's, not scaled as token embeddings are), and the position its attention reaches to (exclusive), for
/// columns that attend past their own position as llama.cpp's non-causal image batches do. Empty: none.
#[derive(Debug, Default)]
pub(crate) struct Inputs<'a> {
    pub embd: Vec<Option<&'a [f32]>>,
    pub ends: Vec<Option<usize>>,
}

/// One token to run: which sequence it extends, and whether its next-token logits are wanted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    pub seq: usize,
    pub token: u32,
    pub logits: bool,
    /// The tokens llama.cpp would run for this sequence in this column's step: 1 for a decoded token, the
    /// size of its chunk for a prompt token ([`attention::prompt_chunk`]). It picks the attention
    /// path, so a column computes the same whatever shares its step and wherever a prefill resumed.
    pub chunk: usize,
    /// The column's place in that chunk (0 for a decoded token), which picks its products' kernel.
    pub index: usize,
}

impl Engine {
    pub(crate) fn load(
        path: &Path,
        meta: &Meta<'_>,
        content: &Content,
        file: &mut File,
    ) -> Result<Engine, LocalError> {
        let arch = Arch::read(meta)?;
        let cfg = Config::read(meta, arch)?;
        let mut loader = Loader {
            path,
            content,
            file,
            formats: Vec::new(),
        };
        // llama.cpp sizes the embedding by the vocabulary; a file without one gets the embedding's own rows.
        let vocab = match meta.opt_array_len("tokenizer.ggml.tokens")? {
            Some(n) => n,
            None => loader.rows("token_embd.weight")?,
        };
        let embed = loader.matrix("token_embd.weight", vocab, cfg.dim)?;
        let output = if loader.has("output.weight") {
            loader.matrix("output.weight", vocab, cfg.dim)?
        } else {
            loader.matrix("token_embd.weight", vocab, cfg.dim)?
        };
        let mut layers = Vec::new();
        for l in 0..cfg.layers {
            layers.push(loader.layer(&cfg, l)?);
        }
        let norm = loader.vector("output_norm.weight", cfg.dim)?;
        // llama.cpp reads the factors for Llama and Mistral 3 only; other families' graphs pass none.
        let rope_factors =
            if matches!(arch, Arch::Llama | Arch::Mistral3) && loader.has("rope_freqs.weight") {
                Some(loader.vector("rope_freqs.weight", cfg.rope.dims / 2)?)
            } else {
                None
            };
        let mut formats = loader.formats;
        formats.sort();
        formats.dedup();
        // The output product always has its columns one by one (llama.cpp keeps only the wanted rows first).
        let kpaths = KPaths::of(layers.iter().flat_map(|l| {
            [&l.qkv, &l.out, &l.gate_up, &l.down]
                .into_iter()
                .flat_map(|linear| &linear.parts)
        }));
        Ok(Engine {
            cfg,
            embed,
            layers,
            norm,
            output: Linear::new(vec![output]),
            rope_factors,
            kernel: Kernel::detect(),
            pool: thread_pool(path)?,
            context: usize::MAX,
            formats,
            kpaths,
        })
    }

    /// Runs `cols` through the model, appending each column's keys and values to its sequence (in column
    /// order, so a prompt's columns attend causally to each other). Returns the logits of the columns that
    /// asked for them, in column order.
    pub(crate) fn step(&self, seqs: &mut [&mut Sequence], cols: &[Column]) -> Vec<Vec<f32>> {
        self.pool.install(|| self.run(seqs, cols))
    }

    /// Runs `f` on the engine's thread pool (so its parallel loops use the engine's threads).
    pub(crate) fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.pool.install(f)
    }

    /// The logits after `prompt`, prefilled into a sequence of its own.
    pub(crate) fn prompt_logits(&self, prompt: &[u32]) -> Vec<f32> {
        let mut seq = Sequence::new(self.cfg.layers);
        let cols: Vec<Column> = prompt
            .iter()
            .enumerate()
            .map(|(i, &token)| {
                let chunk = self.prompt_chunk(prompt.len(), i);
                Column {
                    seq: 0,
                    token,
                    logits: i + 1 == prompt.len(),
                    chunk: chunk.size,
                    index: i - chunk.start,
                }
            })
            .collect();
        self.step(&mut [&mut seq], &cols).pop().unwrap_or_default()
    }

    /// The chunk llama.cpp's server reads position `pos` of a `len`-token prompt in: it ends batches early
    /// before the end of a prompt for a model with sliding-window layers ([`attention::prompt_chunk`]).
    pub(crate) fn prompt_chunk(&self, len: usize, pos: usize) -> attention::Chunk {
        attention::prompt_chunk(len, pos, self.cfg.swa.is_some())
    }

    /// An empty sequence of this model's layers.
    pub(crate) fn sequence(&self) -> Sequence {
        Sequence::new(self.cfg.layers)
    }

    /// The model's width (its embeddings').
    pub(crate) fn width(&self) -> usize {
        self.cfg.dim
    }

    /// Token ids the model knows: the embedding's rows.
    pub(crate) fn vocab(&self) -> usize {
        self.embed.rows
    }

    pub(crate) fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    fn run(&self, seqs: &mut [&mut Sequence], cols: &[Column]) -> Vec<Vec<f32>> {
        self.run_with(seqs, cols, &Inputs::default())
    }

    /// As [`Engine::step`], with columns that take an embedding instead of their token's and attend past
    /// their own position (see [`Inputs`]).
    pub(crate) fn step_with(
        &self,
        seqs: &mut [&mut Sequence],
        cols: &[Column],
        inputs: &Inputs<'_>,
    ) -> Vec<Vec<f32>> {
        self.pool.install(|| self.run_with(seqs, cols, inputs))
    }

    fn run_with(
        &self,
        seqs: &mut [&mut Sequence],
        cols: &[Column],
        inputs: &Inputs<'_>,
    ) -> Vec<Vec<f32>> {
        let cfg = &self.cfg;
        let positions = positions(seqs, cols);
        let mut x = scratch::zeroed(cols.len() * cfg.dim);
        for (c, col) in cols.iter().enumerate() {
            let dst = &mut x[c * cfg.dim..(c + 1) * cfg.dim];
            match inputs.embd.get(c).copied().flatten() {
                // As llama.cpp: an embedding given as input (an image's) is not scaled.
                Some(e) => dst.copy_from_slice(e),
                None => {
                    self.embed.dequantize_row(col.token as usize, dst);
                    if let Some(s) = cfg.embed_scale {
                        scale(dst, s);
                    }
                }
            }
        }
        let factors = self.rope_factors.as_deref();
        let rope = Rope::new(cfg, cfg.rope.base, factors, &positions);
        let swa_rope = cfg
            .swa
            .as_ref()
            .map(|s| Rope::new(cfg, s.rope_base, factors, &positions));
        let mut batch = batches(cols);
        let wanted: Vec<usize> = (0..cols.len()).filter(|&c| cols[c].logits).collect();
        for (l, layer) in self.layers.iter().enumerate() {
            let h = rms_norm(&x, &layer.attn_norm, cfg.eps);
            let mut qkv = layer.qkv.forward(&h, cfg.dim, &batch);
            if let Some(bias) = &layer.qkv_bias {
                for col in qkv.chunks_exact_mut(bias.len()) {
                    add(col, bias);
                }
            }
            norm_heads(&mut qkv, layer, cfg);
            match (&swa_rope, cfg.window(l)) {
                (Some(r), Some(_)) => r.apply(&mut qkv, cfg),
                _ => rope.apply(&mut qkv, cfg),
            }
            if let Some(s) = cfg.query_scale {
                for col in qkv.chunks_exact_mut(cfg.q_dim() + 2 * cfg.kv_dim()) {
                    scale(&mut col[..cfg.q_dim()], s);
                }
            }
            if let Some(t) = cfg.attn_temp {
                let width = cfg.q_dim() + 2 * cfg.kv_dim();
                for (col, &p) in qkv.chunks_exact_mut(width).zip(&positions) {
                    scale(&mut col[..cfg.q_dim()], t.at(p));
                }
            }
            append_kv(seqs, cols, &qkv, l, cfg);
            let mut attn = attention(
                seqs,
                cols,
                &positions,
                &inputs.ends,
                &qkv,
                l,
                cfg,
                self.context,
            );
            if l + 1 == self.layers.len() && wanted.len() < cols.len() {
                // As llama.cpp: after the last layer's attention only the columns whose logits are wanted
                // go on; the others' results would never be read. Each keeps its own batch, so its
                // products are the ones it would get among all columns.
                attn = select(&attn, cfg.q_dim(), &wanted);
                x = select(&x, cfg.dim, &wanted);
                batch = wanted.iter().map(|&c| batch[c]).collect();
            }
            let mut o = layer.out.forward(&attn, cfg.q_dim(), &batch);
            if let Some(w) = &layer.post_attn_norm {
                o = rms_norm(&o, w, cfg.eps);
            }
            add(&mut x, &o);
            // llama.cpp keeps only the columns whose logits are wanted before the last layer's MLP, so each
            // of those is multiplied there on its own; the other columns' results are never used.
            let ffn_batch: &[Batch] = if l + 1 == self.layers.len() {
                &[]
            } else {
                &batch
            };
            let h = rms_norm(&x, &layer.ffn_norm, cfg.eps);
            let gu = layer.gate_up.forward(&h, cfg.dim, ffn_batch);
            let act = if cfg.block.gelu {
                activation::geglu(&gu, cfg.ffn)
            } else {
                activation::swiglu(&gu, cfg.ffn)
            };
            let mut d = layer.down.forward(&act, cfg.ffn, ffn_batch);
            if let Some(w) = &layer.post_ffn_norm {
                d = rms_norm(&d, w, cfg.eps);
            }
            add(&mut x, &d);
        }
        if x.len() != wanted.len() * cfg.dim {
            x = select(&x, cfg.dim, &wanted);
        }
        self.logits(&x)
    }

    /// The logits of each column of `x` (the columns whose logits are wanted).
    fn logits(&self, x: &[f32]) -> Vec<Vec<f32>> {
        if x.is_empty() {
            return Vec::new();
        }
        let h = rms_norm(x, &self.norm, self.cfg.eps);
        let mut out = self.output.forward(&h, self.cfg.dim, &[]);
        if let Some(cap) = self.cfg.final_softcap {
            // As llama.cpp's graph: scale by the reciprocal, tanh, scale back.
            let inv = 1.0 / cap;
            for v in out.iter_mut() {
                *v = (*v * inv).tanh() * cap;
            }
        }
        out.chunks_exact(self.output.rows)
            .map(<[f32]>::to_vec)
            .collect()
    }
}

/// Per column, the product llama.cpp computes it in when it runs this column's sequence alone (see [`batch`]).
fn batches(cols: &[Column]) -> Vec<Batch> {
    cols.iter().map(|c| batch(c.chunk, c.index)).collect()
}

/// The product llama.cpp computes a column in, for a column at `index` in a chunk of `chunk` tokens
/// ([`Column::chunk`]): its prompt chunk, the column at its place in it, or for a decoded token one column.
/// Where a prefill resumes mid-chunk the chunk still decides, so a column computes the same whatever shares
/// its step.
pub(crate) fn batch(chunk: usize, index: usize) -> Batch {
    match chunk {
        1 => Batch::ALONE,
        size => Batch { size, index },
    }
}

/// Each column's position: its sequence's length before this step plus the earlier columns of that sequence.
fn positions(seqs: &[&mut Sequence], cols: &[Column]) -> Vec<usize> {
    let mut next: Vec<usize> = seqs.iter().map(|s| s.len()).collect();
    cols.iter()
        .map(|c| {
            let p = next[c.seq];
            next[c.seq] += 1;
            p
        })
        .collect()
}

/// Rotary position embedding as llama.cpp's CPU code applies it, in its normal mode (adjacent pairs, which
/// Llama GGUFs expect) or NEOX mode (dimension `i` with `i + dims / 2`, Qwen's and Gemma's).
struct Rope {
    /// Per column, `rope.dims / 2` (cos, sin) pairs.
    table: Vec<(f32, f32)>,
}

impl Rope {
    fn new(cfg: &Config, base: f32, factors: Option<&[f32]>, positions: &[usize]) -> Rope {
        let half = cfg.rope.dims / 2;
        let theta_scale = base.powf(-2.0 / cfg.rope.dims as f32);
        let mut table = Vec::with_capacity(positions.len() * half);
        for &p in positions {
            // Built by repeated multiplication, as llama.cpp builds its cache, so the angles round alike; then
            // divided by the pair's frequency factor and multiplied by the linear scale (`rope_yarn` without
            // its extrapolation: both exact when 1).
            let mut theta = p as f32;
            for i in 0..half {
                let ff = factors.map_or(1.0, |f| f[i]);
                let (angle, mscale) = rope_yarn(&cfg.rope, theta / ff, i);
                table.push((angle.cos() * mscale, angle.sin() * mscale));
                theta *= theta_scale;
            }
        }
        Rope { table }
    }

    /// Rotates the query and key heads of every column of `qkv` in place. The rotation's first output is one
    /// multiply-add over a rounded product, as GCC contracts llama.cpp's `x0*cos - x1*sin` (unfused, or fused the other
    /// ways, it parts from llama.cpp in the last bit of some values).
    fn apply(&self, qkv: &mut [f32], cfg: &Config) {
        #[cfg(target_arch = "x86_64")]
        if Kernel::detect() == Kernel::Avx2 {
            // SAFETY: `Kernel::Avx2` is only chosen on CPUs with AVX2 and FMA.
            return unsafe { self.apply_fma(qkv, cfg) };
        }
        self.rotate(qkv, cfg);
    }

    /// [`Rope::rotate`] with FMA instructions, so each `mul_add` is one instruction rather than a call to
    /// libm's software `fmaf` (same result, many times faster).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn apply_fma(&self, qkv: &mut [f32], cfg: &Config) {
        self.rotate(qkv, cfg);
    }

    #[inline(always)]
    fn rotate(&self, qkv: &mut [f32], cfg: &Config) {
        let width = cfg.q_dim() + 2 * cfg.kv_dim();
        let rotated = cfg.q_dim() + cfg.kv_dim();
        let half = cfg.rope.dims / 2;
        // The second value of a pair: next to the first, or half the rotated dimensions on.
        let (step, offset) = if cfg.rope.neox { (1, half) } else { (2, 1) };
        for (c, col) in qkv.chunks_exact_mut(width).enumerate() {
            let angles = &self.table[c * half..(c + 1) * half];
            for head in col[..rotated].chunks_exact_mut(cfg.head_dim) {
                for (i, &(cos, sin)) in angles.iter().enumerate() {
                    let (a, b) = (head[i * step], head[i * step + offset]);
                    head[i * step] = a.mul_add(cos, -(b * sin));
                    head[i * step + offset] = a.mul_add(sin, b * cos);
                }
            }
        }
    }
}

/// ggml's `rope_yarn` for pair `i`: the angle (scaled, or with YaRN mixed with the unscaled one) and what its
/// cosine and sine are multiplied by. ggml-cpu is built with FMA, and GCC contracts the mix to one multiply-add
/// (computed unfused, some angles part from llama.cpp's in the last bit).
fn rope_yarn(rope: &arch::Rope, extrap: f32, i: usize) -> (f32, f32) {
    let interp = rope.scale * extrap;
    let Some(yarn) = rope.yarn else {
        return (interp, 1.0);
    };
    let [low, high] = yarn.corr_dims;
    let y = (i as f32 - low) / 0.001f32.max(high - low);
    let mix = (1.0 - y.clamp(0.0, 1.0)) * yarn.ext_factor;
    let angle = interp.mul_add(1.0 - mix, extrap * mix);
    (angle, 0.1f32.mul_add((1.0 / rope.scale).ln(), 1.0))
}

/// Qwen 3's and Gemma 3's RMS norm over each query and key head, in place, before the rotation.
fn norm_heads(qkv: &mut [f32], layer: &Layer, cfg: &Config) {
    let (Some(qn), Some(kn)) = (&layer.q_norm, &layer.k_norm) else {
        return;
    };
    let width = cfg.q_dim() + 2 * cfg.kv_dim();
    for col in qkv.chunks_exact_mut(width) {
        let (q, rest) = col.split_at_mut(cfg.q_dim());
        for head in q.chunks_exact_mut(cfg.head_dim) {
            rms_norm_row(head, qn, cfg.eps);
        }
        for head in rest[..cfg.kv_dim()].chunks_exact_mut(cfg.head_dim) {
            rms_norm_row(head, kn, cfg.eps);
        }
    }
}

/// Appends each column's keys and values (rounded to f16) to its sequence's own cache for layer `l`.
fn append_kv(seqs: &mut [&mut Sequence], cols: &[Column], qkv: &[f32], l: usize, cfg: &Config) {
    let width = cfg.q_dim() + 2 * cfg.kv_dim();
    let q_dim = cfg.q_dim();
    let kv_dim = cfg.kv_dim();
    for (c, col) in cols.iter().enumerate() {
        let row = &qkv[c * width..(c + 1) * width];
        let seq = &mut *seqs[col.seq];
        let cache = &mut seq.own.layers[l];
        for (cached, values) in [
            (&mut cache.k, &row[q_dim..q_dim + kv_dim]),
            (&mut cache.v, &row[q_dim + kv_dim..]),
        ] {
            let at = cached.len();
            cached.extend_from_slice(values);
            round_f16_in_place(&mut cached[at..]);
        }
        if l + 1 == cfg.layers {
            seq.own.len += 1;
        }
    }
}

/// Attention of every column and head over its own sequence's positions up to its own (see
/// [`crate::attention`] for how each is computed, and why).
#[allow(clippy::too_many_arguments)]
fn attention(
    seqs: &[&mut Sequence],
    cols: &[Column],
    positions: &[usize],
    ends: &[Option<usize>],
    qkv: &[f32],
    l: usize,
    cfg: &Config,
    context: usize,
) -> Buf<f32> {
    let width = cfg.q_dim() + 2 * cfg.kv_dim();
    let q_dim = cfg.q_dim();
    let hd = cfg.head_dim;
    let group = cfg.heads / cfg.kv_heads;
    let scale = match cfg.query_scale {
        Some(_) => 1.0,
        None => 1.0 / (hd as f32).sqrt(),
    };
    let window = cfg.window(l);
    // A sliding layer's cache in llama.cpp holds the window and one prompt chunk, padded, which bounds the
    // KV length its split path sees.
    let context = match window {
        Some(w) => context.min((w + attention::PROMPT_CHUNK).next_multiple_of(256)),
        None => context,
    };
    // Each column's path, and per sequence the positions held (this step's included) and whether any of its
    // columns is tiled.
    let paths: Vec<attention::Path> = cols
        .iter()
        .zip(positions)
        .map(|(c, &p)| attention::path(c.chunk, p, context))
        .collect();
    let mut tiled = vec![false; seqs.len()];
    let mut held = vec![0usize; seqs.len()];
    for (i, ((c, &p), how)) in cols.iter().zip(positions).zip(&paths).enumerate() {
        tiled[c.seq] |= *how == attention::Path::Tiled;
        let end = ends.get(i).copied().flatten().unwrap_or(p + 1);
        held[c.seq] = held[c.seq].max(end);
    }
    let keys = |seq: usize, kv_head: usize| {
        let mut runs = seqs[seq].segments(l);
        let first = runs.next().expect("a sequence has its own part");
        Keys {
            runs: [first, runs.next().unwrap_or((&[], &[]))],
            stride: cfg.kv_dim(),
            offset: kv_head * hd,
            dim: hd,
        }
    };
    // Transposed keys for the sequences whose queries take the tiled path, once per key head rather than
    // once per query.
    let mut transposed: Vec<Option<Vec<Vec<f32>>>> = vec![None; seqs.len()];
    for (s, t) in transposed.iter_mut().enumerate() {
        if tiled[s] {
            let len = held[s];
            *t = Some(
                (0..cfg.kv_heads)
                    .into_par_iter()
                    .map(|h| attention::transpose_keys(&keys(s, h), len))
                    .collect(),
            );
        }
    }
    let mut out = scratch::overwritten(cols.len() * q_dim);
    out.par_chunks_mut(hd).enumerate().for_each(|(i, dst)| {
        let (c, head) = (i / cfg.heads, i % cfg.heads);
        let (seq, kv_head) = (cols[c].seq, head / group);
        let q = &qkv[c * width + head * hd..c * width + (head + 1) * hd];
        let kt = transposed[seq].as_ref().map(|t| &t[kv_head][..]);
        let first = window.map_or(0, |w| (positions[c] + 1).saturating_sub(w));
        let end = ends.get(c).copied().flatten().unwrap_or(positions[c] + 1);
        attention::attend(paths[c], q, &keys(seq, kv_head), kt, first..end, scale, dst);
    });
    out
}

/// Columns `keep` of `x`, whose columns are `width` values wide.
fn select(x: &[f32], width: usize, keep: &[usize]) -> Buf<f32> {
    let mut out = scratch::overwritten(keep.len() * width);
    for (dst, &c) in out.chunks_exact_mut(width).zip(keep) {
        dst.copy_from_slice(&x[c * width..(c + 1) * width]);
    }
    out
}

/// RMS norm of each column (sum of squares in f64, as llama.cpp does), times the weight.
fn rms_norm(x: &[f32], weight: &[f32], eps: f32) -> Buf<f32> {
    let mut out = scratch::copied(x);
    for col in out.chunks_exact_mut(weight.len()) {
        rms_norm_row(col, weight, eps);
    }
    out
}

/// [`rms_norm`] of one row in place.
fn rms_norm_row(row: &mut [f32], weight: &[f32], eps: f32) {
    let sum: f64 = row.iter().map(|&v| f64::from(v * v)).sum();
    let scale = 1.0 / ((sum / row.len() as f64) as f32 + eps).sqrt();
    for (v, &w) in row.iter_mut().zip(weight) {
        *v = *v * scale * w;
    }
}

fn add(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

fn scale(x: &mut [f32], by: f32) {
    for v in x {
        *v *= by;
    }
}

/// A pool of `NMB_THREADS` threads (default: one per core).
fn thread_pool(path: &Path) -> Result<rayon::ThreadPool, LocalError> {
    let threads = match std::env::var("NMB_THREADS") {
        Ok(v) => v
            .trim()
            .parse::<usize>()
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| LocalError::InvalidParams {
                field: "NMB_THREADS",
                message: format!("expected a whole number of threads of at least 1, got {v:?}"),
            })?,
        Err(_) => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("nmb-local-{i}"))
        .build()
        .map_err(|e| LocalError::Inference {
            path: path.to_path_buf(),
            message: format!("cannot start {threads} threads: {e}"),
        })
}

/// Reads tensors by name, in the formats the kernels take, naming the file and tensor in every error.
pub(crate) struct Loader<'a> {
    path: &'a Path,
    content: &'a Content,
    file: &'a mut File,
    formats: Vec<String>,
}

impl<'a> Loader<'a> {
    /// A loader over the tensors of `content`, read from `file` (a vision projector's, see `vision`).
    pub(crate) fn new(path: &'a Path, content: &'a Content, file: &'a mut File) -> Loader<'a> {
        Loader {
            path,
            content,
            file,
            formats: Vec::new(),
        }
    }

    pub(crate) fn err(&self, name: &str, message: String) -> LocalError {
        LocalError::Gguf {
            path: self.path.to_path_buf(),
            message: format!("tensor `{name}`: {message}"),
        }
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.content.tensor_infos.contains_key(name)
    }

    /// llama.cpp adds a layer's optional biases (`attn_output.bias`, the MLP's, ...) where a file has them; this
    /// engine adds only the Q, K and V biases of the families that use them, so a file with any other bias is
    /// refused rather than run without it.
    fn refuse_unread_biases(&self, cfg: &Config, l: usize) -> Result<(), LocalError> {
        let prefix = format!("blk.{l}.");
        let read = |t: &str| {
            cfg.block.qkv_bias && ["attn_q.bias", "attn_k.bias", "attn_v.bias"].contains(&t)
        };
        let unread = (self.content.tensor_infos.keys())
            .filter_map(|n| Some((n, n.strip_prefix(&prefix)?)))
            .find(|(_, t)| t.ends_with(".bias") && !read(t));
        match unread {
            Some((name, _)) => Err(self.err(
                name,
                "a bias the local engine does not add in this architecture (llama.cpp would); \
                 it runs only Qwen 2's Q, K and V biases"
                    .into(),
            )),
            None => Ok(()),
        }
    }

    /// Layer `l`'s weights, with the tensors its family adds.
    fn layer(&mut self, cfg: &Config, l: usize) -> Result<Layer, LocalError> {
        self.refuse_unread_biases(cfg, l)?;
        let name = |t: &str| format!("blk.{l}.{t}");
        let (dim, q_dim, kv_dim) = (cfg.dim, cfg.q_dim(), cfg.kv_dim());
        let qkv_bias = if cfg.block.qkv_bias {
            let mut bias = self.vector(&name("attn_q.bias"), q_dim)?;
            bias.extend(self.vector(&name("attn_k.bias"), kv_dim)?);
            bias.extend(self.vector(&name("attn_v.bias"), kv_dim)?);
            Some(bias)
        } else {
            None
        };
        let (q_norm, k_norm) = if cfg.block.qk_norm {
            (
                Some(self.vector(&name("attn_q_norm.weight"), cfg.head_dim)?),
                Some(self.vector(&name("attn_k_norm.weight"), cfg.head_dim)?),
            )
        } else {
            (None, None)
        };
        let post = |this: &mut Self, t: &str| -> Result<Option<Vec<f32>>, LocalError> {
            match cfg.block.post_norms {
                true => this.vector(&name(t), dim).map(Some),
                false => Ok(None),
            }
        };
        let ffn = cfg.ffn;
        Ok(Layer {
            attn_norm: self.vector(&name("attn_norm.weight"), dim)?,
            qkv: Linear::new(vec![
                self.matrix(&name("attn_q.weight"), q_dim, dim)?,
                self.matrix(&name("attn_k.weight"), kv_dim, dim)?,
                self.matrix(&name("attn_v.weight"), kv_dim, dim)?,
            ]),
            qkv_bias,
            q_norm,
            k_norm,
            out: Linear::new(vec![self.matrix(
                &name("attn_output.weight"),
                dim,
                q_dim,
            )?]),
            post_attn_norm: post(self, "post_attention_norm.weight")?,
            ffn_norm: self.vector(&name("ffn_norm.weight"), dim)?,
            gate_up: Linear::new(vec![
                self.matrix(&name("ffn_gate.weight"), ffn, dim)?,
                self.matrix(&name("ffn_up.weight"), ffn, dim)?,
            ]),
            down: Linear::new(vec![self.matrix(&name("ffn_down.weight"), dim, ffn)?]),
            post_ffn_norm: post(self, "post_ffw_norm.weight")?,
        })
    }

    /// The tensor `name`, which must have exactly `shape` (outermost first: `[rows, columns]`). The header
    /// reader has already placed its bytes inside the file; this holds it to what the architecture's
    /// hyperparameters say, before anything is read or allocated for it.
    pub(crate) fn info(&self, name: &str, shape: &[usize]) -> Result<&TensorInfo, LocalError> {
        let info = self.content.tensor_infos.get(name).ok_or_else(|| {
            self.err(
                name,
                "missing; expected it in this architecture's GGUF".into(),
            )
        })?;
        let dims = info.shape.dims();
        if dims != shape {
            return Err(self.err(
                name,
                format!(
                    "shape {dims:?}; expected {shape:?} from the file's hyperparameters (embedding length, \
                     heads, key length, feed-forward length) and its vocabulary"
                ),
            ));
        }
        Ok(info)
    }

    /// The tensor `name`, whatever its shape (for a reader that reads a dimension from it).
    pub(crate) fn info_any(&self, name: &str) -> Result<&TensorInfo, LocalError> {
        (self.content.tensor_infos.get(name))
            .ok_or_else(|| self.err(name, "missing; expected it in this GGUF".into()))
    }

    /// The rows of a 2-D tensor (the embedding of a file with no vocabulary).
    fn rows(&self, name: &str) -> Result<usize, LocalError> {
        match self.content.tensor_infos.get(name).map(|i| i.shape.dims()) {
            Some([rows, _]) => Ok(*rows),
            Some(dims) => Err(self.err(name, format!("shape {dims:?}; expected [rows, columns]"))),
            None => Err(self.err(
                name,
                "missing; expected it in this architecture's GGUF".into(),
            )),
        }
    }

    /// A 2-D weight of `rows` outputs and `cols` columns (its input width).
    pub(crate) fn matrix(
        &mut self,
        name: &str,
        rows: usize,
        cols: usize,
    ) -> Result<QMatrix, LocalError> {
        let info = self.info(name, &[rows, cols])?;
        let dims = info.shape.dims().to_vec();
        let format = match info.ggml_dtype {
            GgmlDType::Q4_1 => Some(Format::Q4_1),
            GgmlDType::Q8_0 => Some(Format::Q8_0),
            GgmlDType::Q4K => Some(Format::Q4K),
            GgmlDType::Q5K => Some(Format::Q5K),
            GgmlDType::Q6K => Some(Format::Q6K),
            GgmlDType::F16 => Some(Format::F16),
            GgmlDType::BF16 => Some(Format::BF16),
            GgmlDType::Q5_0 => Some(Format::Q5_0),
            GgmlDType::Q5_1 => Some(Format::Q5_1),
            GgmlDType::Q4_0 => Some(Format::Q4_0),
            _ => None,
        };
        let (dtype, offset) = (info.ggml_dtype, info.offset);
        if let Some(format) = format {
            let block = format.block_values();
            // F16 and BF16 rows take any width, as ggml's do; the block formats hold whole blocks.
            if !cols.is_multiple_of(block) && !matches!(format, Format::F16 | Format::BF16) {
                return Err(self.err(
                    name,
                    format!(
                        "shape {dims:?} in {}; expected a width that is a multiple of its {block}-value blocks",
                        format.name()
                    ),
                ));
            }
            // The header reader checked these bytes lie inside the file, so the product cannot overflow.
            let bytes = self.raw(name, offset, rows * format.row_bytes(cols))?;
            self.formats.push(format.name().to_string());
            return Ok(QMatrix::new(format, rows, cols, bytes));
        }
        if !cols.is_multiple_of(BLOCK) {
            return Err(self.err(
                name,
                format!(
                    "type {dtype:?} over {cols} columns; the engine requantises it to Q8_0, which takes widths \
                     that are a multiple of {BLOCK} (F16 and BF16 take any width)"
                ),
            ));
        }
        let values = self.dequantized(name)?;
        self.formats.push(format!("Q8_0 (from {dtype:?})"));
        Ok(QMatrix::quantize_q8_0(&values, rows, cols))
    }

    /// A 1-D f32 weight (a norm) of `len` values.
    pub(crate) fn vector(&mut self, name: &str, len: usize) -> Result<Vec<f32>, LocalError> {
        self.info(name, &[len])?;
        self.dequantized(name)
    }

    pub(crate) fn dequantized(&mut self, name: &str) -> Result<Vec<f32>, LocalError> {
        self.content
            .tensor(self.file, name, &Device::Cpu)
            .and_then(|q| q.dequantize(&Device::Cpu))
            .and_then(|t| t.flatten_all())
            .and_then(|t| t.to_vec1::<f32>())
            .map_err(|e| {
                self.err(
                    name,
                    format!("cannot read it: {}", gguf::candle_message(&e)),
                )
            })
    }

    pub(crate) fn raw(
        &mut self,
        name: &str,
        offset: u64,
        len: usize,
    ) -> Result<Vec<u8>, LocalError> {
        let start = self.content.tensor_data_offset + offset;
        let mut bytes = vec![0u8; len];
        self.file
            .seek(SeekFrom::Start(start))
            .and_then(|_| self.file.read_exact(&mut bytes))
            .map_err(|e| {
                self.err(
                    name,
                    format!("cannot read its {len} bytes at offset {start}: {e}"),
                )
            })?;
        Ok(bytes)
    }
}
