//! `nmb eval --template-variants DIR|bundled`: a prompt sweep. The same evaluation runs once per template
//! variant, each exactly as `nmb eval --template VARIANT --name "NAME [variant]"` would (so each resumes and
//! reuses stored answers on its own), then one report covers every variant when `--report DIR` is given; its
//! prompt-sensitivity section compares them (`nmb-report`'s `sweep`).

use crate::store_at::StoreAt;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::json;

use super::{dry_run, run_one, EvalArgs, Output};

pub(super) fn run(mut args: EvalArgs, at: &StoreAt) -> Result<ExitCode> {
    let source = args
        .template_variants
        .take()
        .context("a prompt sweep needs --template-variants")?;
    let variants = nmb_study::sweep::variants(&source)?;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| nmb_store::default_display_name(&args.model));
    // Each run would write its own report into the same folder; the sweep writes one over all of them.
    let report = args.report.take();
    let (mut config, invocation) = (args.config()?, args.invocation(at));
    let output = Output {
        report: None,
        ..args.output()?
    };
    let mut runs = Vec::new();
    for (i, (label, template)) in variants.iter().enumerate() {
        if !args.quiet {
            eprintln!("prompt sweep: {}/{}: {label}", i + 1, variants.len());
        }
        config.template = template.clone();
        config.name = Some(format!("{name} [{label}]"));
        if args.dry_run {
            dry_run(&config, args.json)?;
            continue;
        }
        let ran = run_one(&config, &invocation, &output, at)
            .with_context(|| format!("prompt variant {label}"))?;
        runs.push((label.clone(), ran.outcome.run_id));
    }
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    let ids: Vec<&str> = runs.iter().map(|(_, id)| id.as_str()).collect();
    let html = super::set_report(at, &ids, report.as_deref())?;
    if args.json {
        let list: Vec<_> = runs
            .iter()
            .map(|(label, id)| json!({"variant": label, "name": format!("{name} [{label}]"), "run_id": id}))
            .collect();
        println!("{}", json!({"sweep": list, "report": html}));
    } else {
        println!(
            "prompt sweep: {} variant(s): {}",
            runs.len(),
            runs.iter()
                .map(|(label, id)| format!("{label} {id}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if let Some(html) = &html {
            println!("sweep report: {}", html.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
