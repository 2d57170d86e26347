//! `nmb import FILE --format neurovlm-run`: the JSONL of NeuroVLM-Bench's `run_async.py`, one run per model it
//! asked, each built by [`ImportedRun`] without asking anything (see `nmb_run::stored::replay`).

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, Result};
use nmb_plan::GenParams;
use nmb_requests::ModelSpec;
use nmb_run::import::neurovlm_run;
use nmb_score::ScoringConfig;
use nmb_store::Store;
use nmb_study::job::Done;
use nmb_study::{Imported, ImportedRun};
use serde_json::{json, Value};

use super::super::eval;
use super::super::score::ProtocolArg;
use super::{human_scoring, ImportArgs};
use crate::progress::Terminal;
use crate::store_at::StoreAt;

pub(super) fn run(args: ImportArgs, at: &StoreAt) -> Result<ExitCode> {
    refuse_human_flags(&args)?;
    let source = nmb_suite::Source {
        answers: args.answer_key.clone(),
        map: args.map.clone(),
        images_root: args.images_root.clone(),
        ..nmb_suite::Source::new(&args.suite)
    };
    let suite = source.load_checked(false)?.suite;
    let read = neurovlm_run::read_file(&args.file, &suite, &GenParams::default())?;
    for w in &read.warnings {
        eprintln!("warning: {}", nmb_table::terminal::excerpt_of(w, 2000));
    }
    let models = read.models()?;
    let store = Arc::new(at.open()?);
    let suite_hash = nmb_suite::suite_hash(&suite)?;
    let scoring = scoring(&args);
    let mut runs = Vec::new();
    for model in models {
        let imported = ImportedRun {
            suite: source.clone(),
            template: args.template.clone(),
            model: model.clone(),
            name: None,
            scoring: scoring.clone(),
        };
        runs.push(build(&imported, &store, &suite_hash, &args)?);
    }
    if args.json {
        let out = json!({ "file": read.file, "format": neurovlm_run::FORMAT, "runs": runs, "warnings": read.warnings });
        println!("{out}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `--as` and `--display-name` name one person; the runner's file names its models itself.
fn refuse_human_flags(args: &ImportArgs) -> Result<()> {
    if args.human.is_some() || args.display_name.is_some() {
        anyhow::bail!(
            "--as and --display-name are for --format human; a neurovlm-run file names its models itself"
        );
    }
    Ok(())
}

/// Scoring as a person's run is scored, with the authors' reading on `--protocol neurovlm-paper`.
fn scoring(args: &ImportArgs) -> Option<ScoringConfig> {
    let mut scoring = human_scoring(args.no_score, args.no_bertscore);
    if let (Some(s), ProtocolArg::NeurovlmPaper) = (&mut scoring, args.protocol) {
        s.paper = Some(nmb_results::structured::paper::PaperOptions::default());
    }
    scoring
}

/// Builds one model's run and prints what it did (text), or returns it for the one JSON object.
fn build(
    imported: &ImportedRun,
    store: &Arc<Store>,
    suite_hash: &str,
    args: &ImportArgs,
) -> Result<Value> {
    let m = &imported.model;
    let spec = &m.spec;
    let lines = format!(
        "{} answer(s), {} error line(s), {} case(s) without a line",
        m.answered, m.errored, m.unanswered
    );
    let watch = Terminal {
        quiet: args.quiet || args.json,
    };
    let built = imported
        .build(store, suite_hash, &watch)
        .with_context(|| format!("cannot build the run of {spec}"))?;
    let mut out = json!({
        "model": spec.to_string(),
        "lines": { "answered": m.answered, "errored": m.errored, "cases_without_line": m.unanswered },
    });
    match built {
        Imported::Already { run_id } => {
            if !args.json {
                println!(
                    "{spec}: {lines}; imported before as run {}, which is finished: nothing added",
                    run_id
                );
            }
            out["run_id"] = json!(run_id);
            out["already_imported"] = json!(true);
        }
        Imported::Built(done) => {
            if !args.json {
                print_built(spec, &lines, &done, args.no_score)?;
            }
            let outcome = &done.outcome;
            out["run_id"] = json!(outcome.run_id);
            out["already_imported"] = json!(false);
            out["resumed"] = json!(outcome.resumed);
            out["summary"] = json!(outcome.summary);
            out["scores"] = json!(done.scores.as_ref().map(eval::scores_json));
        }
    }
    Ok(out)
}

/// The run built: what the file gave, the scores, the run's id. Nothing was asked, so none of `nmb eval`'s
/// request counts or advice to resume applies.
fn print_built(spec: &ModelSpec, lines: &str, done: &Done, no_score: bool) -> Result<()> {
    let outcome = &done.outcome;
    let verb = if outcome.resumed { "resumed" } else { "built" };
    println!(
        "{spec}: {lines}; run {} {verb}, nothing sent to any model",
        outcome.run_id
    );
    match &done.scores {
        Some(r) => super::super::score::print_report(r, false)?,
        None if no_score => println!(
            "not scored (--no-score); `nmb score {}` scores it",
            outcome.run_id
        ),
        None => println!("not scored"),
    }
    println!("run id: {}", outcome.run_id);
    Ok(())
}
