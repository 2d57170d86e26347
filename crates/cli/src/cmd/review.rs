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
  nmb review create RUN_A RUN_B --mode pairwise --reviewers lee,park --overlap 1
  nmb review judge rv-1a2b3c4d5e6f --judge openai:gpt-4o
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
set and rubric hash; a change adds a row, so the history is an audit trail.

With --mode pairwise, each item is two runs' answers to the same task side by side, A and B in an order drawn
with the seed and recorded; reviewers vote A, B, about the same, or neither acceptable (keys a, b, t, n), and
`nmb report` ranks the models from the votes (Bradley–Terry with ties, style-controlled, with CIs).";

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
    /// Ask LLM judges which answer of each pair of a pairwise set is better, in both orders, and measure their
    /// position bias and agreement with the clinicians' votes
    Judge(JudgeArgs),
    /// Serve pages where a clinician answers a suite's cases; their answers become the run of human:NAME
    #[command(after_help = super::answer::EXAMPLES)]
    Answer(super::answer::AnswerArgs),
}

#[derive(Args)]
pub struct JudgeArgs {
    /// A pairwise review set's id
    set: String,
    /// Judge model spec (repeat for several)
    #[arg(long = "judge", value_name = "SPEC", required = true)]
    judges: Vec<String>,
    /// Bootstrap resamples of the intervals
    #[arg(long, default_value_t = nmb_stats::DEFAULT_RESAMPLES)]
    resamples: usize,
    /// Most MiB one judge response may take [default: 1 MiB plus 64 bytes per token the judge may generate]
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    max_response_mib: Option<u64>,
    /// What judges see of the images the models were shown: `none` (the question's text only) or `same` (the
    /// exact image bytes the model of the pair's first answer received for the task, read from the store, in
    /// its order with their captions, attached once to every pairwise question). A judge that cannot take images
    /// (`local:`) is refused before anything is sent, and one whose server answers `unsupported_input` stops the
    /// asking. The judges' runs with images are others than those without, and their manifests record it
    #[arg(long, value_enum, default_value = "none", value_name = "none|same")]
    judge_images: super::score::JudgeImagesArg,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    Grade,
    Pairwise,
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
    /// grade: reviewers grade one answer at a time; pairwise: they vote between two runs' answers to the same
    /// task (A, B, about the same, neither acceptable), shown in a random order the set records
    #[arg(long, value_enum, default_value_t = Mode::Grade)]
    mode: Mode,
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
        ReviewCommand::Judge(a) => judge(a, at),
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
        pairwise: args.mode == Mode::Pairwise,
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

fn judge(args: JudgeArgs, at: &StoreAt) -> Result<ExitCode> {
    let store = at.open_for_reading()?;
    let specs = (args.judges.iter())
        .map(|j| nmb_requests::ModelSpec::parse(j).with_context(|| format!("--judge {j}")))
        .collect::<Result<Vec<_>>>()?;
    let images = nmb_score::JudgeImages::from(args.judge_images);
    let config = nmb_score::ScoringConfig {
        judges: specs,
        max_response_mib: args.max_response_mib,
        judge_images: images,
        ..nmb_score::ScoringConfig::default()
    };
    let judges = config
        .connect_judges(&nmb_study::job::connect_judge)
        .context("cannot connect the judges")?;
    if images == nmb_score::JudgeImages::Same {
        nmb_score::refuse_blind_judges(&judges).context("cannot connect the judges")?;
    }
    let cfg = nmb_stats::BootstrapConfig {
        resamples: args.resamples.max(1),
        ..nmb_stats::BootstrapConfig::default()
    };
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let cannot = || format!("cannot judge the pairs of review set {}", args.set);
    let pairs = nmb_review::pairs_to_judge(&store, &args.set).with_context(cannot)?;
    let shown = match images {
        nmb_score::JudgeImages::Same => Some(pair_images(&store, &pairs).with_context(cannot)?),
        nmb_score::JudgeImages::None => None,
    };
    let (specs, verdicts) = runtime
        .block_on(nmb_judges::pairwise::judge_pairs(
            &store,
            &judges,
            &pairs.scored,
            &pairs.pairs,
            shown.as_deref(),
        ))
        .with_context(cannot)?;
    let results = nmb_review::judges_beside_clinicians(&store, &pairs, &specs, &verdicts, &cfg)
        .with_context(cannot)?;
    if args.json {
        let mut doc = serde_json::json!({"set_id": args.set, "judges": results});
        if images == nmb_score::JudgeImages::Same {
            doc["judge_images"] = serde_json::json!(images.as_str());
        }
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        for r in &results {
            println!("{}", r.sentence);
            for n in &r.notes {
                println!("  note: {n}");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The images each pair's judges are shown: those the model of its first answer was shown for the task, or the
/// second's when the first was shown none.
fn pair_images(
    store: &Store,
    pairs: &nmb_review::SetPairs,
) -> Result<Vec<Vec<nmb_judges::judge::JudgeImage>>> {
    let samples: Vec<(&str, &str, u32)> = (pairs.answers.iter())
        .flatten()
        .map(|a| (a.run_id.as_str(), a.task_id.as_str(), a.sample_index))
        .collect();
    let shown = nmb_score::shown_images(store, &samples)?;
    Ok(shown
        .chunks(2)
        .map(|both| match both[0].is_empty() {
            true => both.get(1).cloned().unwrap_or_default(),
            false => both[0].clone(),
        })
        .collect())
}
