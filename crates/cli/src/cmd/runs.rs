//! `nmb runs list|show`: what the run store holds.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use nmb_store::{RunInfo, RunSummary};

use crate::store_at::StoreAt;
use serde_json::{json, Value};

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

/// The summary fields at the top level, with the manifest next to them.
fn run_json(summary: &RunSummary, info: &RunInfo) -> Value {
    let mut v = serde_json::to_value(summary).unwrap_or_else(|_| json!({}));
    if let Some(obj) = v.as_object_mut() {
        obj.insert(
            "manifest".into(),
            serde_json::to_value(&info.manifest).unwrap_or_else(|_| json!({})),
        );
    }
    v
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
    for info in &runs {
        let summary = store
            .summary(&info.run_id)
            .with_context(|| format!("cannot summarise run {}", info.run_id))?;
        rows.push((summary, info));
    }
    if args.json {
        let all: Vec<Value> = rows.iter().map(|(s, i)| run_json(s, i)).collect();
        println!("{}", Value::Array(all));
        return Ok(ExitCode::SUCCESS);
    }
    if rows.is_empty() {
        println!("no runs in {at}");
        return Ok(ExitCode::SUCCESS);
    }
    // Studies in the order their newest run appears; a stable sort keeps runs newest first within each.
    let mut order: Vec<Option<String>> = Vec::new();
    for (_, info) in &rows {
        if !order.contains(&info.manifest.study) {
            order.push(info.manifest.study.clone());
        }
    }
    order.sort_by_key(Option::is_none);
    rows.sort_by_key(|(_, info)| order.iter().position(|s| *s == info.manifest.study));
    let mut heading = None;
    let grouped = order.iter().any(Option::is_some);
    println!(
        "{:<24} {:<11} {:<24} {:>14}  {:<12} model",
        "run id", "status", "created", "ok/err/total", "suite"
    );
    for (s, info) in &rows {
        if grouped && heading != Some(&info.manifest.study) {
            heading = Some(&info.manifest.study);
            match &info.manifest.study {
                Some(name) => println!("study {name}"),
                None => println!("not in a study"),
            }
        }
        let field = |v: &str| if v.is_empty() { "-" } else { v }.to_string();
        println!(
            "{:<24} {:<11} {:<24} {:>14}  {:<12} {}",
            s.run_id,
            s.status.as_str(),
            s.created_at,
            format!("{}/{}/{}", s.samples_ok, s.samples_errored, s.samples_total),
            field(&info.manifest.suite_id),
            field(&info.manifest.display_name())
        );
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
        println!("{}", run_json(&s, &info));
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", render(&s, &info));
    Ok(ExitCode::SUCCESS)
}

fn render(s: &RunSummary, info: &RunInfo) -> String {
    let m = &info.manifest;
    let text = |v: &str| if v.is_empty() { "-" } else { v }.to_string();
    let classes = |c: &std::collections::BTreeMap<String, u64>| {
        if c.is_empty() {
            "-".to_string()
        } else {
            c.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let dropped = text(&m.dropped_inputs.join("; "));
    let rows = [
        ("run", s.run_id.clone()),
        ("status", s.status.as_str().to_string()),
        ("created", s.created_at.clone()),
        ("updated", s.updated_at.clone()),
        ("name", text(&m.display_name())),
        ("model", text(&m.model)),
        (
            "suite",
            format!("{} (hash {})", text(&m.suite_id), text(&m.suite_hash)),
        ),
        ("inputs", text(&m.input_mode)),
        ("samples/task", m.samples.to_string()),
        ("parameters", m.params.to_string()),
        ("templates", text(&m.template_hash)),
        ("dropped", dropped),
        ("nmb", text(&m.nmb_version)),
        (
            "samples",
            format!(
                "{} total: {} ok, {} errored, {} pending",
                s.samples_total, s.samples_ok, s.samples_errored, s.samples_pending
            ),
        ),
        ("errors", classes(&s.errors_by_class)),
        (
            "requests",
            format!(
                "{} sent ({} calls, {} errored: {}), {} answers from the store",
                s.requests_sent,
                s.calls,
                s.calls_errored,
                classes(&s.call_errors_by_class),
                s.cache_hits
            ),
        ),
        (
            "tokens",
            format!("in {}, out {}", s.tokens_in, s.tokens_out),
        ),
        (
            "latency ms",
            format!(
                "mean {:.0}, p50 {}, p90 {}, p99 {}, max {} (over {} calls)",
                s.latency_ms.mean,
                s.latency_ms.p50,
                s.latency_ms.p90,
                s.latency_ms.p99,
                s.latency_ms.max,
                s.latency_ms.count
            ),
        ),
    ];
    rows.iter().map(|(k, v)| format!("{k:<13} {v}\n")).collect()
}
