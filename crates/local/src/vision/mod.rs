//! Vision projectors (`mmproj` GGUFs, llama.cpp's `mtmd`): a SigLIP image encoder and the projection of its
//! output into a language model's embedding space, computed as llama.cpp's `clip.cpp` computes them.
//!
//! - **Types.** `clip.projector_type` `gemma3` (MedGemma, Gemma 3: average pooling of the patch grid by
//!   `clip.vision.projector.scale_factor`, default 4, then the soft-embedding RMS norm and the input projection)
//!   and `idefics3` (SmolVLM: pixel shuffle by the scale factor, then `mm.model.fc`). Any other type is refused
//!   with the list of those read.
//! - **Files from outside.** The header goes through the same checks as a model's (`gguf::header`); then every
//!   hyperparameter is held to a bound before anything is sized from it (image and patch sizes, widths, heads,
//!   layers, the scale factor) and every tensor to the shape they give, and the activations an image needs
//!   are held to [`MAX_ACTIVATION_BYTES`].
//! - **Numbers.** The tower's matrix products go through the text engine's kernels (`quant`), on its thread
//!   pool; attention through its flash-attention paths (`attention`, keys and values rounded to f16 as
//!   llama.cpp casts them); the other operations are `ops`, each as ggml's CPU build computes it.

mod idefics3;
mod layout;
mod ops;
mod preprocess;

use std::path::{Path, PathBuf};

use candle_core::quantized::GgmlDType;
use rayon::prelude::*;

pub(crate) use layout::{decode as decode_image, split_prompt};
pub use layout::{GEMMA3_IMAGE_END, GEMMA3_IMAGE_START};
pub use preprocess::RgbImage;

use crate::attention::PROMPT_CHUNK;
use crate::attention::{self, Keys};
use crate::engine::{Column, Engine, Inputs, Loader};
use crate::gguf::{self, Meta};
use crate::quant::{self, Acts, Batch, Format, QMatrix};
use crate::LocalError;

/// The projector types this crate runs, as `clip.projector_type` names them.
pub const PROJECTOR_TYPES: [&str; 2] = ["gemma3", "idefics3"];

/// The most bytes of activations one image may need (the widest of the tower's intermediate tensors, its
/// attention included); a projector that would need more is refused at load.
pub const MAX_ACTIVATION_BYTES: u64 = 8 << 30;

/// Queries of one head that attend together (see `Projector::attention`): each tile of 64 keys and values
/// (16 KiB each for heads of 64) is used this many times while it is in the cache.
const QUERY_GROUP: usize = 32;

/// Upper bounds on a projector's hyperparameters, far above any released model's.
const MAX_IMAGE_SIZE: u64 = 4096;
const MAX_WIDTH: u64 = 16384;
const MAX_LAYERS: u64 = 256;
const MAX_SCALE: u64 = 16;

/// One part of a prompt holding images, as llama.cpp's `mtmd_tokenize` splits it: a run of text tokens, or an
/// image's embeddings (rows of the text model's width), which Gemma 3 reads with attention both ways within
/// the image (`non_causal`).
#[derive(Debug, Clone, PartialEq)]
pub enum PromptPart {
    Tokens(Vec<u32>),
    Image { embd: Vec<f32>, non_causal: bool },
}

/// Which projector a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectorKind {
    Gemma3,
    Idefics3,
}

impl ProjectorKind {
    pub fn name(self) -> &'static str {
        match self {
            ProjectorKind::Gemma3 => "gemma3",
            ProjectorKind::Idefics3 => "idefics3",
        }
    }
}

/// The tower's hyperparameters, read from `clip.vision.*`.
#[derive(Debug, Clone)]
struct Hparams {
    width: usize,
    heads: usize,
    ffn: usize,
    layers: usize,
    image_size: usize,
    patch: usize,
    eps: f32,
    mean: [f32; 3],
    std: [f32; 3],
    /// Pooling (Gemma 3) or pixel-shuffle (Idefics3) factor per side.
    scale: usize,
    /// The longer side Idefics3 resizes an image to before slicing it (`clip.vision.preproc_image_size`); 0
    /// for Gemma 3.
    longest_edge: usize,
}

impl Hparams {
    fn side(&self) -> usize {
        self.image_size / self.patch
    }
}

struct Layer {
    ln1: (Vec<f32>, Vec<f32>),
    q: (QMatrix, Vec<f32>),
    k: (QMatrix, Vec<f32>),
    v: (QMatrix, Vec<f32>),
    o: (QMatrix, Vec<f32>),
    ln2: (Vec<f32>, Vec<f32>),
    up: (QMatrix, Vec<f32>),
    down: (QMatrix, Vec<f32>),
}

/// A loaded vision projector.
pub struct Projector {
    path: PathBuf,
    kind: ProjectorKind,
    hp: Hparams,
    /// The patch embedding as `width` rows of `3 · patch²` f32 values (channel, then row, then column), each
    /// row padded with zeros to a multiple of eight values (as the patches are, see [`Projector::tower`]).
    patch_w: Vec<f32>,
    patch_b: Vec<f32>,
    pos: Vec<f32>,
    layers: Vec<Layer>,
    post_ln: (Vec<f32>, Vec<f32>),
    /// Gemma 3's soft-embedding norm weight.
    soft_norm: Vec<f32>,
    /// The projection to the text model's width: Gemma 3's input projection transposed, or Idefics3's fc.
    proj: QMatrix,
    /// A content hash of the file, for the model identity.
    hash: String,
}

impl std::fmt::Debug for Projector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Projector")
            .field("path", &self.path)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Projector {
    /// Loads and checks the projector at `path`.
    pub fn load(path: &Path) -> Result<Projector, LocalError> {
        let (mut file, content) = gguf::read_content(path)?;
        let meta = Meta {
            path,
            map: &content.metadata,
        };
        let kind = read_kind(&meta)?;
        let hp = read_hparams(&meta, kind)?;
        let hash = gguf::content_hash(path, &mut file, content.tensor_data_offset)?;
        let mut l = Loader::new(path, &content, &mut file);
        let (w, ffn, side, p) = (hp.width, hp.ffn, hp.side(), hp.patch);
        let info = l.info("v.patch_embd.weight", &[w, 3, p, p])?;
        if info.ggml_dtype != GgmlDType::F32 {
            return Err(l.err(
                "v.patch_embd.weight",
                format!(
                    "type {:?}; the local engine takes the patch embedding in F32, as llama.cpp's converter writes it",
                    info.ggml_dtype
                ),
            ));
        }
        // llama.cpp's patch convolution multiplies in f16 (`ggml_conv_2d`'s im2col is F16).
        let patch_w = pad8(
            &quant::round_f16_all(&l.dequantized("v.patch_embd.weight")?),
            3 * hp.patch * hp.patch,
        );
        let patch_b = l.vector("v.patch_embd.bias", w)?;
        l.info("v.position_embd.weight", &[side * side, w])?;
        let pos = l.dequantized("v.position_embd.weight")?;
        let mut layers = Vec::with_capacity(hp.layers);
        for i in 0..hp.layers {
            let n = |t: &str| format!("v.blk.{i}.{t}");
            let mut lin =
                |t: &str, rows: usize, cols: usize| -> Result<(QMatrix, Vec<f32>), LocalError> {
                    Ok((
                        l.matrix(&n(&format!("{t}.weight")), rows, cols)?,
                        l.vector(&n(&format!("{t}.bias")), rows)?,
                    ))
                };
            let (q, k, v, o) = (
                lin("attn_q", w, w)?,
                lin("attn_k", w, w)?,
                lin("attn_v", w, w)?,
                lin("attn_out", w, w)?,
            );
            let (up, down) = (lin("ffn_up", ffn, w)?, lin("ffn_down", w, ffn)?);
            layers.push(Layer {
                ln1: (l.vector(&n("ln1.weight"), w)?, l.vector(&n("ln1.bias"), w)?),
                q,
                k,
                v,
                o,
                ln2: (l.vector(&n("ln2.weight"), w)?, l.vector(&n("ln2.bias"), w)?),
                up,
                down,
            });
        }
        let post_ln = (
            l.vector("v.post_ln.weight", w)?,
            l.vector("v.post_ln.bias", w)?,
        );
        let (soft_norm, proj) = match kind {
            ProjectorKind::Gemma3 => {
                let soft = l.vector("mm.soft_emb_norm.weight", w)?;
                let name = "mm.input_projection.weight";
                let rows = l_rows(&l, name, 1)?;
                let info = l.info(name, &[w, rows])?;
                if info.ggml_dtype != GgmlDType::F16 {
                    return Err(l.err(
                        name,
                        format!(
                            "type {:?}; the local engine takes it in F16 (as llama.cpp's converter writes it)",
                            info.ggml_dtype,
                        ),
                    ));
                }
                let offset = info.offset;
                let bytes = l.raw(name, offset, w * rows * 2)?;
                (
                    soft,
                    QMatrix::new(Format::F16, rows, w, transpose16(&bytes, w, rows)),
                )
            }
            ProjectorKind::Idefics3 => {
                let name = "mm.model.fc.weight";
                let cols = w * hp.scale * hp.scale;
                let rows = l_rows(&l, name, 0)?;
                (Vec::new(), l.matrix(name, rows, cols)?)
            }
        };
        Ok(Projector {
            path: path.to_path_buf(),
            kind,
            hp,
            patch_w,
            patch_b,
            pos,
            layers,
            post_ln,
            soft_norm,
            proj,
            hash,
        })
    }

    /// The prompt part of an image's embeddings, read as this projector's text model reads it.
    pub fn image_part(&self, embd: Vec<f32>) -> PromptPart {
        PromptPart::Image {
            embd,
            non_causal: self.kind == ProjectorKind::Gemma3,
        }
    }

    pub fn kind(&self) -> ProjectorKind {
        self.kind
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The content hash recorded in a model identity.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The width of the embeddings it produces (the text model's).
    pub fn output_width(&self) -> usize {
        self.proj.rows
    }

    /// Embeddings per image the tower encodes (per slice for Idefics3).
    pub fn tokens_per_image(&self) -> usize {
        let side = self.hp.side() / self.hp.scale;
        side * side
    }

    /// The square side images are resized to.
    pub fn image_size(&self) -> usize {
        self.hp.image_size
    }

    /// The embeddings of `image`: resized and padded to the projector's size, normalised, encoded;
    /// `tokens_per_image()` rows of `output_width()` values. Runs on the caller's rayon pool. For Gemma 3 this
    /// is what llama.cpp computes for the image. For Idefics3 llama.cpp slices an image into tiles and a global
    /// image instead ([`Projector::idefics3_parts`]).
    pub fn encode(&self, image: &RgbImage) -> Vec<f32> {
        let square = preprocess::resize_pad(image, self.hp.image_size);
        self.encode_square(&square)
    }

    /// The embeddings of an image already of the projector's size.
    fn encode_square(&self, image: &RgbImage) -> Vec<f32> {
        let planes = preprocess::normalize(image, self.hp.mean, self.hp.std);
        let x = self.tower(&planes, image.width);
        let side = self.hp.side();
        let merged = match self.kind {
            ProjectorKind::Gemma3 => {
                let pooled = ops::avg_pool(&x, side, self.hp.width, self.hp.scale);
                ops::rms_norm(&pooled, &self.soft_norm, self.hp.eps)
            }
            ProjectorKind::Idefics3 => ops::pixel_shuffle(&x, side, self.hp.width, self.hp.scale),
        };
        linear(&self.proj, None, &merged)
    }

    /// The SigLIP tower over a normalised square image (`planes`, `size` pixels a side): one row of `width`
    /// values per patch, in row order, after the post-LayerNorm.
    fn tower(&self, planes: &[f32], size: usize) -> Vec<f32> {
        let hp = &self.hp;
        let (p, side, w) = (hp.patch, size / hp.patch, hp.width);
        let n = side * side;
        let k = 3 * p * p;
        // Each patch and kernel row padded with zeros to a multiple of eight values: that leaves tinyBLAS's sums
        // (a last partial group takes only its lanes) and the other product's (the first `k` values) as they are.
        let kp = k.next_multiple_of(8);
        // im2col: each patch's values in the kernel's order (channel, row, column).
        let mut cols = vec![0f32; n * kp];
        cols.par_chunks_mut(kp).enumerate().for_each(|(i, dst)| {
            let (py, px) = (i / side, i % side);
            for c in 0..3 {
                for ky in 0..p {
                    let src = c * size * size + (py * p + ky) * size + px * p;
                    dst[(c * p + ky) * p..][..p].copy_from_slice(&planes[src..src + p]);
                }
            }
            quant::round_f16_in_place(&mut dst[..k]);
        });
        // llama.cpp multiplies the patches by tinyBLAS (which takes a width that is no multiple of eight too).
        let tiny_blas = n.is_multiple_of(4) && n >= 2;
        let blocked = match tiny_blas {
            true => quant::tinyblas_f32(&cols, &self.patch_w, kp),
            false => None,
        };
        let mut x = blocked.unwrap_or_else(|| {
            let mut x = vec![0f32; n * w];
            x.par_chunks_mut(w)
                .zip(cols.par_chunks(kp))
                .for_each(|(dst, patch)| {
                    for (o, d) in dst.iter_mut().enumerate() {
                        let row = &self.patch_w[o * kp..][..k];
                        *d = ops::dot_f16(&patch[..k], row, tiny_blas);
                    }
                });
            x
        });
        ops::add_rows(&mut x, &self.patch_b);
        ops::add(&mut x, &self.pos);
        for layer in &self.layers {
            let h = ops::layer_norm(&x, &layer.ln1.0, &layer.ln1.1, hp.eps);
            let qkv = linear_many(
                &[&layer.q, &layer.k, &layer.v].map(|(w, b)| (w, Some(b.as_slice()))),
                &h,
            );
            let (q, kv) = qkv.split_at(n * w);
            let (kk, v) = kv.split_at(n * w);
            let att = self.attention(q, kk, v, n);
            let mut cur = linear(&layer.o.0, Some(&layer.o.1), &att);
            ops::add(&mut cur, &x);
            x = cur;
            let h = ops::layer_norm(&x, &layer.ln2.0, &layer.ln2.1, hp.eps);
            let mut up = linear(&layer.up.0, Some(&layer.up.1), &h);
            ops::gelu(&mut up);
            let mut down = linear(&layer.down.0, Some(&layer.down.1), &up);
            ops::add(&mut down, &x);
            x = down;
        }
        ops::layer_norm(&x, &self.post_ln.0, &self.post_ln.1, hp.eps)
    }

    /// Full (non-causal) attention of every patch over every patch, by llama.cpp's CPU flash attention with
    /// keys and values cast to f16.
    fn attention(&self, q: &[f32], k: &[f32], v: &[f32], n: usize) -> Vec<f32> {
        let (w, heads) = (self.hp.width, self.hp.heads);
        let hd = w / heads;
        let (k16, v16) = (quant::round_f16_all(k), quant::round_f16_all(v));
        let keys = |head: usize| Keys {
            runs: [(&k16[..], &v16[..]), (&[], &[])],
            stride: w,
            offset: head * hd,
            dim: hd,
        };
        let path = attention::path(n, n - 1, usize::MAX);
        let kt: Vec<Option<Vec<f32>>> = (0..heads)
            .into_par_iter()
            .map(|h| {
                (path == attention::Path::Tiled).then(|| attention::transpose_keys(&keys(h), n))
            })
            .collect();
        let scale = 1.0 / (hd as f32).sqrt();
        let mut out = vec![0f32; n * w];
        if let Some(kt) = kt
            .iter()
            .map(Option::as_deref)
            .collect::<Option<Vec<&[f32]>>>()
        {
            // Each head's values one row after another, so that a tile's rows are one run of memory.
            let vh: Vec<Vec<f32>> = (0..heads)
                .into_par_iter()
                .map(|h| {
                    v16.chunks_exact(w)
                        .flat_map(|row| &row[h * hd..(h + 1) * hd])
                        .copied()
                        .collect()
                })
                .collect();
            let keys = |head: usize| Keys {
                // The keys are read from `kt` only; the values' rows stand in for them.
                runs: [(&vh[head][..], &vh[head][..]), (&[], &[])],
                stride: hd,
                offset: 0,
                dim: hd,
            };
            // Groups of queries of one head walk the keys together (`attention::tiled_group`): the same
            // arithmetic per query, each tile of keys and values read once per group.
            let groups: Vec<(usize, usize)> = (0..heads)
                .flat_map(|h| (0..n).step_by(QUERY_GROUP).map(move |c| (h, c)))
                .collect();
            let results: Vec<Vec<f32>> = groups
                .par_iter()
                .map(|&(head, c0)| {
                    let c1 = (c0 + QUERY_GROUP).min(n);
                    let queries: Vec<&[f32]> = (c0..c1).map(|c| &q[c * w + head * hd..]).collect();
                    let mut res = vec![0f32; (c1 - c0) * hd];
                    let mut dsts: Vec<&mut [f32]> = res.chunks_mut(hd).collect();
                    attention::tiled_group(&queries, &keys(head), kt[head], 0..n, scale, &mut dsts);
                    res
                })
                .collect();
            for (&(head, c0), res) in groups.iter().zip(&results) {
                for (i, r) in res.chunks_exact(hd).enumerate() {
                    out[(c0 + i) * w + head * hd..][..hd].copy_from_slice(r);
                }
            }
            return out;
        }
        out.par_chunks_mut(hd).enumerate().for_each(|(i, dst)| {
            let (c, head) = (i / heads, i % heads);
            let qh = &q[c * w + head * hd..c * w + (head + 1) * hd];
            attention::attend(path, qh, &keys(head), kt[head].as_deref(), 0..n, scale, dst);
        });
        out
    }
}

/// The logits after a prompt of `parts` (token runs and image embeddings), each part run as llama.cpp's
/// `mtmd_helper_eval_chunks` decodes it: in batches of up to 512 columns of its own; an image's batch
/// attends within itself both ways where `non_causal` (Gemma 3).
pub(crate) fn parts_logits(engine: &Engine, parts: &[PromptPart]) -> Vec<f32> {
    let mut seq = engine.sequence();
    let mut logits = Vec::new();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        let (len, embd) = match part {
            PromptPart::Tokens(ids) => (ids.len(), None),
            PromptPart::Image { embd, .. } => (embd.len() / engine.width(), Some(embd)),
        };
        for start in (0..len).step_by(PROMPT_CHUNK) {
            let n = PROMPT_CHUNK.min(len - start);
            let at = seq.len();
            let cols: Vec<Column> = (start..start + n)
                .map(|j| Column {
                    seq: 0,
                    token: match part {
                        PromptPart::Tokens(ids) => ids[j],
                        PromptPart::Image { .. } => 0,
                    },
                    logits: last && j + 1 == len,
                    chunk: n,
                    index: (at + j - start) % PROMPT_CHUNK,
                })
                .collect();
            let dim = engine.width();
            let inputs = Inputs {
                embd: (start..start + n)
                    .map(|j| embd.map(|e| &e[j * dim..(j + 1) * dim]))
                    .collect(),
                ends: (0..n)
                    .map(|_| match part {
                        PromptPart::Image {
                            non_causal: true, ..
                        } => Some(at + n),
                        _ => None,
                    })
                    .collect(),
            };
            if let Some(l) = engine.step_with(&mut [&mut seq], &cols, &inputs).pop() {
                logits = l;
            }
        }
    }
    logits
}

/// `w · x + bias` for every row of `x` (one column of the product each), all rows in one product as llama.cpp
/// multiplies a whole image.
fn linear(w: &QMatrix, bias: Option<&[f32]>, x: &[f32]) -> Vec<f32> {
    linear_many(&[(w, bias)], x)
}

/// [`linear`] of each `(w, bias)` in `ws` on the same `x`, one product after another in the result. Weights of
/// one type and shape share one rounding of `x` and one hand-off to the thread pool.
fn linear_many(ws: &[(&QMatrix, Option<&[f32]>)], x: &[f32]) -> Vec<f32> {
    let Some((first, _)) = ws.first() else {
        return Vec::new();
    };
    // The products share the output stride, so one shape as well as one type.
    let alike = |w: &QMatrix| (w.format, w.rows, w.cols) == (first.format, first.rows, first.cols);
    if !ws.iter().all(|(w, _)| alike(w)) {
        return ws.iter().flat_map(|&one| linear_many(&[one], x)).collect();
    }
    let (n, rows) = (x.len() / first.cols, first.rows);
    let batch: Vec<Batch> = (0..n).map(|index| Batch { size: n, index }).collect();
    let acts = Acts::quantize_in(x, first.cols, first.format, &batch);
    // Column `c` of product `j` at `j * n * rows + c * rows`: each product laid out as one alone would be.
    let jobs: Vec<(&QMatrix, &Acts, usize)> = ws
        .iter()
        .enumerate()
        .map(|(j, (w, _))| (*w, &acts, j * n * rows))
        .collect();
    let mut out = vec![0f32; ws.len() * n * rows];
    quant::matmul_many(&jobs, &mut out, rows);
    for (part, (_, bias)) in out.chunks_exact_mut((n * rows).max(1)).zip(ws) {
        if let Some(b) = bias {
            ops::add_rows(part, b);
        }
    }
    out
}

/// Rows of `k` values, each padded with zeros to a multiple of eight.
fn pad8(rows: &[f32], k: usize) -> Vec<f32> {
    let kp = k.next_multiple_of(8);
    if kp == k {
        return rows.to_vec();
    }
    let mut out = vec![0f32; rows.len() / k * kp];
    out.par_chunks_mut(kp)
        .zip(rows.par_chunks(k))
        .for_each(|(dst, src)| dst[..k].copy_from_slice(src));
    out
}

/// Dimension `at` (0: the outermost) of a 2-D tensor: the output width of the projection, the text model's.
fn l_rows(l: &Loader<'_>, name: &str, at: usize) -> Result<usize, LocalError> {
    match l.info_any(name)?.shape.dims() {
        dims @ [_, _] if dims[at] > 0 && (dims[at] as u64) <= MAX_WIDTH => Ok(dims[at]),
        dims => Err(l.err(
            name,
            format!("shape {dims:?}; expected [rows, columns] of at most {MAX_WIDTH}"),
        )),
    }
}

/// F16 values stored `rows × cols` (row-major), as `cols × rows`.
fn transpose16(bytes: &[u8], rows: usize, cols: usize) -> Vec<u8> {
    let mut out = vec![0u8; bytes.len()];
    for r in 0..rows {
        for c in 0..cols {
            let (src, dst) = (2 * (r * cols + c), 2 * (c * rows + r));
            out[dst..dst + 2].copy_from_slice(&bytes[src..src + 2]);
        }
    }
    out
}

fn read_kind(meta: &Meta<'_>) -> Result<ProjectorKind, LocalError> {
    let key = if meta.map.contains_key("clip.projector_type") {
        "clip.projector_type"
    } else {
        "clip.vision.projector_type"
    };
    let name = meta.string(key)?;
    match name {
        "gemma3" => Ok(ProjectorKind::Gemma3),
        "idefics3" => Ok(ProjectorKind::Idefics3),
        other => Err(LocalError::Metadata {
            path: meta.path.to_path_buf(),
            key: key.into(),
            expected: format!(
                "a projector type the local engine runs ({}), not `{other}`",
                PROJECTOR_TYPES.join(", ")
            ),
        }),
    }
}

fn read_hparams(meta: &Meta<'_>, kind: ProjectorKind) -> Result<Hparams, LocalError> {
    let bad = |key: &str, expected: String| LocalError::Metadata {
        path: meta.path.to_path_buf(),
        key: key.into(),
        expected,
    };
    let bounded = |key: &str, lo: u64, hi: u64| -> Result<usize, LocalError> {
        let v = meta.uint(key)?;
        if !(lo..=hi).contains(&v) {
            return Err(bad(key, format!("a value from {lo} to {hi}, not {v}")));
        }
        Ok(v as usize)
    };
    if meta.opt_bool("clip.has_vision_encoder")? != Some(true) {
        return Err(bad(
            "clip.has_vision_encoder",
            "true (a vision projector)".into(),
        ));
    }
    if meta.opt_bool("clip.use_gelu")? != Some(true)
        || meta.opt_bool("clip.use_silu")? == Some(true)
    {
        return Err(bad(
            "clip.use_gelu",
            "true: the local engine runs SigLIP towers with the tanh GELU".into(),
        ));
    }
    let width = bounded("clip.vision.embedding_length", 1, MAX_WIDTH)?;
    let heads = bounded("clip.vision.attention.head_count", 1, MAX_WIDTH)?;
    let ffn = bounded("clip.vision.feed_forward_length", 1, 4 * MAX_WIDTH)?;
    let layers = bounded("clip.vision.block_count", 1, MAX_LAYERS)?;
    let image_size = bounded("clip.vision.image_size", 1, MAX_IMAGE_SIZE)?;
    let patch = bounded("clip.vision.patch_size", 1, MAX_IMAGE_SIZE)?;
    let eps = meta
        .opt_f32("clip.vision.attention.layer_norm_epsilon")?
        .ok_or_else(|| bad("clip.vision.attention.layer_norm_epsilon", "a float".into()))?;
    if !(eps.is_finite() && eps >= 0.0) {
        return Err(bad(
            "clip.vision.attention.layer_norm_epsilon",
            format!("a finite eps ≥ 0, not {eps}"),
        ));
    }
    let three = |key: &str| -> Result<[f32; 3], LocalError> {
        match meta.opt_f32s(key)?.as_deref() {
            Some(&[a, b, c]) if [a, b, c].iter().all(|v| v.is_finite()) => Ok([a, b, c]),
            _ => Err(bad(key, "three finite floats (red, green, blue)".into())),
        }
    };
    let (mean, std) = (
        three("clip.vision.image_mean")?,
        three("clip.vision.image_std")?,
    );
    if std.contains(&0.0) {
        return Err(bad("clip.vision.image_std", "three non-zero values".into()));
    }
    let scale_key = "clip.vision.projector.scale_factor";
    let longest_edge = match kind {
        // The longest edge llama.cpp slices images at (module `idefics3`).
        ProjectorKind::Idefics3 => bounded("clip.vision.preproc_image_size", 1, MAX_IMAGE_SIZE)?,
        ProjectorKind::Gemma3 => 0,
    };
    let scale = match meta.opt_uint(scale_key)? {
        Some(v) if (1..=MAX_SCALE).contains(&v) => v as usize,
        Some(v) => {
            return Err(bad(
                scale_key,
                format!("a value from 1 to {MAX_SCALE}, not {v}"),
            ))
        }
        None if kind == ProjectorKind::Gemma3 => 4,
        None => return Err(bad(scale_key, "Idefics3's pixel-shuffle factor".into())),
    };
    let hp = Hparams {
        width,
        heads,
        ffn,
        layers,
        image_size,
        patch,
        eps,
        mean,
        std,
        scale,
        longest_edge,
    };
    if !image_size.is_multiple_of(patch) || !hp.side().is_multiple_of(scale) {
        return Err(bad(
            "clip.vision.image_size",
            format!(
                "a multiple of the patch size ({patch}) whose patch grid divides by the scale factor ({scale}), not \
                 {image_size}"
            ),
        ));
    }
    if !width.is_multiple_of(heads) || !(width / heads).is_multiple_of(2) {
        return Err(bad(
            "clip.vision.attention.head_count",
            format!("a count dividing the width {width} into heads of an even size, not {heads}"),
        ));
    }
    let n = (hp.side() * hp.side()) as u64;
    let widest = (width.max(ffn) as u64).max(3 * (patch * patch) as u64);
    let bytes = n * widest * 4 * 4 + n * n * 4;
    if bytes > MAX_ACTIVATION_BYTES {
        return Err(bad(
            "clip.vision.image_size",
            format!(
                "a size whose activations fit in {} GiB; {image_size} px in patches of {patch} with width {widest} \
                 would need {} GiB",
                MAX_ACTIVATION_BYTES >> 30,
                bytes >> 30
            ),
        ));
    }
    Ok(hp)
}
