//! `nmb eval --probe anchoring,sycophancy`: context probes. The evaluation runs as `nmb eval` would without a
//! probe, then once per probe, each probed run exactly as `nmb eval` with that probe and `--name "NAME [probe]"`
//! (so each resumes and reuses stored answers on its own); one report covers them all when `--report DIR` is
//! given, and its context-probe section pairs each probed run with the unprobed one.

use crate::store_at::StoreAt;
use std::process::ExitCode;

use anyhow::{Context, Result};
use serde_json::json;

use super::{dry_run, run_one, EvalArgs, Output};

pub(super) fn run(mut args: EvalArgs, at: &StoreAt) -> Result<ExitCode> {
    let kinds = std::mem::take(&mut args.probe);
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| nmb_store::default_display_name(&args.model));
    // Each run would write its own report into the same folder; one report is written over all of them.
    let report = args.report.take();
    let (plain, invocation) = (args.config()?, args.invocation(at));
    let mut configs = vec![(None, plain.clone())];
    for kind in &kinds {
        let probed = nmb_study::probe::probed(&plain, *kind, args.probe_seed, Some(&name))
            .with_context(|| format!("probe {kind}"))?;
        configs.push((Some(*kind), probed));
    }
    let output = Output {
        report: None,
        ..args.output()?
    };
    let mut runs = Vec::new();
    for (kind, config) in &configs {
        let label = kind.map_or("no probe", |k| k.as_str());
        let unprobed = config.probe.as_ref().map_or(&[][..], |p| &p.unprobed[..]);
        if !args.quiet {
            eprintln!("context probes: {label}");
        }
        if !unprobed.is_empty() && !args.json {
            eprintln!(
                "probe {label}: no wrong diagnosis could be chosen for {} task(s), asked without the probe: {}",
                unprobed.len(),
                unprobed.join(", ")
            );
        }
        if args.dry_run {
            dry_run(config, args.json)?;
            continue;
        }
        let ran = run_one(config, &invocation, &output, at).with_context(|| label.to_string())?;
        runs.push((*kind, config, ran.outcome.run_id));
    }
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    let ids: Vec<&str> = runs.iter().map(|(_, _, id)| id.as_str()).collect();
    let html = super::set_report(at, &ids, report.as_deref())?;
    if args.json {
        let list: Vec<_> = runs
            .iter()
            .map(|(kind, config, id)| {
                let probe = config.probe.as_ref();
                json!({
                    "probe": kind.map(|k| k.as_str()),
                    "seed": probe.map(|p| p.seed),
                    "name": config.name,
                    "run_id": id,
                    "unprobed_tasks": probe.map(|p| &p.unprobed),
                })
            })
            .collect();
        println!("{}", json!({"probes": list, "report": html}));
    } else {
        let listed: Vec<String> = runs
            .iter()
            .map(|(kind, _, id)| format!("{} {id}", kind.map_or("none", |k| k.as_str())))
            .collect();
        println!("context probes: {}", listed.join(", "));
        if let Some(html) = &html {
            println!("report: {}", html.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
