//! `nmb eval --config study.toml`: a whole study. Each cell of the run file's matrix (suite × model × template)
//! runs as the `nmb eval` it stands for, so it resumes, reuses stored answers and scores exactly as that
//! command would: the models at once through one scheduler, or one cell after another under a budget cap. Then
//! one report covers every run of the study. The budget, the state file and the report are `nmb-study`'s; the
//! run file's format is in
//! `nmb eval --help` and `nmb-study`.

use crate::store_at::StoreAt;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use nmb_requests::Scheduler;
use nmb_run::{Invocation, Resume};
use nmb_study::{Budget, Cell, CellEstimate, Stopped, Study, Totals};
use serde_json::json;

use super::eval::{run_one, run_with, EvalArgs, Output, Ran};
use nmb_score::ScoringConfig;

pub fn run(config: &Path, top: &EvalArgs, at: &StoreAt) -> Result<ExitCode> {
    let study = nmb_study::read(config)?;
    let cells = study.cells();
    let cap = top.max_cost.or(study.max_cost());
    if cap.is_some() {
        nmb_study::check_cap(&study, &cells)?;
    }
    if top.dry_run {
        return dry_run(&study, &cells);
    }
    let models: BTreeSet<&str> = cells.iter().map(|c| c.model.as_str()).collect();
    let how = How {
        top,
        at,
        scoring: match top.no_score {
            true => None,
            false => Some(scoring(&study, &cells)?),
        },
    };
    let (runs, stopped) = if cap.is_none() && models.len() > 1 {
        (in_parallel(&study, &cells, &how)?, None)
    } else {
        in_turn(&study, &cells, &how, cap)?
    };
    let runs: Vec<(&Cell, String)> = runs.into_iter().map(|(c, r)| (c, r.run_id)).collect();
    let spent = cap.map(|_| spent(at, &study, &cells)).transpose()?;
    let state = nmb_study::record(at.runs_dir(), &study, cap, spent, stopped.as_ref(), &runs)?;
    let html = nmb_study::report(&at.open()?, &study, &cells, &runs)?;
    if top.json {
        let cells: Vec<_> = runs
            .iter()
            .map(|(c, id)| json!({"cell": c.index, "name": c.name, "model": c.model, "suite": c.suite, "run_id": id}))
            .collect();
        let out = json!({
            "study": study.name(), "cells": cells, "report": html, "stopped": stopped, "spent": spent,
            "state": state, "models_at_once": if cap.is_none() { models.len() } else { 1 },
        });
        println!("{out}");
    } else {
        if let Some(s) = &stopped {
            println!(
                "study {} stopped at cell {} ({}): {}",
                study.name(),
                s.cell,
                s.name,
                s.reason
            );
        }
        println!("study report: {}", html.display());
    }
    Ok(ExitCode::SUCCESS)
}

type Done<'a> = Vec<(&'a Cell, Ran)>;

/// How every cell runs: the invocation's own switches, the store, and the study's scoring.
struct How<'a> {
    top: &'a EvalArgs,
    at: &'a StoreAt,
    scoring: Option<ScoringConfig>,
}

impl How<'_> {
    fn invocation(&self, max_requests: Option<u64>) -> Invocation {
        Invocation {
            resume: if self.top.fresh {
                Resume::Fresh
            } else {
                Resume::Auto
            },
            max_requests,
            ..self.top.invocation(self.at)
        }
    }

    fn output(&self, quiet: bool) -> Output {
        Output {
            json: false,
            quiet,
            report: None,
            scoring: self.scoring.clone(),
        }
    }
}

/// The run file's scoring for every cell: its judges, BERTScore and rubric switches, and the models' prices.
fn scoring(study: &Study, cells: &[Cell]) -> Result<ScoringConfig> {
    let s = &study.file.scoring;
    let mut config = ScoringConfig::default();
    for judge in &s.judges {
        let spec = nmb_requests::ModelSpec::parse(judge)
            .with_context(|| format!("{}: scoring.judges", study.path.display()))?;
        config.judges.push(spec);
    }
    if s.bertscore == Some(false) {
        config.bertscore = nmb_score::BertScoreSetting::Off;
    }
    if s.rubric == Some(false) {
        config.rubric = nmb_score::RubricChoice::Off;
    }
    // The run file's prices were checked when it was read (finite, >= 0).
    for c in cells {
        if let Some([input, output]) = c.price {
            let price = nmb_score::cost::Price {
                input_per_mtok: input,
                output_per_mtok: output,
            };
            config.prices.0.insert(c.model.clone(), price);
        }
    }
    Ok(config)
}

/// Cells one after another (with a cap, which needs what the previous cells spent); the first that stops at the
/// cap stops the study, and why is returned.
fn in_turn<'a>(
    study: &Study,
    cells: &'a [Cell],
    how: &How,
    cap: Option<f64>,
) -> Result<(Done<'a>, Option<Stopped>)> {
    let mut runs = Vec::new();
    for cell in cells {
        announce(study, cell, cells.len(), how.top.quiet);
        let budget = match cap {
            Some(cap) => Some(Budget::for_cell(cap, cell, spent(how.at, study, cells)?)?),
            None => None,
        };
        let max_requests = budget.as_ref().map(|b| b.requests);
        let invocation = how.invocation(max_requests);
        let ran = run_one(
            &cell.config,
            &invocation,
            &how.output(how.top.quiet),
            how.at,
        )
        .with_context(|| cell_label(study, cell))?;
        let stopped = ran.stopped_early.then(|| Stopped {
            cell: cell.index,
            name: cell.name.clone(),
            suite: cell.suite.clone(),
            run_id: ran.run_id.clone(),
            reason: budget
                .as_ref()
                .map_or("--max-requests".to_string(), |b| b.why(cap.unwrap_or(0.0))),
        });
        runs.push((cell, ran));
        if stopped.is_some() {
            return Ok((runs, stopped));
        }
    }
    Ok((runs, None))
}

/// Every model's cells at once, each model's in turn, all through one scheduler: its global limit
/// (`--concurrency`) holds across the study, and each model keeps its own limit because only one of its cells
/// runs at a time. Cells run quietly; a line says when each starts.
fn in_parallel<'a>(study: &Study, cells: &'a [Cell], how: &How) -> Result<Done<'a>> {
    let scheduler = Scheduler::new(how.top.limits().scheduler_config());
    let mut groups: Vec<Vec<&Cell>> = Vec::new();
    for cell in cells {
        match groups.iter_mut().find(|g| g[0].model == cell.model) {
            Some(g) => g.push(cell),
            None => groups.push(vec![cell]),
        }
    }
    let results: Vec<Result<Done<'a>>> = std::thread::scope(|s| {
        let handles: Vec<_> = groups
            .iter()
            .map(|group| {
                let scheduler = scheduler.clone();
                s.spawn(move || -> Result<Done<'a>> {
                    let mut done = Vec::new();
                    for cell in group {
                        announce(study, cell, cells.len(), how.top.quiet);
                        let invocation = how.invocation(None);
                        let (config, out) = (&cell.config, how.output(true));
                        let ran =
                            run_with(config, &invocation, &out, how.at, Some(scheduler.clone()))
                                .with_context(|| cell_label(study, cell))?;
                        done.push((*cell, ran));
                    }
                    Ok(done)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a study thread panicked")))
            })
            .collect()
    });
    let mut runs = Vec::new();
    for r in results {
        runs.extend(r?);
    }
    runs.sort_by_key(|(c, _)| c.index);
    Ok(runs)
}

/// How errors name a cell: `study NAME: cell N (CELL NAME)`.
fn cell_label(study: &Study, cell: &Cell) -> String {
    format!(
        "study {}: cell {} ({})",
        study.name(),
        cell.index,
        cell.name
    )
}

fn announce(study: &Study, cell: &Cell, of: usize, quiet: bool) {
    if !quiet {
        eprintln!(
            "study {}: {}/{of}: {} on {}",
            study.name(),
            cell.index,
            cell.name,
            cell.suite
        );
    }
}

/// What each cell would send and the most it can cost, as a table; nothing is sent or stored.
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
    let mut rows = Vec::new();
    for cell in cells {
        let row = CellEstimate::of(cell)?;
        println!(
            "{:>4}  {:<28} {:<36} {:>8} {:>12} {:>12} {:>10}",
            cell.index,
            cell.name,
            cell.suite,
            row.requests,
            row.est_input_tokens,
            row.max_output,
            row.max_dollars
                .map_or("no price".into(), |d| format!("{d:.4}"))
        );
        rows.push(row);
    }
    let t = Totals::of(&rows);
    println!(
        "total: {} request(s), about {} input tokens, at most {} output tokens, at most ${:.4}{}",
        t.requests,
        t.est_input_tokens,
        t.max_output,
        t.max_dollars,
        if t.unpriced > 0 {
            format!(" ({} cell(s) without a price not counted)", t.unpriced)
        } else {
            String::new()
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// What the study's runs have spent so far; nothing when the store cannot be opened (no run has been stored).
fn spent(at: &StoreAt, study: &Study, cells: &[Cell]) -> Result<f64> {
    match at.open() {
        Ok(store) => Ok(nmb_study::spent(&store, study, cells)?),
        Err(_) => Ok(0.0),
    }
}
