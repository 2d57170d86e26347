//! Reports: what a researcher publishes from one run or a comparison of several.
//!
//! This crate owns turning stored runs and their scores into files:
//! - a single self-contained HTML page (inline CSS and SVG, no script, no external asset, a strict
//!   Content-Security-Policy), with the headline table, charts, the two-axis scatter, paired significance, a
//!   per-case section with thumbnails and every sampled answer, and the run manifests;
//! - for prompt sweeps (a model on a suite under several templates), a prompt-sensitivity section: scores per
//!   variant, their spread with CIs, rank flips and Kendall's W ([`sweep`], also in `sweep.csv`);
//! - for runs whose answers have a reasoning model's thinking, a thinking section: reasoning tokens (or, where
//!   the API counted none, thinking words) per level and family, and accuracy by thinking length ([`thinking`]);
//! - beside pass@k, worst-at-k (HealthBench's expected worst of k samples) for k = 1..n, as a table and a curve
//!   ([`worst`]); under the paired comparisons, each p-value's Holm and Benjamini–Hochberg adjusted values with
//!   the family counted, and per pair of runs the smallest difference the suite detects;
//! - for runs with multi-turn consults, a revision table (first- and last-turn accuracy, changed top diagnosis,
//!   wrong → right and right → wrong);
//! - for runs with NeuroVLM-Bench (`structured`) scores, a section with per-field metrics, the diagnosis_name
//!   confusion heat map, calibration with a reliability diagram, safety flags, abstentions and cost per image;
//! - for runs in a pairwise review, the clinicians' ranking (ratings with CIs, wins / ties / losses) and the
//!   win-rate matrix (from `nmb_review::run_pairwise`);
//! - Markdown with the same tables, CSV (one row per sample, plus an aggregate CSV and `structured.csv`), JSON with
//!   the full results;
//! - a leaderboard export in the Neural-MedBench site's `js/data.js` shape;
//! - the text and JSON `nmb runs list` and `nmb runs show` print about stored runs ([`runs`]).
//!
//! Everything a model wrote is untrusted: it is escaped in every HTML context ([`html::escape`], which is
//! `nmb-table`'s); images are
//! decoded and re-encoded as small PNG thumbnails, never embedded as stored.
//!
//! Layout: `input` reads the runs; `sections` builds each section's data once (tables, estimates, chart points,
//! the cross-run analysis); `render` lays them out, one module per format (`html`, `markdown`, `csv`, `json`, and
//! `svg` for the charts), escaping in one place. A section that is one table is listed in
//! `sections::under_headline`, and every renderer shows it without further code.
//!
//! It does not score (that is `nmb-score`; it reads the [`ScoreReport`] of `nmb-results`), call models, or change
//! the store.
//! Cross-run numbers it derives itself — the breadth-versus-depth rank correlation and paired comparisons between
//! models — come from `nmb-stats` with a recorded seed.

pub mod export;
mod input;
pub mod leaderboard;
mod render;
pub mod runs;
mod sections;
mod table;
pub mod terminal;
mod thumbs;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

pub use input::{
    load_run, score_files, scores_from_file, stored_scores, RunData, TaskPrompt, Thumbnail,
};
pub use leaderboard::{
    leaderboard, model_data, read_data_js, vendor, Leaderboard, LeaderboardEntry,
    LeaderboardOptions, MergeError,
};
pub use nmb_results::ScoreReport;
pub use render::html;
pub use render::json::json_report;
pub use sections::analysis::{build, Analysis, CostEstimate, ModelPoint, Price, Prices, TwoAxis};
pub use sections::paired::paired_table;
pub use sections::{sweep, thinking, worst};
pub use table::{Cell, Column, Table};

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error(transparent)]
    Store(#[from] nmb_store::StoreError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("unknown report format {0:?}; expected html, md, csv or json")]
    UnknownFormat(String),
    #[error("no runs given; name at least one run id")]
    NoRuns,
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what} is not a valid score report: {message}")]
    Scores { what: String, message: String },
    #[error("{}: a second score report for the same run", .0.display())]
    SecondScores(PathBuf),
    #[error("cannot merge the leaderboard into {0}")]
    Merge(#[from] MergeError),
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    Html,
    Markdown,
    Csv,
    Json,
}

impl Format {
    pub const ALL: [Format; 4] = [Format::Html, Format::Markdown, Format::Csv, Format::Json];

    pub fn parse(text: &str) -> Result<Format, ReportError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "html" => Ok(Format::Html),
            "md" | "markdown" => Ok(Format::Markdown),
            "csv" => Ok(Format::Csv),
            "json" => Ok(Format::Json),
            other => Err(ReportError::UnknownFormat(other.to_string())),
        }
    }
}

/// What to write and where.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    pub out_dir: PathBuf,
    pub formats: BTreeSet<Format>,
    /// Also write `leaderboard.json` and `data.js`.
    pub leaderboard: bool,
    /// Version key, organisations, model sizes and the file to merge into, for the leaderboard.
    pub leaderboard_options: LeaderboardOptions,
    /// Dollar prices per million tokens, by model.
    pub prices: Prices,
    /// Seed, level and resamples of the bootstrap behind cross-run numbers.
    pub bootstrap: nmb_stats::BootstrapConfig,
    /// The level at which adjusted p-values are marked significant and power figures are computed.
    pub alpha: f64,
    /// Cases whose section starts expanded in HTML when the report has at most this many cases.
    pub expand_cases_up_to: usize,
    /// API keys cut out of every file written (a store from before keys were redacted may still hold one).
    pub secrets: nmb_chat::Secrets,
}

impl ReportOptions {
    pub fn new(out_dir: impl Into<PathBuf>) -> Self {
        ReportOptions {
            out_dir: out_dir.into(),
            formats: Format::ALL.into_iter().collect(),
            leaderboard: false,
            leaderboard_options: LeaderboardOptions::default(),
            prices: Prices::default(),
            bootstrap: nmb_stats::BootstrapConfig::default(),
            alpha: nmb_results::multiplicity::DEFAULT_ALPHA,
            expand_cases_up_to: 20,
            secrets: nmb_chat::Secrets::from_env(),
        }
    }

    /// How review sets are analysed for the report: with the report's own bootstrap seed and resamples (at least
    /// one), everything else at its default.
    pub fn calibration_options(&self) -> nmb_calibration::AgreementOptions {
        nmb_calibration::AgreementOptions {
            bootstrap: nmb_stats::BootstrapConfig {
                seed: self.bootstrap.seed,
                resamples: self.bootstrap.resamples.max(1),
                ..nmb_stats::BootstrapConfig::default()
            },
            ..nmb_calibration::AgreementOptions::default()
        }
    }
}

/// Files written, by kind.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Written {
    pub html: Option<PathBuf>,
    pub markdown: Option<PathBuf>,
    pub csv_samples: Option<PathBuf>,
    pub csv_aggregate: Option<PathBuf>,
    /// `structured.csv`, written when some run has NeuroVLM-Bench (structured) scores.
    pub structured_csv: Option<PathBuf>,
    /// `sweep.csv`, written when the runs hold a prompt sweep.
    pub sweep_csv: Option<PathBuf>,
    pub json: Option<PathBuf>,
    pub leaderboard_json: Option<PathBuf>,
    pub leaderboard_js: Option<PathBuf>,
}

impl Written {
    pub fn all(&self) -> Vec<&Path> {
        [
            &self.html,
            &self.markdown,
            &self.csv_samples,
            &self.csv_aggregate,
            &self.structured_csv,
            &self.sweep_csv,
            &self.json,
            &self.leaderboard_json,
            &self.leaderboard_js,
        ]
        .into_iter()
        .filter_map(|p| p.as_deref())
        .collect()
    }
}

/// Writes every requested format for `runs` into `opts.out_dir`.
pub fn write_report(runs: &[RunData], opts: &ReportOptions) -> Result<Written, ReportError> {
    if runs.is_empty() {
        return Err(ReportError::NoRuns);
    }
    std::fs::create_dir_all(&opts.out_dir).map_err(|source| ReportError::Write {
        path: opts.out_dir.clone(),
        source,
    })?;
    let analysis = build(runs, &opts.prices, &opts.bootstrap, opts.alpha);
    let tables = sections::under_headline(runs, &analysis);
    let mut written = Written::default();
    let file = |name: &str| opts.out_dir.join(name);
    if opts.formats.contains(&Format::Html) {
        let path = file("report.html");
        write_text(&path, &html::render(runs, &analysis, &tables, opts), opts)?;
        written.html = Some(path);
    }
    if opts.formats.contains(&Format::Markdown) {
        let path = file("report.md");
        write_text(
            &path,
            &render::markdown::render(runs, &analysis, &tables),
            opts,
        )?;
        written.markdown = Some(path);
    }
    if opts.formats.contains(&Format::Csv) {
        let samples = file("samples.csv");
        write_text(&samples, &render::csv::samples(runs), opts)?;
        let aggregate = file("aggregate.csv");
        write_text(&aggregate, &render::csv::aggregate(runs, &analysis), opts)?;
        written.csv_samples = Some(samples);
        written.csv_aggregate = Some(aggregate);
        if let Some(text) = render::csv::structured(runs, &analysis) {
            let structured = file("structured.csv");
            write_text(&structured, &text, opts)?;
            written.structured_csv = Some(structured);
        }
        if let Some(text) = render::csv::sweep(&analysis) {
            let sweep = file("sweep.csv");
            write_text(&sweep, &text, opts)?;
            written.sweep_csv = Some(sweep);
        }
    }
    if opts.formats.contains(&Format::Json) {
        let path = file("report.json");
        write_text(
            &path,
            &render::json::document(runs, &analysis, &tables),
            opts,
        )?;
        written.json = Some(path);
    }
    if opts.leaderboard {
        let lb = &opts.leaderboard_options;
        let existing = lb.merge.as_deref().map(read_data_js).transpose()?;
        let data = model_data(&leaderboard(runs, lb), lb, existing);
        let json_path = file("leaderboard.json");
        write_text(&json_path, &leaderboard::to_json(&data), opts)?;
        let js_path = file("data.js");
        write_text(&js_path, &leaderboard::to_data_js(&data), opts)?;
        written.leaderboard_json = Some(json_path);
        written.leaderboard_js = Some(js_path);
    }
    Ok(written)
}

fn write_text(path: &Path, text: &str, opts: &ReportOptions) -> Result<(), ReportError> {
    std::fs::write(path, opts.secrets.redact(text)).map_err(|source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    })
}
