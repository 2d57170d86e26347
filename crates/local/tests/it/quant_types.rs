//! Every weight type the engine multiplies with, against llama.cpp bit for bit, on tiny random-weight Llama
//! GGUFs that `scripts/tiny-gguf.py` writes with SmolLM2's tokenizer (every matrix in the type under test, the
//! norms in F32; 2 layers of width 256).
//!
//! For each type: every logit after each of eight prompts equals llama.cpp's (`scripts/llama-logits.py`), and
//! 64 greedy tokens after two of them equal its server's. The prompt lengths take each of the ways llama.cpp
//! multiplies a prompt: Q4_K's repacked kernels read a prompt four columns at a time and the last one to three
//! one by one, so the lengths cover each remainder, one token, the tiled attention path (64 tokens and more)
//! and a second 512-token chunk. Without Python's `gguf` and `numpy`, xllamacpp or the SmolLM2 GGUF the tests
//! skip with a message locally and fail under `CI=true`.

use std::path::PathBuf;

use nmb_chat::GenParams;
use nmb_local::{FinishReason, LocalModel};
use nmb_test_support::llama::LlamaServer;
use serde_json::json;

use crate::common;

/// The types `local:` multiplies with as they are stored.
const TYPES: [&str; 10] = [
    "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "F16", "BF16",
];

const PROMPT_LENGTHS: [usize; 8] = [1, 2, 4, 7, 13, 64, 101, 530];

const GREEDY_STEPS: u32 = 64;

/// SmolLM2's vocabulary, which the tiny files copy.
const VOCAB: u64 = 49152;

/// The tiny GGUF of `ty`, written once per test binary into Cargo's scratch folder for tests.
fn tiny(ty: &str) -> Option<PathBuf> {
    common::tiny_gguf(ty, &format!("tiny-{ty}"), &[])
}

/// Token ids spread over the vocabulary (deterministic), the first one SmolLM2's BOS.
fn prompt(len: usize, seed: u64) -> Vec<u32> {
    let mut s = seed;
    (0..len)
        .map(|i| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if i == 0 {
                1
            } else {
                // Past the control tokens at the start of the vocabulary.
                (17 + (s >> 33) % (VOCAB - 17)) as u32
            }
        })
        .collect()
}

fn prompts() -> Vec<Vec<u32>> {
    PROMPT_LENGTHS
        .iter()
        .enumerate()
        .map(|(i, &len)| prompt(len, i as u64 + 1))
        .collect()
}

#[test]
fn prompt_logits_equal_llama_cpp_bit_for_bit_in_every_type() {
    let mut failures = Vec::new();
    for ty in TYPES {
        let Some(path) = tiny(ty) else { return };
        let m = LocalModel::load(&path).unwrap_or_else(|e| panic!("{ty}: loads: {e}"));
        let prompts = prompts();
        let Some(theirs) = nmb_test_support::llama::prompt_logits(&path, &prompts) else {
            return;
        };
        for (ids, theirs) in prompts.iter().zip(&theirs) {
            let ours = m.prompt_logits(ids).expect("prompt logits");
            assert_eq!(ours.len(), theirs.len(), "{ty}: vocabulary sizes");
            let differ: Vec<usize> = (0..ours.len())
                .filter(|&i| ours[i].to_bits() != theirs[i].to_bits())
                .collect();
            if let Some(&i) = differ.first() {
                failures.push(format!(
                    "{ty}, {} prompt tokens: {} of {} logits differ; token {i}: nmb {:e}, llama.cpp {:e}",
                    ids.len(),
                    differ.len(),
                    ours.len(),
                    ours[i],
                    theirs[i]
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn greedy_tokens_equal_llama_cpp_in_every_type() {
    let greedy = GenParams {
        temperature: 0.0,
        top_p: 1.0,
        max_tokens: GREEDY_STEPS,
        seed: Some(1),
        reasoning_effort: None,
        thinking_budget: None,
        unsent: Default::default(),
        extra_body: None,
    };
    let mut failures = Vec::new();
    for ty in TYPES {
        let Some(path) = tiny(ty) else { return };
        let m = LocalModel::load(&path).unwrap_or_else(|e| panic!("{ty}: loads: {e}"));
        let Some(server) = LlamaServer::start(&path) else {
            return;
        };
        for ids in &prompts()[3..5] {
            let answer = crate::greedy::post_json(
                &server.url,
                "/completion",
                &json!({
                    "prompt": ids,
                    "n_predict": GREEDY_STEPS,
                    "temperature": 0.0,
                    "cache_prompt": false,
                    "return_tokens": true,
                    "ignore_eos": true,
                }),
            );
            let theirs: Vec<u32> = answer["tokens"]
                .as_array()
                .unwrap_or_else(|| panic!("no `tokens` in llama.cpp's answer: {answer}"))
                .iter()
                .map(|t| t.as_u64().expect("a token id") as u32)
                .collect();
            assert_eq!(theirs.len(), GREEDY_STEPS as usize, "{answer}");
            let run = m
                .sample_tokens(ids, &greedy, 1)
                .unwrap_or_else(|e| panic!("{ty}: sample_tokens fails: {e}"))
                .remove(0);
            // llama.cpp was told to go past end-of-generation tokens; where nmb stopped on one, llama.cpp's
            // token there is that one.
            let agree = theirs.starts_with(&run.tokens)
                && (run.finish != FinishReason::Stop
                    || m.decode(&theirs[run.tokens.len()..][..1], true)
                        .is_ok_and(|s| s.is_empty()));
            if !agree {
                failures.push(format!(
                    "{ty}, {} prompt tokens: nmb ({:?}) {:?}\n  llama.cpp {:?}",
                    ids.len(),
                    run.finish,
                    run.tokens,
                    theirs
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
