//! `nmb agreement`: how well judges and clinicians agree, from a CSV of their ratings.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, Result};
use clap::Args;
use nmb_calibration::{analyse, render_text, AgreementOptions, Ratings};
use nmb_stats::{BootstrapConfig, DEFAULT_RESAMPLES, DEFAULT_SEED};

pub const EXAMPLES: &str = "\
Examples:
  nmb agreement ratings.csv
  nmb agreement ratings.csv --json --pass-threshold 3
  nmb agreement ratings.csv --judge gpt-4o --judge claude --dimension overall

FILE.csv has a header naming the columns annotator,item,dimension,score (any order; other columns
are ignored) and one rating per row, e.g.

  annotator,item,dimension,score
  dr_lee,case_1/q1#0,overall,4
  judge:openai:gpt-4o,case_1/q1#0,overall,5

Annotators whose name starts with `judge:` (or named with --judge) are LLM judges; everyone else is a
clinician. For each dimension nmb reports: every pair of annotators (Pearson, Spearman, Cohen's
kappa, quadratic-weighted kappa, Krippendorff's alpha interval and nominal, ICC(2,1)); all raters,
the clinicians and the judges as groups (both alphas, ICC(2,1)); each judge against the clinicians'
consensus (their mean score per item; the kappas and nominal alpha use it rounded); and with
--pass-threshold, each judge's pass rate over all items it rated corrected for its sensitivity
and specificity against the clinicians (Rogan-Gladen). Every statistic has a seeded 95% bootstrap
interval over items; one that cannot be computed says why. Exit status: 0 success, 1 unreadable
or invalid file (every problem is listed with its line and column), 2 bad usage.";

#[derive(Args, Debug)]
pub struct AgreementArgs {
    /// Ratings CSV: annotator,item,dimension,score
    #[arg(value_name = "FILE.csv")]
    file: PathBuf,
    /// An annotator that is an LLM judge (repeatable); names starting with `judge:` always are
    #[arg(long, value_name = "NAME")]
    judge: Vec<String>,
    /// Only this dimension (repeatable); default all, in file order
    #[arg(long, value_name = "NAME")]
    dimension: Vec<String>,
    /// Scores at or above this pass; adds each judge's Rogan-Gladen corrected pass rate
    #[arg(long, value_name = "SCORE")]
    pass_threshold: Option<f64>,
    /// Seed of the bootstrap resampling (recorded in the output)
    #[arg(long, default_value_t = DEFAULT_SEED)]
    seed: u64,
    /// Bootstrap resamples per interval
    #[arg(long, default_value_t = DEFAULT_RESAMPLES, value_name = "N")]
    resamples: usize,
    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,
}

pub fn run(args: AgreementArgs) -> Result<ExitCode> {
    let ratings = Ratings::read_csv(&args.file)?;
    let options = AgreementOptions {
        judges: args.judge,
        dimensions: args.dimension,
        pass_threshold: args.pass_threshold,
        bootstrap: BootstrapConfig {
            resamples: args.resamples.max(1),
            seed: args.seed,
            ..BootstrapConfig::default()
        },
        ..AgreementOptions::default()
    };
    let report = analyse(&ratings, &options).map_err(|e| anyhow!(e))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render_text(&report));
    }
    Ok(ExitCode::SUCCESS)
}
