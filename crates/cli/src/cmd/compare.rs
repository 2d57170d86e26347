//! `nmb compare RUN_A RUN_B`: paired bootstrap and exact McNemar test between two scored runs.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use nmb_score::results::Comparison;
use nmb_score::stored;

use super::score::{open_store, BootstrapArgs};

pub const EXAMPLES: &str = "\
Examples:
  nmb compare r20260101-120000-ab12 r20260102-090000-cd34
  nmb compare RUN_A RUN_B --json

Both runs must have been scored (`nmb score`); the newest stored report of each is used. Items are the
(task, sample) pairs both runs answered and scored; errored samples are left out on either side. The
difference is accuracy(A) - accuracy(B) with a paired bootstrap 95% CI that resamples whole cases, and the
exact (binomial) McNemar test on the discordant items; overall and per level and family.

Exit status: 0 when compared, 1 when a run is unknown or not scored, 2 on bad usage.";

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// First run (A)
    #[arg(value_name = "RUN_A")]
    pub run_a: String,
    /// Second run (B)
    #[arg(value_name = "RUN_B")]
    pub run_b: String,
    #[command(flatten)]
    pub bootstrap: BootstrapArgs,
    /// Print one JSON object instead of a table
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: CompareArgs, runs_dir: &Path) -> Result<ExitCode> {
    let store = open_store(runs_dir)?;
    let load = |run: &str| -> Result<_> {
        store.run(run)?;
        stored::latest(&store, run)?
            .ok_or_else(|| nmb_score::ScoreError::NotScored {
                run_id: run.to_string(),
            })
            .context("cannot compare")
    };
    let (a, b) = (load(&args.run_a)?, load(&args.run_b)?);
    let cmp = nmb_score::compare::compare(&a, &b, &args.bootstrap.config())?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&cmp)?);
    } else {
        print_table(&cmp);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_table(c: &Comparison) {
    println!("A  {}  {}", c.run_a, c.model_a);
    println!("B  {}  {}", c.run_b, c.model_b);
    println!(
        "paired bootstrap 95% CI ({} resamples, seed {}, clustered by case); exact McNemar p",
        c.bootstrap.resamples, c.bootstrap.seed
    );
    println!();
    println!(
        "{:<11} {:<13} {:>5} {:>8} {:>8} {:<28} {:>6} {:>6} {:>9}",
        "level",
        "family",
        "items",
        "acc A",
        "acc B",
        "A - B [95% CI]",
        "only A",
        "only B",
        "McNemar p"
    );
    for g in &c.groups {
        let level = g.level.map_or("all".to_string(), |l| l.to_string());
        let family = g.family.map_or("all".to_string(), |f| f.to_string());
        let (acc_a, acc_b, diff) = match &g.paired {
            Some(p) => (
                format!("{:.1}%", p.mean_a * 100.0),
                format!("{:.1}%", p.mean_b * 100.0),
                format!(
                    "{:+.1} [{:+.1}, {:+.1}] pts",
                    p.diff.value * 100.0,
                    p.diff.ci_low * 100.0,
                    p.diff.ci_high * 100.0
                ),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let (only_a, only_b, p) = match &g.mcnemar {
            Some(m) => (
                m.only_a.to_string(),
                m.only_b.to_string(),
                format!("{:.4}", m.p_value),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "{:<11} {:<13} {:>5} {:>8} {:>8} {:<28} {:>6} {:>6} {:>9}",
            level, family, g.items, acc_a, acc_b, diff, only_a, only_b, p
        );
    }
    for n in &c.notes {
        println!("note  {n}");
    }
}
