//! Running a study's cells: each cell's evaluation carried to its end by [`crate::job::run`], exactly as the
//! `nmb eval` it stands for would, so that a study resumes and reuses stored answers as its evaluations do.
//! Without a cap the models run at once through one scheduler; under a cap the cells run one after another,
//! each with the request budget what the cells before it spent leaves.

use std::collections::BTreeSet;
use std::sync::Arc;

use nmb_requests::{ModelSpec, Scheduler};
use nmb_run::{Claiming, Invocation, Limits, Resume};
use nmb_score::ScoringConfig;
use nmb_store::Store;

use crate::job::{self, Job, JobError, Quiet, Watch};
use crate::{spent, Budget, BudgetError, Cell, CellEstimate, Stopped, Study, Totals};

/// Why a study's cells could not all run.
#[derive(Debug, thiserror::Error)]
pub enum RunCellsError {
    /// `label` names the study and the cell: `study NAME: cell N (CELL NAME)`.
    #[error("{label}")]
    Cell {
        label: String,
        #[source]
        source: Box<JobError>,
    },
    #[error(transparent)]
    Budget(#[from] BudgetError),
    #[error("{path}: scoring.judges: {source}")]
    Judge {
        path: String,
        #[source]
        source: nmb_requests::SpecError,
    },
    #[error("a study thread stopped unexpectedly")]
    Panicked,
}

/// How every cell of one invocation runs.
pub struct Running {
    /// Start new runs even where an unfinished one has the same configuration.
    pub fresh: bool,
    /// The invocation's limits: the scheduler that cells running at once share keeps its global limit.
    pub limits: Limits,
    pub claiming: Option<Claiming>,
    /// Score each cell's run at the end; `None` leaves them unscored.
    pub scoring: Option<ScoringConfig>,
    /// Stop before the estimated spending could pass this many dollars; the cells then run one at a time.
    pub cap: Option<f64>,
}

/// What a study's invocation did.
pub struct Ran<'a> {
    /// Each cell that ran, with its run id, in matrix order.
    pub runs: Vec<(&'a Cell, String)>,
    /// Where and why the study stopped at its cap, if it did.
    pub stopped: Option<Stopped>,
    /// How many models were asked at once.
    pub models_at_once: usize,
    /// What the study's runs have spent, when it runs under a cap.
    pub spent: Option<f64>,
}

/// Runs every cell (see the module's doc) and returns each cell's run.
pub fn run_cells<'a>(
    study: &Study,
    cells: &'a [Cell],
    how: &Running,
    store: &Arc<Store>,
    watch: &dyn Watch,
) -> Result<Ran<'a>, RunCellsError> {
    let models: BTreeSet<&str> = cells.iter().map(|c| c.model.as_str()).collect();
    let at_once = how.cap.is_none() && models.len() > 1;
    let (runs, stopped) = match at_once {
        true => (in_parallel(study, cells, how, store, watch)?, None),
        false => in_turn(study, cells, how, store, watch)?,
    };
    let spent = how.cap.map(|_| spent(store, study, cells)).transpose()?;
    Ok(Ran {
        runs,
        stopped,
        models_at_once: if at_once { models.len() } else { 1 },
        spent,
    })
}

/// The run file's scoring for every cell: its judges, BERTScore and rubric switches, and the models' prices.
pub fn scoring_config(study: &Study, cells: &[Cell]) -> Result<ScoringConfig, RunCellsError> {
    let s = &study.file.scoring;
    let mut config = ScoringConfig::default();
    for judge in &s.judges {
        let spec = ModelSpec::parse(judge).map_err(|source| RunCellsError::Judge {
            path: study.path.display().to_string(),
            source,
        })?;
        config.judges.push(spec);
    }
    if s.bertscore == Some(false) {
        config.bertscore = nmb_score::BertScoreSetting::Off;
    }
    if s.rubric == Some(false) {
        config.rubric = nmb_score::RubricChoice::Off;
    }
    config.by = s.by.iter().map(|b| b.trim().to_string()).collect();
    config.judge_images = s.judge_images.unwrap_or_default();
    for c in cells {
        if let Some(price) = c.price {
            config.prices.0.insert(c.model.clone(), price);
        }
    }
    Ok(config)
}

impl Running {
    fn invocation(&self, max_requests: Option<u64>) -> Invocation {
        Invocation {
            resume: if self.fresh {
                Resume::Fresh
            } else {
                Resume::Auto
            },
            max_requests,
            plan_only: false,
            claiming: self.claiming.clone(),
            replay: None,
        }
    }

    fn job<'a>(&'a self, cell: &'a Cell, invocation: &'a Invocation) -> Job<'a> {
        Job {
            config: &cell.config,
            invocation,
            scoring: self.scoring.as_ref(),
            report: None,
        }
    }
}

type Runs<'a> = Vec<(&'a Cell, String)>;

/// Cells one after another (with a cap, which needs what the previous cells spent); the first that stops at the
/// cap stops the study, and why is returned.
fn in_turn<'a>(
    study: &Study,
    cells: &'a [Cell],
    how: &Running,
    store: &Arc<Store>,
    watch: &dyn Watch,
) -> Result<(Runs<'a>, Option<Stopped>), RunCellsError> {
    let mut runs = Vec::new();
    for cell in cells {
        announce(study, cell, cells.len(), watch);
        let budget = match how.cap {
            Some(cap) => Some(Budget::for_cell(cap, cell, spent(store, study, cells)?)?),
            None => None,
        };
        let invocation = how.invocation(budget.as_ref().map(|b| b.requests));
        let done = job::run(how.job(cell, &invocation), store, None, watch)
            .map_err(|e| in_cell(study, cell, e))?;
        let run_id = done.outcome.run_id;
        let stopped = done.outcome.stopped_early.then(|| Stopped {
            cell: cell.index,
            name: cell.name.clone(),
            suite: cell.suite.clone(),
            run_id: run_id.clone(),
            reason: budget.as_ref().map_or("--max-requests".to_string(), |b| {
                b.why(how.cap.unwrap_or(0.0))
            }),
        });
        runs.push((cell, run_id));
        if stopped.is_some() {
            return Ok((runs, stopped));
        }
    }
    Ok((runs, None))
}

/// Every model's cells at once, each model's in turn, all through one scheduler: its global limit holds across
/// the study, and each model keeps its own limit because only one of its cells runs at a time. Cells are not
/// followed one by one; a line says when each starts.
fn in_parallel<'a>(
    study: &Study,
    cells: &'a [Cell],
    how: &Running,
    store: &Arc<Store>,
    watch: &dyn Watch,
) -> Result<Runs<'a>, RunCellsError> {
    let scheduler = Scheduler::new(how.limits.scheduler_config());
    let mut groups: Vec<Vec<&Cell>> = Vec::new();
    for cell in cells {
        match groups.iter_mut().find(|g| g[0].model == cell.model) {
            Some(g) => g.push(cell),
            None => groups.push(vec![cell]),
        }
    }
    let quiet = Quiet(watch);
    let one_model = |group: &Vec<&'a Cell>| -> Result<Runs<'a>, RunCellsError> {
        let mut runs = Vec::new();
        for cell in group {
            announce(study, cell, cells.len(), watch);
            let invocation = how.invocation(None);
            let job = how.job(cell, &invocation);
            let done = job::run(job, store, Some(scheduler.clone()), &quiet)
                .map_err(|e| in_cell(study, cell, e))?;
            runs.push((*cell, done.outcome.run_id));
        }
        Ok(runs)
    };
    let results: Vec<Result<Runs<'a>, RunCellsError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (groups.iter())
            .map(|group| s.spawn(|| one_model(group)))
            .collect();
        (handles.into_iter())
            .map(|h| h.join().unwrap_or(Err(RunCellsError::Panicked)))
            .collect()
    });
    let mut runs = Vec::new();
    for r in results {
        runs.extend(r?);
    }
    runs.sort_by_key(|(c, _)| c.index);
    Ok(runs)
}

fn in_cell(study: &Study, cell: &Cell, e: JobError) -> RunCellsError {
    RunCellsError::Cell {
        label: format!(
            "study {}: cell {} ({})",
            study.name(),
            cell.index,
            cell.name
        ),
        source: Box::new(e),
    }
}

fn announce(study: &Study, cell: &Cell, of: usize, watch: &dyn Watch) {
    let name = study.name();
    watch.say(&format!(
        "study {name}: {}/{of}: {} on {}",
        cell.index, cell.name, cell.suite
    ));
}

/// What each cell would send and the most it can cost, as a table, with the totals; nothing is sent or stored.
pub fn dry_run_text(study: &Study, cells: &[Cell]) -> Result<String, BudgetError> {
    let mut out = format!(
        "dry run of study {}: {} cell(s); nothing is sent or stored.\n",
        study.name(),
        cells.len()
    );
    out += &format!(
        "{:>4}  {:<28} {:<36} {:>8} {:>12} {:>12} {:>10}\n",
        "cell", "model", "suite", "requests", "est. in", "max out", "max $"
    );
    let mut rows = Vec::new();
    for cell in cells {
        let row = CellEstimate::of(cell)?;
        let dollars = (row.max_dollars).map_or("no price".into(), |d| format!("{d:.4}"));
        out += &format!(
            "{:>4}  {:<28} {:<36} {:>8} {:>12} {:>12} {:>10}\n",
            cell.index,
            cell.name,
            cell.suite,
            row.requests,
            row.est_input_tokens,
            row.max_output,
            dollars
        );
        rows.push(row);
    }
    let t = Totals::of(&rows);
    let unpriced = match t.unpriced {
        0 => String::new(),
        n => format!(" ({n} cell(s) without a price not counted)"),
    };
    out += &format!(
        "total: {} request(s), about {} input tokens, at most {} output tokens, at most ${:.4}{unpriced}\n",
        t.requests, t.est_input_tokens, t.max_output, t.max_dollars
    );
    Ok(out)
}
