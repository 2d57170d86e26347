//! Finding the GGUFs the tests run on, writing the tiny random-weight ones, and the prompts they read.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use nmb_test_support::assets::{py_dir, repo_root};
use nmb_test_support::need;

/// The SmolLM2 GGUF (see `nmb_test_support::assets`): `None` after a message locally, a failure under CI.
pub fn smollm2() -> Option<PathBuf> {
    nmb_test_support::assets::smollm2_gguf()
}

/// The Gemma 3 270M Q4_K_M GGUF: `None` after a message locally, a failure under CI.
pub fn gemma3() -> Option<PathBuf> {
    nmb_test_support::assets::gemma3_gguf()
}

/// Prompt lengths that take each of the ways llama.cpp multiplies and attends over a prompt: Q4_K's repacked
/// kernels read a prompt four columns at a time and the last one to three one by one, so the lengths cover
/// each remainder, one token, the tiled attention path (64 tokens and more) and a second 512-token chunk.
pub const PROMPT_LENGTHS: [usize; 8] = [1, 2, 4, 7, 13, 64, 101, 530];

/// SmolLM2's vocabulary, which the tiny files copy.
pub const SMOLLM2_VOCAB: u64 = 49152;

/// The tiny GGUF of architecture `arch` (see `scripts/tiny-gguf.py --arch`) with its matrices in `ty` (see
/// [`tiny_gguf`]). `None` (after a message locally, a failure under CI) without SmolLM2's GGUF or Python's `gguf`
/// and `numpy`.
pub fn tiny(ty: &str, arch: &str) -> Option<PathBuf> {
    match arch {
        "llama" => tiny_gguf(ty, &format!("tiny-{ty}"), &[]),
        _ => tiny_gguf(ty, &format!("tiny-{arch}-{ty}"), &["--arch", arch]),
    }
}

/// A tiny random-weight GGUF with SmolLM2's tokenizer that `scripts/tiny-gguf.py` writes in weight type `ty`
/// into Cargo's scratch folder for tests, as `NAME.gguf`; `extra` are further arguments of the script (`--pre`,
/// `--chat-template`). Without extra arguments a file left by an earlier run is reused (the script writes the
/// same bytes); with them it is written once per test binary, so an edited fixture is never read stale.
pub fn tiny_gguf(ty: &str, name: &str, extra: &[&str]) -> Option<PathBuf> {
    static WRITTEN: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let smollm2 = smollm2()?;
    need(
        "Python's gguf and numpy (scripts/tiny-gguf.py)",
        "scripts/assets.sh installs them into .nmb-assets/py",
        Command::new("python3")
            .args(["-c", "import gguf, numpy"])
            .env("PYTHONPATH", py_dir())
            .output()
            .ok()
            .filter(|o| o.status.success()),
    )?;
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.gguf"));
    let mut written = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    let written = written.get_or_insert_with(HashSet::new);
    let reusable = extra.is_empty() && out.exists();
    if !reusable && !written.contains(&out) {
        let partial = out.with_extension("partial");
        let run = Command::new("python3")
            .arg(repo_root().join("scripts/tiny-gguf.py"))
            .arg(&smollm2)
            .arg(ty)
            .arg(&partial)
            .args(extra)
            .env("PYTHONPATH", py_dir())
            .output()
            .expect("running python3 scripts/tiny-gguf.py");
        assert!(
            run.status.success(),
            "tiny-gguf.py {ty} {extra:?} failed: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        std::fs::rename(&partial, &out).expect("moves the GGUF into place");
        written.insert(out.clone());
    }
    Some(out)
}

/// `len` token ids spread over a vocabulary of `vocab` (deterministic from `seed`), the first one `bos`, the
/// others past the control tokens at its start.
pub fn prompt(len: usize, seed: u64, vocab: u64, bos: u32) -> Vec<u32> {
    let mut s = seed;
    (0..len)
        .map(|i| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            if i == 0 {
                bos
            } else {
                (17 + (s >> 33) % (vocab - 17)) as u32
            }
        })
        .collect()
}

/// One prompt of each of [`PROMPT_LENGTHS`] in SmolLM2's vocabulary, starting with its BOS.
pub fn prompts() -> Vec<Vec<u32>> {
    PROMPT_LENGTHS
        .iter()
        .enumerate()
        .map(|(i, &len)| prompt(len, i as u64 + 1, SMOLLM2_VOCAB, 1))
        .collect()
}

/// Where `ours` (the engine's logits after each of `prompts`) differs from llama.cpp's (`scripts/llama-logits.py`)
/// on `path`: one line per prompt whose logits are not all equal to the bit, `label` first. `None` when
/// llama.cpp's library is missing (after a message locally, a failure under CI).
pub fn logits_differences(
    label: &str,
    path: &std::path::Path,
    prompts: &[Vec<u32>],
    mut ours: impl FnMut(&[u32]) -> Vec<f32>,
) -> Option<Vec<String>> {
    let theirs = nmb_test_support::llama::prompt_logits(path, prompts)?;
    let mut failures = Vec::new();
    for (ids, theirs) in prompts.iter().zip(&theirs) {
        let ours = ours(ids);
        assert_eq!(ours.len(), theirs.len(), "{label}: vocabulary sizes");
        let differ: Vec<usize> = (0..ours.len())
            .filter(|&i| ours[i].to_bits() != theirs[i].to_bits())
            .collect();
        if let Some(&i) = differ.first() {
            failures.push(format!(
                "{label}, {} prompt tokens: {} of {} logits differ; token {i}: nmb {:e}, llama.cpp {:e}",
                ids.len(),
                differ.len(),
                ours.len(),
                ours[i],
                theirs[i]
            ));
        }
    }
    Some(failures)
}

/// Where `m`'s greedy tokens after each of `prompts` differ from llama.cpp's server's over `steps` tokens
/// (`ignore_eos`): one line per prompt, `label` first. `None` when the server cannot start (after a message
/// locally, a failure under CI).
pub fn greedy_differences(
    label: &str,
    m: &nmb_local::LocalModel,
    path: &std::path::Path,
    prompts: &[Vec<u32>],
    steps: u32,
) -> Option<Vec<String>> {
    use nmb_local::FinishReason;
    let greedy = nmb_chat::GenParams {
        temperature: 0.0,
        top_p: 1.0,
        max_tokens: steps,
        seed: Some(1),
        reasoning_effort: None,
        thinking_budget: None,
        unsent: Default::default(),
        extra_body: None,
    };
    let server = nmb_test_support::llama::LlamaServer::start(path)?;
    let mut failures = Vec::new();
    for ids in prompts {
        let answer = crate::greedy::post_json(
            &server.url,
            "/completion",
            &serde_json::json!({
                "prompt": ids,
                "n_predict": steps,
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
        assert_eq!(theirs.len(), steps as usize, "{answer}");
        let run = m
            .sample_tokens(ids, &greedy, 1)
            .unwrap_or_else(|e| panic!("{label}: sample_tokens fails: {e}"))
            .remove(0);
        // llama.cpp was told to go past end-of-generation tokens; where nmb stopped on one, llama.cpp's
        // token there is that one.
        let agree = theirs.starts_with(&run.tokens)
            && (run.finish != FinishReason::Stop
                || m.decode(&theirs[run.tokens.len()..][..1], true)
                    .is_ok_and(|s| s.is_empty()));
        if !agree {
            failures.push(format!(
                "{label}, {} prompt tokens: nmb ({:?}) {:?}\n  llama.cpp {:?}",
                ids.len(),
                run.finish,
                run.tokens,
                theirs
            ));
        }
    }
    Some(failures)
}
