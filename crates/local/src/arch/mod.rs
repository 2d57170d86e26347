//! The model architectures the engine runs, each read from its GGUF metadata into one [`Config`] that the
//! shared forward pass in `engine` follows. One module per family says what its layers add to Llama's
//! (`llama`, `mistral3`, `qwen`, `gemma3`); llama.cpp's graph for each (`src/models/*.cpp`) is the reference, and
//! the bit-for-bit tests against xllamacpp's build of it (`tests/it/architectures.rs`) are the judge.

mod gemma3;
mod llama;
mod mistral3;
mod qwen;

use crate::gguf::Meta;
use crate::LocalError;

/// The `general.architecture` values the engine runs, as llama.cpp names them.
pub(crate) const SUPPORTED: [&str; 5] = ["llama", "mistral3", "qwen2", "qwen3", "gemma3"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arch {
    Llama,
    Mistral3,
    Qwen2,
    Qwen3,
    Gemma3,
}

impl Arch {
    /// The file's architecture, or [`LocalError::UnsupportedArchitecture`] listing [`SUPPORTED`].
    pub(crate) fn read(meta: &Meta<'_>) -> Result<Arch, LocalError> {
        let name = meta.string("general.architecture")?;
        Ok(match name {
            "llama" => Arch::Llama,
            "mistral3" => Arch::Mistral3,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma3" => Arch::Gemma3,
            _ => {
                return Err(LocalError::UnsupportedArchitecture {
                    path: meta.path.to_path_buf(),
                    arch: name.to_string(),
                    supported: SUPPORTED.join(", "),
                })
            }
        })
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Mistral3 => "mistral3",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
        }
    }

    /// The metadata key `{arch}.{key}`.
    pub(crate) fn key(self, key: &str) -> String {
        format!("{}.{key}", self.name())
    }
}

/// Rotary position embedding as llama.cpp applies it: which pairs rotate, over how many of each head's
/// dimensions, and the frequencies.
#[derive(Debug, Clone)]
pub(crate) struct Rope {
    /// NEOX mode rotates dimension `i` with `i + dims / 2`; normal mode rotates adjacent pairs.
    pub neox: bool,
    /// Dimensions rotated at the start of each head (`rope.dimension_count`); the rest pass unchanged.
    pub dims: usize,
    pub base: f32,
    /// Linear scaling (`1 / rope.scaling.factor`), 1 when none.
    pub scale: f32,
    /// YaRN's mix of scaled and unscaled angles, where the file asks for it.
    pub yarn: Option<Yarn>,
}

/// YaRN rope scaling as ggml's `rope_yarn` computes it: per rotated pair, a ramp between the correction
/// dimensions mixes the scaled angle with the unscaled one, and the cosines and sines are multiplied by
/// `1 + 0.1 ln(1 / scale)` (llama.cpp's own attention factor being 1).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Yarn {
    pub ext_factor: f32,
    /// `ggml_rope_yarn_corr_dims`: the first and last pair index of the ramp.
    pub corr_dims: [f32; 2],
}

/// Llama 4's attention temperature (Mistral 3): queries at position `p` are multiplied by
/// `ln(floor((p + offset) / floor) + 1) * scale + 1`, computed in f64 as llama.cpp fills that input.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AttnTemp {
    pub scale: f32,
    pub floor: f32,
    pub offset: f32,
}

impl AttnTemp {
    pub(crate) fn at(&self, p: usize) -> f32 {
        let steps = ((p as f32 + self.offset) / self.floor).floor();
        ((f64::from(steps) + 1.0).ln() * f64::from(self.scale) + 1.0) as f32
    }
}

/// Sliding-window attention on some layers (llama.cpp's `swa_layers`, standard type: a query sees the
/// `window` positions up to its own).
#[derive(Debug, Clone)]
pub(crate) struct Swa {
    pub window: usize,
    /// Per layer, whether its attention slides.
    pub layers: Vec<bool>,
    /// The rotary base of the sliding layers.
    pub rope_base: f32,
}

/// What a family adds to Llama's layer, each as llama.cpp's graph places it.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Block {
    /// Biases added to the Q, K and V products (`attn_{q,k,v}.bias`).
    pub qkv_bias: bool,
    /// RMS norms over each query and key head before the rotation (`attn_{q,k}_norm`).
    pub qk_norm: bool,
    /// RMS norms of the attention and MLP outputs before each is added back (`post_attention_norm`,
    /// `post_ffw_norm`).
    pub post_norms: bool,
    /// `gelu(gate) * up` (ggml's tanh GELU from its f16 table) rather than `silu(gate) * up`.
    pub gelu: bool,
}

/// The shape and numerics of a model, from its GGUF metadata.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub arch: Arch,
    pub dim: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub ffn: usize,
    pub eps: f32,
    pub rope: Rope,
    pub swa: Option<Swa>,
    pub block: Block,
    /// The token embedding is multiplied by this (Gemma: `sqrt(dim)`).
    pub embed_scale: Option<f32>,
    /// Queries are multiplied by this before attention, which then scales scores by 1 (Gemma); otherwise
    /// scores are scaled by `1 / sqrt(head_dim)`.
    pub query_scale: Option<f32>,
    /// Logits become `cap * tanh(logits / cap)`.
    pub final_softcap: Option<f32>,
    /// Queries are multiplied by a factor growing with their position.
    pub attn_temp: Option<AttnTemp>,
}

impl Config {
    /// Reads the configuration of an `arch` model.
    pub(crate) fn read(meta: &Meta<'_>, arch: Arch) -> Result<Config, LocalError> {
        let base = common(meta, arch)?;
        match arch {
            Arch::Llama => llama::config(meta, base),
            Arch::Mistral3 => mistral3::config(meta, base),
            Arch::Qwen2 | Arch::Qwen3 => qwen::config(meta, base),
            Arch::Gemma3 => gemma3::config(meta, base),
        }
    }

    pub(crate) fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }

    pub(crate) fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }

    /// Bytes of KV cache one token takes (keys and values, every layer).
    pub(crate) fn kv_bytes_per_token(&self) -> usize {
        self.layers * 2 * self.kv_dim() * size_of::<f32>()
    }

    /// Whether layer `l` attends over a sliding window, and how wide.
    pub(crate) fn window(&self, l: usize) -> Option<usize> {
        self.swa.as_ref().filter(|s| s.layers[l]).map(|s| s.window)
    }
}

/// The most layers a model may have (llama.cpp's `LLAMA_MAX_LAYERS`).
pub(crate) const MAX_LAYERS: usize = 512;

/// A hyperparameter (a width, a count, a length) under `key`, when present: an unsigned integer of at most
/// 32 bits, as llama.cpp reads every one of them, so that the products of two fit in a `usize`.
pub(crate) fn hyperparameter(meta: &Meta<'_>, key: &str) -> Result<Option<usize>, LocalError> {
    match meta.opt_uint(key)? {
        None => Ok(None),
        Some(v) if v <= u64::from(u32::MAX) => Ok(Some(v as usize)),
        Some(v) => Err(LocalError::Metadata {
            path: meta.path.to_path_buf(),
            key: key.into(),
            expected: format!("an unsigned 32-bit integer, as llama.cpp reads it, found {v}"),
        }),
    }
}

/// What every family reads the same way: Llama's layout under the family's own key prefix.
fn common(meta: &Meta<'_>, arch: Arch) -> Result<Config, LocalError> {
    let key = |k: &str| arch.key(k);
    let opt_uint = |k: &str| hyperparameter(meta, &key(k));
    let uint = |k: &str| -> Result<usize, LocalError> {
        opt_uint(k)?.ok_or_else(|| LocalError::Metadata {
            path: meta.path.to_path_buf(),
            key: key(k),
            expected: "an unsigned integer (key missing)".into(),
        })
    };
    let bad = |k: &str, expected: &str| LocalError::Metadata {
        path: meta.path.to_path_buf(),
        key: key(k),
        expected: expected.into(),
    };
    let dim = uint("embedding_length")?;
    let heads = uint("attention.head_count")?;
    let kv_heads = opt_uint("attention.head_count_kv")?.unwrap_or(heads);
    if heads == 0 || (opt_uint("attention.key_length")?.is_none() && !dim.is_multiple_of(heads)) {
        return Err(bad(
            "attention.head_count",
            "a head count that divides the embedding length into heads",
        ));
    }
    let head_dim = opt_uint("attention.key_length")?.unwrap_or(dim / heads);
    if head_dim == 0 || !head_dim.is_multiple_of(2) {
        return Err(bad("attention.key_length", "an even, non-zero head size"));
    }
    if opt_uint("attention.value_length")?.is_some_and(|v| v != head_dim) {
        return Err(bad(
            "attention.value_length",
            "the key length (heads whose values differ in size from their keys are not supported)",
        ));
    }
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        return Err(bad(
            "attention.head_count_kv",
            "a key/value head count that divides the head count",
        ));
    }
    let rope_dims = opt_uint("rope.dimension_count")?.unwrap_or(head_dim);
    if rope_dims == 0 || rope_dims > head_dim || !rope_dims.is_multiple_of(2) {
        return Err(bad(
            "rope.dimension_count",
            &format!("an even number of rotated dimensions of at most the head size {head_dim}"),
        ));
    }
    let layers = uint("block_count")?;
    if layers == 0 || layers > MAX_LAYERS {
        return Err(bad(
            "block_count",
            &format!("between 1 and {MAX_LAYERS} layers (llama.cpp's limit), found {layers}"),
        ));
    }
    Ok(Config {
        arch,
        dim,
        layers,
        heads,
        kv_heads,
        head_dim,
        ffn: uint("feed_forward_length")?,
        eps: meta
            .opt_f32(&key("attention.layer_norm_rms_epsilon"))?
            .unwrap_or(1e-5),
        rope: Rope {
            neox: false,
            dims: rope_dims,
            base: meta.opt_f32(&key("rope.freq_base"))?.unwrap_or(10_000.0),
            scale: rope_scale(meta, arch)?,
            yarn: None,
        },
        swa: None,
        block: Block::default(),
        embed_scale: None,
        query_scale: None,
        final_softcap: None,
        attn_temp: None,
    })
}

/// `rope.scaling.*` as llama.cpp reads it: positions are multiplied by `1 / rope.scaling.factor` whatever the
/// type says (none or linear; YaRN adds its mix, which only `mistral3` reads here); LongRoPE and YaRN elsewhere
/// are refused.
fn rope_scale(meta: &Meta<'_>, arch: Arch) -> Result<f32, LocalError> {
    let kind = meta.opt_string(&arch.key("rope.scaling.type"))?;
    let allowed =
        |k: &str| matches!(k, "none" | "linear") || (k == "yarn" && arch == Arch::Mistral3);
    if let Some(other) = kind.filter(|k| !allowed(k)) {
        return Err(LocalError::Metadata {
            path: meta.path.to_path_buf(),
            key: arch.key("rope.scaling.type"),
            expected: format!(
                "`none` or `linear` rope scaling (or `yarn` in a mistral3 file), not `{other}`"
            ),
        });
    }
    Ok(match meta.opt_f32(&arch.key("rope.scaling.factor"))? {
        Some(f) if f != 0.0 => 1.0 / f,
        _ => 1.0,
    })
}
