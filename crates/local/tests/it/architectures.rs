//! Each architecture beside Llama against llama.cpp bit for bit, on tiny random-weight GGUFs that
//! `scripts/tiny-gguf.py --arch` writes (matrices in Q8_0, SmolLM2's tokenizer): Qwen 2 (Q/K/V biases, linear
//! rope scaling), Qwen 3 (per-head Q/K norms, heads wider than width/heads), Gemma 3 (embedding scale, per-head
//! and post norms, GELU from ggml's table, sliding window of 32 on five of its six layers, tied output), Mistral
//! 3 (YaRN rope scaling, attention temperature past 128 positions) and Llama with Llama 3.1's rope frequency
//! factors. For each: every logit after the eight prompts of
//! [`crate::common::PROMPT_LENGTHS`] (up to 530 tokens, far past Gemma's window) equals llama.cpp's, and 64
//! greedy tokens after two of them equal its server's.
//!
//! And the real Gemma 3 270M (Q4_K_M: Q5_0, Q8_0, Q4_K and Q6_K matrices, 18 layers, window 512): the logits
//! after token-id prompts up to past its window equal llama.cpp's. Its SentencePiece tokenizer is not needed:
//! [`LocalWeights`] runs token ids.
//!
//! Without Python's `gguf` and `numpy`, xllamacpp or the GGUFs the tests skip with a message locally and fail
//! under `CI=true`.

use nmb_local::{LocalModel, LocalWeights};

use crate::common::{self, greedy_differences, logits_differences, prompt, prompts, tiny};

const ARCHS: [&str; 5] = ["qwen2", "qwen3", "gemma3", "llama3", "mistral3"];

const GREEDY_STEPS: u32 = 64;

#[test]
fn prompt_logits_equal_llama_cpp_bit_for_bit_in_every_architecture() {
    let mut failures = Vec::new();
    for arch in ARCHS {
        let Some(path) = tiny("Q8_0", arch) else {
            return;
        };
        let m = LocalModel::load(&path).unwrap_or_else(|e| panic!("{arch}: loads: {e}"));
        let Some(found) = logits_differences(arch, &path, &prompts(), |ids| {
            m.prompt_logits(ids).expect("prompt logits")
        }) else {
            return;
        };
        failures.extend(found);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn greedy_tokens_equal_llama_cpp_in_every_architecture() {
    let mut failures = Vec::new();
    for arch in ARCHS {
        let Some(path) = tiny("Q8_0", arch) else {
            return;
        };
        let m = LocalModel::load(&path).unwrap_or_else(|e| panic!("{arch}: loads: {e}"));
        let Some(found) = greedy_differences(arch, &m, &path, &prompts()[3..5], GREEDY_STEPS)
        else {
            return;
        };
        failures.extend(found);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Gemma 3's vocabulary and its BOS id.
const GEMMA3_VOCAB: u64 = 262_144;
const GEMMA3_BOS: u32 = 2;

#[test]
fn gemma3_270m_prompt_logits_equal_llama_cpp_bit_for_bit() {
    let Some(path) = common::gemma3() else { return };
    let weights = LocalWeights::load(&path).expect("loads Gemma 3 270M");
    assert_eq!(weights.vocab(), GEMMA3_VOCAB as usize);
    // One token, a short one-pass prompt, the tiled path, past the 512-position window (a second chunk), and
    // past the 1024 cells of llama.cpp's sliding-window cache (a third chunk, written over cells it reuses).
    let prompts: Vec<Vec<u32>> = [1, 9, 70, 600, 1300]
        .iter()
        .enumerate()
        .map(|(i, &len)| prompt(len, 40 + i as u64, GEMMA3_VOCAB, GEMMA3_BOS))
        .collect();
    let Some(failures) = logits_differences("gemma3 270M", &path, &prompts, |ids| {
        weights.prompt_logits(ids).expect("prompt logits")
    }) else {
        return;
    };
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
