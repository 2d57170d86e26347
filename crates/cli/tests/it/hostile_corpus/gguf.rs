//! Hostile GGUF model files whose headers lie: alignment, counts, tensor extents and offsets, vocabularies.
//!
//! Each is a variant of the tiny model `nmb_test_support::gguf` writes (which loads and answers: the first case),
//! given to `nmb eval --model local:FILE` on one sample task with `RUST_BACKTRACE=1`: it must be refused with an
//! error naming the file and the key or tensor, and no backtrace.

use std::path::Path;

use nmb_test_support::gguf::{ty, Gguf, Value};

use super::{check_all, Case};
use crate::common::nmb_command;

/// `nmb eval` of `g` (written as `NAME.gguf` under `dir`) on one sample task, with backtraces asked for.
fn eval(dir: &Path, name: &str, g: &Gguf) -> (std::process::Command, std::path::PathBuf) {
    let file = dir.join(format!("{name}.gguf"));
    g.write(&file);
    let runs = dir.join(format!("runs-{name}"));
    let mut c = nmb_command(&runs);
    c.args([
        "eval",
        "--suite",
        "sample",
        "--limit",
        "1",
        "--samples",
        "1",
    ])
    .args(["--max-tokens", "4", "--seed", "1", "-q", "--model"])
    .arg(format!("local:{}", file.display()))
    .env("RUST_BACKTRACE", "1");
    (c, runs)
}

/// A case refusing the variant of the tiny model that `change` makes, saying `says` and the file's name.
fn refused(dir: &Path, name: &str, change: impl FnOnce(&mut Gguf), says: &[&str]) -> Case {
    let mut g = Gguf::tiny();
    change(&mut g);
    let (command, runs) = eval(dir, name, &g);
    let file = format!("{name}.gguf");
    let mut words = says.to_vec();
    words.push(&file);
    Case::refused(name, command, &runs, &words).forbid("candle_core::")
}

/// A raw value: the type id, then `bytes`.
fn raw_array(item: u32, claimed: u64) -> Value {
    let mut bytes = item.to_le_bytes().to_vec();
    bytes.extend(claimed.to_le_bytes());
    Value::Raw(ty::ARRAY, bytes)
}

/// Every case of this kind, written under `dir`.
pub fn cases(dir: &Path) -> Vec<Case> {
    let (tiny, runs) = eval(dir, "tiny", &Gguf::tiny());
    let mut string_lie = (1u64 << 60).to_le_bytes().to_vec();
    string_lie.extend(b"llama");
    vec![
        Case::answered("the tiny model answers", tiny, &runs, &[]),
        refused(
            dir,
            "alignment-zero",
            |g| {
                g.set("general.alignment", Value::U32(0));
            },
            &["general.alignment", "power of two"],
        ),
        refused(
            dir,
            "block-count-2-62",
            |g| {
                g.set("llama.block_count", Value::U64(1 << 62));
            },
            &["llama.block_count", "32-bit"],
        ),
        refused(
            dir,
            "tensor-rows-2-58",
            |g| g.tensor("blk.0.attn_q.weight").dims = vec![64, 1 << 58],
            &["blk.0.attn_q.weight", "2^63"],
        ),
        refused(
            dir,
            "tensor-rows-past-the-end",
            |g| g.tensor("blk.0.attn_q.weight").dims = vec![64, 1 << 40],
            &["blk.0.attn_q.weight", "past the end"],
        ),
        refused(
            dir,
            "offset-wraps",
            |g| g.tensor("output_norm.weight").offset = Some(u64::MAX - 31),
            &["output_norm.weight", "past the end"],
        ),
        refused(
            dir,
            "offset-overlaps",
            |g| g.tensor("output.weight").offset = Some(0),
            &["output.weight", "token_embd.weight", "overlap"],
        ),
        refused(
            dir,
            "tensor-count-2-62",
            |g| g.tensor_count = Some(1 << 62),
            &["4611686018427387904 tensors", "left in the file"],
        ),
        refused(
            dir,
            "string-length-lie",
            |g| {
                g.set("general.architecture", Value::Raw(ty::STRING, string_lie));
            },
            &["general.architecture", "1152921504606846976 bytes"],
        ),
        refused(
            dir,
            "array-length-lie",
            |g| {
                g.set("tokenizer.ggml.tokens", raw_array(ty::STRING, 1 << 40));
            },
            &["tokenizer.ggml.tokens", "1099511627776 items"],
        ),
        refused(
            dir,
            "empty-vocabulary",
            |g| {
                g.set("tokenizer.ggml.tokens", Value::Strs(vec![]))
                    .set("tokenizer.ggml.scores", Value::F32s(vec![]))
                    .set("tokenizer.ggml.token_type", Value::I32s(vec![]));
            },
            &["tokenizer.ggml.tokens", "at least one token"],
        )
        .forbid("too long"),
        refused(
            dir,
            "bos-outside-the-vocabulary",
            |g| {
                g.set("tokenizer.ggml.bos_token_id", Value::U32(1 << 20));
            },
            &[
                "tokenizer.ggml.bos_token_id",
                "below the vocabulary's 288 tokens",
            ],
        ),
        refused(
            dir,
            "shape-against-the-heads",
            |g| {
                g.set("llama.attention.head_count_kv", Value::U32(2));
            },
            &["blk.0.attn_k.weight", "expected [64, 64]"],
        ),
        refused(dir, "version-1", |g| g.version = 1, &["version 1"]),
    ]
}

#[test]
fn every_gguf_case_ends_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    check_all(cases(tmp.path()));
}
