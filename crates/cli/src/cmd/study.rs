//! `nmb eval --config study.toml`: a whole study. Each cell of the run file's matrix (suite × model × template)
//! runs as the `nmb eval` it stands for (`nmb_study::run_cells`), then one report covers every run of the
//! study. The run file's format is in `nmb eval --help` and `nmb-study`.

use crate::store_at::StoreAt;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Result;
use nmb_study::Running;
use serde_json::json;

use super::eval::EvalArgs;
use crate::progress::Terminal;

pub fn run(config: &Path, top: &EvalArgs, at: &StoreAt) -> Result<ExitCode> {
    let study = nmb_study::read(config)?;
    let mut cells = study.probed_cells()?;
    // --max-response-mib holds for every model the run file gives no cap of its own.
    for cell in &mut cells {
        let limits = &mut cell.config.limits;
        limits.max_response_mib = limits.max_response_mib.or(top.limits().max_response_mib);
    }
    let cap = top.max_cost.or(study.max_cost());
    if cap.is_some() {
        nmb_study::check_cap(&study, &cells)?;
    }
    if top.dry_run {
        print!("{}", nmb_study::dry_run_text(&study, &cells)?);
        return Ok(ExitCode::SUCCESS);
    }
    let how = Running {
        fresh: top.fresh,
        limits: top.limits(),
        claiming: top.invocation(at).claiming,
        scoring: match top.no_score {
            true => None,
            false => Some(nmb_score::ScoringConfig {
                max_response_mib: top.limits().max_response_mib,
                ..nmb_study::scoring_config(&study, &cells)?
            }),
        },
        cap,
    };
    let store = Arc::new(at.open()?);
    let watch = Terminal { quiet: top.quiet };
    let ran = nmb_study::run_cells(&study, &cells, &how, &store, &watch)?;
    let stopped = ran.stopped.as_ref();
    let state = nmb_study::record(at.runs_dir(), &study, cap, ran.spent, stopped, &ran.runs)?;
    let html = nmb_study::report(&store, &study, &cells, &ran.runs)?;
    if top.json {
        let cells: Vec<_> = (ran.runs.iter())
            .map(|(c, id)| json!({"cell": c.index, "name": c.name, "model": c.model, "suite": c.suite, "run_id": id}))
            .collect();
        let out = json!({
            "study": study.name(), "cells": cells, "report": html, "stopped": stopped, "spent": ran.spent,
            "state": state, "models_at_once": ran.models_at_once,
        });
        println!("{out}");
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(s) = stopped {
        let name = study.name();
        println!(
            "study {name} stopped at cell {} ({}): {}",
            s.cell, s.name, s.reason
        );
    }
    println!("study report: {}", html.display());
    Ok(ExitCode::SUCCESS)
}
