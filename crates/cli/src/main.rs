//! The `nmb` command line: a thin layer over the library crates.
//!
//! `main` parses arguments and dispatches to one module per subcommand under `cmd/`. A subcommand returns the
//! process exit code; errors carry context and are printed once, here.

// Doc comments on the argument structs are clap's help text (`[default: ...]`, `MODEL[@BASE_URL]`), not rustdoc.
#![allow(rustdoc::broken_intra_doc_links)]

mod cmd;
mod progress;
mod store_at;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

const EXAMPLES: &str = "\
Examples:
  nmb eval --suite sample --model local:SmolLM2-135M-Instruct.Q4_1.gguf --samples 1
  nmb eval --suite sample --model openai:gpt-4o --dry-run
  nmb runs list
  nmb runs show <RUN_ID> --json
  nmb suite stats sample
  nmb suite validate ../shared/formats/neural-medbench-site.example.json --answers answers.jsonl
  nmb suite stats ../shared/data/vqa-rad/trainset.json --filter image_organ=HEAD --json
  nmb suite show sample <CASE_ID>
  nmb score RUN_ID --judge openai:gpt-4o --json
  nmb compare RUN_A RUN_B
  nmb agreement ratings.csv --pass-threshold 3 --json
  nmb review create RUN_ID --reviewers lee,park --overlap 0.2
  nmb agreement --review rv-1a2b3c4d5e6f
  nmb import answers.jsonl --suite sample --as human:lee
  nmb import run.jsonl --format neurovlm-run --suite neurovlm:image_mapping.csv --images-root DATASET
  nmb bertscore --model-dir DIR --layer 6 --cands answers.txt --refs references.txt --json
  nmb report RUN_ID [RUN_ID...] --out nmb-report --format html,md,csv,json
  nmb export inspect RUN_ID --out run.json
  nmb export mlflow RUN_ID --tracking-uri http://127.0.0.1:5000

A SUITE is `sample` or `sample-structured` (bundled), a path whose format is detected, or FORMAT:PATH
with FORMAT one of site, native, vqa-rad, mcq, neurovlm, pubmedqa, slake, table, pmc-vqa, omnimedvqa, pathvqa,
or a Hugging Face dataset: hf-disk:[PRESET:]DIR (save_to_disk) or hf-cache:[PRESET:]NAME[:CONFIG] (--split).

Exit status: 0 success; 1 failure (the suite has errors or cannot be loaded, a run cannot be scored); 2 bad usage.
Logging goes to stderr; set NMB_LOG (e.g. NMB_LOG=debug) to see more.";

/// Measures how well vision-language models reason like neurologists.
///
/// nmb loads benchmark suites (Neural-MedBench cases, hand-written suites, VQA-RAD, MedQA/MedMCQA), asks
/// models about them, stores every answer and scores them.
#[derive(Parser)]
#[command(name = "nmb", version, about, long_about, after_help = EXAMPLES)]
struct Cli {
    /// Where runs are stored (the SQLite file RUNS_DIR/nmb.sqlite)
    #[arg(
        long,
        global = true,
        value_name = "DIR",
        env = "NMB_RUNS_DIR",
        default_value = "nmb-runs"
    )]
    runs_dir: PathBuf,
    /// Where runs are stored instead: a PostgreSQL URL (postgres://USER@HOST:PORT/DB) or a runs directory. Keep
    /// the password out of shared command lines: in NMB_STORE_URL, or in PGPASSWORD
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "NMB_STORE_URL",
        hide_env_values = true
    )]
    store: Option<String>,
    /// Most voxels one DICOM file or series may decode to [default: 268435456, 1 GiB as floats]
    #[arg(long, global = true, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    max_voxels: Option<u64>,
    /// Most MiB a .nii.gz stream or a deflated DICOM data set may inflate to [default: 2048]
    #[arg(long, global = true, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    max_inflated_mib: Option<u64>,
    /// Most MiB a PNG, JPEG, GIF, WebP, BMP or TIFF image may decode to [default: 512]
    #[arg(long, global = true, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..))]
    max_image_mib: Option<u64>,
    /// Most MiB a file nmb reads whole may hold: a suite (JSON, JSONL, CSV), an answer key, an import, a run
    /// file, a rubric; also what a Parquet table's cells may decode to, at least [default: 64]
    #[arg(long, global = true, value_name = "MIB", env = "NMB_MAX_FILE_MIB",
          value_parser = clap::value_parser!(u64).range(1..))]
    max_file_mib: Option<u64>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Inspect benchmark suites: validate, count, show one case
    #[command(after_help = cmd::suite::EXAMPLES)]
    Suite(cmd::suite::SuiteCommand),
    /// Ask a model about every task of a suite; store every answer as it arrives (resumable)
    #[command(after_help = cmd::eval::help())]
    Eval(Box<cmd::eval::EvalArgs>),
    /// List stored runs, or show one run's counts, errors, tokens and manifest
    #[command(after_help = cmd::runs::EXAMPLES)]
    Runs(cmd::runs::RunsCommand),
    /// Score a stored run: diagnosis matching, pass@k (both readings), judges, rubric, taxonomy, BERTScore, CIs
    #[command(after_help = cmd::score::EXAMPLES)]
    Score(cmd::score::ScoreArgs),
    /// Compare two scored runs on the same items: paired bootstrap and exact McNemar test
    #[command(after_help = cmd::compare::EXAMPLES)]
    Compare(cmd::compare::CompareArgs),
    /// What a paired comparison on this suite can detect: the smallest difference in accuracy, the cases a
    /// target difference needs
    #[command(after_help = cmd::power::EXAMPLES)]
    Power(cmd::power::PowerArgs),
    /// BERTScore (P, R, F1) of candidate lines against reference lines, with a local encoder
    #[command(after_help = cmd::bertscore::EXAMPLES)]
    Bertscore(cmd::bertscore::BertScoreArgs),
    /// Write the report of one run or a comparison: self-contained HTML, Markdown, CSV, JSON, leaderboard
    #[command(after_help = cmd::report::EXAMPLES)]
    Report(cmd::report::ReportArgs),
    /// Agreement between judges and clinicians (correlations, kappas, alpha, ICC, corrected pass rates)
    #[command(after_help = cmd::agreement::EXAMPLES)]
    Agreement(cmd::agreement::AgreementArgs),
    /// Work on a shared store's runs alongside other workers: claim pending samples, ask, store, exit when done
    #[command(after_help = cmd::worker::EXAMPLES)]
    Worker(cmd::worker::WorkerArgs),
    /// Look at a DICOM file or series or a NIfTI volume, and render the views a model would receive
    #[command(subcommand, after_help = cmd::image::EXAMPLES)]
    Image(cmd::image::ImageCommand),
    /// Copy runs between stores: SQLite and PostgreSQL, either direction
    #[command(after_help = cmd::store::EXAMPLES)]
    Store(cmd::store::StoreCommand),
    /// Browse stored runs in a web browser: runs, samples, answers, prompts and images (read-only)
    #[command(after_help = cmd::serve::EXAMPLES)]
    Serve(cmd::serve::ServeArgs),
    /// Clinicians grade answers blind: review sets, progress, export, review plans, pairwise votes, answer pages
    #[command(subcommand, after_help = cmd::review::EXAMPLES)]
    Review(cmd::review::ReviewCommand),
    /// Criterion rubrics (HealthBench form): check one for sign and point mistakes
    #[command(subcommand, after_help = cmd::rubric::EXAMPLES)]
    Rubric(cmd::rubric::RubricCommand),
    /// Record a clinician's answers (JSONL) to a suite as the run of human:NAME, a human baseline, or the runs
    /// NeuroVLM-Bench's runner made (--format neurovlm-run) as runs of imported:MODEL
    #[command(after_help = cmd::import::EXAMPLES)]
    Import(cmd::import::ImportArgs),
    /// Write scored runs where other tools look: an Inspect AI eval log, an MLflow tracking server
    #[command(after_help = cmd::export::EXAMPLES)]
    Export(cmd::export::ExportCommand),
    /// Print this command line's reference as Markdown (docs/cli.md is its output)
    #[command(hide = true)]
    MarkdownHelp,
}

/// Subcommands that use no store: the global `--runs-dir` and `--store` are left out of their help.
const STORELESS: [&str; 2] = ["image", "bertscore"];

/// The command line as parsed and documented: clap's, with the store flags hidden where they do nothing. A
/// subcommand that has its own (hidden) copy of a global argument is not given the global one, and passes its
/// value up all the same.
fn command() -> clap::Command {
    let cli = Cli::command();
    let hidden: Vec<clap::Arg> = cli
        .get_arguments()
        .filter(|a| matches!(a.get_id().as_str(), "runs_dir" | "store"))
        .map(|a| a.clone().hide(true))
        .collect();
    STORELESS.iter().fold(cli, |cli, name| {
        cli.mut_subcommand(name, |sub| sub.args(hidden.iter().cloned()))
    })
}

/// The examples and notes after each command's options, as preformatted Markdown blocks: they are laid out in
/// lines and columns, and hold `<RUN_ID>`-like words a Markdown reader would take for HTML.
fn fence_after_help(command: clap::Command) -> clap::Command {
    let names: Vec<String> = command
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let mut command = match command.get_after_help().map(|h| h.to_string()) {
        Some(text) => command.after_help(format!("```text\n{}\n```", text.trim_end())),
        None => command,
    };
    for name in names {
        command = command.mut_subcommand(name, fence_after_help);
    }
    command
}

/// The reference `nmb markdown-help` prints: every subcommand's help, as Markdown.
fn markdown_help() -> String {
    let options = clap_markdown::MarkdownOptions::new()
        .title("nmb command-line reference".to_string())
        .show_footer(false);
    let intro = "Generated from the command line's own help by `nmb markdown-help > docs/cli.md`; edit the \
                 help texts in `crates/cli/src`, not this file. The options of `nmb` itself (`--runs-dir`, \
                 `--store` and the imaging budgets) are global: they may follow any subcommand.\n\n";
    let text = clap_markdown::help_markdown_command_custom(&fence_after_help(command()), &options);
    match text.split_once('\n') {
        Some((title, rest)) => format!("{title}\n\n{intro}{}", rest.trim_start()),
        None => text,
    }
}

fn main() -> ExitCode {
    restore_sigpipe();
    init_tracing();
    let cli = match Cli::from_arg_matches(&command().get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    // 0 keeps a budget's default.
    nmb_imaging::limits::set_budgets(nmb_imaging::limits::Budgets {
        voxels: cli.max_voxels.unwrap_or(0),
        inflated_bytes: cli.max_inflated_mib.unwrap_or(0).saturating_mul(1 << 20),
        raster_bytes: cli.max_image_mib.unwrap_or(0).saturating_mul(1 << 20),
    });
    nmb_suite::limits::set_max_file_bytes(cli.max_file_mib.unwrap_or(0).saturating_mul(1 << 20));
    let at = match store_at::StoreAt::new(cli.runs_dir, cli.store) {
        Ok(at) => at,
        Err(e) => {
            eprintln!("error: {}", render_error(&e));
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Suite(c) => cmd::suite::run(c),
        Command::Eval(args) => match &args.config {
            Some(file) => cmd::study::run(file, &args, &at),
            None => cmd::eval::run(*args, &at),
        },
        Command::Runs(c) => cmd::runs::run(c, &at),
        Command::Score(c) => cmd::score::run(c, &at),
        Command::Compare(c) => cmd::compare::run(c, &at),
        Command::Power(a) => cmd::power::run(a, &at),
        Command::Bertscore(a) => cmd::bertscore::run(a),
        Command::Report(a) => cmd::report::run(a, &at),
        Command::Agreement(a) => cmd::agreement::run(a, &at),
        Command::Image(c) => cmd::image::run(c),
        Command::Store(c) => cmd::store::run(c),
        Command::Worker(a) => cmd::worker::run(a, &at),
        Command::Serve(a) => cmd::serve::run(a, &at),
        Command::Review(c) => cmd::review::run(c, &at),
        Command::Rubric(c) => cmd::rubric::run(c, &at),
        Command::Import(a) => cmd::import::run(a, &at),
        Command::Export(c) => cmd::export::run(c, &at),
        Command::MarkdownHelp => {
            print!("{}", markdown_help());
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", render_error(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes on one line. Many library errors already quote their source in their own message
/// (`cannot read FILE: No such file`), so a cause whose text is already there is not repeated. Only the
/// errors' `Display` texts are used (never `Debug`, which holds anyhow's backtrace under `RUST_BACKTRACE=1`),
/// and the result is made inert for the terminal: control characters other than line breaks are escaped and
/// each line is cut to a bounded excerpt, whatever a file or a server put into the message.
fn render_error(e: &anyhow::Error) -> String {
    let mut out = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
    }
    out.split('\n')
        .map(|line| nmb_table::terminal::excerpt_of(line, ERROR_LINE_CHARS))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The most characters of one line of an error message.
const ERROR_LINE_CHARS: usize = 2000;

/// Rust ignores SIGPIPE, so `nmb ... | head` would make `println!` panic once the reader is gone. The default
/// action ends the process quietly instead, as other command-line tools do.
fn restore_sigpipe() {
    #[cfg(unix)]
    // SAFETY: called first thing in main, before any other thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("NMB_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .without_time()
        .with_target(false)
        .init();
}
