//! `nmb eval --config study.toml`: a whole study. Each cell of the run file's matrix (suite × model × template)
//! runs as the `nmb eval` it stands for, so it resumes, reuses stored answers and scores exactly as that
//! command would: the models at once through one scheduler, or one cell after another under a budget cap. Then
//! one report covers every run of the study. The run file's format is in
//! `nmb eval --help` and `nmb-study`.

use crate::store_at::StoreAt;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use nmb_report::{Prices, ReportOptions};
use nmb_requests::Scheduler;
use nmb_run::{EvalConfig, Invocation, Resume};
use nmb_study::{Cell, Study};
use serde_json::json;

use super::eval::{run_one, run_with, EvalArgs, Output, Ran};
use nmb_score::ScoringConfig;

pub fn run(config: &Path, top: &EvalArgs, at: &StoreAt) -> Result<ExitCode> {
    let study = nmb_study::read(config)?;
    let cells = study.cells();
    let cap = top.max_cost.or(study.max_cost());
    if cap.is_some() {
        check_cap(&study, &cells)?;
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
    let state = record(at, &study, cap, spent, stopped.clone(), &runs)?;
    let html = report(&study, &cells, &runs, at)?;
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
                s["cell"],
                s["name"].as_str().unwrap_or(""),
                s["reason"].as_str().unwrap_or("")
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
    for c in cells {
        if let Some([i, o]) = c.price {
            let spec = format!("{}={i},{o}", c.model);
            config.prices.add_spec(&spec).map_err(anyhow::Error::msg)?;
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
) -> Result<(Done<'a>, Option<serde_json::Value>)> {
    let mut runs = Vec::new();
    for cell in cells {
        announce(study, cell, cells.len(), how.top.quiet);
        let budget = match cap {
            Some(cap) => Some(Budget::for_cell(
                cap,
                &cell.config,
                cell,
                how.at,
                study,
                cells,
            )?),
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
        .with_context(|| {
            format!(
                "study {}: cell {} ({})",
                study.name(),
                cell.index,
                cell.name
            )
        })?;
        let stopped = ran.stopped_early.then(|| {
            json!({
                "cell": cell.index,
                "name": cell.name,
                "suite": cell.suite,
                "run_id": ran.run_id,
                "reason": budget.as_ref().map_or("--max-requests".to_string(), |b| b.why(cap.unwrap_or(0.0))),
            })
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
                                .with_context(|| {
                                    format!(
                                        "study {}: cell {} ({})",
                                        study.name(),
                                        cell.index,
                                        cell.name
                                    )
                                })?;
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

/// A cap can be kept only where every call has a price: every model priced, and no judges (the run file gives
/// judges no price).
fn check_cap(study: &Study, cells: &[Cell]) -> Result<()> {
    if let Some(c) = cells.iter().find(|c| c.price.is_none()) {
        anyhow::bail!(
            "{}: study.max_cost needs a price for every model; {} has none (add price = [input, output])",
            study.path.display(),
            c.model
        );
    }
    if !study.file.scoring.judges.is_empty() {
        anyhow::bail!(
            "{}: study.max_cost cannot be kept with judges, which have no price in the run file; remove the judges \
             or the cap",
            study.path.display()
        );
    }
    Ok(())
}

/// What one cell may still spend.
struct Budget {
    /// Dollars the study's runs have spent so far (every invocation).
    spent: f64,
    /// The most one request of this cell can cost: its largest estimated prompt (earlier answers of a consult
    /// included at max_tokens each) and max_tokens out, at the model's price.
    per_request: f64,
    /// Requests that fit in what is left.
    requests: u64,
}

impl Budget {
    fn why(&self, cap: f64) -> String {
        format!(
            "the next requests could pass the cap of ${cap:.4}: ${:.4} spent, at most ${:.6} per request, {} request(s) \
             allowed",
            self.spent, self.per_request, self.requests
        )
    }

    fn for_cell(
        cap: f64,
        config: &EvalConfig,
        cell: &Cell,
        at: &StoreAt,
        study: &Study,
        cells: &[Cell],
    ) -> Result<Budget> {
        let spent = spent(at, study, cells)?;
        let [price_in, price_out] = cell.price.unwrap_or([0.0, 0.0]);
        let plan = nmb_run::estimate(config)?;
        let max_tokens = config.params.max_tokens;
        let max_out = f64::from(max_tokens);
        let input = plan
            .tasks
            .iter()
            .map(|t| t.largest_prompt(max_tokens))
            .fold(0.0, f64::max);
        let per_request = (input * price_in + max_out * price_out) / 1_000_000.0;
        let left = (cap - spent).max(0.0);
        let requests = if per_request > 0.0 {
            (left / per_request).floor() as u64
        } else {
            u64::MAX
        };
        Ok(Budget {
            spent,
            per_request,
            requests,
        })
    }
}

/// Dollars spent by every run of the study, from the tokens its calls used (answers taken from the store cost
/// nothing).
fn spent(at: &StoreAt, study: &Study, cells: &[Cell]) -> Result<f64> {
    let Ok(store) = at.open() else {
        return Ok(0.0);
    };
    let mut dollars = 0.0;
    for run in store.list_runs()? {
        if run.manifest.study.as_deref() != Some(study.name()) {
            continue;
        }
        let price = cells
            .iter()
            .find(|c| nmb_requests::ModelSpec::identity_of(&c.model) == run.manifest.model)
            .and_then(|c| c.price);
        if let Some([i, o]) = price {
            let s = store.summary(&run.run_id)?;
            dollars += (s.tokens_in as f64 * i + s.tokens_out as f64 * o) / 1_000_000.0;
        }
    }
    Ok(dollars)
}

/// Where the study got to, kept in RUNS_DIR/studies/NAME.json: its runs, what it spent and where and why it
/// stopped.
fn record(
    at: &StoreAt,
    study: &Study,
    cap: Option<f64>,
    spent: Option<f64>,
    stopped: Option<serde_json::Value>,
    runs: &[(&Cell, String)],
) -> Result<std::path::PathBuf> {
    let dir = at.runs_dir().join("studies");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let path = dir.join(format!("{}.json", study.name()));
    let state = json!({
        "study": study.name(),
        "run_file": study.path,
        "max_cost": cap,
        "spent": spent,
        "stopped": stopped,
        "runs": runs.iter().map(|(c, id)| json!({"cell": c.index, "name": c.name, "run_id": id})).collect::<Vec<_>>(),
    });
    std::fs::write(&path, serde_json::to_string_pretty(&state)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
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
            p.0.insert(nmb_requests::ModelSpec::identity_of(&c.model), price);
        }
    }
    p
}

/// One report over every run of the study (its two-axis view, paired comparisons and sweeps included).
fn report(
    study: &Study,
    cells: &[Cell],
    runs: &[(&Cell, String)],
    at: &StoreAt,
) -> Result<std::path::PathBuf> {
    let store = at.open()?;
    let mut data = Vec::new();
    for (_, id) in runs {
        let scores = nmb_report::stored_scores(&store, id)?;
        data.push(nmb_report::load_run(&store, id, scores)?);
    }
    let mut opts = ReportOptions::new(study.report_dir());
    opts.prices = prices(cells);
    opts.leaderboard = study.file.study.leaderboard;
    if let Some(formats) = study.formats() {
        opts.formats = formats
            .iter()
            .map(|f| nmb_report::Format::parse(f))
            .collect::<Result<_, _>>()?;
        // The study's answer names the HTML page, so it is always written.
        opts.formats.insert(nmb_report::Format::Html);
    }
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
        let t = nmb_run::estimate(&cell.config)
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
