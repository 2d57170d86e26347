//! `nmb eval --template-variants DIR|bundled`: a prompt sweep. The same evaluation runs once per template
//! variant, each exactly as `nmb eval --template VARIANT --name "NAME [variant]"` would (so each resumes and
//! reuses stored answers on its own), then one report covers every variant when `--report DIR` is given; its
//! prompt-sensitivity section compares them (`nmb-report`'s `sweep`).

use crate::store_at::StoreAt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};

use serde_json::json;

use nmb_run::TemplateChoice;

use super::{dry_run, run_one, EvalArgs, Output};

/// What `--template-variants bundled` runs: the built-in templates first (`default`, no `--template`), then
/// each bundled variant as `--template bundled:NAME`.
fn bundled() -> Vec<(String, Option<PathBuf>)> {
    std::iter::once(("default".to_string(), None))
        .chain(
            nmb_plan::variant_names()
                .map(|n| (n.to_string(), Some(PathBuf::from(format!("bundled:{n}"))))),
        )
        .collect()
}

/// The variants a `--template-variants` value names: `bundled`, else every `*.jinja` file in the folder, in
/// name order, each named by its file stem.
fn variants(source: &Path) -> Result<Vec<(String, Option<PathBuf>)>> {
    if source == Path::new("bundled") {
        return Ok(bundled());
    }
    let entries = std::fs::read_dir(source).with_context(|| {
        format!(
            "--template-variants {}: expected a folder of *.jinja templates, or `bundled`",
            source.display()
        )
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("cannot list {}", source.display()))?
            .path();
        if path.is_file() && path.extension().is_some_and(|e| e == "jinja") {
            files.push(path);
        }
    }
    files.sort();
    if files.is_empty() {
        bail!(
            "--template-variants {}: the folder has no *.jinja template",
            source.display()
        );
    }
    Ok(files
        .into_iter()
        .map(|p| {
            let stem = p
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            (stem, Some(p))
        })
        .collect())
}

pub(super) fn run(mut args: EvalArgs, at: &StoreAt) -> Result<ExitCode> {
    let source = args
        .template_variants
        .take()
        .context("a prompt sweep needs --template-variants")?;
    let variants = variants(&source)?;
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
        config.template = template
            .as_ref()
            .map(|t| TemplateChoice::parse(&t.to_string_lossy()));
        config.name = Some(format!("{name} [{label}]"));
        if args.dry_run {
            dry_run(&config, args.json)?;
            continue;
        }
        let ran = run_one(&config, &invocation, &output, at)
            .with_context(|| format!("prompt variant {label}"))?;
        runs.push((label.clone(), ran.run_id));
    }
    if args.dry_run {
        return Ok(ExitCode::SUCCESS);
    }
    let html = match &report {
        Some(dir) => Some(write_report(&runs, at, dir)?),
        None => None,
    };
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

/// One report over every variant's run (scored runs with their stored scores).
fn write_report(runs: &[(String, String)], at: &StoreAt, dir: &Path) -> Result<PathBuf> {
    let store = at.open()?;
    let mut data = Vec::new();
    for (_, id) in runs {
        let scores = nmb_report::stored_scores(&store, id)?;
        data.push(nmb_report::load_run(&store, id, scores)?);
    }
    let written = nmb_report::write_report(&data, &nmb_report::ReportOptions::new(dir))
        .with_context(|| format!("cannot write the sweep report into {}", dir.display()))?;
    written.html.context("the report writer wrote no HTML file")
}
