//! `nmb rubric lint`: sign and point mistakes in a criterion rubric, with file and line.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use nmb_results::criteria::CriterionRubric;
use nmb_score::criteria::lint::{lint, Severity};
use serde_json::json;

pub const EXAMPLES: &str = "\
Examples:
  nmb rubric lint rubrics/sample-criteria-v1.toml
  nmb rubric lint healthbench_rubrics.jsonl --json

A criterion rubric is TOML ([[task]] tables with [[task.criterion]]: id, criterion, points, tags) or JSON
lines (one criterion per line, or HealthBench's rows with \"rubrics\"); docs/formats.md has both.
Errors: a harm with positive points, a wanted behaviour with negative points, zero points, a task whose
criteria have no positive points, the same text twice in a task. Warnings: points beyond -10..10, no
axis: tag. A criterion tagged lint:sign-checked skips the two sign checks. Exit status: 0 no errors
(warnings allowed), 1 errors or an unreadable file, 2 bad usage.";

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
}

pub fn run(c: RubricCommand) -> Result<ExitCode> {
    match c {
        RubricCommand::Lint(a) => run_lint(a),
    }
}

fn run_lint(args: LintArgs) -> Result<ExitCode> {
    let rubric = CriterionRubric::load(&args.file)
        .with_context(|| format!("cannot lint {}", args.file.display()))?;
    let findings = lint(&rubric);
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
        });
        println!("{out}");
    } else {
        for f in &findings {
            println!("{f}");
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
