//! `nmb rubric lint`: sign and point mistakes in a criterion rubric, with file and line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use nmb_requests::ModelSpec;
use nmb_results::criteria::CriterionRubric;
use nmb_score::criteria::direction;
use nmb_score::criteria::lint::{judged, lint, unread_safety, Finding, Severity};
use nmb_score::ScoringConfig;
use serde_json::json;

use crate::store_at::StoreAt;

pub const EXAMPLES: &str = "\
Examples:
  nmb rubric lint rubrics/sample-criteria-v1.toml
  nmb rubric lint healthbench_rubrics.jsonl --json
  nmb rubric lint rubrics/sample-criteria-v1.toml --judge openai:gpt-4o

A criterion rubric is TOML ([[task]] tables with [[task.criterion]]: id, criterion, points, tags) or JSON
lines (one criterion per line, or HealthBench's rows with \"rubrics\"); docs/formats.md has both.
Errors: a harm with positive points, a wanted behaviour with negative points, zero points, a task whose
criteria have no positive points, the same text twice in a task. Warnings: points beyond -10..10, no
axis: tag. Which way a criterion points comes from its tags (`harm`: a harm; HealthBench's `cluster:...`:
wanted), else from its wording. With --judge, each judge is asked which way every criterion's text points
(wanted or harmful, never shown the points); a reading against the points' sign is an error
(judge-disagrees-with-sign). Its calls are stored in the run store and answered from it the next time, so
linting again sends nothing. A criterion tagged lint:sign-checked skips every sign check. Exit status: 0 no
errors (warnings allowed), 1 errors or an unreadable file, 2 bad usage.";

#[derive(Subcommand, Debug)]
pub enum RubricCommand {
    /// Check a criterion rubric for sign and point mistakes; exit 1 if any is an error
    Lint(LintArgs),
}

#[derive(Args, Debug)]
pub struct LintArgs {
    /// The criterion rubric (.toml, or .jsonl)
    file: PathBuf,
    /// Print one JSON object (findings, counts) instead of lines
    #[arg(long)]
    json: bool,
    /// Also ask this judge which way each criterion points, and flag a reading against the points' sign
    /// (repeatable; a spec as `nmb score --judge`)
    #[arg(long = "judge", value_name = "SPEC")]
    judges: Vec<String>,
}

pub fn run(c: RubricCommand, at: &StoreAt) -> Result<ExitCode> {
    match c {
        RubricCommand::Lint(a) => run_lint(a, at),
    }
}

fn run_lint(args: LintArgs, at: &StoreAt) -> Result<ExitCode> {
    let rubric = CriterionRubric::load(&args.file)
        .with_context(|| format!("cannot lint {}", args.file.display()))?;
    let mut findings = lint(&rubric);
    if !args.judges.is_empty() {
        findings.extend(ask_judges(&args.judges, &rubric, at)?);
        findings.sort_by(|a, b| (a.line, &a.task).cmp(&(b.line, &b.task)));
    }
    // What no judge read: the safety criteria that point neither way by their tags or wording.
    let unread = if args.judges.is_empty() {
        unread_safety(&rubric)
    } else {
        Vec::new()
    };
    let errors = findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    let warnings = findings.len() - errors;
    if args.json {
        let list: Vec<_> = findings
            .iter()
            .map(|f| {
                json!({
                    "severity": if f.severity == Severity::Error { "error" } else { "warning" },
                    "code": f.code,
                    "file": f.source,
                    "line": f.line,
                    "task": f.task,
                    "criterion": f.criterion,
                    "message": f.message,
                })
            })
            .collect();
        let out = json!({
            "file": rubric.source,
            "tasks": rubric.tasks.len(),
            "criteria": rubric.info().criteria,
            "errors": errors,
            "warnings": warnings,
            "findings": list,
            "unread_safety": unread
                .iter()
                .map(|(task, c)| json!({"task": task, "criterion": c.id, "line": c.line}))
                .collect::<Vec<_>>(),
        });
        println!("{out}");
    } else {
        for f in &findings {
            println!("{f}");
        }
        if !unread.is_empty() {
            let lines: Vec<String> = unread.iter().map(|(_, c)| c.line.to_string()).collect();
            println!(
                "{}: note: {} axis:safety criteria point neither way by their tags or wording (lines {}); \
                 --judge SPEC has a judge read them",
                rubric.source,
                unread.len(),
                lines.join(", ")
            );
        }
        println!(
            "{}: {} tasks, {} criteria: {errors} errors, {warnings} warnings",
            rubric.source,
            rubric.tasks.len(),
            rubric.info().criteria
        );
    }
    Ok(if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The findings of each judge's reading of the rubric's criteria, asked through the store.
fn ask_judges(specs: &[String], rubric: &CriterionRubric, at: &StoreAt) -> Result<Vec<Finding>> {
    let judges = specs
        .iter()
        .map(|j| ModelSpec::parse(j).with_context(|| format!("--judge {j}")))
        .collect::<Result<Vec<_>>>()?;
    let config = ScoringConfig {
        judges,
        ..ScoringConfig::default()
    };
    let judges = config.connect_judges(&nmb_study::job::connect_judge)?;
    let store = Arc::new(at.open()?);
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let readings = runtime
        .block_on(direction::read(store, &judges, rubric))
        .context("cannot ask the judges")?;
    Ok(judged(rubric, &readings))
}
