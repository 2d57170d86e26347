//! `nmb worker`: one of any number of processes, on any number of machines, that share the runs of one store.
//! Each claims pending samples under a lease, keeps the lease alive, stores every answer as it arrives, and
//! exits when nothing is left. A run knows how to rebuild its evaluation: `nmb eval` records its own arguments
//! in the run's manifest (suite and file paths made absolute), and the rebuilt configuration must hash to the
//! run's, so a worker whose suite or model differs is refused instead of mixing answers.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser};
use nmb_run::{Claiming, RunOutcome};
use nmb_store::{now_ms, RunKind, RunStatus, Store};
use serde_json::json;

use super::eval::EvalArgs;
use crate::store_at::StoreAt;

pub const EXAMPLES: &str = "\
Examples:
  nmb --store postgres://nmb@db:5432/nmb eval --suite sample --model openai:m@http://gpu1:8000/v1 --plan-only
  nmb --store postgres://nmb@db:5432/nmb worker --concurrency 32          # on each machine
  NMB_STORE_URL=postgres://nmb@db/nmb nmb worker --run RUN_ID --model openai:m@http://localhost:8000/v1

Workers rebuild a run's evaluation from the arguments `nmb eval` recorded, so the suite, answer key and
template files must be at the same absolute paths on every machine (the bundled `sample` suite always is).";

/// How long a claim lasts without renewal, unless `--lease-secs` says otherwise.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// Work on this run only [default: every unfinished run with work left, newest first]
    #[arg(long, value_name = "RUN_ID")]
    run: Option<String>,
    /// Requests this worker keeps in flight at once
    #[arg(long, value_name = "N", default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=4096))]
    concurrency: u32,
    /// At most N requests in flight to each server across every worker of the store [default: --concurrency]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    fleet_limit: Option<u32>,
    /// Seconds a claim lasts without renewal: samples of a worker that was killed are claimed again after this
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    lease_secs: f64,
    /// Send to this model spec instead of the run's (this machine's replica, say); the model's identity, its
    /// first base URL, must be the run's
    #[arg(long, value_name = "SPEC")]
    model: Option<String>,
    /// One JSON object per run worked on
    #[arg(long)]
    json: bool,
    /// No progress output on stderr
    #[arg(long, short)]
    quiet: bool,
}

/// `nmb eval`'s arguments, parsed alone.
#[derive(Parser)]
#[command(name = "eval")]
struct Recipe {
    #[command(flatten)]
    eval: EvalArgs,
}

pub fn run(args: WorkerArgs, at: &StoreAt) -> Result<ExitCode> {
    if !(args.lease_secs.is_finite() && args.lease_secs >= 1.0) {
        bail!(
            "--lease-secs {}: expected at least 1 second",
            args.lease_secs
        );
    }
    let store = at.open_for_reading()?;
    let runs = runs_to_work_on(&store, args.run.as_deref())?;
    drop(store);
    if runs.is_empty() {
        eprintln!("worker: no run in {at} has work left");
        return Ok(ExitCode::SUCCESS);
    }
    for (run_id, recipe) in runs {
        let eval = rebuild(&args, &run_id, &recipe).with_context(|| {
            format!("run {run_id}: cannot rebuild its evaluation from the arguments it recorded")
        })?;
        if !args.quiet {
            eprintln!("worker: run {run_id}");
        }
        super::eval::run_one(&eval, at).with_context(|| format!("run {run_id}"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The run asked for, or every unfinished model run with work left; each with its recorded arguments.
fn runs_to_work_on(store: &Store, only: Option<&str>) -> Result<Vec<(String, Vec<String>)>> {
    if let Some(id) = only {
        let run = store.run(id).with_context(|| format!("no run {id}"))?;
        let Some(recipe) = run.manifest.worker_args else {
            bail!("run {id} did not record how to rebuild it (it was not made by `nmb eval`, or by an older nmb)");
        };
        return Ok(vec![(run.run_id, recipe)]);
    }
    let mut out = Vec::new();
    for run in store.list_runs()? {
        let open = run.status == RunStatus::Running && run.manifest.kind == RunKind::Model;
        let Some(recipe) = run.manifest.worker_args.filter(|_| open) else {
            continue;
        };
        if store.work_left(&run.run_id, now_ms())? > 0 {
            out.push((run.run_id, recipe));
        }
    }
    Ok(out)
}

fn rebuild(args: &WorkerArgs, run_id: &str, recipe: &[String]) -> Result<EvalArgs> {
    let argv = std::iter::once("eval".to_string()).chain(recipe.iter().cloned());
    let mut eval = Recipe::try_parse_from(argv)?.eval;
    eval.resume = Some(run_id.to_string());
    eval.fresh = false;
    eval.plan_only = false;
    eval.no_score = true;
    eval.concurrency = args.concurrency;
    eval.fleet_limit = args.fleet_limit;
    eval.json = args.json;
    eval.quiet = args.quiet;
    eval.lease = Some(Duration::from_secs_f64(args.lease_secs));
    if let Some(model) = &args.model {
        eval.model = model.clone();
    }
    Ok(eval)
}

/// This process's claims: unique across machines and restarts.
pub fn claiming(lease: Duration) -> Claiming {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into());
    let started_ms = now_ms();
    Claiming {
        worker_id: format!("{host}:{}:{started_ms}", std::process::id()),
        lease,
        started_ms,
    }
}

/// Options that belong to one invocation rather than to the run, with and without a value.
const LOCAL_WITH_VALUE: &[&str] = &[
    "--store",
    "--runs-dir",
    "--resume",
    "--report",
    "--max-requests",
    "--concurrency",
    "--fleet-limit",
];
const LOCAL_FLAGS: &[&str] = &[
    "--plan-only",
    "--json",
    "-q",
    "--quiet",
    "--fresh",
    "--dry-run",
];

/// The arguments of this `nmb eval` that define the run, for the manifest.
pub fn recipe_from_command_line() -> Vec<String> {
    recipe(&std::env::args().skip(1).collect::<Vec<_>>())
}

fn recipe(argv: &[String]) -> Vec<String> {
    let start = argv.iter().position(|a| a == "eval").map_or(0, |i| i + 1);
    let mut out = Vec::new();
    let mut rest = argv[start..].iter();
    let mut after_suite = false;
    while let Some(arg) = rest.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v)),
            _ => (arg.as_str(), None),
        };
        if LOCAL_WITH_VALUE.contains(&name) {
            if inline.is_none() {
                rest.next();
            }
            continue;
        }
        if LOCAL_FLAGS.contains(&name) {
            continue;
        }
        out.push(match (after_suite, inline) {
            (true, None) => super::eval::absolute_suite_spec(arg),
            (false, None) => absolute_if_path(arg),
            (_, Some(v)) if name == "--suite" => {
                format!("--suite={}", super::eval::absolute_suite_spec(v))
            }
            (_, Some(v)) => format!("{name}={}", absolute_if_path(v)),
        });
        after_suite = name == "--suite" && inline.is_none();
    }
    out
}

/// A relative path that exists here, made absolute so that workers started elsewhere find it.
fn absolute_if_path(arg: &str) -> String {
    let path = Path::new(arg);
    if arg.starts_with('-') || path.is_absolute() || !path.exists() {
        return arg.to_string();
    }
    std::path::absolute(path).map_or_else(|_| arg.to_string(), |p| p.display().to_string())
}

/// What `nmb eval --plan-only` prints: the run and how to start workers on it.
pub fn print_planned(outcome: &RunOutcome, at: &StoreAt, as_json: bool) {
    let s = &outcome.summary;
    if as_json {
        println!(
            "{}",
            json!({ "run_id": outcome.run_id, "planned": true, "summary": s })
        );
        return;
    }
    println!(
        "run {} planned in {at}: {} samples, {} pending, {} done",
        outcome.run_id,
        s.samples_total,
        s.samples_pending,
        s.samples_ok + s.samples_errored
    );
    println!(
        "start workers on any machine: nmb --store URL worker --run {}",
        outcome.run_id
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_recipe_keeps_what_defines_the_run_and_drops_what_belongs_to_the_invocation() {
        let argv = strings(&[
            "--store",
            "postgres://u:pw@h/db",
            "eval",
            "--suite",
            "sample",
            "--model",
            "openai:m@http://h/v1",
            "--samples",
            "5",
            "--json",
            "--concurrency=8",
            "--report",
            "out",
            "--plan-only",
            "-q",
            "--seed",
            "3",
        ]);
        assert_eq!(
            recipe(&argv),
            strings(&[
                "--suite",
                "sample",
                "--model",
                "openai:m@http://h/v1",
                "--samples",
                "5",
                "--seed",
                "3"
            ])
        );
    }

    #[test]
    fn a_suite_path_that_exists_becomes_absolute() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = std::env::current_dir().unwrap();
        let rel = pathdiff(dir.path(), &cwd);
        let argv = strings(&["eval", "--suite", &format!("native:{rel}")]);
        let out = recipe(&argv);
        assert_eq!(
            out[1],
            format!(
                "native:{}",
                std::path::absolute(dir.path()).unwrap().display()
            )
        );
    }

    /// `to` relative to `from` when `to` lies under it, else `to` itself (still a path that exists).
    fn pathdiff(to: &Path, from: &Path) -> String {
        to.strip_prefix(from).unwrap_or(to).display().to_string()
    }
}
