//! `nmb eval`: ask a model about every task of a suite and store each answer as it arrives.

use crate::store_at::StoreAt;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use nmb_plan::{GenParams, InputMode, ReasoningEffort, SamplingParam};
use nmb_requests::ModelSpec;
use nmb_run::{
    Claiming, EvalConfig, FewShot, Invocation, Limits, Resume, RunOutcome, TemplateChoice,
};
use nmb_stats::BootstrapConfig;
use nmb_study::job::{Done, Job};
use nmb_suite::{Filter, Level};
use serde_json::json;

use nmb_score::ScoringConfig;

use super::score::ScoringArgs;
use crate::progress::Terminal;

mod perturb;
mod probes;
mod sweep;

/// `nmb eval --help`'s examples: [`EXAMPLES`], the run file's format ([`nmb_study::RUN_FILE_HELP`]) and
/// [`EXIT_STATUS`].
pub fn help() -> String {
    format!("{EXAMPLES}{}\n\n{EXIT_STATUS}", nmb_study::RUN_FILE_HELP)
}

const EXAMPLES: &str = "\
Examples:
  nmb eval --suite sample --model local:SmolLM2-135M-Instruct.Q4_1.gguf --samples 1 --max-tokens 256
  nmb eval --suite sample --model openai:gpt-4o --dry-run
  nmb eval --suite sample --model openai:gpt-4o --samples 5 --concurrency 32 --report out
  nmb eval --suite sample --model openai:gpt-4o --judge anthropic:claude-sonnet-4-5
  nmb eval --suite sample --model openai:gpt-4o --template-variants bundled --report sweep
  nmb eval --suite sample --model openai:gpt-4o --perturb mismatch,blank,noise:0.2 --report reliance
  nmb eval --suite sample --model anthropic:claude-sonnet-4-5 --inputs text --limit 10
  nmb eval --suite sample --model gemini:gemini-2.5-pro --max-requests 100
  nmb eval --suite sample --model openai:Qwen/Qwen2-VL-7B-Instruct@http://127.0.0.1:8000/v1
  nmb eval --suite site:direct-diagnosis.json --answers answers.jsonl --model openai:gpt-4o
  nmb eval --suite sample --model openai:gpt-4o --resume 20250101-120000-ab12cd

MODEL is BACKEND:MODEL[@BASE_URL], BACKEND one of:
  openai:NAME[@URL]     chat completions; a base URL ending in /v1 reaches any OpenAI-compatible
                        server (vLLM, SGLang, TGI, Ollama, llama.cpp server, OpenRouter)
  anthropic:NAME[@URL]  the Messages API
  gemini:NAME[@URL]     generateContent
  local:PATH.gguf       a GGUF Llama-family model run in-process on the CPU; text only: images
                        are dropped and the run manifest says so. local:hf://OWNER/NAME/FILE.gguf
                        downloads the file first (needs network access to huggingface.co)
API keys come only from OPENAI_API_KEY, ANTHROPIC_API_KEY and GEMINI_API_KEY; a key may be
absent when a base URL is given (a local server).

Every answer is stored in RUNS_DIR/nmb.sqlite as soon as it arrives. Running the same command
again resumes the unfinished run with the same configuration (after a finished run, it starts a
new run that takes every stored answer from the store): a stored answer is never requested
again. --fresh starts a new run anyway; --resume RUN_ID continues a given run (same
configuration). Progress goes to stderr: a bar on a terminal, a line every 10 s otherwise.

At the end the run is scored as `nmb score RUN_ID` would (rules and BERTScore; judges with
--judge) and the score report is stored; --no-score skips this. --report DIR also writes the
HTML, Markdown, CSV and JSON report and prints the HTML file's path.

";

/// What `nmb eval --help` ends with, after the run file's format.
const EXIT_STATUS: &str = "\
Exit status: 0 when the run was carried out (errored samples are stored with their error class;
--resume RUN_ID retries them), 1 on failure (suite, model, store), 2 on bad usage.";

#[derive(Args, Debug)]
pub struct EvalArgs {
    /// A whole study from a run file (TOML: models, suites, templates, judges, report); see below
    #[arg(long, value_name = "FILE", conflicts_with_all = ["suite", "model", "resume"])]
    pub config: Option<PathBuf>,
    /// With --config: stop before the study's estimated spending could pass USD dollars (overrides the run
    /// file's max_cost)
    #[arg(long, value_name = "USD", requires = "config", value_parser = non_negative)]
    pub max_cost: Option<f64>,
    /// The suite: `sample` (bundled), a path whose format is detected, or FORMAT:PATH (see `nmb suite --help`)
    #[arg(
        long,
        value_name = "SUITE",
        required_unless_present = "config",
        default_value = "",
        hide_default_value = true
    )]
    suite: String,
    /// Answer-key JSONL joined by case_id (format: docs/formats.md, "Answer keys")
    #[arg(long, value_name = "FILE")]
    answers: Option<PathBuf>,
    /// Keep only tasks whose task or case metadata has KEY=VALUE (or not, with KEY!=VALUE); repeatable, all
    /// must hold. Built-in keys: family, level, case_id, task_id, language
    #[arg(long = "filter", value_name = "KEY=VALUE")]
    filters: Vec<Filter>,
    /// Level of site-format tasks: direct, complex or multi_turn [default: from the file name]
    #[arg(long, value_name = "LEVEL")]
    level: Option<Level>,
    /// For tables (table:, pmc-vqa:, omnimedvqa:, pathvqa:) and NeuroVLM manifests (neurovlm:): read FIELD
    /// from COLUMN; repeatable
    #[arg(long = "map", value_name = "FIELD=COLUMN", value_parser = nmb_suite::parse_map)]
    map: Vec<(String, String)>,
    /// For NeuroVLM manifests (neurovlm:): the folder the image paths are relative to [default: the manifest's
    /// folder]; the authors' image_mapping.csv names images under their dataset folder
    #[arg(long, value_name = "DIR")]
    images_root: Option<PathBuf>,
    /// For Hugging Face datasets (hf-disk:, hf-cache:): the split to read, where the folder has several
    #[arg(long, value_name = "SPLIT")]
    split: Option<String>,
    /// The model, BACKEND:MODEL[@BASE_URL] (see below)
    #[arg(
        long,
        value_name = "MODEL",
        required_unless_present = "config",
        default_value = "",
        hide_default_value = true
    )]
    pub model: String,
    /// The name reports, tables and exports show for this run [default: a local model's file stem, else the
    /// model id]
    #[arg(long, value_name = "NAME")]
    name: Option<String>,
    /// Answers sampled per task [default: the suite's `samples`, else 5, so that pass@5 is possible]. Uses the
    /// API's `n` where it has one (OpenAI, Gemini), else separate requests
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    samples: Option<u32>,
    /// Ask each sample in a request of its own (seed + sample index) instead of using the API's `n`. Servers
    /// that reject `n` (llama.cpp, Ollama, ...) get this automatically after their first refusal
    #[arg(long)]
    no_n: bool,
    /// For `local:` models: decode without grammar. By default a task that asks for JSON (differential,
    /// lesion, structured) is decoded under its JSON schema's grammar, as llama.cpp's server does; runs made with
    /// and without grammar are kept apart, and runs from before nmb had grammar resume only with this flag
    #[arg(long)]
    no_grammar: bool,
    /// For `local:` models: a vision projector (an `mmproj` GGUF, as llama.cpp's `--mmproj` takes it, types
    /// `gemma3`) through which the model sees the task's images, placed in the prompt as llama.cpp's server
    /// places them; without it a local model is text-only and images are dropped. The projector's hash is part
    /// of the model's identity, so runs with another projector or none are kept apart
    #[arg(long, value_name = "FILE.gguf")]
    mmproj: Option<PathBuf>,
    /// What the model sees: `full` (EHR, notes and images), `text` (no images), `images` (images and question)
    #[arg(long, value_name = "MODE", default_value = "full")]
    inputs: InputMode,
    /// Only the first N tasks, in suite order
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    limit: Option<u64>,
    /// Requests in flight at once (lowered automatically on HTTP 429 and raised again; a local model
    /// always runs one at a time)
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub concurrency: u32,
    /// On a shared store: at most N requests in flight to each server across every process using the store
    /// [default: --concurrency]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub fleet_limit: Option<u32>,
    /// Send at most N requests in this invocation, then stop; the run stays resumable
    #[arg(long, value_name = "N")]
    pub max_requests: Option<u64>,
    /// Print the requests the run would send and an estimate of their tokens; send and store nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Create the run and its pending samples, print its id, and stop: `nmb worker` processes (on any number of
    /// machines sharing the store) do the asking
    #[arg(long, conflicts_with_all = ["dry_run", "config", "template_variants"])]
    pub plan_only: bool,
    /// Continue this run (see `nmb runs list`); the configuration must be the same
    #[arg(long, value_name = "RUN_ID", conflicts_with = "fresh")]
    pub resume: Option<String>,
    /// Start a new run even if an unfinished one has the same configuration (stored answers are still reused)
    #[arg(long)]
    pub fresh: bool,
    /// Sampling temperature, >= 0, or `none` to send none (the server's default applies)
    #[arg(long, value_name = "T|none", default_value = "0.7", value_parser = temperature_arg, allow_negative_numbers = true)]
    temperature: Sampled,
    /// Nucleus sampling: keep the smallest set of tokens whose probability reaches P, 0 < P <= 1, or `none` to
    /// send none
    #[arg(long, value_name = "P|none", default_value = "0.95", value_parser = top_p_arg, allow_negative_numbers = true)]
    top_p: Sampled,
    /// A JSON object whose fields are added to the top level of every request body, replacing any of the same
    /// name (vLLM's `{"chat_template_kwargs": {"enable_thinking": false}, "top_k": 20, "min_p": 0}`); recorded
    /// with the parameters and hashed
    #[arg(long, value_name = "JSON", value_parser = json_object)]
    extra_body: Option<BTreeMap<String, serde_json::Value>>,
    /// Most tokens per answer, thinking included where the API counts it [default: 1024; 25000 for OpenAI's
    /// reasoning models, 65536 for Gemini models that think by default (docs/providers.md)]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_tokens: Option<u32>,
    /// Ask as OpenAI's reasoning models require: max_completion_tokens, no temperature (unless 1), no top_p
    /// [default: for o-series and GPT-5 on OpenAI's API; elsewhere after the server's first refusal]
    #[arg(long)]
    reasoning_model: bool,
    /// A reasoning model's effort: none, minimal, low, medium, high (OpenAI reasoning_effort, Gemini thinkingConfig)
    #[arg(long, value_name = "LEVEL", value_parser = |s: &str| s.parse::<ReasoningEffort>())]
    reasoning_effort: Option<ReasoningEffort>,
    /// Tokens the model may think before answering: Anthropic's extended thinking (budget_tokens: at least
    /// 1024 and below --max-tokens, which counts the thinking; temperature and a top_p under 0.95 are then not
    /// sent), Gemini's thinkingBudget
    #[arg(long, value_name = "N")]
    thinking_budget: Option<u32>,
    /// Sampling seed where the backend takes one (OpenAI, Gemini, local); sample i of a task gets SEED + i
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// A prompt template file (minijinja) for every family instead of the built-in ones (see the nmb-plan docs);
    /// `bundled:NAME` for a bundled variant (paraphrase-1, paraphrase-2, paraphrase-3, order, no-persona)
    #[arg(long, value_name = "FILE")]
    template: Option<PathBuf>,
    /// A prompt sweep: run once per template, every *.jinja file in DIR in name order, or `bundled` (the
    /// built-in templates and each bundled variant); each run is named `NAME [variant]`, and --report covers all
    #[arg(long, value_name = "DIR|bundled", conflicts_with_all = ["template", "resume", "config"])]
    template_variants: Option<PathBuf>,
    /// Context probes, comma-separated: `anchoring` (a colleague suggests a wrong diagnosis in the notes),
    /// `sycophancy` (a last turn insists on it). The evaluation runs without a probe and once per probe, each
    /// run named `NAME [probe]`; the wrong diagnosis of each task comes from its reference's differential, else
    /// the reference's nearest siblings in the lexicon, drawn with --probe-seed; --report covers all
    #[arg(long, value_name = "LIST", value_delimiter = ',', conflicts_with_all = ["template_variants", "resume", "config", "plan_only"])]
    probe: Vec<nmb_plan::ProbeKind>,
    /// The seed that draws each probed task's wrong diagnosis; part of the probed runs' identity
    #[arg(long, value_name = "N", default_value_t = 1, requires = "probe")]
    probe_seed: u64,
    /// Few-shot examples before each question. A count K, with --few-shot-from: K example tasks of the task's
    /// family (its level where the pool has K), each its prompt and images followed by its reference answer,
    /// spread over the reference classes, chosen per task with --seed, never from the task's case. Or
    /// NeuroVLM-Bench's examples file (few_shot_examples.csv: file_path, class; needs --template), its images
    /// under --images-root: each task is asked as their runner asks it (the prompt file of --template as the
    /// system message, the examples with their classes, then the image)
    #[arg(long, value_name = "K|FILE.csv", value_parser = few_shot_arg)]
    few_shot: Option<FewShotArg>,
    /// Where --few-shot K takes its examples: a suite as --suite names it, and optionally one filter as --filter
    /// writes it (SUITE:KEY=VALUE, e.g. sample:level!=multi_turn). The evaluated suite itself leaves each task's
    /// own case out; given as the same spec as --suite, it is read with --answers, --level, --map,
    /// --images-root and --split, without --filter
    #[arg(long, value_name = "SUITE[:FILTER]")]
    few_shot_from: Option<String>,
    /// Image reliance and robustness: run once unperturbed (named NAME) and once per perturbation (named
    /// `NAME [perturbation]`), the images changed after rendering, seeded by --seed: blank, mismatch (another
    /// case's images, same modality), drop:SEQUENCE, noise:SIGMA, blur:SIGMA, contrast:GAMMA, jpeg:QUALITY,
    /// downsample:FACTOR, rotate:DEGREES, flip:h|v, crop:FRACTION; comma-separated. --report covers all
    #[arg(long, value_name = "LIST", value_parser = perturb_list, conflicts_with_all = ["template_variants", "resume", "config", "probe", "few_shot"])]
    pub perturb: Option<PerturbList>,
    /// Language the prompts ask answers in [default: the suite's, else English]; "" for no instruction
    #[arg(long, value_name = "LANG")]
    answer_language: Option<String>,
    /// Seconds one attempt may take, from sending the request to the last byte of its answer, before it counts as
    /// a timeout (and is retried); with --batch, each request to the batch API
    #[arg(long, value_name = "SECS", default_value_t = 300.0, value_parser = positive)]
    timeout: f64,
    /// Retries of a failed request (rate limit, server error, network, timeout, malformed response)
    #[arg(long, value_name = "N", default_value_t = 6)]
    max_retries: u32,
    /// Send through the provider's batch API (OpenAI Batch, Anthropic Message Batches, Gemini batch mode):
    /// half the price, answered within 24 hours. Batches are recorded before they are submitted, so a stopped
    /// run resumes polling them and never submits a request twice
    #[arg(long)]
    pub batch: bool,
    /// With --batch: seconds between polls of a submitted batch
    #[arg(long, value_name = "SECS", default_value_t = 30.0, requires = "batch")]
    pub batch_poll: f64,
    /// With --batch: at most N requests in the model's submitted, unfinished batches at once [default: 4096].
    /// A batch the provider refuses for its queue limit (OpenAI's enqueued-token limit) goes again later in
    /// batches half the size (see docs/providers.md)
    #[arg(long, value_name = "N", requires = "batch", value_parser = clap::value_parser!(u32).range(1..))]
    pub batch_max_requests: Option<u32>,
    /// Print one JSON object at the end (the run summary) instead of text
    #[arg(long)]
    pub json: bool,
    /// No progress output on stderr
    #[arg(long, short)]
    pub quiet: bool,
    /// Do not score the run at the end (score it later with `nmb score RUN_ID`)
    #[arg(long)]
    pub no_score: bool,
    #[command(flatten)]
    scoring: ScoringArgs,
    /// After the run is scored, log it to an MLflow tracking server as `nmb export mlflow RUN_ID
    /// --tracking-uri URI` does (experiment `nmb`; exporting again updates the same MLflow run)
    #[arg(long, value_name = "mlflow=URI", value_parser = export_target, conflicts_with_all = ["no_score", "config"])]
    export: Option<String>,
    /// Also write the run's report (HTML, Markdown, CSV, JSON) into DIR and print the HTML file's path
    #[arg(long, value_name = "DIR")]
    report: Option<PathBuf>,
}

/// `--max-tokens` when none is given: room for the thinking of a model that thinks by default
/// ([`nmb_requests::rules::thinking_room`]), else [`GenParams::default`]'s.
pub fn default_max_tokens(model: &ModelSpec) -> u32 {
    nmb_requests::rules::thinking_room(model.backend, &model.model)
        .map_or(GenParams::default().max_tokens, |room| room.max_tokens)
}

fn non_negative(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("expected a number >= 0, got {s:?}")),
    }
}

/// A sampling parameter's value, or `None` for `none`: not sent at all.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sampled(Option<f64>);

fn temperature_arg(s: &str) -> Result<Sampled, String> {
    if s == "none" {
        return Ok(Sampled(None));
    }
    non_negative(s).map(|v| Sampled(Some(v)))
}

fn top_p_arg(s: &str) -> Result<Sampled, String> {
    if s == "none" {
        return Ok(Sampled(None));
    }
    probability(s).map(|v| Sampled(Some(v)))
}

/// `--few-shot`'s value: a count of examples, or NeuroVLM-Bench's examples file.
#[derive(Debug, Clone, PartialEq)]
pub enum FewShotArg {
    Count(u32),
    File(PathBuf),
}

fn few_shot_arg(s: &str) -> Result<FewShotArg, String> {
    match s.trim().parse::<u32>() {
        Ok(0) => Err("expected at least 1 example, or an examples file (FILE.csv)".into()),
        Ok(k) => Ok(FewShotArg::Count(k)),
        Err(_) => Ok(FewShotArg::File(PathBuf::from(s))),
    }
}

/// `SUITE[:FILTER]`: the suite, and a filter where the text after the last `:` is one (it has `=`).
fn few_shot_from(text: &str) -> Result<nmb_suite::Source> {
    if let Some((spec, filter)) = text.rsplit_once(':') {
        if filter.contains('=') {
            let filter: Filter = filter
                .parse()
                .map_err(|e: String| anyhow::anyhow!("--few-shot-from {text}: {e}"))?;
            let mut source = nmb_suite::Source::new(spec);
            source.filters = vec![filter];
            return Ok(source);
        }
    }
    Ok(nmb_suite::Source::new(text))
}

/// `--perturb`'s list, parsed whole (one clap value).
#[derive(Debug, Clone, PartialEq)]
pub struct PerturbList(pub Vec<nmb_imaging::Perturbation>);

fn perturb_list(s: &str) -> Result<PerturbList, String> {
    nmb_imaging::perturb::parse_list(s)
        .map(PerturbList)
        .map_err(|e| e.to_string())
}

fn json_object(s: &str) -> Result<BTreeMap<String, serde_json::Value>, String> {
    serde_json::from_str(s)
        .map_err(|e| format!("expected a JSON object, e.g. '{{\"top_k\": 20}}': {e}"))
}

fn probability(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!("expected a number in (0, 1], got {s:?}")),
    }
}

fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v < 1e7 => Ok(v),
        _ => Err(format!("expected a number of seconds > 0, got {s:?}")),
    }
}

impl EvalArgs {
    /// The evaluation these arguments describe.
    pub fn config(&self) -> Result<EvalConfig> {
        let model = ModelSpec::parse(&self.model).context("bad --model")?;
        let suite = nmb_suite::Source {
            spec: self.suite.clone(),
            answers: self.answers.clone(),
            filters: self.filters.clone(),
            level: self.level,
            map: self.map.clone(),
            images_root: self.images_root.clone(),
            split: self.split.clone(),
        };
        let mut config = EvalConfig::new(suite, model);
        config.name = self.name.clone();
        config.inputs = self.inputs;
        config.samples = self.samples;
        config.no_n = self.no_n;
        config.reasoning_model = self.reasoning_model;
        config.no_grammar = self.no_grammar;
        if self.mmproj.is_some() && config.model.backend != nmb_requests::BackendKind::Local {
            anyhow::bail!(
                "--mmproj is for `local:` models (a GGUF run in-process); {} sees images through its own API",
                self.model
            );
        }
        config.mmproj = self.mmproj.clone();
        config.limit = self.limit;
        let defaults = GenParams::default();
        let mut unsent = BTreeSet::new();
        if self.temperature.0.is_none() {
            unsent.insert(SamplingParam::Temperature);
        }
        if self.top_p.0.is_none() {
            unsent.insert(SamplingParam::TopP);
        }
        config.params = GenParams {
            temperature: self.temperature.0.unwrap_or(defaults.temperature),
            top_p: self.top_p.0.unwrap_or(defaults.top_p),
            max_tokens: self
                .max_tokens
                .unwrap_or_else(|| default_max_tokens(&config.model)),
            seed: self.seed,
            reasoning_effort: self.reasoning_effort,
            thinking_budget: self.thinking_budget,
            unsent,
            extra_body: self.extra_body.clone(),
        };
        config.template = self
            .template
            .as_ref()
            .map(|p| TemplateChoice::parse(&p.to_string_lossy()));
        config.answer_language = self.answer_language.clone();
        config.few_shot = self.few_shot_config(&config.suite)?;
        config.limits = self.limits();
        Ok(config)
    }

    /// The few-shot configuration: an examples file (with --template), or K examples from --few-shot-from.
    fn few_shot_config(&self, suite: &nmb_suite::Source) -> Result<Option<FewShot>> {
        match (&self.few_shot, &self.few_shot_from) {
            (None, None) => Ok(None),
            (Some(FewShotArg::File(path)), None) => {
                anyhow::ensure!(
                    self.template.is_some(),
                    "--few-shot {} (NeuroVLM-Bench's examples file) needs --template PROMPT.txt, the runner's \
                     prompt file",
                    path.display()
                );
                Ok(Some(FewShot::File(path.clone())))
            }
            (Some(FewShotArg::File(path)), Some(_)) => anyhow::bail!(
                "--few-shot-from takes a count of examples (--few-shot K); {} is an examples file, which brings \
                 its own examples",
                path.display()
            ),
            (Some(FewShotArg::Count(k)), None) => anyhow::bail!(
                "--few-shot {k} needs --few-shot-from SUITE[:FILTER], the suite its examples come from (e.g. \
                 --few-shot-from {}, each task's own case left out)",
                if suite.spec.is_empty() { "sample" } else { &suite.spec }
            ),
            (None, Some(from)) => anyhow::bail!(
                "--few-shot-from {from} needs --few-shot K, the number of examples before each question"
            ),
            (Some(FewShotArg::Count(k)), Some(from)) => {
                let mut from = few_shot_from(from)?;
                if from.spec == suite.spec {
                    from = nmb_suite::Source {
                        filters: from.filters,
                        ..suite.clone()
                    };
                }
                Ok(Some(FewShot::Examples { k: *k, from }))
            }
        }
    }

    pub fn limits(&self) -> Limits {
        Limits {
            concurrency: self.concurrency,
            fleet_limit: self.fleet_limit,
            timeout_secs: self.timeout,
            max_retries: self.max_retries,
            batch: self.batch,
            batch_poll_secs: self.batch.then_some(self.batch_poll),
            batch_max_requests: self.batch_max_requests,
            max_response_mib: self.scoring.max_response_mib,
        }
    }

    /// Which run this invocation writes into and how much it may send.
    pub fn invocation(&self, at: &StoreAt) -> Invocation {
        let resume = match (&self.resume, self.fresh) {
            (Some(id), _) => Resume::Run(id.clone()),
            (None, true) => Resume::Fresh,
            (None, false) => Resume::Auto,
        };
        Invocation {
            resume,
            max_requests: self.max_requests,
            plan_only: self.plan_only,
            claiming: claiming_on(at),
            replay: None,
        }
    }

    /// What this invocation prints, writes and scores besides the run.
    pub fn output(&self) -> Result<Output> {
        let scoring = match self.no_score {
            true => None,
            false => Some(
                self.scoring
                    .config(BootstrapConfig::default())
                    .context("a scoring option would fail after the evaluation")?,
            ),
        };
        Ok(Output {
            json: self.json,
            quiet: self.quiet,
            report: self.report.clone(),
            scoring,
            mlflow: self.export.clone(),
        })
    }
}

/// On a shared store every evaluation works as one of possibly many workers; alone in a SQLite file it need not.
pub fn claiming_on(at: &StoreAt) -> Option<Claiming> {
    at.is_shared()
        .then(|| Claiming::for_this_process(Claiming::DEFAULT_LEASE))
}

/// What one invocation prints, writes and scores after its evaluation.
#[derive(Clone)]
pub struct Output {
    pub json: bool,
    pub quiet: bool,
    /// Also write the run's report into this folder.
    pub report: Option<PathBuf>,
    /// Score the run at the end with these options; `None` leaves it unscored.
    pub scoring: Option<ScoringConfig>,
    /// Log the scored run to this MLflow tracking server (`--export mlflow=URI`).
    pub mlflow: Option<String>,
}

pub fn run(args: EvalArgs, at: &StoreAt) -> Result<ExitCode> {
    if args.template_variants.is_some() {
        return sweep::run(args, at);
    }
    if !args.probe.is_empty() {
        return probes::run(args, at);
    }
    if args.perturb.is_some() {
        return perturb::run(args, at);
    }
    let config = args.config()?;
    if args.dry_run {
        let scoring = args.output()?.scoring;
        return dry_run_judged(&config, args.json, scoring.as_ref());
    }
    let done = run_one(&config, &args.invocation(at), &args.output()?, at)?;
    Ok(match done.outcome.all_errored() {
        true => ExitCode::FAILURE,
        false => ExitCode::SUCCESS,
    })
}

/// One evaluation carried to its end (`nmb_study::job`), its summary printed as `out` says.
pub fn run_one(
    config: &EvalConfig,
    invocation: &Invocation,
    out: &Output,
    at: &StoreAt,
) -> Result<Done> {
    let job = Job {
        config,
        invocation,
        scoring: out.scoring.as_ref(),
        report: out.report.as_deref(),
    };
    let watch = Terminal { quiet: out.quiet };
    let done = nmb_study::job::run(job, &Arc::new(at.open()?), None, &watch)?;
    match invocation.plan_only {
        true => print_planned(&done.outcome, at, out.json),
        false => print_done(&config.model, &done, out, invocation.max_requests)?,
    }
    if let (Some(uri), Some(_), false) = (&out.mlflow, &done.scores, invocation.plan_only) {
        let target = super::export::Mlflow {
            tracking_uri: uri,
            experiment: super::export::DEFAULT_EXPERIMENT,
            artifacts: true,
        };
        // Under --json stdout holds one object, so the export's line goes to stderr.
        super::export::to_mlflow(
            std::slice::from_ref(&done.outcome.run_id),
            &target,
            at,
            out.json,
        )?;
    }
    Ok(done)
}

/// The one report over a set of runs (a template sweep, perturbations, probes) when `--report DIR` was given:
/// the path of its HTML page.
fn set_report(at: &StoreAt, ids: &[&str], report: Option<&Path>) -> Result<Option<PathBuf>> {
    let Some(dir) = report else {
        return Ok(None);
    };
    Ok(Some(nmb_study::sweep::report(&at.open()?, ids, dir)?))
}

/// `--export mlflow=URI`: the tracking server's URI.
fn export_target(text: &str) -> Result<String, String> {
    match text.strip_prefix("mlflow=") {
        Some(uri) if !uri.is_empty() => Ok(uri.to_string()),
        _ => Err("expected mlflow=URI (an MLflow tracking server, http(s)://HOST:PORT)".into()),
    }
}

/// Prints what an evaluation of `model` did: its summary with its scores, and where its report went.
pub fn print_done(
    model: &ModelSpec,
    done: &Done,
    out: &Output,
    max_requests: Option<u64>,
) -> Result<()> {
    report(out, &done.finished(max_requests), done.scores.as_ref())?;
    if done.images_dropped && !out.json {
        eprintln!(
            "note: {model} is text-only: images were not sent (the run manifest records this)"
        );
    }
    if let Some(html) = &done.report_html {
        // With --json, stdout holds the one JSON object and nothing else.
        match out.json {
            true => eprintln!("report: {}", html.display()),
            false => println!("report: {}", html.display()),
        }
    }
    Ok(())
}

/// A dry run that also counts what judges that see the images (`--judge-images same`) would be sent.
fn dry_run_judged(
    config: &EvalConfig,
    as_json: bool,
    scoring: Option<&ScoringConfig>,
) -> Result<ExitCode> {
    let questions = scoring.map_or(0, ScoringConfig::image_questions_per_sample);
    if questions == 0 {
        return dry_run(config, as_json);
    }
    let estimate = nmb_run::estimate(config)?;
    let images = estimate.conversation_images * questions;
    let tokens = estimate.conversation_image_tokens * questions;
    match as_json {
        true => {
            let mut out = estimate.json(config);
            out["judge_images"] = json!({
                "questions_per_sample": questions,
                "images_sent": images,
                "est_image_tokens": tokens,
            });
            println!("{out}");
        }
        false => {
            print!("{}", estimate.text(config));
            println!(
                "judges (--judge-images same): at most {images} images, ~{tokens} image tokens of input, over \
                 {questions} questions per sample (rubric, criteria, taxonomy; every judge and repeat)"
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn dry_run(config: &EvalConfig, as_json: bool) -> Result<ExitCode> {
    let estimate = nmb_run::estimate(config)?;
    match as_json {
        true => println!("{}", estimate.json(config)),
        false => print!("{}", estimate.text(config)),
    }
    Ok(ExitCode::SUCCESS)
}

/// The scores as `nmb eval --json` prints them in its one object.
pub(super) fn scores_json(r: &nmb_results::ScoreReport) -> serde_json::Value {
    json!({
        "config_hash": r.config.config_hash,
        "overall": r.overall,
        "by_level_family": r.by_level_family,
        "structured": r.structured,
        "label_set": r.label_set,
        "revision": r.revision,
        "notes": r.notes,
    })
}

/// Prints the end-of-run summary, with the scores when the run was scored.
fn report(
    out: &Output,
    done: &nmb_run::summary::Finished,
    scores: Option<&nmb_results::ScoreReport>,
) -> Result<()> {
    if out.json {
        println!("{}", done.json(scores.map(scores_json)));
        return Ok(());
    }
    for warning in done.warnings() {
        eprintln!("{warning}");
    }
    print!("{}", done.text());
    match scores {
        Some(r) => {
            println!();
            super::score::print_report(r, false)?;
        }
        None => println!("{}", done.not_scored(out.scoring.is_none())),
    }
    println!("run id: {}", done.outcome.summary.run_id);
    Ok(())
}

/// What `nmb eval --plan-only` prints: the run and how to start workers on it.
fn print_planned(outcome: &RunOutcome, at: &StoreAt, as_json: bool) {
    let s = &outcome.summary;
    if as_json {
        println!(
            "{}",
            json!({ "run_id": outcome.run_id, "planned": true, "summary": s })
        );
        return;
    }
    println!(
        "run {} planned in {at}: {} samples, {} pending, {} done",
        outcome.run_id,
        s.samples_total,
        s.samples_pending,
        s.samples_ok + s.samples_errored
    );
    println!(
        "start workers on any machine: nmb --store URL worker --run {}",
        outcome.run_id
    );
}
