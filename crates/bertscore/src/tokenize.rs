//! Tokenisation the way bert-score's `sent_encode` does it, on top of a `tokenizer.json`.

use std::path::Path;

use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::BertScoreError;

/// A loaded `tokenizer.json` with padding off and truncation at the model's maximum length.
pub struct TextTokenizer {
    inner: Tokenizer,
    cls: u32,
    sep: u32,
}

impl TextTokenizer {
    /// Loads `tokenizer.json` from `dir`. `max_tokens` includes the special tokens.
    ///
    /// RoBERTa text is encoded as the tokenizer file says, without forcing a leading space:
    /// bert-score only passes `add_prefix_space=True` to `GPT2Tokenizer` instances, and since
    /// transformers 4.x `RobertaTokenizer` is no longer one, so the first word gets no space.
    pub fn load(dir: &Path, max_tokens: usize) -> Result<Self, BertScoreError> {
        let path = dir.join("tokenizer.json");
        let err = |msg: String| BertScoreError::Tokenizer {
            path: path.display().to_string(),
            msg,
        };
        if !path.is_file() {
            return Err(err(
                "file not found (a fast-tokenizer tokenizer.json is required)".into(),
            ));
        }
        let mut inner = Tokenizer::from_file(&path).map_err(|e| err(e.to_string()))?;
        // Some exported tokenizer.json files (MiniLM's among them) pad every input to a fixed
        // length; padded [PAD] tokens would then take part in the greedy matching.
        inner.with_padding(None);
        inner
            .with_truncation(Some(TruncationParams {
                direction: TruncationDirection::Right,
                max_length: max_tokens,
                strategy: TruncationStrategy::LongestFirst,
                stride: 0,
            }))
            .map_err(|e| err(format!("cannot set truncation: {e}")))?;
        let empty = inner
            .encode("", true)
            .map_err(|e| err(format!("cannot encode the empty string: {e}")))?;
        let (cls, sep) = match empty.get_ids() {
            [cls, sep] => (*cls, *sep),
            other => {
                return Err(err(format!(
                    "expected the post-processor to wrap text in exactly two special tokens \
                     (like [CLS] .. [SEP] or <s> .. </s>), got {} for empty input",
                    other.len()
                )))
            }
        };
        Ok(Self { inner, cls, sep })
    }

    /// Token ids with special tokens, after stripping surrounding whitespace (as `sent_encode`).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(vec![self.cls, self.sep]);
        }
        self.inner
            .encode(text, true)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| e.to_string())
    }

    /// Whether `id` is the start or end special token, which bert-score weights 0.
    pub fn is_special(&self, id: u32) -> bool {
        id == self.cls || id == self.sep
    }
}
