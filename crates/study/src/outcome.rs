//! What a study leaves behind once its cells have run: its state file ([`record`], RUNS_DIR/studies/NAME.json)
//! and one report over every run of the study ([`report`], with the models' [`prices`]).

use std::path::{Path, PathBuf};

use nmb_report::{Prices, ReportError, ReportOptions};
use nmb_store::Store;
use serde::Serialize;
use serde_json::json;

use crate::{Cell, Study};

/// Why a study's state or report cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum OutcomeError {
    #[error("cannot create {path}: {source}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A run's data could not be read, or a report format is unknown.
    #[error(transparent)]
    Report(Box<ReportError>),
    #[error("cannot write the study report into {dir}: {source}")]
    WriteReport {
        dir: PathBuf,
        #[source]
        source: Box<ReportError>,
    },
    #[error("the report writer wrote no HTML file")]
    NoHtml,
}

impl From<ReportError> for OutcomeError {
    fn from(e: ReportError) -> Self {
        OutcomeError::Report(Box::new(e))
    }
}

/// Where and why a study stopped before its last cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stopped {
    /// The cell's 1-based position in the matrix.
    pub cell: usize,
    pub name: String,
    pub suite: String,
    /// The run the cell stopped in.
    pub run_id: String,
    pub reason: String,
}

/// Writes where the study got to into `runs_dir/studies/NAME.json`: the run file, the cap, what it spent, where
/// and why it stopped, and each cell's run. Returns the file's path.
pub fn record(
    runs_dir: &Path,
    study: &Study,
    cap: Option<f64>,
    spent: Option<f64>,
    stopped: Option<&Stopped>,
    runs: &[(&Cell, String)],
) -> Result<PathBuf, OutcomeError> {
    let dir = runs_dir.join("studies");
    std::fs::create_dir_all(&dir).map_err(|source| OutcomeError::CreateDir {
        path: dir.clone(),
        source,
    })?;
    let path = dir.join(format!("{}.json", study.name()));
    let state = json!({
        "study": study.name(),
        "run_file": study.path,
        "max_cost": cap,
        "spent": spent,
        "stopped": stopped,
        "runs": runs.iter().map(|(c, id)| json!({"cell": c.index, "name": c.name, "run_id": id})).collect::<Vec<_>>(),
    });
    let text = serde_json::to_string_pretty(&state).expect("a JSON value always serializes");
    std::fs::write(&path, text).map_err(|source| OutcomeError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// The models' prices, keyed by model identity, for the report's cost column.
pub fn prices(cells: &[Cell]) -> Prices {
    let mut p = Prices::default();
    for c in cells {
        if let Some(price) = c.price {
            p.0.insert(c.config.model.identity().to_string(), price);
        }
    }
    p
}

/// Writes one report over `runs` (the study's cells and their run ids) into the study's report folder, in its
/// formats (HTML always) with the models' prices: its two-axis view, paired comparisons and sweeps included.
/// Returns the HTML page's path.
pub fn report(
    store: &Store,
    study: &Study,
    cells: &[Cell],
    runs: &[(&Cell, String)],
) -> Result<PathBuf, OutcomeError> {
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
    let ids: Vec<&str> = runs.iter().map(|(_, id)| id.as_str()).collect();
    write_runs(store, &ids, &opts)
}

/// Writes one report over the stored runs `run_ids` (each with its stored scores) as `opts` says; returns the
/// HTML page's path.
pub(crate) fn write_runs(
    store: &Store,
    run_ids: &[&str],
    opts: &ReportOptions,
) -> Result<PathBuf, OutcomeError> {
    let mut data = Vec::new();
    for id in run_ids {
        let scores = nmb_report::stored_scores(store, id)?;
        data.push(nmb_report::load_run(store, id, scores)?);
    }
    let written =
        nmb_report::write_report(&data, opts).map_err(|source| OutcomeError::WriteReport {
            dir: opts.out_dir.clone(),
            source: Box::new(source),
        })?;
    written.html.ok_or(OutcomeError::NoHtml)
}
