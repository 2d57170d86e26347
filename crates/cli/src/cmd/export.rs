//! `nmb export inspect|mlflow`: a scored run written where other tools look.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};

use crate::store_at::StoreAt;

pub const EXAMPLES: &str = "\
Examples:
  nmb export inspect r20260101-120000-ab12 --out run.json
  inspect view --log-dir .
  nmb export mlflow r20260101-120000-ab12 r20260102-090000-cd34 --tracking-uri http://127.0.0.1:5000

The run must have been scored (`nmb eval` scores at its end, `nmb score` again); its newest score report is
exported. Exit status: 0 when exported, 1 when a run is unknown or not scored or the file cannot be written,
2 on bad usage.";

const INSPECT_EXAMPLES: &str = "\
Examples:
  nmb export inspect r20260101-120000-ab12 --out logs/r20260101-120000-ab12.json
  inspect view --log-dir logs

Writes an Inspect AI eval log (JSON, log format version 2) that `inspect view` shows and
`inspect_ai.log.read_eval_log` reads: the eval spec (suite as task, model, decoding parameters, hashes in its
metadata), the plan, one sample per task and sample index (epoch = sample index + 1) with the prompt's
messages and images, the answer as output, the reference as target and nmb's verdict as the `nmb` score
(1 correct, 0 wrong; errored, pending and reference-less samples have none), and the headline numbers as the
`nmb` scorer's metrics (accuracy, pass@k, CI bounds as *_ci_low / *_ci_high).";

const MLFLOW_EXAMPLES: &str = "\
Examples:
  mlflow server --backend-store-uri sqlite:///mlflow.db --serve-artifacts --port 5000
  nmb export mlflow r20260101-120000-ab12 --tracking-uri http://127.0.0.1:5000 --experiment neuro

One MLflow run per nmb run, found again by its nmb_run_id tag: exporting again updates the same MLflow run
(metrics logged anew), never a second one. Params: model, suite, suite_version, template, samples,
input_mode, nmb_version and each decoding parameter as param.NAME. Metrics: the headline numbers of the
newest score report (tasks, cases, samples, n, correct, errored, pending, no_reference, parse_failed,
unresolved, accuracy, pass_at_1_unbiased, pass_at_1_top_k_in_answer, pass_at_5_..., lesion, rubric,
BERTScore and breadth numbers where scored, answer_words), each CI's bounds as NAME_ci_low and
NAME_ci_high. Tags: nmb_run_id, nmb_suite_hash, nmb_template_hash, nmb_config_hash,
nmb_scoring_config_hash, nmb_model and the model's identity (nmb_model_*). Artifacts: the run's report
(HTML, Markdown, CSV, JSON, as `nmb report` writes it), uploaded through the server's artifact proxy, so
the server must run with --serve-artifacts (--no-artifacts leaves them out).

Credentials: user:password@ in the URI is sent as HTTP basic auth, MLFLOW_TRACKING_TOKEN as a bearer
token; messages show the URI without them.";

#[derive(Args)]
pub struct ExportCommand {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Write a scored run as an Inspect AI eval log (JSON) for `inspect view`
    #[command(after_help = INSPECT_EXAMPLES)]
    Inspect(InspectArgs),
    /// Log scored runs to an MLflow tracking server: params, headline metrics, hashes as tags, the report as
    /// artifacts
    #[command(after_help = MLFLOW_EXAMPLES)]
    Mlflow(MlflowArgs),
}

#[derive(Args)]
struct MlflowArgs {
    /// The scored runs
    #[arg(value_name = "RUN_ID", required = true)]
    runs: Vec<String>,
    /// The tracking server, http(s)://[USER:PASSWORD@]HOST:PORT
    #[arg(
        long,
        value_name = "URI",
        env = "MLFLOW_TRACKING_URI",
        hide_env_values = true
    )]
    tracking_uri: String,
    /// The MLflow experiment (created when missing)
    #[arg(long, value_name = "NAME", default_value = DEFAULT_EXPERIMENT)]
    experiment: String,
    /// Log params, metrics and tags only, not the report files
    #[arg(long)]
    no_artifacts: bool,
}

#[derive(Args)]
struct InspectArgs {
    /// The scored run
    #[arg(value_name = "RUN_ID")]
    run: String,
    /// The eval log file to write (JSON)
    #[arg(long, value_name = "FILE.json")]
    out: PathBuf,
}

pub fn run(c: ExportCommand, at: &StoreAt) -> Result<ExitCode> {
    match c.action {
        Action::Inspect(a) => inspect(a, at),
        Action::Mlflow(a) => mlflow(a, at),
    }
}

fn inspect(a: InspectArgs, at: &StoreAt) -> Result<ExitCode> {
    let store = super::score::open_store(at)?;
    let report = super::power::latest_scores(&store, &a.run, "cannot export the run")?;
    let log = nmb_report::export::inspect_log(&store, &a.run, &report)
        .with_context(|| format!("cannot export run {}", a.run))?;
    let text = serde_json::to_string(&log)?;
    write_file(&a.out, text.as_bytes())?;
    println!(
        "wrote {} ({} samples, Inspect eval log)",
        a.out.display(),
        report.samples.len()
    );
    Ok(ExitCode::SUCCESS)
}

fn mlflow(a: MlflowArgs, at: &StoreAt) -> Result<ExitCode> {
    let target = Mlflow {
        tracking_uri: &a.tracking_uri,
        experiment: &a.experiment,
        artifacts: !a.no_artifacts,
    };
    to_mlflow(&a.runs, &target, at, false)?;
    Ok(ExitCode::SUCCESS)
}

/// The experiment runs are logged under when none is named.
pub const DEFAULT_EXPERIMENT: &str = "nmb";

/// Where and what [`to_mlflow`] logs.
pub struct Mlflow<'a> {
    pub tracking_uri: &'a str,
    pub experiment: &'a str,
    /// Upload the run's report folder as artifacts.
    pub artifacts: bool,
}

/// Logs each scored run to MLflow (one MLflow run per nmb run, found again by tag), printing a line per run on
/// stdout, or on stderr with `to_stderr`.
pub fn to_mlflow(runs: &[String], target: &Mlflow, at: &StoreAt, to_stderr: bool) -> Result<()> {
    let token = std::env::var("MLFLOW_TRACKING_TOKEN")
        .ok()
        .filter(|t| !t.is_empty());
    let tracking = nmb_report::export::mlflow::Tracking::new(target.tracking_uri, token)?;
    let store = super::score::open_store(at)?;
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    for id in runs {
        let report = super::power::latest_scores(&store, id, "cannot export the run")?;
        let run = store.run(id)?;
        let folder =
            tempfile::tempdir().context("cannot make a temporary folder for the report")?;
        if target.artifacts {
            let data = nmb_report::load_run(&store, id, Some(report.clone()))
                .with_context(|| format!("reading run {id}"))?;
            nmb_report::write_report(&[data], &nmb_report::ReportOptions::new(folder.path()))
                .with_context(|| format!("writing the report of run {id}"))?;
        }
        let artifacts = target.artifacts.then(|| folder.path());
        let done = runtime
            .block_on(nmb_report::export::mlflow::export(
                &tracking,
                target.experiment,
                &run,
                &report,
                artifacts,
            ))
            .with_context(|| format!("cannot export run {id} to MLflow"))?;
        let line = format!(
            "{id} -> MLflow run {} in experiment {} at {} ({}; {} metrics, {} artifacts)",
            done.mlflow_run_id,
            done.experiment_id,
            tracking.shown(),
            if done.created { "created" } else { "updated" },
            done.metrics,
            done.artifacts
        );
        match to_stderr {
            true => eprintln!("{line}"),
            false => println!("{line}"),
        }
    }
    Ok(())
}

/// Written beside its final name and renamed, so a reader never sees half a file.
fn write_file(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut part = path.as_os_str().to_owned();
    part.push(".part");
    let part = PathBuf::from(part);
    std::fs::write(&part, bytes).with_context(|| format!("cannot write {}", part.display()))?;
    std::fs::rename(&part, path).with_context(|| format!("cannot write {}", path.display()))
}
