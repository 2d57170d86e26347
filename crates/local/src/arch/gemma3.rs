//! Gemma 3 (`llm_build_gemma3` in llama.cpp, with its hyperparameters from `llama_model::load_hparams`):
//! - the token embedding times `sqrt(dim)`;
//! - RMS norms over each query and key head before the rotation (NEOX pairs), and RMS norms of the attention
//!   and MLP outputs before each is added back. Gemma's `1 + w` norm weights arrive with the 1 already added by
//!   llama.cpp's converter, so every norm is the plain one;
//! - queries times `1 / sqrt(key_length)` (`1 / sqrt(dim / heads)` for the 62-layer 27B) and scores unscaled;
//! - `gelu(gate) * up`, with ggml's tanh GELU read from its f16 table;
//! - with `attention.sliding_window`, five of every six layers (all but layers 5, 11, 17, ...) attend over that
//!   many positions and rotate with base 10000, the others over everything with `rope.freq_base`. Without it,
//!   every layer is global and llama.cpp's non-sliding graph caps the logits at `final_logit_softcapping`;
//! - the output matrix is the embedding's unless the file has its own.

use super::{Block, Config, Swa};
use crate::gguf::Meta;
use crate::LocalError;

/// Every `PATTERN`th layer attends globally (llama.cpp's `set_swa_pattern(6)`).
const PATTERN: usize = 6;

/// The rotary base of the sliding layers (`rope_freq_base_train_swa`).
const SWA_ROPE_BASE: f32 = 10_000.0;

pub(super) fn config(meta: &Meta<'_>, mut cfg: Config) -> Result<Config, LocalError> {
    cfg.rope.neox = true;
    cfg.block = Block {
        qkv_bias: false,
        qk_norm: true,
        post_norms: true,
        gelu: true,
    };
    cfg.embed_scale = Some((cfg.dim as f32).sqrt());
    let scaled_by = if cfg.layers == 62 {
        (cfg.dim / cfg.heads) as f32
    } else {
        cfg.head_dim as f32
    };
    cfg.query_scale = Some(1.0 / scaled_by.sqrt());
    let window =
        super::hyperparameter(meta, &cfg.arch.key("attention.sliding_window"))?.filter(|&w| w > 0);
    match window {
        Some(window) => {
            cfg.swa = Some(Swa {
                window,
                layers: (0..cfg.layers).map(|l| l % PATTERN < PATTERN - 1).collect(),
                rope_base: SWA_ROPE_BASE,
            })
        }
        None => {
            cfg.final_softcap = meta
                .opt_f32(&cfg.arch.key("final_logit_softcapping"))?
                .filter(|&c| c > 0.0)
        }
    }
    Ok(cfg)
}
