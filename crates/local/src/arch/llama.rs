//! Llama (and the Mistral 7B files that call themselves `llama`): the base layer, rotary pairs adjacent.
//! Llama 3.1's rope scaling reaches the engine as the `rope_freqs.weight` tensor of frequency factors, which
//! the engine divides each rotary angle by, as llama.cpp does (`llm_build_llama`, `ggml_rope_ext`).

use super::Config;
use crate::gguf::Meta;
use crate::LocalError;

pub(super) fn config(_meta: &Meta<'_>, cfg: Config) -> Result<Config, LocalError> {
    Ok(cfg)
}
