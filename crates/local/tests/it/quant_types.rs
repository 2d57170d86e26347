//! Every weight type the engine multiplies with, against llama.cpp bit for bit, on tiny random-weight Llama
//! GGUFs that `scripts/tiny-gguf.py` writes with SmolLM2's tokenizer (every matrix in the type under test, the
//! norms in F32; 2 layers of width 256).
//!
//! For each type: every logit after each of eight prompts equals llama.cpp's (`scripts/llama-logits.py`), and
//! 64 greedy tokens after two of them equal its server's. The prompt lengths
//! ([`crate::common::PROMPT_LENGTHS`]) take each of the ways llama.cpp multiplies a prompt. Without Python's `gguf` and `numpy`, xllamacpp or the SmolLM2 GGUF the tests
//! skip with a message locally and fail under `CI=true`.

use nmb_local::LocalModel;

use crate::common::{greedy_differences, logits_differences, prompts, tiny};

/// The types `local:` multiplies with as they are stored.
const TYPES: [&str; 10] = [
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16",
];

const GREEDY_STEPS: u32 = 64;

#[test]
fn prompt_logits_equal_llama_cpp_bit_for_bit_in_every_type() {
    let mut failures = Vec::new();
    for ty in TYPES {
        let Some(path) = tiny(ty, "llama") else {
            return;
        };
        let m = LocalModel::load(&path).unwrap_or_else(|e| panic!("{ty}: loads: {e}"));
        let Some(found) = logits_differences(ty, &path, &prompts(), |ids| {
            m.prompt_logits(ids).expect("prompt logits")
        }) else {
            return;
        };
        failures.extend(found);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn greedy_tokens_equal_llama_cpp_in_every_type() {
    let mut failures = Vec::new();
    for ty in TYPES {
        let Some(path) = tiny(ty, "llama") else {
            return;
        };
        let m = LocalModel::load(&path).unwrap_or_else(|e| panic!("{ty}: loads: {e}"));
        let Some(found) = greedy_differences(ty, &m, &path, &prompts()[3..5], GREEDY_STEPS) else {
            return;
        };
        failures.extend(found);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
