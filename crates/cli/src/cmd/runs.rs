//! `nmb runs list|show`: what the run store holds.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nmb_report::runs;
use serde_json::Value;

use crate::store_at::StoreAt;

pub const EXAMPLES: &str = "\
Examples:
  nmb runs list
  nmb runs show 20250101-120000-ab12cd
  nmb runs show 20250101-120000-ab12cd --json | jq .errors_by_class
  nmb --runs-dir /data/nmb-runs runs list --json

Runs live in RUNS_DIR/nmb.sqlite (RUNS_DIR: --runs-dir, else $NMB_RUNS_DIR, else ./nmb-runs), or in the
PostgreSQL database of --store URL (else $NMB_STORE_URL).";

const LIST_EXAMPLES: &str = "\
Examples:
  nmb runs list
  nmb runs list --json

Newest first, grouped by study (`nmb eval --config`) with runs outside a study last: run id, status (running,
interrupted, finished), when it started, model, suite, and its samples (ok / errored / total). A run that shows `running` with no nmb process alive was killed; running the
same `nmb eval` command again resumes it.";

const SHOW_EXAMPLES: &str = "\
Examples:
  nmb runs show 20250101-120000-ab12cd
  nmb runs show 20250101-120000-ab12cd --json

--json prints one object: run_id, status, created_at, updated_at, config_hash, samples_total, samples_ok,
samples_errored, samples_pending, requests_sent (every HTTP attempt or local generation, retries included),
calls, calls_errored, cache_hits (answers taken from the store), errors_by_class (errored samples by final
error class), call_errors_by_class, tokens_in, tokens_out, latency_ms {count, mean, p50, p90, p99, max},
and manifest (suite, suite hash, template hashes, model, parameters, input mode, samples, dropped inputs,
nmb version, model identity).
Exit status: 0 when the run is shown, 1 when there is no such run or no store, 2 on bad usage.";

#[derive(Args)]
pub struct RunsCommand {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// List the stored runs, newest first
    #[command(after_help = LIST_EXAMPLES)]
    List(ListArgs),
    /// Counts, errors by class, tokens, latency and the manifest of one run
    #[command(after_help = SHOW_EXAMPLES)]
    Show(ShowArgs),
}

#[derive(Args)]
struct ListArgs {
    /// Print a JSON array of run summaries (with manifests) instead of a table
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ShowArgs {
    /// The run id, as `nmb eval` printed it or `nmb runs list` shows it
    #[arg(value_name = "RUN_ID")]
    run_id: String,
    /// Print one JSON object instead of text
    #[arg(long)]
    json: bool,
}

pub fn run(command: RunsCommand, at: &StoreAt) -> Result<ExitCode> {
    match command.action {
        Action::List(args) => list(args, at),
        Action::Show(args) => show(args, at),
    }
}

fn list(args: ListArgs, at: &StoreAt) -> Result<ExitCode> {
    let Some(store) = at.open_existing()? else {
        if args.json {
            println!("[]");
        } else {
            println!("no runs in {at}");
        }
        return Ok(ExitCode::SUCCESS);
    };
    let runs = store.list_runs().context("cannot list runs")?;
    let mut rows = Vec::with_capacity(runs.len());
    for info in runs {
        let summary = store
            .summary(&info.run_id)
            .with_context(|| format!("cannot summarise run {}", info.run_id))?;
        rows.push((summary, info));
    }
    if args.json {
        let all: Vec<Value> = rows.iter().map(|(s, i)| runs::run_json(s, i)).collect();
        println!("{}", Value::Array(all));
    } else if rows.is_empty() {
        println!("no runs in {at}");
    } else {
        print!("{}", runs::list_text(&rows));
    }
    Ok(ExitCode::SUCCESS)
}

fn show(args: ShowArgs, at: &StoreAt) -> Result<ExitCode> {
    let Some(store) = at.open_existing()? else {
        bail!("no run store at {at}; run `nmb eval` first or pass --runs-dir or --store");
    };
    let Some(info) = store.get_run(&args.run_id).context("cannot read the run")? else {
        bail!(
            "no run {:?} in {at}; `nmb runs list` shows the stored runs",
            args.run_id
        );
    };
    let s = store
        .summary(&info.run_id)
        .with_context(|| format!("cannot summarise run {}", info.run_id))?;
    if args.json {
        println!("{}", runs::run_json(&s, &info));
    } else {
        print!("{}", runs::show_text(&s, &info));
    }
    Ok(ExitCode::SUCCESS)
}
