//! The tokenizer: built from the GGUF's own metadata (byte-level BPE), or read from a `tokenizer.json` next to it.

use std::path::{Path, PathBuf};

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

use crate::gguf::Meta;
use crate::LocalError;

/// GGUF token types (llama.cpp's `llama_token_type`) that become added tokens.
const TOKEN_TYPE_CONTROL: i64 = 3;
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

/// Llama 3's split regex (llama.cpp `LLAMA_VOCAB_PRE_TYPE_LLAMA3`); GPT-2's is built into `ByteLevel`.
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Where the tokenizer came from; recorded so a run can say which one it used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenizerSource {
    /// Built from `tokenizer.ggml.*` metadata; `pre` is the GGUF's `tokenizer.ggml.pre` (or `gpt2` when absent).
    Gguf { pre: String },
    /// Read from this `tokenizer.json`.
    File(PathBuf),
}

/// Builds the tokenizer: `tokenizer.json` when given, the GGUF metadata otherwise.
pub(crate) fn load(
    meta: &Meta<'_>,
    override_file: Option<&Path>,
) -> Result<(Tokenizer, TokenizerSource), LocalError> {
    match override_file {
        Some(file) => {
            let tok = Tokenizer::from_file(file).map_err(|e| LocalError::Tokenizer {
                path: file.to_path_buf(),
                message: format!("cannot read tokenizer.json: {e}"),
            })?;
            Ok((tok, TokenizerSource::File(file.to_path_buf())))
        }
        None => from_gguf(meta),
    }
}

fn from_gguf(meta: &Meta<'_>) -> Result<(Tokenizer, TokenizerSource), LocalError> {
    let kind = meta.string("tokenizer.ggml.model")?;
    if kind != "gpt2" {
        return Err(unsupported(
            meta,
            format!(
                "tokenizer.ggml.model is `{kind}`; only `gpt2` (byte-level BPE) can be built from GGUF metadata"
            ),
        ));
    }
    let pre = meta
        .opt_string("tokenizer.ggml.pre")?
        .unwrap_or("gpt2")
        .to_string();
    let tokens = meta.strings("tokenizer.ggml.tokens")?;
    let merges = parse_merges(meta, meta.strings("tokenizer.ggml.merges")?)?;
    let vocab: Vocab = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.to_string(), i as u32))
        .collect();
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, merges)
        .build()
        .map_err(|e| {
            tok_err(
                meta,
                format!("cannot build BPE from tokens and merges: {e}"),
            )
        })?;
    let mut tok = Tokenizer::new(bpe);
    tok.with_pre_tokenizer(Some(pre_tokenizer(meta, &pre)?));
    tok.with_decoder(Some(ByteLevelDecoder::default()));
    add_special(meta, &mut tok, &tokens)?;
    Ok((tok, TokenizerSource::Gguf { pre }))
}

/// GGUF merges are `"left right"` strings; byte-level tokens never contain a plain space.
fn parse_merges(meta: &Meta<'_>, merges: Vec<&str>) -> Result<Vec<(String, String)>, LocalError> {
    merges
        .iter()
        .enumerate()
        .map(|(i, m)| match m.split_once(' ') {
            Some((a, b)) => Ok((a.to_string(), b.to_string())),
            None => Err(LocalError::Metadata {
                path: meta.path.to_path_buf(),
                key: "tokenizer.ggml.merges".into(),
                expected: format!("`left right` pairs (item {i} has no space)"),
            }),
        })
        .collect()
}

/// The pre-tokenizer for llama.cpp's `tokenizer.ggml.pre` names whose regexes we reproduce exactly.
fn pre_tokenizer(meta: &Meta<'_>, pre: &str) -> Result<PreTokenizerWrapper, LocalError> {
    let byte_level = |use_regex| ByteLevel::new(false, true, use_regex);
    match pre {
        "gpt2" | "mpt" | "olmo" | "jais" => Ok(byte_level(true).into()),
        // Single digits first, then the GPT-2 regex (llama.cpp groups these together).
        "smollm" | "starcoder" | "refact" | "command-r" | "codeshell" | "exaone" | "minerva" => {
            Ok(Sequence::new(vec![Digits::new(true).into(), byte_level(true).into()]).into())
        }
        "llama3" | "llama-bpe" | "llama-v3" | "falcon3" | "pixtral" => {
            let split = Split::new(
                SplitPattern::Regex(LLAMA3_SPLIT.to_string()),
                SplitDelimiterBehavior::Isolated,
                false,
            )
            .map_err(|e| tok_err(meta, format!("cannot compile the llama3 split regex: {e}")))?;
            Ok(Sequence::new(vec![split.into(), byte_level(false).into()]).into())
        }
        other => Err(unsupported(
            meta,
            format!("tokenizer.ggml.pre `{other}` is not one of the pre-tokenizers nmb reproduces"),
        )),
    }
}

/// Control tokens become special added tokens (matched whole in text, dropped when decoding answers);
/// user-defined ones become plain added tokens.
fn add_special(meta: &Meta<'_>, tok: &mut Tokenizer, tokens: &[&str]) -> Result<(), LocalError> {
    let Some(types) = meta.opt_ints("tokenizer.ggml.token_type")? else {
        return Ok(());
    };
    let pick = |want: i64, special: bool| -> Vec<AddedToken> {
        tokens
            .iter()
            .zip(&types)
            .filter(|(_, t)| **t == want)
            .map(|(s, _)| AddedToken::from(s.to_string(), special))
            .collect()
    };
    tok.add_special_tokens(pick(TOKEN_TYPE_CONTROL, true))
        .map_err(|e| tok_err(meta, format!("cannot add control tokens: {e}")))?;
    tok.add_tokens(pick(TOKEN_TYPE_USER_DEFINED, false))
        .map_err(|e| tok_err(meta, format!("cannot add user-defined tokens: {e}")))?;
    Ok(())
}

fn unsupported(meta: &Meta<'_>, message: String) -> LocalError {
    LocalError::UnsupportedTokenizer {
        path: meta.path.to_path_buf(),
        message,
    }
}

fn tok_err(meta: &Meta<'_>, message: String) -> LocalError {
    LocalError::Tokenizer {
        path: meta.path.to_path_buf(),
        message,
    }
}
