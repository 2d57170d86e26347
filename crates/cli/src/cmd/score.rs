//! `nmb score RUN_ID`: score a stored run (matching, judges, rubric, taxonomy, BERTScore, CIs) and store the
//! report.

use crate::store_at::StoreAt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use nmb_requests::{HttpOptions, ModelSpec, Scheduler, SchedulerConfig, Transport};
use nmb_run::{connect_model, ConnectOptions};
use nmb_score::cost::Prices;
use nmb_score::results::{Aggregation, ScoreReport};
use nmb_score::semantic::Rescale;
use nmb_score::{stored, BertScoreSetting, JudgeModel, Rubric, ScoreOptions};
use nmb_stats::{BootstrapConfig, DEFAULT_RESAMPLES, DEFAULT_SEED};
use nmb_store::{Manifest, Store, SuiteSource};
use nmb_suite::{Filter, Level, LoadOptions, Suite};

pub const EXAMPLES: &str = "\
Examples:
  nmb score r20260101-120000-ab12
  nmb score r20260101-120000-ab12 --judge openai:gpt-4o --json > scores.json
  nmb score RUN --judge openai:gpt-4o --judge anthropic:claude-sonnet-4-0 --judge gemini:gemini-2.5-pro \\
      --jury-aggregate majority
  nmb score RUN --judge openai:judge@http://127.0.0.1:8000/v1 --taxonomy-labels clinicians.csv
  nmb score RUN --suite site:direct-diagnosis.json --answers answers.jsonl

Without --judge, matching uses rules only (normalisation, abbreviations, the answer key's synonyms, the
lexicon's disease hierarchy); pairs the rules cannot decide count as wrong and are reported as unresolved,
and there is no rubric grading or judge taxonomy. Judge calls are stored in the run store like model calls:
scoring again sends nothing that was answered before, and the same stored answers give the same report,
byte for byte. pass@k is reported in two labelled readings: `unbiased_estimator` (over the n samples of
each task) and `top_k_in_answer` (within one answer's ranked differential).

Exit status: 0 when the run was scored, 1 on failure (unknown run, unreadable suite or labels, store
error), 2 on bad usage.";

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum AggregateArg {
    Mean,
    Majority,
}

impl From<AggregateArg> for Aggregation {
    fn from(a: AggregateArg) -> Self {
        match a {
            AggregateArg::Mean => Aggregation::Mean,
            AggregateArg::Majority => Aggregation::Majority,
        }
    }
}

/// Opens the run store (the global `--runs-dir` or `--store`); scoring never creates one.
pub fn open_store(at: &StoreAt) -> Result<Arc<Store>> {
    at.open_for_reading()
}

/// Bootstrap settings shared by `score` and `compare`.
#[derive(Args, Debug, Clone)]
pub struct BootstrapArgs {
    /// Seed of the bootstrap resampling (recorded with every interval)
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SEED)]
    pub seed: u64,
    /// Bootstrap resamples per interval
    #[arg(long, value_name = "N", default_value_t = DEFAULT_RESAMPLES)]
    pub resamples: usize,
}

impl BootstrapArgs {
    pub fn config(&self) -> BootstrapConfig {
        BootstrapConfig {
            resamples: self.resamples.max(1),
            level: 0.95,
            seed: self.seed,
        }
    }
}

/// How answers are scored: judges, rubric, taxonomy, BERTScore. Shared by `nmb score` and `nmb eval`.
#[derive(Args, Debug)]
pub struct ScoringArgs {
    /// Judge model BACKEND:MODEL[@BASE_URL]; repeat for a jury
    #[arg(long = "judge", value_name = "SPEC")]
    pub judges: Vec<String>,
    /// How a jury's verdicts combine: rubric scores by mean or by most frequent score; yes/no and error
    /// classes always by majority
    #[arg(long, value_enum, default_value = "majority")]
    pub jury_aggregate: AggregateArg,
    /// Rubric file (TOML) [default: the built-in rubrics/neurology-v1.toml]
    #[arg(long, value_name = "FILE")]
    pub rubric: Option<PathBuf>,
    /// Skip rubric grading
    #[arg(long)]
    pub no_rubric: bool,
    /// Skip the judges' error taxonomy of wrong answers
    #[arg(long)]
    pub no_taxonomy: bool,
    /// Human error-taxonomy labels (CSV: task_id, sample_index, category[, justification, annotator,
    /// run_id]); they take precedence over judges
    #[arg(long, value_name = "FILE.csv")]
    pub taxonomy_labels: Option<PathBuf>,
    /// BERTScore model directory (config.json, model.safetensors, tokenizer.json)
    #[arg(long, value_name = "DIR", default_value = nmb_score::semantic::DEFAULT_MODEL_DIR)]
    pub bertscore_model: PathBuf,
    /// BERTScore layer [default: the model's last layer]
    #[arg(long, value_name = "N")]
    pub bertscore_layer: Option<usize>,
    /// Weight BERTScore's tokens by idf computed from the references (bert-score's idf=True)
    #[arg(long, conflicts_with = "no_bertscore")]
    pub bertscore_idf: bool,
    /// Rescale BERTScore with a baseline: a file in bert-score's format (LAYER,P,R,F), or `default` for the
    /// baseline nmb ships for its MiniLM model [default: raw scores]
    #[arg(long, value_name = "FILE|default", conflicts_with = "no_bertscore")]
    pub bertscore_rescale: Option<String>,
    /// Skip BERTScore
    #[arg(long)]
    pub no_bertscore: bool,
    /// Re-asks after an invalid judge answer
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub max_reasks: u32,
    /// Judge calls in flight per judge
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub judge_concurrency: usize,
    /// Price of a model, MODEL=IN,OUT in dollars per million input and output tokens (MODEL may be * for all),
    /// for the cost per 1,000 images of structured answers; repeatable
    #[arg(long = "price", value_name = "MODEL=IN,OUT")]
    pub prices: Vec<String>,
}

#[derive(Args, Debug)]
pub struct ScoreArgs {
    /// The run to score (see `nmb runs`)
    #[arg(value_name = "RUN_ID")]
    pub run_id: String,
    #[command(flatten)]
    pub scoring: ScoringArgs,
    #[command(flatten)]
    pub bootstrap: BootstrapArgs,
    /// The suite the run was made on [default: from the run's manifest]
    #[arg(long, value_name = "SUITE")]
    pub suite: Option<String>,
    /// Answer-key JSONL for the suite [default: from the run's manifest]
    #[arg(long, value_name = "FILE")]
    pub answers: Option<PathBuf>,
    /// Task filters the run was made with (KEY=VALUE, repeatable) [default: from the run's manifest]
    #[arg(long = "filter", value_name = "KEY=VALUE")]
    pub filters: Vec<Filter>,
    /// Level of site-format tasks [default: from the run's manifest]
    #[arg(long, value_name = "LEVEL")]
    pub level: Option<Level>,
    /// Print the whole report as JSON (per-sample verdicts, per level/family aggregates with CIs, config)
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ScoreArgs, at: &StoreAt) -> Result<ExitCode> {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let report = runtime.block_on(score(&args, at))?;
    print_report(&report, args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// Scores the run and stores the report; used by `nmb score` (and `nmb eval` at its end).
pub async fn score(args: &ScoreArgs, at: &StoreAt) -> Result<ScoreReport> {
    let store = open_store(at)?;
    let run = store.run(&args.run_id)?;
    if let Some(judged) = run.manifest.judged_run() {
        bail!(
            "run {} holds judge calls, not model answers; score the run it judged ({judged})",
            args.run_id
        );
    }
    let suite = load_suite(args, &run.manifest)?;
    let bootstrap = args.bootstrap.config();
    score_loaded(&store, &args.run_id, &suite, &args.scoring, bootstrap).await
}

/// Scores a run whose suite is already loaded and stores the report.
pub async fn score_loaded(
    store: &Arc<Store>,
    run_id: &str,
    suite: &Suite,
    args: &ScoringArgs,
    bootstrap: BootstrapConfig,
) -> Result<ScoreReport> {
    let model = store.run(run_id)?.manifest.model;
    let opts = options(args, &model, bootstrap)?;
    let scheduler = Scheduler::new(SchedulerConfig::default());
    let report = nmb_score::score_run(store, &scheduler, run_id, suite, &opts)
        .await
        .with_context(|| format!("cannot score run {run_id}"))?;
    stored::save(store, &report).context("cannot store the score report")?;
    Ok(report)
}

fn options(args: &ScoringArgs, model: &str, bootstrap: BootstrapConfig) -> Result<ScoreOptions> {
    let prices = Prices::from_specs(&args.prices).map_err(anyhow::Error::msg)?;
    let judges = connect_judges(&args.judges)?;
    let rubric = match (&args.rubric, args.no_rubric) {
        (_, true) => None,
        (Some(path), false) => Some(Rubric::load(path)?),
        (None, false) => Some(Rubric::builtin()),
    };
    Ok(ScoreOptions {
        judges,
        aggregation: args.jury_aggregate.into(),
        max_reasks: args.max_reasks,
        judge_concurrency: args.judge_concurrency.max(1),
        rubric,
        taxonomy: !args.no_taxonomy,
        human_labels: args.taxonomy_labels.clone(),
        bertscore: bertscore_setting(args),
        bootstrap,
        price: prices.for_model(model),
        ..ScoreOptions::default()
    })
}

fn bertscore_setting(args: &ScoringArgs) -> BertScoreSetting {
    if args.no_bertscore {
        return BertScoreSetting::Off;
    }
    BertScoreSetting::Model {
        dir: args.bertscore_model.clone(),
        layer: args.bertscore_layer,
        idf: args.bertscore_idf,
        rescale: args.bertscore_rescale.as_deref().map(|r| match r {
            "default" => Rescale::Default,
            file => Rescale::File(PathBuf::from(file)),
        }),
    }
}

/// What can be checked before a run is evaluated, so that a bad scoring option fails before any model is asked
/// rather than after: judge specs, the rubric file, the BERTScore baseline.
pub fn check(args: &ScoringArgs) -> Result<()> {
    Prices::from_specs(&args.prices).map_err(anyhow::Error::msg)?;
    for j in &args.judges {
        ModelSpec::parse(j).with_context(|| format!("--judge {j}"))?;
    }
    if let (Some(path), false) = (&args.rubric, args.no_rubric) {
        Rubric::load(path)?;
    }
    nmb_score::semantic::check(&bertscore_setting(args)).context("BERTScore options")?;
    Ok(())
}

fn connect_judges(specs: &[String]) -> Result<Vec<JudgeModel>> {
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    // One HTTP client for every judge.
    let options = ConnectOptions {
        transport: Some(Transport::new(&HttpOptions::default()).context("cannot set up HTTP")?),
        ..ConnectOptions::default()
    };
    specs
        .iter()
        .map(|s| {
            let connected = connect_model(s, &options).with_context(|| format!("--judge {s}"))?;
            Ok(JudgeModel {
                spec: ModelSpec::identity_of(&connected.spec.to_string()),
                backend: connected.backend,
                identity: connected.identity,
            })
        })
        .collect()
}

/// The suite named on the command line, else the one the manifest names.
fn load_suite(args: &ScoreArgs, manifest: &Manifest) -> Result<Suite> {
    let source = &manifest.suite_source;
    let spec = args
        .suite
        .clone()
        .or_else(|| source.suite_spec.clone())
        .or_else(|| {
            let bundled = ["sample", nmb_suite::sample::structured::SUITE_ID];
            bundled
                .contains(&manifest.suite_id.as_str())
                .then(|| manifest.suite_id.clone())
        });
    let Some(spec) = spec else {
        bail!(
            "run {} was made on suite {:?}, and its manifest does not say where that suite is; pass --suite \
             (and --answers if it has an answer key)",
            args.run_id,
            manifest.suite_id
        );
    };
    let answers = args
        .answers
        .clone()
        .or_else(|| source.answers_path.as_ref().map(PathBuf::from));
    let filters = if args.filters.is_empty() {
        manifest_filters(source)?
    } else {
        args.filters.clone()
    };
    let level = match args.level {
        Some(l) => Some(l),
        None => source
            .level
            .as_deref()
            .map(|l| l.parse::<Level>())
            .transpose()
            .map_err(|e| anyhow::anyhow!("run manifest level: {e}"))?,
    };
    let map = source
        .map
        .iter()
        .flatten()
        .map(|m| super::suite::parse_map(m).map_err(anyhow::Error::msg))
        .collect::<Result<Vec<_>>>()
        .context("run manifest map")?;
    let opts = LoadOptions {
        filters,
        answers,
        level,
        map,
        text_only: manifest.input_mode == "text",
    };
    let loaded =
        nmb_suite::load(&spec, &opts).with_context(|| format!("cannot load suite {spec}"))?;
    Ok(loaded.suite)
}

fn manifest_filters(source: &SuiteSource) -> Result<Vec<Filter>> {
    source
        .filters
        .iter()
        .flatten()
        .map(|f| {
            f.parse::<Filter>()
                .map_err(|e| anyhow::anyhow!("run manifest filter {f:?}: {e}"))
        })
        .collect()
}

/// Prints the report as JSON, or the summary `nmb-report` builds for a terminal from the report's own tables.
pub fn print_report(report: &ScoreReport, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(report)?);
    } else {
        print!("{}", nmb_report::terminal::score_report(report));
    }
    Ok(())
}
