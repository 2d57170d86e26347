//! `nmb eval --config study.toml`: a whole study. Each cell of the run file's matrix (suite × model × template)
//! runs as the `nmb eval` it stands for, one after another, so it resumes, reuses stored answers and scores
//! exactly as that command would; then one report covers every run of the study. The run file's format is in
//! `nmb eval --help` and `nmb-study`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use nmb_report::{Prices, ReportOptions};
use nmb_store::Store;
use nmb_study::{Cell, Study};
use serde_json::json;

use super::eval::{dry_run_totals, run_one, EvalArgs};

/// A cell's arguments parsed exactly as `nmb eval` parses its own.
#[derive(Parser)]
#[command(name = "nmb eval", no_binary_name = true)]
struct CellCli {
    #[command(flatten)]
    eval: EvalArgs,
}

pub fn run(config: &Path, top: &EvalArgs, runs_dir: &Path) -> Result<ExitCode> {
    let study = nmb_study::read(config)?;
    // A budget that is not enforced is worse than none: refuse it until the cap is built.
    if study.max_cost().is_some() {
        anyhow::bail!(
            "{}: study.max_cost is not enforced by this version of nmb; remove it to run the study without a \
             cap (use --dry-run to see the most the study can cost)",
            config.display()
        );
    }
    let cells = study.cells();
    if top.dry_run {
        return dry_run(&study, &cells);
    }
    let mut runs = Vec::new();
    for cell in &cells {
        if !top.quiet {
            eprintln!(
                "study {}: {}/{}: {} on {}",
                study.name(),
                cell.index,
                cells.len(),
                cell.name,
                cell.suite
            );
        }
        let args = cell_args(cell, &switches(top))?;
        let run_id = run_one(&args, runs_dir).with_context(|| {
            format!(
                "study {}: cell {} ({})",
                study.name(),
                cell.index,
                cell.name
            )
        })?;
        if let Some(id) = run_id {
            tag(runs_dir, &id, study.name())?;
            runs.push((cell, id));
        }
    }
    let html = report(&study, &cells, &runs, runs_dir)?;
    if top.json {
        let cells: Vec<_> = runs
            .iter()
            .map(|(c, id)| json!({"cell": c.index, "name": c.name, "model": c.model, "suite": c.suite, "run_id": id}))
            .collect();
        println!(
            "{}",
            json!({"study": study.name(), "cells": cells, "report": html})
        );
    } else {
        println!("study report: {}", html.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// The invocation's own output and scoring switches, passed on to every cell.
fn switches(top: &EvalArgs) -> Vec<&'static str> {
    [
        (top.quiet, "--quiet"),
        (top.no_score, "--no-score"),
        (top.fresh, "--fresh"),
    ]
    .into_iter()
    .filter_map(|(on, flag)| on.then_some(flag))
    .collect()
}

/// The cell's `nmb eval` arguments, parsed as `nmb eval` parses its own.
fn cell_args(cell: &Cell, extra: &[&str]) -> Result<EvalArgs> {
    let mut argv = cell.args.clone();
    argv.extend(extra.iter().map(|s| s.to_string()));
    let parsed = CellCli::try_parse_from(&argv)
        .map_err(|e| anyhow::anyhow!("cell {} ({}): {}", cell.index, cell.name, e.render()))?;
    Ok(parsed.eval)
}

/// Records the study in the run's manifest (outside its configuration, like its name).
fn tag(runs_dir: &Path, run_id: &str, study: &str) -> Result<()> {
    let store = Store::open_dir(runs_dir).context("cannot open the run store")?;
    let mut run = store.run(run_id)?;
    if run.manifest.study.as_deref() != Some(study) {
        run.manifest.study = Some(study.to_string());
        store.update_manifest(run_id, &run.manifest)?;
    }
    Ok(())
}

/// The models' prices, for the report's cost column.
fn prices(cells: &[Cell]) -> Prices {
    let mut p = Prices::default();
    for c in cells {
        if let Some([input, output]) = c.price {
            let price = nmb_report::Price {
                input_per_mtok: input,
                output_per_mtok: output,
            };
            p.0.insert(c.model.clone(), price);
        }
    }
    p
}

/// One report over every run of the study (its two-axis view, paired comparisons and sweeps included).
fn report(
    study: &Study,
    cells: &[Cell],
    runs: &[(&Cell, String)],
    runs_dir: &Path,
) -> Result<std::path::PathBuf> {
    let store = Store::open_dir(runs_dir).context("cannot open the run store")?;
    let mut data = Vec::new();
    for (_, id) in runs {
        let scores = nmb_report::stored_scores(&store, id)?;
        data.push(nmb_report::load_run(&store, id, scores)?);
    }
    let mut opts = ReportOptions::new(study.report_dir());
    opts.prices = prices(cells);
    let written = nmb_report::write_report(&data, &opts).with_context(|| {
        format!(
            "cannot write the study report into {}",
            study.report_dir().display()
        )
    })?;
    written.html.context("the report writer wrote no HTML file")
}

/// The matrix with what each cell would send and the most it can cost; nothing is sent or stored.
fn dry_run(study: &Study, cells: &[Cell]) -> Result<ExitCode> {
    println!(
        "dry run of study {}: {} cell(s); nothing is sent or stored.",
        study.name(),
        cells.len()
    );
    println!(
        "{:>4}  {:<28} {:<36} {:>8} {:>12} {:>12} {:>10}",
        "cell", "model", "suite", "requests", "est. in", "max out", "max $"
    );
    let (mut requests, mut input, mut output, mut dollars) = (0u64, 0u64, 0u64, 0f64);
    let mut unpriced = 0;
    for cell in cells {
        let args = cell_args(cell, &[])?;
        let t = dry_run_totals(&args)
            .with_context(|| format!("cell {} ({})", cell.index, cell.name))?;
        let cost = cell.price.map(|[i, o]| {
            (t.total.est_input_tokens as f64 * i + t.max_output as f64 * o) / 1_000_000.0
        });
        println!(
            "{:>4}  {:<28} {:<36} {:>8} {:>12} {:>12} {:>10}",
            cell.index,
            cell.name,
            cell.suite,
            t.requests,
            t.total.est_input_tokens,
            t.max_output,
            cost.map_or("no price".into(), |d| format!("{d:.4}"))
        );
        requests += t.requests;
        input += t.total.est_input_tokens;
        output += t.max_output;
        dollars += cost.unwrap_or(0.0);
        unpriced += usize::from(cost.is_none());
    }
    println!(
        "total: {requests} request(s), about {input} input tokens, at most {output} output tokens, at most ${dollars:.4}{}",
        if unpriced > 0 {
            format!(" ({unpriced} cell(s) without a price not counted)")
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}
