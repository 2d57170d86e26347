//! The `local:` backend: a real language model running in-process on the CPU with this crate's own engine.
//!
//! This crate owns loading GGUF quantized models (architectures `llama`, `mistral3`, `qwen2`, `qwen3` and `gemma3`; see
//! `arch`) from a file path or an `hf://OWNER/NAME/FILE.gguf`
//! spec (the header read and checked here, in candle's types), building their tokenizer and chat template from the GGUF's own
//! metadata, running the model on its quantised weights, generating n answers for a conversation, and
//! [`LocalBackend`], which puts a loaded model behind `nmb_requests::Backend` with one batch for every request.
//! It does not own prompts (`nmb-plan`), scheduling or retries (`nmb-requests`), or storage (`nmb-store`).
//!
//! Behaviour the rest of nmb relies on:
//! - **Tokenizer.** A `tokenizer.json` next to the GGUF wins. Otherwise the GGUF's `tokenizer.ggml.*` metadata
//!   builds it: model `llama` is llama.cpp's SentencePiece tokenizer (module `spm`: best-scoring pair merged
//!   first over the GGUF's scores, byte-fallback `<0xXX>` tokens, the optional space prefix; Gemma, Llama 2);
//!   model `gpt2` is a byte-level BPE `tokenizers::Tokenizer` whose pre-tokenizer follows `tokenizer.ggml.pre`
//!   (`gpt2`, `smollm` and its llama.cpp group, `llama3`/`llama-bpe`, `qwen2`). Control and user-defined token
//!   strings in text become their tokens. BOS goes in front of a prompt as llama.cpp decides
//!   (`tokenizer.ggml.add_bos_token`, by default on for SentencePiece and Llama 3), unless the template wrote it.
//!   Other models and pre-tokenizers are refused with a typed error that says to add a `tokenizer.json`.
//!   [`Tokenizer::open`] builds the tokenizer of a GGUF without its weights.
//! - **Chat template.** `tokenizer.chat_template` rendered with minijinja under Hugging Face's settings
//!   (`trim_blocks`, `lstrip_blocks`, `raise_exception`, Python string methods), with `messages`,
//!   `add_generation_prompt = true`, `bos_token`, `eos_token` and a request's `chat_template_kwargs` (from
//!   `GenParams::extra_body`, e.g. Qwen3's `enable_thinking`; any other extra-body field is refused). A GGUF without
//!   one gets a built-in template by architecture ([`TemplateSource`]): Gemma's turns for the Gemma family
//!   ([`GEMMA_TEMPLATE`], llama.cpp's `gemma` template: the system prompt goes into the first user turn), ChatML
//!   otherwise. llama.cpp's server uses ChatML for every model without a template, Gemma included; nmb does not,
//!   since a Gemma model never saw ChatML.
//! - **Files from outside.** Nothing a GGUF header claims is used before it is checked (module `gguf`): counts
//!   and lengths against the bytes left in the file, the alignment, each tensor's extent (checked arithmetic,
//!   inside the file, apart from the others) and shape (against the architecture's hyperparameters and the
//!   vocabulary); the vocabulary must have tokens and its special ids must be among them. Each refusal names the
//!   key or tensor. The chat template renders under minijinja's fuel and an output cap ([`TEMPLATE_FUEL`],
//!   [`TEMPLATE_OUTPUT_CAP`], both growing with the conversation) and is rendered once at load, so a hostile one
//!   is refused before any request. No error text carries a backtrace, whatever `RUST_BACKTRACE` says.
//! - **Images.** Without a projector, a chat's image parts are replaced by [`IMAGE_OMITTED_MARKER`] where they
//!   stood, and [`LocalCompletion::images_dropped`] counts them so the run manifest can record it. With one
//!   ([`LocalModel::with_projector`], refused when its output width is not the model's), the model sees them as
//!   llama.cpp's server with `mtmd` does: parts joined as the server joins them, a random marker per image in
//!   the rendered prompt, the text split there and each piece tokenised on its own, each image decoded (bad
//!   bytes fail that request, [`LocalError::Image`]), encoded on the engine's pool and laid out per projector
//!   type ([`Projector::image_parts`]: Gemma 3's `<start_of_image>`, embeddings, `<end_of_image>`); image
//!   positions count against the context, and the prompt cache compares them by the image's hash.
//!   Vision projectors (`mmproj` GGUFs, module `vision`) load as [`Projector`] (types `gemma3` and `idefics3`,
//!   any other refused with the list; hostile files refused at load under the model files' header checks and
//!   bounds of their own) and encode an image as llama.cpp's `mtmd` does on the engine's kernels and thread
//!   pool ([`LocalWeights::install`]); [`LocalWeights::parts_logits`] reads a prompt of token runs and image
//!   embeddings ([`PromptPart`]) as `mtmd` decodes it. Idefics3 images are sliced into tiles and a global image
//!   and laid out with their row and column tokens as `mtmd` does ([`Projector::idefics3_parts`]). For both
//!   types the embeddings and the logits after prompts with images equal llama.cpp's to the bit.
//! - **JSON output.** An [`OutputFormat::Json`] request is decoded under its schema's grammar (any JSON object
//!   without a schema), as llama.cpp's server decodes a `response_format`: the schema becomes a GBNF grammar by
//!   the rules of llama.cpp's `json-schema-to-grammar` ([`LocalModel::schema_grammar`]), every sample keeps
//!   llama.cpp's grammar stacks, a token is sampled first and, only when the grammar refuses it, sampled again
//!   from the tokens it allows; the end of the turn is allowed only where the grammar can end (module
//!   `grammar`). A schema outside the subset is [`LocalError::InvalidParams`]. [`LocalModel::without_grammar`]
//!   turns it off.
//! - **Sampling.** Temperature 0 is greedy; otherwise temperature with top-p (every token when `top_p` is 1),
//!   from a SplitMix64 stream seeded from [`GenParams::seed`], so a given seed gives the same text; with no seed
//!   a random one is drawn and reported in [`LocalCompletion::seed`]. Generation stops at the end-of-turn
//!   tokens (eos, `<|im_end|>` and the like) or after `max_tokens`.
//! - **Context.** The window is the GGUF's `{arch}.context_length`. A prompt that does not fit is
//!   [`LocalError::ContextTooLong`] (the `context_length` error class); an answer that reaches the end of the
//!   window finishes with `length`.
//! - **Weights and speed.** The engine is this crate's own (modules `engine`, `quant`, `attention`, `activation`): weights
//!   stay in the file's Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, F16 or BF16 blocks (Q2_K and Q3_K are
//!   requantised to Q8_0 at load), activations are
//!   quantised as llama.cpp quantises them, the dot products use AVX2 when the CPU has it (the formats other
//!   than the K-quants with AVX-512 VNNI's byte dot product where it has that too, unless `NMB_LOCAL_AVX2=1`;
//!   chosen at run time;
//!   `NMB_LOCAL_SCALAR=1` forces the scalar fallback), and matrix products are spread over a rayon pool of
//!   `NMB_THREADS` threads (default: every core). On AVX2 CPUs every tensor is llama.cpp's AVX2 build's to the
//!   bit (attention follows its CPU flash attention step for step), so the logits after a prompt and the
//!   greedy answers equal llama.cpp's on the same GGUF (tested against its library and its server). A prompt is
//!   read in the chunks llama.cpp's server reads it in: 512 tokens from the start of each batch of 2048, and for
//!   a model with sliding-window layers (Gemma 3) a batch ends where 516 and where 4 prompt tokens are left (the
//!   server's context checkpoints), which rounds differently from one batch (module `attention`). The scalar
//!   fallback follows ggml's generic code and may round differently, except for the formats other than Q4_1 and
//!   Q8_0, whose one kernel gives llama.cpp's AVX2 results on every CPU.
//! - **n samples and batching.** [`LocalModel::generate_n`] prefills a prompt once and decodes its n samples
//!   together, each with its own seeded stream (sample `i` uses seed + `i`). [`LocalBackend`] keeps one batch for
//!   all requests: a request that arrives while others decode joins at the next step, up to a KV-cache memory
//!   limit ([`LocalBackend::with_kv_limit`]). Its prompt cache lets a request skip the start it shares with a
//!   prompt read before (a consult's earlier turns), only where that computes exactly what reading it would
//!   ([`LocalBackend::with_prompt_cache`]).
//! - **Weights alone.** [`LocalWeights`] loads the weights without the tokenizer or chat template, for the
//!   logits of token-id prompts (comparing with llama.cpp on a file whose tokenizer is not built here).
//! - **Sharing.** [`LocalModel`] is `Send + Sync` and meant to sit in an `Arc`; every generation keeps its own
//!   KV cache, so concurrent calls are safe, though on a CPU they only compete for cores: send them through
//!   [`LocalBackend`], which batches them.

mod activation;
mod arch;
mod attention;
mod backend;
mod batch;
mod engine;
mod error;
mod gguf;
mod grammar;
mod quant;
mod sample;
mod scratch;
mod spec;
mod spm;
mod template;
mod tokenizer;
mod vision;
mod weights;

use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use nmb_chat::{GenParams, Message, OutputFormat};
use serde::Serialize;
use sha2::{Digest, Sha256};

pub use backend::{BatchStats, LocalBackend};
pub use batch::TokenRun;
pub use error::LocalError;
pub use spec::resolve_model_path;
pub use template::{
    RenderedPrompt, TemplateKwargs, TemplateSource, CHATML_TEMPLATE, GEMMA_TEMPLATE,
    IMAGE_OMITTED_MARKER, TEMPLATE_FUEL, TEMPLATE_OUTPUT_CAP,
};
pub use tokenizer::{Tokenizer, TokenizerSource};
pub use vision::{
    Projector, ProjectorKind, PromptPart, RgbImage, GEMMA3_IMAGE_END, GEMMA3_IMAGE_START,
    MAX_ACTIVATION_BYTES, PROJECTOR_TYPES,
};
pub use weights::LocalWeights;

use batch::{Batch, Constraint, Done, ImageRun, Job};
use engine::Engine;
use gguf::Meta;
use sample::Sampling;
use template::ChatTemplate;

/// What a model identity records for a `local:` model that decodes JSON tasks under their schema's grammar:
/// llama.cpp's JSON-schema-to-GBNF conversion and its grammar sampler.
pub const GRAMMAR_IDENTITY: &str = "json-schema GBNF (llama.cpp rules)";

/// End-of-turn tokens of common chat formats; each one present in the vocabulary also stops generation.
const END_OF_TURN_TOKENS: [&str; 6] = [
    "<|im_end|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|endoftext|>",
    "<end_of_turn>",
    "<|end|>",
];

/// Why generation stopped, as the OpenAI-style `finish_reason` string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    /// The model produced an end-of-turn token.
    Stop,
    /// `max_tokens` or the end of the context window was reached.
    Length,
}

impl FinishReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }
}

/// One generated answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocalCompletion {
    /// The answer, special tokens removed. Untrusted model output.
    pub text: String,
    pub finish_reason: FinishReason,
    /// Prompt tokens, after the chat template (and BOS, when the model adds one).
    pub tokens_in: usize,
    /// Sampled tokens, counting the end-of-turn token when generation stopped on one.
    pub tokens_out: usize,
    /// Image parts left out because the model is text-only.
    pub images_dropped: usize,
    /// This sample's seed: the given one (or the random one drawn when none was given) plus its index.
    pub seed: u64,
    /// Wall time of the whole call: template, tokenizing, prefill and decoding (shared by a call's samples).
    pub latency: Duration,
    /// Of `latency`, the time spent running the prompt through the model before the first sampled token.
    pub prefill: Duration,
    /// Of `tokens_in`, the tokens taken from the prompt cache (read before, by an earlier request) rather than
    /// run through the model again.
    pub tokens_in_reused: usize,
}

/// What a run manifest may want to record about the loaded model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelInfo {
    pub model_id: String,
    pub path: PathBuf,
    pub architecture: String,
    pub context_length: usize,
    pub vocab_size: usize,
    pub tokenizer: String,
    /// True when the chat template came from the GGUF, false when a built-in one was used instead.
    pub chat_template_from_gguf: bool,
    /// Which template: `gguf`, `builtin:gemma` or `builtin:chatml` ([`TemplateSource::label`]).
    pub chat_template: String,
    pub chat_template_sha256: String,
    /// The weight formats as held in memory (`Q4_1`, `Q8_0`, `Q5_0`, `Q4_K`, ..., or `Q8_0 (from Q3K)` for a
    /// requantised tensor).
    pub weights: String,
    /// The dot-product code this CPU runs: `avx512vnni`, `avx2` or `scalar`.
    pub kernel: String,
}

/// A loaded GGUF model, its tokenizer and chat template. See the crate docs for sharing and behaviour.
pub struct LocalModel {
    path: PathBuf,
    model_id: String,
    engine: Engine,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    stop_ids: Vec<u32>,
    context_length: usize,
    architecture: String,
    load_time: Duration,
    /// Whether a request with a JSON schema is decoded under its grammar ([`LocalModel::without_grammar`]).
    grammar: bool,
    /// The tokens as the grammar reads them, built on the first constrained request.
    grammar_vocab: OnceLock<Arc<grammar::Vocab>>,
    /// The vision projector its requests' images go through ([`LocalModel::with_projector`]); without one,
    /// images are dropped.
    projector: Option<Arc<Projector>>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel")
            .field("model_id", &self.model_id)
            .field("path", &self.path)
            .field("context_length", &self.context_length)
            .finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Resolves a spec (a path or `hf://OWNER/NAME/FILE.gguf`, see [`resolve_model_path`]) and loads it.
    pub fn open(spec: &str) -> Result<LocalModel, LocalError> {
        LocalModel::load(&resolve_model_path(spec)?)
    }

    /// Loads a GGUF file: weights onto the CPU, tokenizer and chat template from its metadata.
    pub fn load(path: &Path) -> Result<LocalModel, LocalError> {
        let started = Instant::now();
        let (mut file, content) = gguf::read_content(path)?;
        let meta = Meta {
            path,
            map: &content.metadata,
        };
        // Checked before the tokenizer, so an unsupported file says so first.
        let arch = arch::Arch::read(&meta)?;
        let architecture = arch.name().to_string();
        let override_file = gguf::sibling_tokenizer(path);
        let tokenizer = tokenizer::load(&meta, override_file.as_deref())?;
        let tokens = SpecialTokens::read(&meta, &tokenizer)?;
        let template = ChatTemplate::new(
            path,
            meta.opt_string("tokenizer.chat_template")?,
            &architecture,
            tokens.bos_text.clone(),
            tokens.eos_text.clone(),
        )?;
        // Rendered once now, so that a template past its budget is refused before any request.
        template.check()?;
        let context_length = context_length(&meta, arch)?;
        let model_id = model_id(
            path,
            &mut file,
            content.tensor_data_offset,
            override_file.as_deref(),
        )?;
        let mut engine = Engine::load(path, &meta, &content, &mut file)?;
        engine.context = context_length;
        Ok(LocalModel {
            path: path.to_path_buf(),
            model_id,
            engine,
            tokenizer,
            template,
            stop_ids: tokens.stop_ids,
            context_length,
            architecture,
            load_time: started.elapsed(),
            grammar: true,
            grammar_vocab: OnceLock::new(),
            projector: None,
        })
    }

    /// A stable identifier for cache keys: `FILE_NAME@HASH`, where the hash covers the GGUF header, its length,
    /// samples of its tensor data and any `tokenizer.json` override (not the whole file, to stay cheap).
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The context window in tokens (prompt plus answer).
    pub fn context_length(&self) -> usize {
        self.context_length
    }

    /// Lowers the context window to `tokens` (never above what the model supports), e.g. to bound memory.
    pub fn with_context_length(mut self, tokens: usize) -> LocalModel {
        self.context_length = self.context_length.min(tokens);
        self.engine.context = self.context_length;
        self
    }

    /// How long [`LocalModel::load`] took.
    pub fn load_time(&self) -> Duration {
        self.load_time
    }

    pub fn info(&self) -> ModelInfo {
        ModelInfo {
            model_id: self.model_id.clone(),
            path: self.path.clone(),
            architecture: self.architecture.clone(),
            context_length: self.context_length,
            vocab_size: self.tokenizer.vocab_size(),
            tokenizer: self.tokenizer.source().label(),
            chat_template_from_gguf: self.template.kind == TemplateSource::Gguf,
            chat_template: self.template.kind.label().to_string(),
            chat_template_sha256: hex::encode(Sha256::digest(self.template.source.as_bytes())),
            weights: self.engine.formats.join(","),
            kernel: self.engine.kernel.name().to_string(),
        }
    }

    pub fn tokenizer_source(&self) -> &TokenizerSource {
        self.tokenizer.source()
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// Tokenizes text as it would appear inside a prompt (special-token strings become their tokens; no BOS).
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, LocalError> {
        self.tokenizer.encode(text)
    }

    /// Turns token ids back into text; `skip_special` drops control tokens such as `<|im_end|>`.
    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, LocalError> {
        self.tokenizer.decode(ids, skip_special)
    }

    /// The conversation as the model will see it: chat template applied, images replaced by the marker.
    pub fn render_prompt(&self, messages: &[Message]) -> Result<RenderedPrompt, LocalError> {
        self.template.render(messages, &TemplateKwargs::new())
    }

    /// [`LocalModel::render_prompt`] with further template variables (`chat_template_kwargs`).
    pub fn render_prompt_with(
        &self,
        messages: &[Message],
        kwargs: &TemplateKwargs,
    ) -> Result<RenderedPrompt, LocalError> {
        self.template.render(messages, kwargs)
    }

    /// Which chat template the model renders with.
    pub fn template_source(&self) -> TemplateSource {
        self.template.kind
    }

    /// The prompt's token ids, with BOS prepended when the GGUF asks for it and the template did not add it.
    pub fn prompt_tokens(&self, prompt: &str) -> Result<Vec<u32>, LocalError> {
        self.tokenizer.encode_prompt(prompt)
    }

    /// Generates one answer; a JSON `output` is decoded under its schema's grammar (see the crate docs).
    pub fn generate(
        &self,
        messages: &[Message],
        params: &GenParams,
        output: &OutputFormat,
    ) -> Result<LocalCompletion, LocalError> {
        let mut all = self.generate_n(messages, params, output, 1)?;
        Ok(all.remove(0))
    }

    /// Generates `n` answers to one conversation, prefilled once and decoded together (see the crate docs).
    pub fn generate_n(
        &self,
        messages: &[Message],
        params: &GenParams,
        output: &OutputFormat,
        n: usize,
    ) -> Result<Vec<LocalCompletion>, LocalError> {
        let started = Instant::now();
        let request = self.request(messages, params, output, n)?;
        let done = self.run_alone(request.job, ());
        self.completions(request.shape, done, started)
    }

    /// `n` samples of a prompt given as token ids, decoded together. Temperature 0 is greedy.
    pub fn sample_tokens(
        &self,
        prompt: &[u32],
        params: &GenParams,
        n: usize,
    ) -> Result<Vec<TokenRun>, LocalError> {
        self.sample_tokens_timed(prompt, params, n)
            .map(|(runs, _)| runs)
    }

    /// [`LocalModel::sample_tokens`], with how long the prefill and the whole call took (for benchmarks).
    pub fn sample_tokens_timed(
        &self,
        prompt: &[u32],
        params: &GenParams,
        n: usize,
    ) -> Result<(Vec<TokenRun>, Timings), LocalError> {
        self.sample_tokens_as(prompt, params, n, &OutputFormat::Text)
    }

    /// [`LocalModel::sample_tokens_timed`] with an output format: a JSON one is decoded under its schema's
    /// grammar, as [`LocalModel::generate_n`] decodes it.
    pub fn sample_tokens_as(
        &self,
        prompt: &[u32],
        params: &GenParams,
        n: usize,
        output: &OutputFormat,
    ) -> Result<(Vec<TokenRun>, Timings), LocalError> {
        let job = self.job(prompt.to_vec(), Vec::new(), params, n, output)?;
        let done = self.run_alone(job, ());
        let timings = Timings {
            prefill: done.prefill,
            total: done.latency,
        };
        let runs = done.result.map_err(|m| self.inference_error(m))?;
        Ok((runs, timings))
    }

    /// The job a conversation asks for, checked, with what the completions must report about it.
    pub(crate) fn request(
        &self,
        messages: &[Message],
        params: &GenParams,
        output: &OutputFormat,
        n: usize,
    ) -> Result<Request, LocalError> {
        if let Some(projector) = &self.projector {
            return self.request_seeing(projector, messages, params, output, n);
        }
        let rendered = self.render_prompt_with(messages, &template_kwargs(params)?)?;
        let prompt = self.prompt_tokens(&rendered.text)?;
        Ok(Request {
            shape: PromptShape {
                tokens_in: prompt.len(),
                images_dropped: rendered.images_dropped,
            },
            job: self.job(prompt, Vec::new(), params, n, output)?,
        })
    }

    /// [`LocalModel::request`] with a projector: the conversation rendered with a marker for each image, split
    /// there, each image decoded and encoded into the parts its projector type places (see `vision::layout`).
    fn request_seeing(
        &self,
        projector: &Projector,
        messages: &[Message],
        params: &GenParams,
        output: &OutputFormat,
        n: usize,
    ) -> Result<Request, LocalError> {
        let marker = media_marker();
        let rendered = self
            .template
            .render_media(messages, &template_kwargs(params)?, marker)?;
        let images: Vec<&nmb_chat::ImagePart> = messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                nmb_chat::Part::Image(i) => Some(i),
                nmb_chat::Part::Text(_) => None,
            })
            .collect();
        let tokenize = |text: &str| self.tokenizer.encode(text);
        // Per image part of the prompt, the key the prompt cache compares it by.
        let mut hashes = Vec::new();
        let parts = vision::split_prompt(
            &rendered.text,
            marker,
            images.len(),
            self.tokenizer.bos(),
            &tokenize,
            |i| {
                let index = i + 1;
                let rgb = vision::decode_image(&images[i].bytes)
                    .map_err(|message| LocalError::Image { index, message })?;
                let parts = self
                    .engine
                    .install(|| projector.image_parts(&rgb, &tokenize))
                    .map_err(|e| match e {
                        LocalError::Image { message, .. } => LocalError::Image { index, message },
                        other => other,
                    })?;
                let tiles = parts
                    .iter()
                    .filter(|p| matches!(p, PromptPart::Image { .. }))
                    .count();
                hashes.extend((0..tiles).map(|t| format!("{}#{t}", images[i].sha256)));
                Ok(parts)
            },
        )?;
        let (prompt, runs) = flatten(parts, hashes, self.engine.width());
        Ok(Request {
            shape: PromptShape {
                tokens_in: prompt.len(),
                images_dropped: 0,
            },
            job: self.job(prompt, runs, params, n, output)?,
        })
    }

    fn job(
        &self,
        prompt: Vec<u32>,
        images: Vec<ImageRun>,
        params: &GenParams,
        n: usize,
        output: &OutputFormat,
    ) -> Result<Job, LocalError> {
        let sampling = sampling(params)?;
        let constraint = self.constraint(output)?;
        if n == 0 {
            return Err(LocalError::InvalidParams {
                field: "n",
                message: "expected at least 1 sample".into(),
            });
        }
        no_empty_prompt(&prompt)?;
        if prompt.len() >= self.context_length {
            return Err(LocalError::ContextTooLong {
                prompt_tokens: prompt.len(),
                context_length: self.context_length,
            });
        }
        self.check_ids(&prompt)?;
        let budget = (params.max_tokens as usize).min(self.context_length - prompt.len());
        Ok(Job {
            prompt,
            images,
            n,
            sampling,
            seed: params.seed.unwrap_or_else(random_seed),
            budget,
            constraint,
        })
    }

    /// The grammar a request's output format asks for: a JSON schema's (any JSON object without one, as
    /// llama.cpp's server reads `json_object`), or none for text or when grammar is off.
    fn constraint(&self, output: &OutputFormat) -> Result<Option<Constraint>, LocalError> {
        let OutputFormat::Json { schema } = output else {
            return Ok(None);
        };
        if !self.grammar {
            return Ok(None);
        }
        let any_object = serde_json::json!({});
        let schema = schema.as_ref().unwrap_or(&any_object);
        let grammar =
            grammar::Grammar::from_schema(schema).map_err(|message| LocalError::InvalidParams {
                field: "response_format",
                message: format!(
                    "{message}; grammar-constrained decoding cannot follow it (--no-grammar decodes without)"
                ),
            })?;
        let vocab = self.grammar_vocab.get_or_init(|| {
            Arc::new(grammar::Vocab::new(
                self.tokenizer.pieces(),
                self.stop_ids.clone(),
            ))
        });
        Ok(Some(Constraint {
            grammar: Arc::new(grammar),
            vocab: vocab.clone(),
        }))
    }

    /// Sees images through `projector` (an `mmproj` GGUF, see [`Projector`]): a request's images are decoded,
    /// encoded and placed in its prompt as llama.cpp's server with `mtmd` places them, instead of being dropped.
    /// Refused when the projector's output width is not the model's embedding width.
    pub fn with_projector(mut self, projector: Projector) -> Result<LocalModel, LocalError> {
        let (theirs, ours) = (projector.output_width(), self.engine.width());
        if theirs != ours {
            return Err(LocalError::Projector {
                model: self.path.clone(),
                projector: projector.path().to_path_buf(),
                message: format!(
                    "the projector's output width is {theirs}, the model's embedding width {ours}; a projector \
                     made for this model has its width"
                ),
            });
        }
        self.projector = Some(Arc::new(projector));
        Ok(self)
    }

    /// The vision projector, when one is loaded.
    pub fn projector(&self) -> Option<&Projector> {
        self.projector.as_deref()
    }

    /// Decodes every request without grammar, whatever output format it asks for (`--no-grammar`).
    pub fn without_grammar(mut self) -> LocalModel {
        self.grammar = false;
        self
    }

    /// Whether requests with a JSON schema are decoded under its grammar.
    pub fn grammar(&self) -> bool {
        self.grammar
    }

    /// The GBNF grammar a JSON schema becomes, by the rules of llama.cpp's `json-schema-to-grammar` (rule names
    /// and text as it writes them, one `name ::= rule` line per rule, sorted by name).
    pub fn schema_grammar(schema: &serde_json::Value) -> Result<String, LocalError> {
        grammar::schema::to_grammar(schema).map_err(|e| LocalError::InvalidParams {
            field: "response_format",
            message: e.to_string(),
        })
    }

    /// Refuses token ids the model has no embedding for (a caller's ids, never the tokenizer's).
    fn check_ids(&self, prompt: &[u32]) -> Result<(), LocalError> {
        match prompt.iter().find(|&&t| t as usize >= self.engine.vocab()) {
            None => Ok(()),
            Some(&bad) => Err(LocalError::InvalidParams {
                field: "prompt",
                message: format!(
                    "token id {bad} is outside the model's vocabulary of {} tokens",
                    self.engine.vocab()
                ),
            }),
        }
    }

    /// Runs one job in a batch of its own until it finishes.
    fn run_alone<T>(&self, job: Job, tag: T) -> Done<T> {
        let mut batch = self.batch();
        batch.admit(tag, job);
        loop {
            if let Some(done) = batch.step().pop() {
                return done;
            }
        }
    }

    /// An empty batch on this model, for callers that run several jobs together.
    pub(crate) fn batch<T>(&self) -> Batch<'_, T> {
        Batch::new(&self.engine, &self.stop_ids)
    }

    /// The completions of a finished job.
    pub(crate) fn completions<T>(
        &self,
        shape: PromptShape,
        done: Done<T>,
        started: Instant,
    ) -> Result<Vec<LocalCompletion>, LocalError> {
        let runs = done.result.map_err(|m| self.inference_error(m))?;
        runs.into_iter()
            .map(|run| {
                Ok(LocalCompletion {
                    text: self.decode(&run.tokens, true)?,
                    finish_reason: run.finish,
                    tokens_in: shape.tokens_in,
                    tokens_out: run.tokens.len() + usize::from(run.finish == FinishReason::Stop),
                    images_dropped: shape.images_dropped,
                    seed: run.seed,
                    latency: started.elapsed(),
                    prefill: done.prefill,
                    tokens_in_reused: done.reused,
                })
            })
            .collect()
    }

    /// The next-token logits after `prompt` (token ids), one per vocabulary entry.
    pub fn prompt_logits(&self, prompt: &[u32]) -> Result<Vec<f32>, LocalError> {
        no_empty_prompt(prompt)?;
        if prompt.len() > self.context_length {
            return Err(LocalError::ContextTooLong {
                prompt_tokens: prompt.len(),
                context_length: self.context_length,
            });
        }
        self.check_ids(prompt)?;
        Ok(self.engine.prompt_logits(prompt))
    }

    /// Never stop on end-of-turn tokens: every answer runs to `max_tokens`. For benchmarks, which must decode a
    /// fixed number of tokens as llama.cpp's `ignore_eos` does.
    pub fn without_stop_tokens(mut self) -> LocalModel {
        self.stop_ids.clear();
        self
    }

    /// Threads the model runs on (`NMB_THREADS`, default one per core).
    pub fn threads(&self) -> usize {
        self.engine.threads()
    }

    fn inference_error(&self, message: String) -> LocalError {
        LocalError::Inference {
            path: self.path.clone(),
            message,
        }
    }
}

/// The text that stands for an image in a rendered prompt until it is split there: random per process, as
/// llama.cpp's server makes its own, so text in a conversation cannot pass for an image.
fn media_marker() -> &'static str {
    static MARKER: OnceLock<String> = OnceLock::new();
    MARKER.get_or_init(|| format!("<__media_{:016x}__>", random_seed()))
}

/// Prompt parts as one run of token ids, a placeholder (token 0) at each image position, and the images with
/// where they stand; `hashes` name the image parts in order.
fn flatten(parts: Vec<PromptPart>, hashes: Vec<String>, width: usize) -> (Vec<u32>, Vec<ImageRun>) {
    let mut prompt = Vec::new();
    let mut images = Vec::new();
    let mut hashes = hashes.into_iter();
    for part in parts {
        match part {
            PromptPart::Tokens(ids) => prompt.extend(ids),
            PromptPart::Image { embd, non_causal } => {
                let len = embd.len() / width;
                images.push(ImageRun {
                    start: prompt.len(),
                    len,
                    embd: embd.into(),
                    non_causal,
                    hash: hashes.next().unwrap_or_default().into(),
                });
                prompt.extend(std::iter::repeat_n(0, len));
            }
        }
    }
    (prompt, images)
}

/// Refuses a prompt of no tokens as what it is, not as a prompt too long for the window.
fn no_empty_prompt(prompt: &[u32]) -> Result<(), LocalError> {
    match prompt.is_empty() {
        true => Err(LocalError::InvalidParams {
            field: "prompt",
            message: "expected at least one token; the chat template and tokenizer gave none"
                .into(),
        }),
        false => Ok(()),
    }
}

/// How long a generation took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timings {
    /// Running the prompt through the model and sampling the first tokens.
    pub prefill: Duration,
    /// The whole generation, prefill included.
    pub total: Duration,
}

/// A checked request: its job, and what its completions report about the prompt.
pub(crate) struct Request {
    pub job: Job,
    pub shape: PromptShape,
}

/// What every completion of a request reports about its prompt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PromptShape {
    tokens_in: usize,
    images_dropped: usize,
}

/// BOS/EOS texts and every token id that ends a turn.
struct SpecialTokens {
    bos_text: String,
    eos_text: String,
    stop_ids: Vec<u32>,
}

impl SpecialTokens {
    fn read(meta: &Meta<'_>, tok: &Tokenizer) -> Result<SpecialTokens, LocalError> {
        let id = |key: &str| -> Result<Option<u32>, LocalError> {
            match meta.opt_uint(key)? {
                None => Ok(None),
                Some(v) => u32::try_from(v)
                    .map(Some)
                    .map_err(|_| LocalError::Metadata {
                        path: meta.path.to_path_buf(),
                        key: key.into(),
                        expected: "a token id that fits in 32 bits".into(),
                    }),
            }
        };
        let vocab = tok.vocab_size();
        let in_vocab = |key: &str| -> Result<Option<u32>, LocalError> {
            match id(key)? {
                Some(i) if i as usize >= vocab => Err(LocalError::Metadata {
                    path: meta.path.to_path_buf(),
                    key: key.into(),
                    expected: format!(
                        "a token id below the vocabulary's {vocab} tokens, found {i}"
                    ),
                }),
                found => Ok(found),
            }
        };
        let bos_id = in_vocab("tokenizer.ggml.bos_token_id")?;
        let eos_id = in_vocab("tokenizer.ggml.eos_token_id")?;
        let eot_id = in_vocab("tokenizer.ggml.eot_token_id")?;
        let text = |id: Option<u32>| id.and_then(|i| tok.id_to_token(i)).unwrap_or_default();
        let mut stop_ids: Vec<u32> = [eos_id, eot_id].into_iter().flatten().collect();
        stop_ids.extend(END_OF_TURN_TOKENS.iter().filter_map(|t| tok.token_to_id(t)));
        stop_ids.sort_unstable();
        stop_ids.dedup();
        Ok(SpecialTokens {
            bos_text: text(bos_id),
            eos_text: text(eos_id),
            stop_ids,
        })
    }
}

pub(crate) fn context_length(meta: &Meta<'_>, arch: arch::Arch) -> Result<usize, LocalError> {
    let key = arch.key("context_length");
    match arch::hyperparameter(meta, &key)? {
        Some(n) if n >= 2 => Ok(n),
        found => Err(LocalError::Metadata {
            path: meta.path.to_path_buf(),
            key,
            expected: format!(
                "a context window of at least 2 tokens (a prompt and an answer), found {}",
                found.map_or_else(|| "none".to_string(), |n| n.to_string())
            ),
        }),
    }
}

fn model_id(
    path: &Path,
    file: &mut std::fs::File,
    data_offset: u64,
    tokenizer_json: Option<&Path>,
) -> Result<String, LocalError> {
    let mut hash = gguf::content_hash(path, file, data_offset)?;
    if let Some(tj) = tokenizer_json {
        let bytes = std::fs::read(tj).map_err(|e| gguf::io_err(tj, e))?;
        let mut h = Sha256::new();
        h.update(hash.as_bytes());
        h.update(&bytes);
        hash = hex::encode(h.finalize());
    }
    Ok(format!("{}@{}", gguf::file_label(path), &hash[..16]))
}

/// llama.cpp server's sampling defaults (`common_params_sampling`: temp 0.80, top_p 0.95).
const LLAMA_CPP_TEMPERATURE: f64 = 0.8;
const LLAMA_CPP_TOP_P: f64 = 0.95;

/// Maps the request parameters to a sampling rule, rejecting values that have no meaning.
fn sampling(params: &GenParams) -> Result<Sampling, LocalError> {
    let bad = |field, message: String| Err(LocalError::InvalidParams { field, message });
    // A parameter left unsent takes llama.cpp server's default, as it would there.
    let t = if params.sends_temperature() {
        params.temperature
    } else {
        LLAMA_CPP_TEMPERATURE
    };
    let p = if params.sends_top_p() {
        params.top_p
    } else {
        LLAMA_CPP_TOP_P
    };
    template_kwargs(params)?;
    if !t.is_finite() || t < 0.0 {
        return bad(
            "temperature",
            format!("expected a finite number >= 0, got {t}"),
        );
    }
    if !p.is_finite() || p <= 0.0 || p > 1.0 {
        return bad("top_p", format!("expected a number in (0, 1], got {p}"));
    }
    if params.max_tokens == 0 {
        return bad("max_tokens", "expected at least 1".into());
    }
    Ok(if t == 0.0 {
        Sampling::Greedy
    } else {
        Sampling::Nucleus {
            temperature: t as f32,
            top_p: p as f32,
        }
    })
}

/// The template variables a request sends the way vLLM, SGLang and llama.cpp's server take them:
/// `--extra-body '{"chat_template_kwargs": {...}}'`. Any other extra-body field is refused, since there is no
/// request body to put it in.
fn template_kwargs(params: &GenParams) -> Result<TemplateKwargs, LocalError> {
    let Some(extra) = &params.extra_body else {
        return Ok(TemplateKwargs::new());
    };
    let mut kwargs = TemplateKwargs::new();
    for (key, value) in extra {
        match (key.as_str(), value) {
            ("chat_template_kwargs", serde_json::Value::Object(vars)) => kwargs = vars.clone(),
            ("chat_template_kwargs", other) => {
                return Err(LocalError::InvalidParams {
                    field: "extra_body",
                    message: format!(
                        "`chat_template_kwargs` must be an object of template variables, e.g. \
                         {{\"enable_thinking\": false}}; got {other}"
                    ),
                })
            }
            (other, _) => {
                return Err(LocalError::InvalidParams {
                    field: "extra_body",
                    message: format!(
                        "the in-process engine has no request body, so of --extra-body it reads only \
                         `chat_template_kwargs` (variables for the chat template); `{other}` is for servers"
                    ),
                })
            }
        }
    }
    Ok(kwargs)
}

fn random_seed() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(Instant::now())
}
