//! GGUF files whose headers lie, written from Rust (`nmb_test_support::gguf`): each is refused at load with an
//! error that names the key or tensor and says what was expected, never a panic, an abort or a read of the
//! header as weights. The tiny model they are variants of loads and answers, so each refusal is the lie's.

use std::path::PathBuf;

use nmb_chat::{GenParams, Message, OutputFormat, Role};
use nmb_local::{LocalError, LocalModel, LocalWeights};
use nmb_test_support::gguf::{ty, Gguf, Value, VOCAB};

fn written(g: &Gguf) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("hostile.gguf");
    g.write(&path);
    (dir, path)
}

/// The error loading `g` gives; every word of `says` must be in its text, and so must the file's name.
fn refused(g: &Gguf, says: &[&str]) -> LocalError {
    let (_dir, path) = written(g);
    let err = LocalModel::load(&path).expect_err("refused");
    let text = err.to_string();
    for word in says.iter().chain(&["hostile.gguf"]) {
        assert!(text.contains(word), "`{word}` missing from: {text}");
    }
    assert!(!text.contains('\n'), "one line: {text}");
    err
}

fn tiny_with(change: impl FnOnce(&mut Gguf)) -> Gguf {
    let mut g = Gguf::tiny();
    change(&mut g);
    g
}

fn greedy(max_tokens: u32) -> GenParams {
    GenParams {
        temperature: 0.0,
        max_tokens,
        seed: Some(1),
        ..GenParams::default()
    }
}

#[test]
fn the_tiny_model_loads_and_answers() {
    let (_dir, path) = written(&Gguf::tiny());
    let model = LocalModel::load(&path).expect("the tiny GGUF loads");
    assert_eq!(model.info().vocab_size, VOCAB as usize);
    let msgs = [Message::text(Role::User, "Which artery?")];
    let out = model
        .generate(&msgs, &greedy(8), &OutputFormat::Text)
        .expect("answers");
    assert!(out.tokens_in > 5 && out.tokens_out > 0, "{out:?}");
}

#[test]
fn an_alignment_of_zero_or_not_a_power_of_two_is_refused() {
    for bad in [0u32, 3, 48, 1 << 30] {
        let g = tiny_with(|g| {
            g.set("general.alignment", Value::U32(bad));
        });
        let err = refused(&g, &["general.alignment", "power of two", &bad.to_string()]);
        assert!(matches!(err, LocalError::Metadata { .. }), "{err:?}");
    }
}

#[test]
fn a_block_count_past_what_the_file_holds_is_refused() {
    refused(
        &tiny_with(|g| {
            g.set("llama.block_count", Value::U64(1 << 62));
        }),
        &["llama.block_count", "32-bit"],
    );
    refused(
        &tiny_with(|g| {
            g.set("llama.block_count", Value::U32(1 << 20));
        }),
        &["llama.block_count", "512"],
    );
    refused(
        &tiny_with(|g| {
            g.set("llama.block_count", Value::U32(3));
        }),
        &["blk.2.attn_norm.weight", "missing"],
    );
}

#[test]
fn tensor_rows_past_the_end_of_the_file_are_refused() {
    let g = tiny_with(|g| g.tensor("blk.0.attn_q.weight").dims = vec![64, 1 << 50]);
    refused(&g, &["blk.0.attn_q.weight", "past the end"]);
    let g = tiny_with(|g| g.tensor("blk.0.attn_q.weight").dims = vec![64, 1 << 58]);
    refused(&g, &["blk.0.attn_q.weight", "2^63"]);
}

#[test]
fn a_tensor_offset_that_wraps_or_leaves_the_data_is_refused() {
    for offset in [u64::MAX - 31, 1 << 40] {
        let g = tiny_with(|g| g.tensor("output_norm.weight").offset = Some(offset));
        refused(
            &g,
            &["output_norm.weight", "past the end", &offset.to_string()],
        );
    }
    let g = tiny_with(|g| g.tensor("output_norm.weight").offset = Some(4));
    refused(&g, &["output_norm.weight", "alignment"]);
    let g = tiny_with(|g| g.tensor("output_norm.weight").offset = Some(0));
    refused(&g, &["output_norm.weight", "token_embd.weight", "overlap"]);
}

#[test]
fn a_shape_that_disagrees_with_the_hyperparameters_is_refused() {
    // Inside the file, but with fewer rows than the key/value heads need.
    let g = tiny_with(|g| {
        let t = g.tensor("blk.1.attn_k.weight");
        t.dims = vec![64, 16];
        t.data.truncate(64 * 16 * 2);
    });
    refused(
        &g,
        &["blk.1.attn_k.weight", "[16, 64]", "expected [32, 64]"],
    );
    let g = tiny_with(|g| {
        g.set("llama.attention.head_count", Value::U64(1 << 33));
    });
    refused(&g, &["llama.attention.head_count", "32-bit"]);
    let g = tiny_with(|g| {
        g.set("llama.feed_forward_length", Value::U32(256));
    });
    refused(&g, &["blk.0.ffn_gate.weight", "expected [256, 64]"]);
}

#[test]
fn counts_the_file_cannot_hold_are_refused_before_anything_is_allocated() {
    let g = tiny_with(|g| g.tensor_count = Some(1 << 62));
    refused(&g, &["4611686018427387904 tensors", "left in the file"]);
    let g = tiny_with(|g| g.metadata_count = Some(u64::MAX));
    refused(&g, &["metadata entries", "left in the file"]);
    // A string whose length claims 2^60 bytes.
    let mut claim = (1u64 << 60).to_le_bytes().to_vec();
    claim.extend(b"llama");
    let g = tiny_with(|g| {
        g.set("general.architecture", Value::Raw(ty::STRING, claim));
    });
    refused(&g, &["general.architecture", "1152921504606846976 bytes"]);
    // An array of 2^40 strings, with none following.
    let mut claim = ty::STRING.to_le_bytes().to_vec();
    claim.extend((1u64 << 40).to_le_bytes());
    let g = tiny_with(|g| {
        g.set("tokenizer.ggml.merges", Value::Raw(ty::ARRAY, claim));
    });
    refused(&g, &["tokenizer.ggml.merges", "1099511627776 items"]);
}

#[test]
fn malformed_metadata_is_refused_naming_its_key() {
    let mut nested = ty::ARRAY.to_le_bytes().to_vec();
    nested.extend(1u64.to_le_bytes());
    nested.extend(ty::U8.to_le_bytes());
    nested.extend(0u64.to_le_bytes());
    let g = tiny_with(|g| {
        g.set("general.nested", Value::Raw(ty::ARRAY, nested));
    });
    refused(&g, &["general.nested", "an array of arrays"]);
    let g = tiny_with(|g| {
        g.set(
            "tokenizer.ggml.add_bos_token",
            Value::Raw(ty::BOOL, vec![7]),
        );
    });
    refused(&g, &["tokenizer.ggml.add_bos_token", "boolean", "7"]);
    let g = tiny_with(|g| {
        g.set("general.odd", Value::Raw(99, vec![]));
    });
    refused(&g, &["general.odd", "type 99"]);
    let g = tiny_with(|g| g.metadata.push(("llama.block_count".into(), Value::U32(2))));
    refused(&g, &["llama.block_count", "twice"]);
    let g = tiny_with(|g| {
        let dup = g.tensor("output_norm.weight").clone();
        g.tensors.push(dup);
    });
    refused(&g, &["output_norm.weight", "twice"]);
    let g = tiny_with(|g| g.tensor("output_norm.weight").dims = vec![64, 1, 1, 1, 1]);
    refused(&g, &["output_norm.weight", "5 dimensions"]);
}

#[test]
fn versions_other_than_2_and_3_are_refused() {
    for (version, says) in [
        (1, "version 1"),
        (7, "version 7"),
        (3u32.swap_bytes(), "big-endian"),
    ] {
        refused(&tiny_with(|g| g.version = version), &[says]);
    }
}

#[test]
fn a_context_window_of_no_tokens_is_refused() {
    refused(
        &tiny_with(|g| {
            g.set("llama.context_length", Value::U32(0));
        }),
        &["llama.context_length", "at least 2 tokens"],
    );
}

#[test]
fn an_empty_vocabulary_is_refused_at_load() {
    let g = tiny_with(|g| {
        g.set("tokenizer.ggml.tokens", Value::Strs(vec![]))
            .set("tokenizer.ggml.scores", Value::F32s(vec![]))
            .set("tokenizer.ggml.token_type", Value::I32s(vec![]));
    });
    let err = refused(&g, &["tokenizer.ggml.tokens", "at least one token"]);
    assert!(!err.to_string().contains("too long"), "{err}");
}

#[test]
fn special_token_ids_outside_the_vocabulary_are_refused() {
    for key in [
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.eot_token_id",
    ] {
        let g = tiny_with(|g| {
            g.set(key, Value::U32(VOCAB as u32));
        });
        refused(
            &g,
            &[key, &format!("below the vocabulary's {VOCAB} tokens")],
        );
    }
}

#[test]
fn per_token_arrays_of_another_length_are_refused() {
    let g = tiny_with(|g| {
        g.set("tokenizer.ggml.scores", Value::F32s(vec![0.0; 3]));
    });
    refused(&g, &["288 tokens but 3 scores"]);
    // The embedding must have one row per token, as llama.cpp sizes it.
    let g = tiny_with(|g| {
        let Value::Strs(tokens) = g.value("tokenizer.ggml.tokens") else {
            panic!("tokens")
        };
        tokens.push("\u{2581}ab".into());
        g.set("tokenizer.ggml.scores", Value::F32s(vec![0.0; 289]));
        g.set("tokenizer.ggml.token_type", Value::I32s(vec![1; 289]));
    });
    refused(&g, &["token_embd.weight", "expected [289, 64]"]);
}

#[test]
fn the_weights_alone_go_through_the_same_checks() {
    let g = tiny_with(|g| g.tensor("blk.0.attn_q.weight").dims = vec![64, 1 << 58]);
    let (_dir, path) = written(&g);
    let err = LocalWeights::load(&path).expect_err("refused");
    assert!(err.to_string().contains("blk.0.attn_q.weight"), "{err}");
    let (_dir, path) = written(&Gguf::tiny());
    assert_eq!(
        LocalWeights::load(&path).expect("loads").vocab(),
        VOCAB as usize
    );
}

/// A template that writes nothing, in a vocabulary that adds no BOS, leaves a prompt of no tokens: refused as
/// such, not as a prompt too long for the window.
#[test]
fn a_prompt_of_no_tokens_is_not_called_too_long() {
    let g = tiny_with(|g| {
        g.set("tokenizer.ggml.add_bos_token", Value::Bool(false))
            .set("tokenizer.chat_template", Value::Str(String::new()));
    });
    let (_dir, path) = written(&g);
    let model = LocalModel::load(&path).expect("loads");
    let msgs = [Message::text(Role::User, "Which artery?")];
    let err = model
        .generate(&msgs, &greedy(4), &OutputFormat::Text)
        .expect_err("no tokens");
    assert!(matches!(err, LocalError::InvalidParams { .. }), "{err:?}");
    assert!(err.to_string().contains("gave none"), "{err}");
}

/// Hostile chat templates in a GGUF are refused when it loads, naming the template, before any request.
#[test]
fn a_hostile_chat_template_is_refused_at_load() {
    for src in [
        "{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
        "{% for i in range(100000) %}{% for j in range(100000) %}{{ '' }}{% endfor %}{% endfor %}",
    ] {
        let g = tiny_with(|g| {
            g.set("tokenizer.chat_template", Value::Str(src.into()));
        });
        let err = refused(&g, &["chat template of", "tokenizer.chat_template", "refused at load", "fuel"]);
        assert!(matches!(err, LocalError::Template { .. }), "{err:?}");
    }
}
