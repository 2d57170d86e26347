//! `nmb worker`: one of any number of processes, on any number of machines, that share the runs of one store.
//! Each claims pending samples under a lease, keeps the lease alive, stores every answer as it arrives, and
//! exits when nothing is left. A run knows its evaluation: its manifest records the `EvalConfig` it was made with
//! (suite and file paths absolute), and the configuration a worker runs must hash to the run's, so a worker whose
//! suite or model differs is refused instead of mixing answers.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use nmb_requests::ModelSpec;
use nmb_run::{Claiming, EvalConfig, Invocation, Resume};

use super::eval::Output;
use crate::store_at::StoreAt;

pub const EXAMPLES: &str = "\
Examples:
  nmb --store postgres://nmb@db:5432/nmb eval --suite sample --model openai:m@http://gpu1:8000/v1 --plan-only
  nmb --store postgres://nmb@db:5432/nmb worker --concurrency 32          # on each machine
  NMB_STORE_URL=postgres://nmb@db/nmb nmb worker --run RUN_ID --model openai:m@http://localhost:8000/v1

Workers run the evaluation a run's manifest records, so the suite, answer key and template files must be at the
same absolute paths on every machine (the bundled `sample` suite always is).";

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

pub fn run(args: WorkerArgs, at: &StoreAt) -> Result<ExitCode> {
    if !(args.lease_secs.is_finite() && args.lease_secs >= 1.0) {
        bail!(
            "--lease-secs {}: expected at least 1 second",
            args.lease_secs
        );
    }
    let store = at.open_for_reading()?;
    let runs = nmb_run::runs_with_work(&store, args.run.as_deref())?;
    drop(store);
    if runs.is_empty() {
        eprintln!("worker: no run in {at} has work left");
        return Ok(ExitCode::SUCCESS);
    }
    let output = Output {
        json: args.json,
        quiet: args.quiet,
        report: None,
        scoring: None,
        mlflow: None,
    };
    for (run_id, recorded) in runs {
        let config = this_worker(&args, recorded).with_context(|| format!("run {run_id}"))?;
        let invocation = Invocation {
            resume: Resume::Run(run_id.clone()),
            claiming: Some(Claiming::for_this_process(Duration::from_secs_f64(
                args.lease_secs,
            ))),
            ..Invocation::default()
        };
        if !args.quiet {
            eprintln!("worker: run {run_id}");
        }
        super::eval::run_one(&config, &invocation, &output, at)
            .with_context(|| format!("run {run_id}"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The recorded evaluation with this worker's own limits, and its own replica of the model if it names one.
fn this_worker(args: &WorkerArgs, mut config: EvalConfig) -> Result<EvalConfig> {
    config.limits.concurrency = args.concurrency;
    config.limits.fleet_limit = args.fleet_limit;
    if let Some(model) = &args.model {
        config.model = ModelSpec::parse(model).context("bad --model")?;
    }
    Ok(config)
}
