//! `nmb agreement`: how well judges and clinicians agree, from a CSV of their ratings or a stored review set.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use nmb_calibration::{analyse, render_text, AgreementOptions, Ratings};
use nmb_stats::{BootstrapConfig, DEFAULT_RESAMPLES, DEFAULT_SEED};

use crate::store_at::StoreAt;

pub const EXAMPLES: &str = "\
Examples:
  nmb agreement ratings.csv
  nmb agreement ratings.csv --json --pass-threshold 3
  nmb agreement ratings.csv --judge gpt-4o --judge claude --dimension overall
  nmb agreement --review rv-1a2b3c4d5e6f
  nmb agreement --review rv-1a2b3c4d5e6f --run RUN_ID --json

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
interval over items; one that cannot be computed says why.

Criterion marks (HealthBench's form) are ratings on dimensions named criterion:ID, 1 met and 0 not
met. They get their own section: each judge's balanced F1 (the mean of F1 on met and on not met)
against every clinician's marks, each clinician's against the other clinicians' (where the judge
stands among them), and each judge's per criterion, every (rater, clinician) pair counted as in
HealthBench's meta-evaluation, with intervals resampling answers. They are left out of the rubric
dimensions unless named with --dimension.

With --review SET the ratings come from the store instead: each reviewer's newest grade (verdict and
rubric scores; skipped items left out), each judge's rubric scores of every scored sample of the set's
runs (annotator judge:MODEL, from the run's newest score report when it used the set's rubric), and the
scoring's correctness decision as annotator judge:grader on the `verdict` dimension (correct 2, partly
1, incorrect 0; a verdict passes only when correct). Rubric scores pass at --pass-threshold, default 3,
so every judge gets its Rogan-Gladen corrected pass rate over the whole run. `nmb review export SET
--csv` writes the same ratings as a file.

Exit status: 0 success, 1 unreadable or invalid file (every problem is listed with its line and
column) or unknown review set, 2 bad usage.";

#[derive(Args, Debug)]
pub struct AgreementArgs {
    /// Ratings CSV: annotator,item,dimension,score
    #[arg(
        value_name = "FILE.csv",
        required_unless_present = "review",
        conflicts_with = "review"
    )]
    file: Option<PathBuf>,
    /// Read the ratings of this stored review set (and its runs' judges) instead of a file
    #[arg(long, value_name = "SET")]
    review: Option<String>,
    /// With --review: only the items of this run
    #[arg(long, value_name = "RUN", requires = "review")]
    run: Option<String>,
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

pub fn run(args: AgreementArgs, at: &StoreAt) -> Result<ExitCode> {
    let ratings = match (&args.file, &args.review) {
        (Some(file), _) => Ratings::read_csv(file)?,
        (None, Some(set)) => stored_ratings(at, set, args.run.as_deref())?,
        (None, None) => bail!("give a ratings FILE.csv or --review SET"),
    };
    let mut options = AgreementOptions {
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
    if args.review.is_some() {
        options = nmb_review::review_options(options);
    }
    let report = analyse(&ratings, &options).map_err(|e| anyhow!(e))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render_text(&report));
    }
    Ok(ExitCode::SUCCESS)
}

/// The review set's ratings from the store; its notes (an unscored run, another rubric) go to stderr.
fn stored_ratings(at: &StoreAt, set: &str, run: Option<&str>) -> Result<Ratings> {
    let store = at.open_for_reading()?;
    let r = nmb_review::review_ratings(&store, set, run)?;
    for note in &r.notes {
        eprintln!("note: {note}");
    }
    if r.ratings.rows.is_empty() {
        bail!("review set {set} has no ratings yet: no reviewer has graded an item and no run of it is scored");
    }
    Ok(r.ratings)
}
