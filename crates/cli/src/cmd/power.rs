//! `nmb power RUN [RUN_B]`: the smallest difference in accuracy a paired comparison on this suite detects,
//! and the cases a target difference needs, from the scored runs' own answers.

use crate::store_at::StoreAt;

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use nmb_results::power::{one_run_power, paired_power, PowerAnalysis, PowerOptions};
use nmb_table::{Cell, Table};

use super::score::open_store;

pub const EXAMPLES: &str = "\
Examples:
  nmb power RUN_A RUN_B                    # what comparing these two runs can detect
  nmb power RUN_A RUN_B --detect 0.05      # + the cases a 5-point difference needs
  nmb power RUN --correlation 0.5 --json   # one run: a second run correlating 0.5 with it

Both runs must have been scored (`nmb score`) on the same suite; the newest stored report of each is used.
Items are the (task, sample) pairs both runs scored, as `nmb compare` pairs them; the score is accuracy. The
figures come from the runs' own per-case variance of the paired difference, which holds the correlation between
the two runs' answers to the same item and the clustering of answers within cases (samples per task, tasks per
case): the detectable difference is the smallest true difference in accuracy that `nmb compare`'s paired
bootstrap (resampling cases) and its cluster-adjusted McNemar test detect with --power at two-sided --alpha with
this suite's cases. With one run, the second is assumed to have this run's variance and clustering, and its
answers to correlate with this run's by --correlation (default 0: independent answers, which errs towards a
larger detectable difference than runs of similar models show). docs/report.md has the method and its
assumptions.

Exit status: 0 when computed, 1 when a run is unknown or not scored, the runs are on different suites or share
no case, 2 on bad usage.";

#[derive(Args, Debug)]
pub struct PowerArgs {
    /// A scored run
    #[arg(value_name = "RUN")]
    pub run_a: String,
    /// A second scored run on the same suite [default: none: one run with an assumed correlation]
    #[arg(value_name = "RUN_B")]
    pub run_b: Option<String>,
    /// Two-sided significance level of the test
    #[arg(long, value_name = "ALPHA", default_value_t = nmb_results::multiplicity::DEFAULT_ALPHA, value_parser = level)]
    pub alpha: f64,
    /// Power asked for: the chance of detecting a true difference of the detectable size (0.5 to 1)
    #[arg(long, value_name = "P", default_value_t = 0.8, value_parser = power)]
    pub power: f64,
    /// A target difference in accuracy (0.05 is 5 points): the cases it needs, and the power this suite has
    /// against it
    #[arg(long, value_name = "DIFF", value_parser = difference)]
    pub detect: Option<f64>,
    /// One run only: the correlation assumed between its answers and a second run's on the same items
    #[arg(long, value_name = "RHO", default_value_t = 0.0, value_parser = correlation)]
    pub correlation: f64,
    /// Print one JSON object instead of a table
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: PowerArgs, at: &StoreAt) -> Result<ExitCode> {
    let store = open_store(at)?;
    let load = |run: &str| latest_scores(&store, run, "cannot compute power");
    let opts = PowerOptions {
        alpha: args.alpha,
        power: args.power,
        detect: args.detect,
        correlation: args.correlation,
    };
    let a = load(&args.run_a)?;
    let analysis = match &args.run_b {
        Some(b) => paired_power(&a, &load(b)?, &opts),
        None => one_run_power(&a, &opts),
    }
    .context("cannot compute power")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&analysis)?);
    } else {
        print!("{}", table(&analysis).text());
    }
    Ok(ExitCode::SUCCESS)
}

/// One row per test: the variance it rests on, the detectable difference, and the target's figures.
fn table(a: &PowerAnalysis) -> Table {
    let caption = match &a.run_b {
        Some(b) => format!("A {}  B {b}: paired answers scored in both", a.run_a),
        None => format!("{}: {}", a.run_a, a.assumption.as_deref().unwrap_or("")),
    };
    let mut t = Table::new(
        caption,
        &[
            ("test", false),
            ("cases", true),
            ("answers", true),
            ("samples/task", true),
            ("tasks/case", true),
            ("correlation", true),
            ("design effect", true),
            ("detectable difference", true),
            ("target", true),
            ("cases needed", true),
            ("power at target", true),
        ],
    );
    let opt = |v: Option<String>| v.map_or_else(|| Cell::new("–"), Cell::new);
    for s in &a.tests {
        let v = &s.variance;
        t.push(vec![
            Cell::new(s.test.label()),
            Cell::new(v.cases.to_string()),
            Cell::new(v.items.to_string()),
            Cell::new(format!("{:.2}", v.samples_per_task)),
            Cell::new(format!("{:.2}", v.tasks_per_case)),
            opt(v.correlation.map(|r| format!("{r:.3}"))),
            opt(v.design_effect.map(|d| format!("{d:.2}"))),
            Cell::new(format!("{:.1} pp", s.detectable_difference * 100.0)),
            opt(s.target.map(|d| format!("{:.1} pp", d * 100.0))),
            opt(s.cases_needed.map(|k| k.to_string())),
            opt(s.power_at_target.map(|p| format!("{:.0}%", p * 100.0))),
        ]);
    }
    if let Some(s) = a.sentence() {
        t.footnote = s;
    }
    t
}

fn number(s: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("expected a number, got {s:?}"))
}

/// A significance level: strictly between 0 and 1.
pub fn level(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    (v > 0.0 && v < 1.0)
        .then_some(v)
        .ok_or_else(|| format!("expected a level between 0 and 1 (exclusive), got {v}"))
}

fn power(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    (0.5..1.0)
        .contains(&v)
        .then_some(v)
        .ok_or_else(|| format!("expected a power from 0.5 up to (not including) 1, got {v}"))
}

fn difference(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    (v > 0.0 && v <= 1.0).then_some(v).ok_or_else(|| {
        format!(
            "expected a difference in accuracy above 0 and at most 1 (0.05 is 5 points), got {v}"
        )
    })
}

fn correlation(s: &str) -> Result<f64, String> {
    let v = number(s)?;
    (-1.0..=1.0)
        .contains(&v)
        .then_some(v)
        .ok_or_else(|| format!("expected a correlation from -1 to 1, got {v}"))
}

/// The run's latest stored score report; an unknown or unscored run is an error under `doing`'s context.
pub(super) fn latest_scores(
    store: &nmb_store::Store,
    run: &str,
    doing: &'static str,
) -> Result<nmb_results::ScoreReport> {
    store.run(run)?;
    nmb_results::stored::latest(store, run)?
        .ok_or_else(|| nmb_results::ResultsError::NotScored {
            run_id: run.to_string(),
        })
        .context(doing)
}
