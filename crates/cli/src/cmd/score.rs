//! `nmb score RUN_ID`: score a stored run (matching, judges, rubric, taxonomy, BERTScore, CIs) and store the
//! report.

use crate::store_at::StoreAt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use nmb_requests::ModelSpec;
use nmb_results::cost::Prices;
use nmb_results::structured::paper::PaperOptions;
use nmb_results::{Aggregation, ScoreReport};
use nmb_score::semantic::Rescale;
use nmb_score::{BertScoreSetting, RubricChoice, ScoringConfig, SuiteOverride};
use nmb_stats::{BootstrapConfig, DEFAULT_RESAMPLES, DEFAULT_SEED};
use nmb_store::Store;
use nmb_suite::{Filter, Level};

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

/// How NeuroVLM-Bench answers are read, besides nmb's own reading.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ProtocolArg {
    /// nmb's reading only
    Nmb,
    /// Also as the paper's evaluator (ChatMED/neurovlm-bench evaluate_detailed.py) reads them
    NeurovlmPaper,
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
    /// Criterion rubric (HealthBench form, .toml or .jsonl): judges decide each criterion of the tasks it
    /// covers, met or not, and answers score points met over positive points possible
    #[arg(long, value_name = "FILE")]
    pub criteria: Option<PathBuf>,
    /// Skip the judges' error taxonomy of wrong answers
    #[arg(long)]
    pub no_taxonomy: bool,
    /// Show judges a reasoning model's thinking before each answer (rubric, taxonomy) [default: answers only].
    /// A run scored both with and without it gets the thinking probe in `nmb report`: what showing the thinking
    /// did to each judge's grades
    #[arg(long)]
    pub judge_sees_thinking: bool,
    /// Ask each judge each question K times, with seeds 0..K (each repeat its own recorded judge run): the jury
    /// uses the median of each judge's repeats, and the report gives their test-retest ICC and kappa and the
    /// unstable items
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub judge_repeats: u32,
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
    /// Judges send through their providers' batch APIs (half the price, answered within 24 hours), recorded
    /// before submission as `--batch` does for models
    #[arg(long)]
    pub judge_batch: bool,
    /// With --judge-batch: seconds between polls of a submitted batch
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 30.0,
        requires = "judge_batch"
    )]
    pub judge_batch_poll: f64,
    /// Price of a model, MODEL=IN,OUT in dollars per million input and output tokens (MODEL may be * for all),
    /// for the cost per 1,000 images of structured answers; repeatable
    #[arg(long = "price", value_name = "MODEL=IN,OUT[,CACHED[,WRITE]]")]
    pub prices: Vec<String>,
    /// How NeuroVLM-Bench answers are read: `neurovlm-paper` adds the numbers of the authors' evaluator
    /// beside nmb's own (docs/neurovlm-paper.md lists where the two differ)
    #[arg(long, value_enum, default_value = "nmb")]
    pub protocol: ProtocolArg,
    /// With --protocol neurovlm-paper, report the reference's JSON-valid rate: every answer, whatever it is, over
    /// the answers and errored samples (a bug of the reference, reproduced only on request)
    #[arg(long)]
    pub paper_json_validity_bug: bool,
    /// Most MiB one response of a model or judge may take, read as it arrives (gzip or deflate decoded, at most
    /// 100:1); a larger one errors `response_too_large` without being read further, and is not retried. With
    /// --batch, also each line of a batch's output [default: 1 MiB plus 64 bytes per token each sample may
    /// generate, which every honest answer fits]
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub max_response_mib: Option<u64>,
    /// Also break every headline number down by a field of the cases, repeatable: an EHR field, a case or task
    /// metadata key (`sex`, `disease_group`), or a number in bands, `age:0-40,40-65,65-` (LOW-HIGH holds LOW up
    /// to but not HIGH; a last LOW- has no upper limit). Each subgroup gets its cases, estimate and
    /// case-clustered 95% CI, subgroups under 10 cases are marked, and the gap between the best and the worst
    /// gets its own CI. Every case must have the field and every value a band, else scoring stops before it
    /// starts, naming the case
    #[arg(long = "by", value_name = "FIELD[:BANDS]")]
    pub by: Vec<String>,
    /// What judges see of the images the model was shown: `none` (their captions only) or `same` (the exact
    /// image bytes the model received, read from the store, in its order with their captions, attached to every
    /// rubric, criteria and taxonomy question; each judge pays for them as input tokens). A judge that cannot
    /// take images (`local:`) is refused before anything is sent. Recorded in the scoring configuration; `same`
    /// enters its hash
    #[arg(long, value_enum, default_value = "none", value_name = "none|same")]
    pub judge_images: JudgeImagesArg,
}

/// `--judge-images`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum JudgeImagesArg {
    /// Captions only
    None,
    /// The images the model received
    Same,
}

impl From<JudgeImagesArg> for nmb_score::JudgeImages {
    fn from(a: JudgeImagesArg) -> Self {
        match a {
            JudgeImagesArg::None => nmb_score::JudgeImages::None,
            JudgeImagesArg::Same => nmb_score::JudgeImages::Same,
        }
    }
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

impl ScoringArgs {
    /// The typed scoring configuration these flags describe, with `bootstrap`.
    pub fn config(&self, bootstrap: BootstrapConfig) -> Result<ScoringConfig> {
        let judges = self
            .judges
            .iter()
            .map(|j| ModelSpec::parse(j).with_context(|| format!("--judge {j}")))
            .collect::<Result<_>>()?;
        let rubric = match (&self.rubric, self.no_rubric) {
            (_, true) => RubricChoice::Off,
            (Some(path), false) => RubricChoice::File(path.clone()),
            (None, false) => RubricChoice::Builtin,
        };
        let bertscore = if self.no_bertscore {
            BertScoreSetting::Off
        } else {
            BertScoreSetting::Model {
                dir: self.bertscore_model.clone(),
                layer: self.bertscore_layer,
                idf: self.bertscore_idf,
                rescale: self.bertscore_rescale.as_deref().map(|r| match r {
                    "default" => Rescale::Default,
                    file => Rescale::File(PathBuf::from(file)),
                }),
            }
        };
        Ok(ScoringConfig {
            judges,
            aggregation: self.jury_aggregate.into(),
            rubric,
            taxonomy: !self.no_taxonomy,
            taxonomy_labels: self.taxonomy_labels.clone(),
            bertscore,
            max_reasks: self.max_reasks,
            judge_concurrency: self.judge_concurrency,
            prices: Prices::from_specs(&self.prices).map_err(anyhow::Error::msg)?,
            bootstrap,
            suite: SuiteOverride::default(),
            paper: self.paper()?,
            judge_sees_thinking: self.judge_sees_thinking,
            judge_batch_poll_secs: self.judge_batch.then_some(self.judge_batch_poll),
            judge_repeats: self.judge_repeats,
            criteria: self.criteria.clone(),
            max_response_mib: self.max_response_mib,
            by: self.by_specs()?,
            judge_images: self.judge_images.into(),
        })
    }

    /// The `--by` specs, each checked (bands that overlap or leave gaps are refused here).
    fn by_specs(&self) -> Result<Vec<String>> {
        for spec in &self.by {
            nmb_results::subgroup::parse(spec)?;
        }
        Ok(self.by.iter().map(|s| s.trim().to_string()).collect())
    }

    fn paper(&self) -> Result<Option<PaperOptions>> {
        match (self.protocol, self.paper_json_validity_bug) {
            (ProtocolArg::NeurovlmPaper, bug) => Ok(Some(PaperOptions {
                json_validity_bug: bug,
            })),
            (ProtocolArg::Nmb, false) => Ok(None),
            (ProtocolArg::Nmb, true) => {
                anyhow::bail!("--paper-json-validity-bug needs --protocol neurovlm-paper")
            }
        }
    }
}

impl ScoreArgs {
    /// The scoring configuration of `nmb score`: the scoring flags, the bootstrap, and the suite flags that
    /// replace what the run's manifest records.
    pub fn config(&self) -> Result<ScoringConfig> {
        let mut config = self.scoring.config(self.bootstrap.config())?;
        config.suite = SuiteOverride {
            spec: self.suite.clone(),
            answers: self.answers.clone(),
            filters: self.filters.clone(),
            level: self.level,
        };
        Ok(config)
    }
}

pub fn run(args: ScoreArgs, at: &StoreAt) -> Result<ExitCode> {
    let config = args.config()?;
    let store = open_store(at)?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let report = runtime
        .block_on(nmb_score::score_run(
            &store,
            &args.run_id,
            &config,
            &nmb_study::job::connect_judge,
        ))
        .with_context(|| format!("cannot score run {}", args.run_id))?;
    print_report(&report, args.json)?;
    Ok(ExitCode::SUCCESS)
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
