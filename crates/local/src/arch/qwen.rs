//! Qwen 2 and Qwen 3 (`llm_build_qwen2`, `llm_build_qwen3` in llama.cpp): Llama's layer with rotary pairs half a
//! head apart (NEOX), and in Qwen 2 biases on the Q, K and V products, in Qwen 3 an RMS norm over each query
//! and key head before the rotation.

use super::{Arch, Config};
use crate::gguf::Meta;
use crate::LocalError;

pub(super) fn config(_meta: &Meta<'_>, mut cfg: Config) -> Result<Config, LocalError> {
    cfg.rope.neox = true;
    match cfg.arch {
        Arch::Qwen2 => cfg.block.qkv_bias = true,
        _ => cfg.block.qk_norm = true,
    }
    Ok(cfg)
}
