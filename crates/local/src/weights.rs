//! [`LocalWeights`]: a model's weights without its tokenizer or chat template, for running token ids.

use std::path::{Path, PathBuf};

use crate::engine::Engine;
use crate::gguf::{self, Meta};
use crate::LocalError;

/// A GGUF's weights alone, loaded without building its tokenizer or chat template: the next-token logits of
/// token-id prompts, as [`crate::LocalModel::prompt_logits`] gives them. For comparing the engine with
/// llama.cpp on files whose tokenizer this crate does not build.
pub struct LocalWeights {
    path: PathBuf,
    engine: Engine,
}

impl std::fmt::Debug for LocalWeights {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalWeights")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl LocalWeights {
    pub fn load(path: &Path) -> Result<LocalWeights, LocalError> {
        let (mut file, content) = gguf::read_content(path)?;
        let meta = Meta {
            path,
            map: &content.metadata,
        };
        let mut engine = Engine::load(path, &meta, &content, &mut file)?;
        engine.context = crate::context_length(&meta, crate::arch::Arch::read(&meta)?)?;
        Ok(LocalWeights {
            path: path.to_path_buf(),
            engine,
        })
    }

    /// Token ids the model has embeddings for.
    pub fn vocab(&self) -> usize {
        self.engine.vocab()
    }

    /// The next-token logits after a prompt of text and image parts (see [`crate::PromptPart`]), each part read
    /// as llama.cpp's `mtmd` decodes it; image embeddings must be rows of the model's width.
    pub fn parts_logits(&self, parts: &[crate::PromptPart]) -> Result<Vec<f32>, LocalError> {
        let dim = self.engine.width();
        for part in parts {
            match part {
                crate::PromptPart::Tokens(ids) => {
                    if let Some(&bad) = ids.iter().find(|&&t| t as usize >= self.vocab()) {
                        return Err(LocalError::InvalidParams {
                            field: "prompt",
                            message: format!(
                                "token id {bad} is outside the vocabulary of {}",
                                self.vocab()
                            ),
                        });
                    }
                }
                crate::PromptPart::Image { embd, .. } => {
                    if embd.is_empty() || !embd.len().is_multiple_of(dim) {
                        return Err(LocalError::InvalidParams {
                            field: "prompt",
                            message: format!(
                                "an image of {} values is not rows of the model's width {dim}",
                                embd.len()
                            ),
                        });
                    }
                }
            }
        }
        let total: usize = parts
            .iter()
            .map(|p| match p {
                crate::PromptPart::Tokens(ids) => ids.len(),
                crate::PromptPart::Image { embd, .. } => embd.len() / dim,
            })
            .sum();
        if total == 0 {
            return Err(LocalError::InvalidParams {
                field: "prompt",
                message: "expected at least one token".into(),
            });
        }
        if total >= self.engine.context {
            return Err(LocalError::ContextTooLong {
                prompt_tokens: total,
                context_length: self.engine.context,
            });
        }
        Ok(crate::vision::parts_logits(&self.engine, parts))
    }

    /// Runs `f` (an image's encoding) on the model's thread pool.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        self.engine.install(f)
    }

    /// The next-token logits after `prompt`, one per vocabulary entry.
    pub fn prompt_logits(&self, prompt: &[u32]) -> Result<Vec<f32>, LocalError> {
        if prompt.is_empty() {
            return Err(LocalError::InvalidParams {
                field: "prompt",
                message: "expected at least one token".into(),
            });
        }
        if let Some(&bad) = prompt.iter().find(|&&t| t as usize >= self.vocab()) {
            return Err(LocalError::InvalidParams {
                field: "prompt",
                message: format!(
                    "token id {bad} is outside the model's vocabulary of {} tokens in {}",
                    self.vocab(),
                    self.path.display()
                ),
            });
        }
        Ok(self.engine.prompt_logits(prompt))
    }
}
