//! `nmb eval --perturb LIST`: image reliance and robustness. The same evaluation runs unperturbed (named
//! `NAME`) and once per perturbation, each exactly as `nmb eval --name "NAME [perturbation]"` with that
//! perturbation would (so each resumes and reuses stored answers on its own); `--report DIR` covers them all, and
//! the report's image-reliance section pairs each perturbed run with the unperturbed one. Every perturbation is
//! checked against the suite before anything is sent.

use crate::store_at::StoreAt;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use nmb_imaging::Perturbation;
use serde_json::json;

use super::{dry_run, run_one, EvalArgs, Output};

/// What the perturbed runs are called: the label in brackets after the name.
fn label(p: Option<&Perturbation>) -> String {
    p.map_or_else(|| "none".to_string(), ToString::to_string)
}

pub(super) fn run(mut args: EvalArgs, at: &StoreAt) -> Result<ExitCode> {
    let list = args
        .perturb
        .take()
        .context("a perturbation sweep needs --perturb")?
        .0;
    if !args.inputs.includes_images() {
        bail!(
            "--perturb changes images, but --inputs {} sends none; use --inputs full or images",
            args.inputs
        );
    }
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| nmb_store::default_display_name(&args.model));
    let report = args.report.take();
    let (mut config, invocation) = (args.config()?, args.invocation(at));
    nmb_run::check_perturbations(&config, &list).context("--perturb")?;
    let output = Output {
        report: None,
        ..args.output()?
    };
    let all: Vec<Option<&Perturbation>> =
        std::iter::once(None).chain(list.iter().map(Some)).collect();
    let mut runs = Vec::new();
    for (i, p) in all.iter().enumerate() {
        if !args.quiet {
            eprintln!("perturbations: {}/{}: {}", i + 1, all.len(), label(*p));
        }
        config.perturb = p.cloned();
        config.name = Some(match p {
            Some(p) => format!("{name} [{p}]"),
            None => name.clone(),
        });
        if args.dry_run {
            dry_run(&config, args.json)?;
            continue;
        }
        let ran = run_one(&config, &invocation, &output, at)
            .with_context(|| format!("perturbation {}", label(*p)))?;
        runs.push((
            label(*p),
            config.name.clone().unwrap_or_default(),
            ran.outcome.run_id,
        ));
    }
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    let ids: Vec<&str> = runs.iter().map(|(_, _, id)| id.as_str()).collect();
    let html = super::set_report(at, &ids, report.as_deref())?;
    if args.json {
        let list: Vec<_> = runs
            .iter()
            .map(|(p, name, id)| json!({"perturbation": p, "name": name, "run_id": id}))
            .collect();
        println!("{}", json!({"perturb": list, "report": html}));
    } else {
        println!(
            "perturbations: {} run(s): {}",
            runs.len(),
            runs.iter()
                .map(|(p, _, id)| format!("{p} {id}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(html) = &html {
            println!("report: {}", html.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
