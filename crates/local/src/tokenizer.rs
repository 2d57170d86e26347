//! The tokenizer: built from the GGUF's own metadata (llama.cpp's SentencePiece, or byte-level BPE), or read from
//! a `tokenizer.json` next to it.

use std::path::{Path, PathBuf};

use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior};

use crate::gguf::{self, Meta};
use crate::spm::{Kind, Spm};
use crate::LocalError;

/// GGUF token types (llama.cpp's `llama_token_type`) that become added tokens.
const TOKEN_TYPE_CONTROL: i64 = 3;
const TOKEN_TYPE_USER_DEFINED: i64 = 4;

/// Llama 3's split regex (llama.cpp `LLAMA_VOCAB_PRE_TYPE_LLAMA3`); GPT-2's is built into `ByteLevel`.
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// The `tokenizer.ggml.pre` names llama.cpp gives Llama 3's regex (and BOS by default).
const LLAMA3_PRES: [&str; 5] = ["llama3", "llama-bpe", "llama-v3", "falcon3", "pixtral"];

/// Qwen2's split regex as llama.cpp writes it (`LLAMA_VOCAB_PRE_TYPE_QWEN2`): Llama 3's with single digits, and
/// the contractions spelled out in ASCII case pairs, since `(?i)` would also fold letters such as `ſ` into `s`.
const QWEN2_SPLIT: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Where the tokenizer came from; recorded so a run can say which one it used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenizerSource {
    /// Byte-level BPE built from `tokenizer.ggml.*` metadata (`tokenizer.ggml.model = gpt2`); `pre` is the GGUF's
    /// `tokenizer.ggml.pre` (or `gpt2` when absent).
    Gguf { pre: String },
    /// llama.cpp's SentencePiece tokenizer over the GGUF's tokens and scores (`tokenizer.ggml.model = llama`).
    SentencePiece,
    /// Read from this `tokenizer.json`.
    File(PathBuf),
}

impl TokenizerSource {
    /// How a run records it: `gguf:PRE`, `gguf:spm` or `file:PATH`.
    pub fn label(&self) -> String {
        match self {
            TokenizerSource::Gguf { pre } => format!("gguf:{pre}"),
            TokenizerSource::SentencePiece => "gguf:spm".into(),
            TokenizerSource::File(p) => format!("file:{}", p.display()),
        }
    }
}

/// A model's tokenizer: text to token ids and back, special-token strings in text becoming their tokens.
pub struct Tokenizer {
    inner: Inner,
    source: TokenizerSource,
    path: PathBuf,
    /// The BOS token when the GGUF asks for one in front of every prompt.
    bos: Option<u32>,
    /// `tokenizer.ggml.token_type` of a byte-level BPE vocabulary built from the GGUF (for [`Tokenizer::pieces`]).
    bpe_types: Option<Vec<i64>>,
}

enum Inner {
    Hf(Box<tokenizers::Tokenizer>),
    Spm(Spm),
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("source", &self.source)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Tokenizer {
    /// The tokenizer of a GGUF file as [`crate::LocalModel::load`] builds it (a `tokenizer.json` next to the file
    /// wins), without loading the weights.
    pub fn open(path: &Path) -> Result<Tokenizer, LocalError> {
        let (_file, content) = gguf::read_content(path)?;
        let meta = Meta {
            path,
            map: &content.metadata,
        };
        load(&meta, gguf::sibling_tokenizer(path).as_deref())
    }

    pub fn source(&self) -> &TokenizerSource {
        &self.source
    }

    /// Tokens in the vocabulary, added tokens included.
    pub fn vocab_size(&self) -> usize {
        match &self.inner {
            Inner::Hf(t) => t.get_vocab_size(true),
            Inner::Spm(s) => s.len(),
        }
    }

    /// Tokenizes text as it would appear inside a prompt: special-token strings become their tokens, no BOS is
    /// added (llama.cpp's `tokenize(text, add_special = false, parse_special = true)`).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        match &self.inner {
            Inner::Hf(t) => t
                .encode(text, false)
                .map(|e| e.get_ids().to_vec())
                .map_err(|e| self.error(format!("cannot encode text: {e}"))),
            Inner::Spm(s) => s
                .encode(text, true)
                .map_err(|e| self.error(format!("cannot encode text: {e}"))),
        }
    }

    /// The BOS token put in front of a prompt, when the GGUF asks for one.
    pub(crate) fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// A whole prompt's token ids: [`Tokenizer::encode`], with BOS in front when the GGUF asks for it and the
    /// text did not start with it already (a template that writes `bos_token` itself).
    pub fn encode_prompt(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        let mut ids = self.encode(text)?;
        if let Some(bos) = self.bos {
            if ids.first() != Some(&bos) {
                ids.insert(0, bos);
            }
        }
        Ok(ids)
    }

    /// Turns token ids back into text; `skip_special` drops control tokens such as `<end_of_turn>`.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, LocalError> {
        match &self.inner {
            Inner::Hf(t) => t
                .decode(ids, skip_special)
                .map_err(|e| self.error(format!("cannot decode tokens: {e}"))),
            Inner::Spm(s) => s
                .decode(ids, skip_special)
                .map_err(|e| self.error(format!("cannot decode tokens: {e}"))),
        }
    }

    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        match &self.inner {
            Inner::Hf(t) => t.token_to_id(token),
            Inner::Spm(s) => s.token_to_id(token),
        }
    }

    pub fn id_to_token(&self, id: u32) -> Option<String> {
        match &self.inner {
            Inner::Hf(t) => t.id_to_token(id),
            Inner::Spm(s) => s.id_to_token(id).map(str::to_string),
        }
    }

    /// Every token's bytes as llama.cpp's `token_to_piece(id, special = true)` gives them: control, unknown and
    /// user-defined tokens as their text, normal ones decoded (SentencePiece's `▁` as a space, byte-level BPE's
    /// characters as the bytes they stand for), byte tokens as their byte, unused ones as nothing. A
    /// `tokenizer.json` has no GGUF token types: its added tokens count as control tokens, the rest as normal.
    pub fn pieces(&self) -> Vec<Vec<u8>> {
        match &self.inner {
            Inner::Spm(s) => (0..s.len() as u32).map(|id| s.piece(id)).collect(),
            Inner::Hf(t) => {
                let added = t.get_added_tokens_decoder();
                let table = byte_level_table();
                (0..t.get_vocab_size(true) as u32)
                    .map(|id| {
                        let text = t.id_to_token(id).unwrap_or_default();
                        let kind = match &self.bpe_types {
                            Some(types) => types.get(id as usize).copied().unwrap_or(1),
                            None if added.contains_key(&id) => TOKEN_TYPE_CONTROL,
                            None => 1,
                        };
                        match kind {
                            1 => byte_level_decode(&text, &table),
                            2 | TOKEN_TYPE_CONTROL | TOKEN_TYPE_USER_DEFINED => text.into_bytes(),
                            _ => Vec::new(),
                        }
                    })
                    .collect()
            }
        }
    }

    fn error(&self, message: String) -> LocalError {
        LocalError::Tokenizer {
            path: self.path.clone(),
            message,
        }
    }
}

/// Builds the tokenizer: `tokenizer.json` when given, the GGUF metadata otherwise.
pub(crate) fn load(meta: &Meta<'_>, override_file: Option<&Path>) -> Result<Tokenizer, LocalError> {
    let (inner, source) = match override_file {
        Some(file) => {
            let tok =
                tokenizers::Tokenizer::from_file(file).map_err(|e| LocalError::Tokenizer {
                    path: file.to_path_buf(),
                    message: format!("cannot read tokenizer.json: {e}"),
                })?;
            (
                Inner::Hf(Box::new(tok)),
                TokenizerSource::File(file.to_path_buf()),
            )
        }
        None => match meta.string("tokenizer.ggml.model")? {
            "gpt2" => bpe_from_gguf(meta)?,
            "llama" => (
                Inner::Spm(spm_from_gguf(meta)?),
                TokenizerSource::SentencePiece,
            ),
            kind => {
                return Err(unsupported(
                    meta,
                    format!(
                    "tokenizer.ggml.model is `{kind}`; only `gpt2` (byte-level BPE) and `llama` \
                         (SentencePiece) can be built from GGUF metadata"
                ),
                ))
            }
        },
    };
    let bpe_types = match (&inner, override_file) {
        (Inner::Hf(_), None) => meta.opt_ints("tokenizer.ggml.token_type")?,
        _ => None,
    };
    let tokenizer = Tokenizer {
        inner,
        bpe_types,
        bos: bos_to_add(meta)?,
        source,
        path: meta.path.to_path_buf(),
    };
    tokenizer.check_usable(meta)?;
    Ok(tokenizer)
}

impl Tokenizer {
    /// Refuses a vocabulary no prompt can be written in: no tokens, or a BOS to add that is not one of them.
    fn check_usable(&self, meta: &Meta<'_>) -> Result<(), LocalError> {
        let n = self.vocab_size();
        if n == 0 {
            return Err(match &self.source {
                TokenizerSource::File(file) => LocalError::Tokenizer {
                    path: file.clone(),
                    message: "the vocabulary has no tokens".into(),
                },
                _ => LocalError::Metadata {
                    path: meta.path.to_path_buf(),
                    key: "tokenizer.ggml.tokens".into(),
                    expected: "a vocabulary of at least one token, found none".into(),
                },
            });
        }
        match self.bos {
            Some(bos) if bos as usize >= n => Err(LocalError::Metadata {
                path: meta.path.to_path_buf(),
                key: "tokenizer.ggml.bos_token_id".into(),
                expected: format!(
                    "a token id below the vocabulary's {n} tokens (BOS goes in front of every prompt), found {bos}"
                ),
            }),
            _ => Ok(()),
        }
    }
}

/// llama.cpp's rule: `tokenizer.ggml.add_bos_token` when present, otherwise on for SentencePiece GGUFs and for
/// the Llama 3 family of BPE pre-tokenizers; the id is `tokenizer.ggml.bos_token_id` (SentencePiece defaults to
/// 1). Read from the GGUF even when a `tokenizer.json` replaces its tokenizer. Asking for BOS without naming one
/// is an error, as in llama.cpp.
fn bos_to_add(meta: &Meta<'_>) -> Result<Option<u32>, LocalError> {
    let spm = meta.opt_string("tokenizer.ggml.model")? == Some("llama");
    let pre = meta.opt_string("tokenizer.ggml.pre")?.unwrap_or_default();
    let by_default = spm || LLAMA3_PRES.contains(&pre);
    if !meta
        .opt_bool("tokenizer.ggml.add_bos_token")?
        .unwrap_or(by_default)
    {
        return Ok(None);
    }
    let key = "tokenizer.ggml.bos_token_id";
    let id = match meta.opt_uint(key)? {
        Some(id) => id,
        None if spm => 1,
        None => {
            return Err(LocalError::Metadata {
                path: meta.path.to_path_buf(),
                key: key.into(),
                expected: "a BOS token id, since tokenizer.ggml.add_bos_token asks for BOS".into(),
            })
        }
    };
    u32::try_from(id)
        .map(Some)
        .map_err(|_| LocalError::Metadata {
            path: meta.path.to_path_buf(),
            key: key.into(),
            expected: "a token id that fits in 32 bits".into(),
        })
}

/// The SentencePiece vocabulary with llama.cpp's defaults: score 0 and normal type when the GGUF has none, and a
/// space prefix unless `tokenizer.ggml.add_space_prefix` says otherwise.
fn spm_from_gguf(meta: &Meta<'_>) -> Result<Spm, LocalError> {
    let tokens: Vec<String> = meta
        .strings("tokenizer.ggml.tokens")?
        .into_iter()
        .map(str::to_string)
        .collect();
    let n = tokens.len();
    let scores = meta
        .opt_f32s("tokenizer.ggml.scores")?
        .unwrap_or_else(|| vec![0.0; n]);
    let kinds = match meta.opt_ints("tokenizer.ggml.token_type")? {
        Some(types) => types.into_iter().map(Kind::from_gguf).collect(),
        None => vec![Kind::Normal; n],
    };
    let add_space_prefix = meta
        .opt_bool("tokenizer.ggml.add_space_prefix")?
        .unwrap_or(true);
    Spm::new(tokens, scores, kinds, add_space_prefix).map_err(|e| {
        tok_err(
            meta,
            format!("tokenizer.ggml.tokens, scores and token_type: {e}"),
        )
    })
}

fn bpe_from_gguf(meta: &Meta<'_>) -> Result<(Inner, TokenizerSource), LocalError> {
    let pre = meta
        .opt_string("tokenizer.ggml.pre")?
        .unwrap_or("gpt2")
        .to_string();
    let tokens = meta.strings("tokenizer.ggml.tokens")?;
    same_length(meta, "tokenizer.ggml.token_type", tokens.len())?;
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
    let mut tok = tokenizers::Tokenizer::new(bpe);
    tok.with_pre_tokenizer(Some(pre_tokenizer(meta, &pre)?));
    tok.with_decoder(Some(ByteLevelDecoder::default()));
    add_special(meta, &mut tok, &tokens)?;
    Ok((Inner::Hf(Box::new(tok)), TokenizerSource::Gguf { pre }))
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
        p if LLAMA3_PRES.contains(&p) => split_then_bytes(meta, LLAMA3_SPLIT),
        "qwen2" | "stablelm2" => split_then_bytes(meta, QWEN2_SPLIT),
        other => Err(unsupported(
            meta,
            format!("tokenizer.ggml.pre `{other}` is not one of the pre-tokenizers nmb reproduces"),
        )),
    }
}

/// A regex split, then byte-level mapping without GPT-2's own regex.
fn split_then_bytes(meta: &Meta<'_>, regex: &str) -> Result<PreTokenizerWrapper, LocalError> {
    let split = Split::new(
        SplitPattern::Regex(regex.to_string()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(|e| tok_err(meta, format!("cannot compile the split regex: {e}")))?;
    Ok(Sequence::new(vec![
        split.into(),
        ByteLevel::new(false, true, false).into(),
    ])
    .into())
}

/// Control tokens become special added tokens (matched whole in text, dropped when decoding answers);
/// user-defined ones become plain added tokens.
fn add_special(
    meta: &Meta<'_>,
    tok: &mut tokenizers::Tokenizer,
    tokens: &[&str],
) -> Result<(), LocalError> {
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

/// GPT-2's byte-level alphabet: the character that stands for each byte.
fn byte_level_table() -> std::collections::HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut table = std::collections::HashMap::with_capacity(256);
    let mut next = 0u32;
    for b in 0..=255u8 {
        let c = if printable(b) {
            u32::from(b)
        } else {
            next += 1;
            255 + next
        };
        table.insert(char::from_u32(c).expect("a valid character"), b);
    }
    table
}

/// A byte-level token's bytes (llama.cpp's `llama_decode_text`); a character outside the alphabet stays as its
/// UTF-8.
fn byte_level_decode(text: &str, table: &std::collections::HashMap<char, u8>) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for c in text.chars() {
        match table.get(&c) {
            Some(&b) => out.push(b),
            None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out
}

/// An optional per-token array must hold one item per token, as llama.cpp reads it.
fn same_length(meta: &Meta<'_>, key: &str, tokens: usize) -> Result<(), LocalError> {
    match meta.opt_array_len(key)? {
        Some(n) if n != tokens => Err(LocalError::Metadata {
            path: meta.path.to_path_buf(),
            key: key.into(),
            expected: format!("one item per token ({tokens}), found {n}"),
        }),
        _ => Ok(()),
    }
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
