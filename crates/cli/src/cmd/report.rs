//! `nmb report RUN_ID...`: writes the HTML/Markdown/CSV/JSON report (and optionally the leaderboard export) of
//! one run or a comparison of several.

use crate::store_at::StoreAt;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use nmb_report::{Format, Prices, ReportOptions};

pub const EXAMPLES: &str = "\
Examples:
  nmb report r20260101-120000-ab12                 # one run into ./nmb-report/
  nmb report RUN_A RUN_B --out cmp --format html,md # compare two models
  nmb report RUN... --leaderboard                   # + leaderboard.json, data.js
  nmb report RUN_A RUN_B --leaderboard --org gpt-4o=OpenAI --model-size my-model=7
  nmb report RUN --leaderboard-merge site/js/data.js  # the site's data.js with these rows added
  nmb report RUN --price gpt-4o=2.5,10              # $ per million tokens in,out

Scores come from the store (written by `nmb score`), or from --scores FILE (the JSON of `nmb score --json`).
An unscored run is still reported: answers, errors, tokens and latency, without accuracy.
The HTML file is self-contained (inline CSS and SVG, no script, no network) and escapes all model text.
Prints the paths written, one per line. Exit status: 0 on success, 1 on failure, 2 on bad usage.";

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Run ids (see the store); several make a comparison
    #[arg(required = true, value_name = "RUN_ID")]
    runs: Vec<String>,
    /// Output directory
    #[arg(long, default_value = "nmb-report")]
    out: PathBuf,
    /// Formats to write, comma-separated: html, md, csv, json
    #[arg(long, value_delimiter = ',', default_value = "html,md,csv,json")]
    format: Vec<String>,
    /// Also write leaderboard.json and data.js in the Neural-MedBench site's js/data.js shape
    #[arg(long)]
    leaderboard: bool,
    /// The site's version key the rows go under
    #[arg(long, value_name = "KEY", default_value = nmb_report::leaderboard::DEFAULT_VERSION_KEY)]
    leaderboard_version: String,
    /// Organisation shown for a model: MODEL=NAME, MODEL a run's name, model spec or model id [default: the API's
    /// vendor]; repeatable
    #[arg(long = "org", value_name = "MODEL=NAME")]
    orgs: Vec<String>,
    /// Model size in billions of parameters: MODEL=N [default: null]; repeatable
    #[arg(long = "model-size", value_name = "MODEL=N")]
    sizes: Vec<String>,
    /// An existing site data.js: write it back with these runs' rows added, or replaced by name, and every other
    /// model and version kept (implies --leaderboard)
    #[arg(long, value_name = "FILE")]
    leaderboard_merge: Option<PathBuf>,
    /// Price of a model: MODEL=IN,OUT in dollars per million input and output tokens (MODEL may be * for all),
    /// then optionally the rates of cached input and cache writes
    #[arg(long = "price", value_name = "MODEL=IN,OUT[,CACHED[,WRITE]]")]
    prices: Vec<String>,
    /// A score report JSON file (from `nmb score RUN --json`) to use instead of the stored one; repeatable
    #[arg(long = "scores", value_name = "FILE")]
    scores: Vec<PathBuf>,
    /// Seed of the bootstrap behind cross-run numbers (two-axis correlation, paired comparisons)
    #[arg(long, default_value_t = nmb_stats::DEFAULT_SEED)]
    seed: u64,
    /// Bootstrap resamples for cross-run numbers
    #[arg(long, default_value_t = nmb_stats::DEFAULT_RESAMPLES)]
    resamples: usize,
    /// Level at which the paired comparisons' adjusted p-values are marked significant, and of their power
    /// figures (two-sided)
    #[arg(long, value_name = "ALPHA", default_value_t = nmb_results::multiplicity::DEFAULT_ALPHA, value_parser = super::power::level)]
    alpha: f64,
    /// Break every run's headline numbers down by a field of the cases, as `nmb score --by` does (repeatable;
    /// `sex`, `age:0-40,40-65,65-`), from its stored scores and its suite, with the scoring's own bootstrap; in
    /// place of any breakdown the scoring stored
    #[arg(long = "by", value_name = "FIELD[:BANDS]")]
    by: Vec<String>,
}

pub fn run(args: ReportArgs, at: &StoreAt) -> Result<ExitCode> {
    for spec in &args.by {
        nmb_results::subgroup::parse(spec)?;
    }
    let mut opts = ReportOptions::new(&args.out);
    opts.formats = args
        .format
        .iter()
        .map(|f| Format::parse(f))
        .collect::<Result<_, _>>()?;
    opts.leaderboard = args.leaderboard || args.leaderboard_merge.is_some();
    opts.leaderboard_options = nmb_report::LeaderboardOptions {
        version_key: Some(args.leaderboard_version.clone()),
        orgs: pairs(&args.orgs, "--org", |v| Ok(v.to_string()))?,
        sizes: pairs(&args.sizes, "--model-size", |v| {
            v.parse::<f64>()
                .ok()
                .filter(|n| n.is_finite() && *n > 0.0)
                .ok_or_else(|| format!("expected a positive number of billions, got {v:?}"))
        })?,
        merge: args.leaderboard_merge.clone(),
    };
    opts.prices = Prices::from_specs(&args.prices).map_err(anyhow::Error::msg)?;
    opts.bootstrap.seed = args.seed;
    opts.bootstrap.resamples = args.resamples;
    opts.alpha = args.alpha;
    let store = super::score::open_store(at)?;
    let mut from_files = nmb_report::score_files(&args.scores)?;
    let mut runs = Vec::new();
    for id in &args.runs {
        let from_file = from_files.remove(id);
        let stored = from_file.is_none();
        let scores = match from_file {
            Some(s) => Some(s),
            None => nmb_report::stored_scores(&store, id)?,
        };
        if scores.is_none() {
            eprintln!("note: run {id} has no scores; its report shows answers, errors and usage only (run `nmb score {id}`)");
        }
        let mut run = nmb_report::load_run(&store, id, scores)
            .with_context(|| format!("reading run {id} from {at}"))?;
        if !args.by.is_empty() {
            break_down(&mut run, &args.by)
                .with_context(|| format!("breaking run {id} down by subgroup"))?;
        }
        // Reviews measure the judges of the stored report; one already read from the store is not read again.
        let stored_report = run.scores.as_ref().filter(|_| stored);
        run.calibrations =
            nmb_review::run_calibrations(&store, id, stored_report, &opts.calibration_options())
                .with_context(|| format!("measuring run {id}'s judges against its review sets"))?;
        let model_of = |run: &str| {
            store
                .run(run)
                .map_or_else(|_| run.to_string(), |r| r.manifest.display_name())
        };
        // Two stored scorings that differ only in whether the judges saw the thinking: the probe pairs them.
        if let Some(scores) = run.scores.as_ref().filter(|_| stored) {
            run.thinking_probe = nmb_score::stored_probe(
                &store,
                scores,
                nmb_review::DEFAULT_RUBRIC_PASS,
                &opts.calibration_options().bootstrap,
            )
            .with_context(|| {
                format!("pairing run {id}'s scorings with and without the thinking shown")
            })?;
        }
        run.pairwise = nmb_review::run_pairwise(&store, id, &model_of, &opts.bootstrap)
            .with_context(|| format!("ranking the models of run {id}'s pairwise review sets"))?;
        runs.push(run);
    }
    if let Some(unused) = from_files.keys().next() {
        bail!("--scores names run {unused}, which is not among the runs to report");
    }
    let written = nmb_report::write_report(&runs, &opts)?;
    for path in written.all() {
        println!("{}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// Replaces a scored run's subgroup breakdown by one over `by`, its tasks placed from the suite its manifest
/// records; an unscored run is left as it is (it has no numbers to break down).
fn break_down(run: &mut nmb_report::RunData, by: &[String]) -> Result<()> {
    let Some(scores) = run.scores.as_mut() else {
        eprintln!(
            "note: run {} has no scores to break down by subgroup",
            run.info.run_id
        );
        return Ok(());
    };
    let manifest = &run.info.manifest;
    let source = nmb_score::suite_source(&run.info.run_id, manifest, &Default::default())?;
    let suite = source
        .load(manifest.input_mode == nmb_store::InputMode::Text)?
        .suite;
    let assignments = by
        .iter()
        .map(|spec| nmb_results::subgroup::assign(&suite, spec.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    let cfg = scores.config.bootstrap;
    scores.subgroups = Some(nmb_results::subgroup_breakdown::breakdown(
        scores,
        &assignments,
        &cfg,
    )?);
    Ok(())
}

/// `MODEL=VALUE` flags into a map; the value parsed by `parse`.
fn pairs<T>(
    specs: &[String],
    flag: &str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<BTreeMap<String, T>> {
    let mut out = BTreeMap::new();
    for s in specs {
        let Some((model, value)) = s.split_once('=').filter(|(m, _)| !m.trim().is_empty()) else {
            bail!("{flag} {s:?}: expected MODEL=VALUE");
        };
        let value = parse(value.trim()).map_err(|e| anyhow::anyhow!("{flag} {s:?}: {e}"))?;
        out.insert(model.trim().to_string(), value);
    }
    Ok(out)
}
