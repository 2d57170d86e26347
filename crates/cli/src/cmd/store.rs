//! `nmb store copy FROM TO`: runs from one store to another, SQLite or PostgreSQL on either side.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nmb_store::{is_postgres_url, redact_location, CopyStats, Store, DB_FILE_NAME};

pub const EXAMPLES: &str = "\
Examples:
  nmb store copy nmb-runs postgres://nmb@db.example/nmb
  nmb store copy postgres://nmb@db.example/nmb ./mine --run 20250101-120000-ab12cd
  PGPASSWORD=... nmb store copy nmb-runs postgres://nmb@db.example/nmb --json";

const COPY_EXAMPLES: &str = "\
Examples:
  nmb store copy nmb-runs postgres://nmb@db.example/nmb
  nmb store copy postgres://nmb@db.example/nmb ./mine --run RUN_ID_1 --run RUN_ID_2
  nmb store copy old-runs new-runs --json

FROM and TO are each a PostgreSQL URL (postgres://USER@HOST:PORT/DB, the password in PGPASSWORD
rather than on the command line) or a runs directory (its nmb.sqlite; TO is created when absent).
--runs-dir and --store play no part here.

A run takes along its samples, calls, raw responses, prompts, images and score reports (their JSON
byte for byte), and keeps its run id. It brings along the runs its cached answers came from and
the runs of the judges that scored it. A run TO already holds with the same configuration is skipped, so copying again is
harmless; with another configuration it is an error, and nothing is copied. Volume renders are
copied when every run is; sample leases never are. Each run is copied in one transaction, so an
interrupted copy leaves only whole runs.

--json prints one object: from, to, runs, runs_skipped, runs_added_for_cache_hits,
runs_added_for_judges, samples, calls, turns, prompts, contexts, images (these three counting only
what TO did not hold yet), score_reports, sample_scores, renders, copied_run_ids, skipped_run_ids,
cache_origin_run_ids, judge_run_ids.
Exit status: 0 when the runs are copied, 1 on failure, 2 on bad usage.";

#[derive(Args)]
pub struct StoreCommand {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Copy runs, with their images, prompts and score reports, from one store to another
    #[command(after_help = COPY_EXAMPLES)]
    Copy(CopyArgs),
}

#[derive(Args)]
struct CopyArgs {
    /// The store to copy from: a PostgreSQL URL or a runs directory holding nmb.sqlite
    #[arg(value_name = "FROM")]
    from: String,
    /// The store to copy to: a PostgreSQL URL or a runs directory (created when absent)
    #[arg(value_name = "TO")]
    to: String,
    /// Copy only this run (repeatable); without it, every run
    #[arg(long = "run", value_name = "RUN_ID")]
    runs: Vec<String>,
    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,
}

pub fn run(command: StoreCommand) -> Result<ExitCode> {
    match command.action {
        Action::Copy(args) => copy(args),
    }
}

fn copy(args: CopyArgs) -> Result<ExitCode> {
    if args.from == args.to {
        bail!(
            "FROM and TO are the same store ({})",
            redact_location(&args.from)
        );
    }
    let from = open(&args.from, true)?;
    let to = open(&args.to, false)?;
    let stats = from.copy_runs_to(&to, &args.runs).with_context(|| {
        format!(
            "cannot copy runs from {} to {}",
            location(&from),
            location(&to)
        )
    })?;
    if args.json {
        let mut v = serde_json::to_value(&stats).context("cannot write the stats as JSON")?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert("from".into(), location(&from).into());
            obj.insert("to".into(), location(&to).into());
        }
        println!("{v}");
    } else {
        print_stats(&stats, &from, &to);
    }
    Ok(ExitCode::SUCCESS)
}

/// Opens a location; the source must already be a store, so that a mistyped path is not taken for an empty one.
fn open(location: &str, must_exist: bool) -> Result<Store> {
    let shown = redact_location(location);
    if location.contains("://") && !is_postgres_url(location) {
        bail!("{shown}: expected a postgres:// or postgresql:// URL, or a runs directory");
    }
    if must_exist && !is_postgres_url(location) && !Path::new(location).join(DB_FILE_NAME).is_file()
    {
        bail!("no run store at {shown}: expected a runs directory holding {DB_FILE_NAME}, or a postgres:// URL");
    }
    Store::open_location(location).with_context(|| format!("cannot open the run store {shown}"))
}

/// A store's location for messages: the SQLite file, or the URL without its password.
fn location(store: &Store) -> String {
    store.path().display().to_string()
}

fn print_stats(s: &CopyStats, from: &Store, to: &Store) {
    println!(
        "copied {} run(s) from {} to {}",
        s.runs,
        location(from),
        location(to)
    );
    println!(
        "  {} samples, {} calls, {} turns, {} score reports ({} sample scores), {} render views",
        s.samples, s.calls, s.turns, s.score_reports, s.sample_scores, s.renders
    );
    println!(
        "  new in the target: {} prompts, {} contexts, {} images",
        s.prompts, s.contexts, s.images
    );
    let list = |label: &str, ids: &[String]| {
        if !ids.is_empty() {
            println!("  {label}: {}", ids.join(" "));
        }
    };
    list("copied", &s.copied_run_ids);
    list(
        "brought along for their cached answers",
        &s.cache_origin_run_ids,
    );
    list("brought along as judges of copied runs", &s.judge_run_ids);
    list(
        "skipped (already there, same configuration)",
        &s.skipped_run_ids,
    );
}
