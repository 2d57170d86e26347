//! `nmb review`: blinded clinician review of stored answers (create a set, follow it, export it, revoke a
//! reviewer). The pages reviewers grade on are `nmb serve`'s.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use nmb_review::{AssignOptions, NewSet};
use nmb_store::Store;

use crate::store_at::StoreAt;

pub const EXAMPLES: &str = "\
Examples:
  nmb review create RUN_A RUN_B --reviewers lee,park --per-reviewer 30 --overlap 0.2 --seed 7
  nmb review status rv-1a2b3c4d5e6f
  nmb review export rv-1a2b3c4d5e6f --csv > ratings.csv
  nmb review revoke rv-1a2b3c4d5e6f park
  nmb agreement --review rv-1a2b3c4d5e6f

`create` draws answered samples of the runs, shuffles them with the seed, gives every reviewer the --overlap
share of their items in common (for inter-rater agreement) and the rest to one reviewer each, and prints one
URL per reviewer carrying a secret token (only its SHA-256 is stored: the URL is printed once). Reviewers open
it on a running `nmb serve` (pass its address with --url) and see the case, the question and the answer, never
the model, the run, judge scores or other reviewers' grades; the model's thinking before its answer only when the
set is made with --show-thinking (the blind review grades the answer, so by default it is hidden). Every grade is appended with the reviewer, time,
set and rubric hash; a change adds a row, so the history is an audit trail.";

#[derive(Subcommand)]
pub enum ReviewCommand {
    /// Build a review set from one or more runs and print each reviewer's URL
    Create(CreateArgs),
    /// Progress per reviewer
    Status(SetArgs),
    /// The set's ratings as the annotator,item,dimension,score CSV `nmb agreement` reads
    Export(ExportArgs),
    /// Revoke a reviewer's token at once
    Revoke(RevokeArgs),
    /// How many more reviews a run needs for its calibrated pass rates to reach a target interval width, and
    /// which unreviewed items to review first (where the judges disagree, then where the calibrated chance of
    /// passing is nearest one half)
    Plan(PlanArgs),
    /// Serve pages where a clinician answers a suite's cases; their answers become the run of human:NAME
    #[command(after_help = super::answer::EXAMPLES)]
    Answer(super::answer::AnswerArgs),
}

#[derive(Args)]
pub struct CreateArgs {
    /// Runs whose answers are reviewed
    #[arg(value_name = "RUN", required = true)]
    runs: Vec<String>,
    /// Reviewer names, comma-separated (letters, digits, . _ -)
    #[arg(long, value_delimiter = ',', required = true, value_name = "A,B,...")]
    reviewers: Vec<String>,
    /// Items per reviewer (default: every answer once, plus the shared ones)
    #[arg(long, value_name = "N")]
    per_reviewer: Option<usize>,
    /// Share of each reviewer's items that every reviewer grades
    #[arg(long, default_value_t = 0.2, value_name = "FRACTION")]
    overlap: f64,
    /// Seed of the shuffle (recorded with the set)
    #[arg(long, default_value_t = nmb_stats::DEFAULT_SEED)]
    seed: u64,
    /// Rubric file (default: the bundled neurology rubric)
    #[arg(long, value_name = "FILE")]
    rubric: Option<PathBuf>,
    /// Show reviewers each answer's thinking, collapsed above it (default: hidden, the answer is graded alone)
    #[arg(long)]
    show_thinking: bool,
    /// Criterion rubric (HealthBench form, .toml or .jsonl): reviewers also mark each criterion of an item's
    /// task met or not met, one checkbox per criterion
    #[arg(long, value_name = "FILE")]
    criteria: Option<PathBuf>,
    /// Address of the `nmb serve` reviewers will use
    #[arg(long, default_value = "http://127.0.0.1:8686/")]
    url: String,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct SetArgs {
    #[arg(value_name = "SET")]
    set: String,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct PlanArgs {
    #[arg(value_name = "RUN")]
    run: String,
    /// The interval width to reach, end to end (0.05: five percentage points)
    #[arg(long, value_name = "WIDTH", default_value_t = 0.05)]
    target_ci: f64,
    /// How many items to list to review first
    #[arg(long, value_name = "N", default_value_t = 20)]
    first: usize,
    /// Bootstrap resamples of each interval
    #[arg(long, value_name = "N", default_value_t = 2000)]
    resamples: usize,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct ExportArgs {
    #[arg(value_name = "SET")]
    set: String,
    /// Write CSV (the only format; the flag says so explicitly)
    #[arg(long, required = true)]
    csv: bool,
    /// Write to this file instead of standard output
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

#[derive(Args)]
pub struct RevokeArgs {
    #[arg(value_name = "SET")]
    set: String,
    #[arg(value_name = "REVIEWER")]
    reviewer: String,
}

pub fn run(command: ReviewCommand, at: &StoreAt) -> Result<ExitCode> {
    match command {
        ReviewCommand::Create(a) => create(a, at),
        ReviewCommand::Status(a) => status(a, at),
        ReviewCommand::Export(a) => export(a, at),
        ReviewCommand::Revoke(a) => revoke(a, at),
        ReviewCommand::Plan(a) => plan(a, at),
        ReviewCommand::Answer(a) => super::answer::run(a, at),
    }
}

fn create(args: CreateArgs, at: &StoreAt) -> Result<ExitCode> {
    let store = at.open_for_reading()?;
    let new = NewSet {
        runs: args.runs,
        assign: AssignOptions {
            reviewers: args.reviewers,
            per_reviewer: args.per_reviewer,
            overlap: args.overlap,
            seed: args.seed,
        },
        rubric: args.rubric,
        show_thinking: args.show_thinking,
        criteria: args.criteria,
    };
    let created = nmb_review::create_set(&store, new)
        .with_context(|| format!("cannot create a review set in {at}"))?;
    match args.json {
        true => println!(
            "{}",
            serde_json::to_string_pretty(&created.json(&args.url))?
        ),
        false => print!("{}", created.text(&args.url)),
    }
    Ok(ExitCode::SUCCESS)
}

fn open_set(store: &Store, set: &str) -> Result<nmb_store::ReviewSet> {
    store
        .review_set(set)?
        .ok_or_else(|| anyhow!("no review set {set:?} in the store (see `nmb review create`)"))
}

fn status(args: SetArgs, at: &StoreAt) -> Result<ExitCode> {
    let store = at.open_for_reading()?;
    let set = open_set(&store, &args.set)?;
    let rows = store.review_status(&set.set_id)?;
    if args.json {
        let out = nmb_review::status_json(&set, &rows);
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print!("{}", nmb_review::status_text(&set, &rows));
    }
    Ok(ExitCode::SUCCESS)
}

fn plan(args: PlanArgs, at: &StoreAt) -> Result<ExitCode> {
    let store = at.open_for_reading()?;
    let options = nmb_calibration::AgreementOptions {
        bootstrap: nmb_stats::BootstrapConfig {
            resamples: args.resamples.max(1),
            ..nmb_stats::BootstrapConfig::default()
        },
        ..nmb_calibration::AgreementOptions::default()
    };
    let plan = nmb_review::review_plan(&store, &args.run, args.target_ci, args.first, &options)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&plan)?);
        return Ok(ExitCode::SUCCESS);
    }
    for j in &plan.judges {
        println!("{} (review {})", j.sentence, j.set_id);
    }
    if !plan.review_first.is_empty() {
        println!("review first:");
        for item in &plan.review_first {
            println!("  {item}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn export(args: ExportArgs, at: &StoreAt) -> Result<ExitCode> {
    let store = at.open_for_reading()?;
    let set = open_set(&store, &args.set)?;
    let ratings = nmb_review::review_ratings(&store, &set.set_id, None)?;
    if set.show_thinking {
        eprintln!("note: {}", nmb_review::thinking_line(true));
    }
    for note in &ratings.notes {
        eprintln!("note: {note}");
    }
    let text = ratings.csv();
    match &args.out {
        Some(p) => {
            std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))?
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}

fn revoke(args: RevokeArgs, at: &StoreAt) -> Result<ExitCode> {
    let store = at.open_for_reading()?;
    let set = open_set(&store, &args.set)?;
    if !store.revoke_reviewer(&set.set_id, &args.reviewer)? {
        bail!(
            "review set {} has no active reviewer {:?} (see `nmb review status {}`)",
            set.set_id,
            args.reviewer,
            set.set_id
        );
    }
    println!(
        "revoked {} in {}: their URL no longer opens anything",
        args.reviewer, set.set_id
    );
    Ok(ExitCode::SUCCESS)
}
