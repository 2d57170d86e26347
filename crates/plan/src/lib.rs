//! From suite tasks to model conversations.
//!
//! This crate owns the backend-neutral chat representation ([`chat`]), the prompt templates (data, versioned
//! and hashed: [`Template`]), the input modes of the paper's ablation ([`InputMode`]: `full`, `text`,
//! `images`), the answer shape each family asks for ([`output`]), and the request plan: which conversations,
//! with how many samples and turns, a run must send ([`plan()`], [`PlannedTask`], [`conversation_for_turn`]),
//! with a dry-run estimate ([`PlanSummary`], [`estimate`]). It does not send anything (`nmb-requests`), store
//! anything (`nmb-store`) or parse answers (`nmb-score`). Images are read lazily, one task at a time, through a
//! bounded [`ImageCache`]; DICOM and NIfTI images are refused for now with an error naming the image.
//!
//! # Templates
//!
//! A template is a minijinja source with three named blocks, each rendered to one message:
//! `system` (the system message; omitted if it renders empty), `user` (turn 0: the case evidence and the
//! opening question) and `turn` (each later turn of a multi-turn task: the newly revealed evidence and that
//! turn's question). Built-in templates: `depth-v1` (differential, lesion, rationale), `breadth-closed-v1`,
//! `breadth-open-v1`, `breadth-mcq-v1`, `neurovlm-v1` (structured), and the prompt variants below. A user template file (`--template FILE`) may start with
//! `{# nmb-template: id=NAME version=V #}`; its hash is computed like the built-ins' (see [`template_hash`]).
//! Blocks are rendered with `trim_blocks` and `lstrip_blocks`; runs of blank lines collapse to one and each
//! text part is trimmed. Undefined variables are errors.
//!
//! ## Images
//!
//! Templates produce text, but messages interleave text and images. A template places each image of the
//! current message with `{{ image(img.index) }}` (or `{{ img.marker }}`), which emits a marker; the renderer
//! splits the text at the markers into text and image parts, in the order the template put them. Each image of
//! `images` must be placed exactly once (dropping or repeating one is an error). Marker delimiters are
//! private-use characters that are removed from all case data, so case text cannot forge a marker.
//!
//! ## Variables
//!
//! Every block gets:
//!
//! | variable | meaning |
//! |---|---|
//! | `template.id`, `template.version` | this template |
//! | `task.id`, `task.family`, `task.level` | family: `differential`, `lesion`, `rationale`, `closed_vqa`, `open_vqa`, `multiple_choice`; level: `direct`, `complex`, `multi_turn` |
//! | `task.question` | the opening question, verbatim (may be Chinese) |
//! | `task.options` | list of `{letter, text}` (multiple choice) |
//! | `task.yes_no` | the question opens with an auxiliary verb ("Is", "Does", ...) and has no " or " |
//! | `task.turns` | number of turns, 1 for single-turn tasks |
//! | `case.id`, `case.language`, `case.metadata` | the case |
//! | `case.ehr` | list of `{key, value}` in the case's order (empty in `images` mode) |
//! | `case.notes` | clinical notes (empty in `images` mode) |
//! | `inputs.mode`, `inputs.text`, `inputs.images` | the input mode and what it shows |
//! | `output.format`, `output.schema` | `json` or `text`; the JSON schema as a string, or none |
//! | `answer_language` | e.g. `English`, or none for no language instruction |
//! | `images` | this message's images (empty in `text` mode): `index` (0-based, for `image()`), `number` (1-based across the whole conversation, for captions), `marker`, `id`, `label` (caption, else "MRI FLAIR axial" from modality/sequence/plane, or none), `modality`, `sequence`, `plane`, `caption`, `mime`, `width`, `height` |
//! | `question` | this message's question, verbatim: the task's in `user`, the turn's in `turn` |
//! | `turn.index`, `turn.number`, `turn.count` | 0-based turn, 1-based turn, number of turns |
//! | `turn.text` | the turn's newly revealed text (empty in turn 0 and in `images` mode) |
//!
//! Function: `image(i)` returns the marker of `images[i]`.
//!
//! ## Prompt variants
//!
//! For prompt sweeps (`nmb eval --template-variants bundled`; one of them alone with `--template bundled:NAME`)
//! nmb bundles five variants of its templates, in `templates/variants/NAME.jinja` ([`variant_names`],
//! [`Template::variant`]). Each is one file for every family, branching on `task.family`:
//!
//! | name | what differs from the built-in templates |
//! |---|---|
//! | `paraphrase-1`, `paraphrase-2`, `paraphrase-3` | the system message, the instructions and the words around the question and the evidence, reworded; the same instructions, still with a role ("neurology expert", "medical expert") |
//! | `order` | the built-ins' words in another order: the instruction first, then the question (and options), then the case evidence (EHR, notes, images) |
//! | `no-persona` | the built-ins' words, with the role left out of the system message ("You are an experienced neurology expert", "You are a medical expert ..."); user messages unchanged |
//!
//! In every variant the answer formats are the built-ins' word for word (the JSON example lines, keys and
//! fallback lines such as `"Final diagnosis: ..."` and `"Answer: X"`) and the output formats and schemas come
//! from the family as always, so scoring is unchanged. Structured (NeuroVLM-Bench) tasks fall back to the
//! built-in `neurovlm-v1` prompt, word for word, in the paraphrases and `order` (its nine-key instruction is the
//! benchmark's protocol); `no-persona` drops its role line ("neuroradiology expert") too. Ids are
//! `variant-NAME`, version `1`, and the hash is computed from the file like any template's, so a copy of a
//! variant file used with `--template FILE` is the same template, with the same cached answers.
//!
//! # Decisions
//!
//! - **Answer language.** Question text is kept verbatim (the real site file asks in Chinese about English
//!   case text). The templates add "Answer in English" by default, because the references, the LLM grader's
//!   rubric and BERTScore are in English. A suite may set the default `answer_language` (a name, or null for no
//!   instruction); [`PlanOptions::answer_language`] overrides both.
//! - **Output format.** Differential diagnosis and lesion recognition ask for JSON with a schema that backends
//!   can enforce ([`output::output_format`]); the prompt also accepts a numbered-list (or labelled lines)
//!   fallback, which `nmb-score` parses. Rationale asks for text (JSON `{"diagnosis","rationale"}` allowed);
//!   VQA and multiple choice ask for text, multiple choice as `Answer: X`.
//! - **Multi-turn.** Each sample is its own conversation: turn k's request carries the system message, every
//!   earlier user message and that sample's earlier answers ([`conversation_for_turn`]). Requests per task are
//!   samples x turns.

pub mod chat;
mod error;
pub mod estimate;
pub mod few_shot;
mod images;
mod jinja;
mod loaded;
pub mod output;
mod perturb;
mod plan;
pub mod probe;
mod render;
mod template;
pub mod volumes;

pub use chat::{
    messages_hash, GenParams, ImagePart, Message, OutputFormat, Part, ReasoningEffort, Role,
    SamplingParam,
};
pub use error::PlanError;
pub use few_shot::{ExamplePool, RunnerShots, TaskExamples};
pub use images::{ImageCache, DEFAULT_CACHE_BYTES};
pub use loaded::LoadedImage;
pub use plan::{
    conversation_for_turn, plan, recorded_families, InputMode, Plan, PlanOptions, PlanSummary,
    PlannedTask, PlannedTurn, DEFAULT_ANSWER_LANGUAGE, DEFAULT_SAMPLES,
};
pub use probe::{Probe, ProbeKind};
pub use template::{builtin_ids, template_hash, variant_names, Template};
pub use volumes::{CachedView, RenderCache};
