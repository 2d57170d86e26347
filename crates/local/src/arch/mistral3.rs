//! Mistral 3 (`mistral3`, the text model of Ministral 3 and Mistral Small 3.x GGUFs; `llm_build_mistral3` in
//! llama.cpp): Llama's layer (normal rotary pairs, `rope_freqs.weight` factors where present) with
//! - YaRN rope scaling (`rope.scaling.type = yarn`, with `rope.scaling.original_context_length`, the training
//!   context when absent, and `rope.scaling.yarn_beta_fast`/`_slow`, 32 and 1 when absent);
//! - Llama 4's attention temperature where `attention.temperature_scale` is set: queries at position `p` times
//!   `1 + scale * ln(1 + floor(p / original_context_length))`. llama.cpp's build for xllamacpp 2026.10 takes the
//!   original context as the length, not `attention.temperature_length` (checked against it: the tiny test file
//!   sets the two apart).
//!
//! The YaRN attention-factor keys (`rope.scaling.yarn_log_multiplier`, `.yarn_ext_factor`, `.yarn_attn_factor`,
//! `.attn_factor`) change the scale in ways not checked here and are refused. Mixture-of-experts layers (Mistral
//! Large 3) are refused by the loader (no `ffn_gate` tensor).

use super::{AttnTemp, Config, Yarn};
use crate::gguf::Meta;
use crate::LocalError;

/// Keys whose effect on YaRN's scale is not implemented.
const REFUSED: [&str; 4] = [
    "rope.scaling.yarn_log_multiplier",
    "rope.scaling.yarn_ext_factor",
    "rope.scaling.yarn_attn_factor",
    "rope.scaling.attn_factor",
];

pub(super) fn config(meta: &Meta<'_>, mut cfg: Config) -> Result<Config, LocalError> {
    let key = |k: &str| cfg.arch.key(k);
    for k in REFUSED {
        if meta.opt_f32(&key(k))?.is_some_and(|v| v != 0.0) {
            return Err(LocalError::Metadata {
                path: meta.path.to_path_buf(),
                key: key(k),
                expected: "no value (the local engine does not apply it)".into(),
            });
        }
    }
    let orig = match meta.opt_uint(&key("rope.scaling.original_context_length"))? {
        Some(n) => n,
        None => meta.uint(&key("context_length"))?,
    };
    if meta.opt_string(&key("rope.scaling.type"))? == Some("yarn") {
        let beta_fast = meta
            .opt_f32(&key("rope.scaling.yarn_beta_fast"))?
            .unwrap_or(32.0);
        let beta_slow = meta
            .opt_f32(&key("rope.scaling.yarn_beta_slow"))?
            .unwrap_or(1.0);
        cfg.rope.yarn = Some(Yarn {
            ext_factor: 1.0,
            corr_dims: corr_dims(
                cfg.rope.dims,
                orig as f32,
                cfg.rope.base,
                beta_fast,
                beta_slow,
            ),
        });
    }
    if let Some(scale) = meta
        .opt_f32(&key("attention.temperature_scale"))?
        .filter(|&s| s != 0.0)
    {
        cfg.attn_temp = Some(AttnTemp {
            scale,
            floor: orig as f32,
            offset: 0.0,
        });
    }
    Ok(cfg)
}

/// ggml's `ggml_rope_yarn_corr_dims`: the pairs between which the mix ramps.
fn corr_dims(dims: usize, orig: f32, base: f32, beta_fast: f32, beta_slow: f32) -> [f32; 2] {
    let corr_dim = |rot: f32| {
        dims as f32 * (orig / (rot * 2.0 * std::f32::consts::PI)).ln() / (2.0 * base.ln())
    };
    let start = corr_dim(beta_fast).floor();
    let end = corr_dim(beta_slow).ceil();
    [start.max(0.0), end.min(dims as f32 - 1.0)]
}
