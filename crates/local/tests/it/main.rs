//! The integration tests of `nmb-local`, one module per concern, linked into one test binary.

mod architectures;
mod backend;
mod common;
mod gemma3_tokenizer;
mod grammar;
mod greedy;
mod hostile_gguf;
mod load_errors;
mod logits;
mod quant_types;
mod qwen_style;
mod seeing;
mod smollm2;
mod vision;
