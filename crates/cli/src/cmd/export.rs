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
