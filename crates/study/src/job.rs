//! One evaluation carried to its end, as `nmb eval` carries it: asked (or resumed) through [`nmb_run::evaluate`],
//! scored through [`nmb_score::score_suite`], its report written. Every way of running an evaluation (`nmb eval`,
//! a study's cells, a prompt sweep, workers, human runs) goes through [`run`]; the caller follows it through a
//! [`Watch`] and prints what it wants of the [`Done`].

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nmb_judges::JudgeModel;
use nmb_requests::{BackendKind, CountersSnapshot, ModelSpec, Scheduler, Transport};
use nmb_results::ScoreReport;
use nmb_run::summary::Finished;
use nmb_run::{
    connect_model, ConnectError, ConnectOptions, EvalConfig, EvalError, Invocation, Progress,
    ProgressSnapshot, RunOutcome,
};
use nmb_score::{ScoreError, ScoringConfig};
use nmb_store::Store;
use tokio::sync::watch;

/// Why an evaluation could not be carried to its end.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    #[error("a scoring option would fail after the evaluation")]
    Scoring(#[source] Box<ScoreError>),
    #[error("cannot start the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Evaluate(Box<EvalError>),
    #[error("cannot score run {run_id}")]
    Score {
        run_id: String,
        #[source]
        source: Box<ScoreError>,
    },
    #[error("cannot write the report of run {run_id} into {dir}")]
    Report {
        run_id: String,
        dir: PathBuf,
        #[source]
        source: Box<nmb_report::ReportError>,
    },
    #[error("the report writer wrote no HTML file")]
    NoHtml,
}

/// One evaluation and what to do after it.
#[derive(Clone, Copy)]
pub struct Job<'a> {
    pub config: &'a EvalConfig,
    pub invocation: &'a Invocation,
    /// Score the run at the end with these options; `None` leaves it unscored.
    pub scoring: Option<&'a ScoringConfig>,
    /// Also write the run's report (every format) into this folder.
    pub report: Option<&'a Path>,
}

/// What an evaluation did.
pub struct Done {
    pub outcome: RunOutcome,
    /// The scores, when the run was scored (not when it stopped early or was only planned).
    pub scores: Option<ScoreReport>,
    pub progress: ProgressSnapshot,
    pub counters: CountersSnapshot,
    pub elapsed: Duration,
    /// The model cannot take images although the configuration shows them; the manifest records it.
    pub images_dropped: bool,
    /// The report's HTML page, when a report was written.
    pub report_html: Option<PathBuf>,
}

impl Done {
    /// The end-of-run summary (`nmb_run::summary`) of this evaluation.
    pub fn finished(&self, max_requests: Option<u64>) -> Finished<'_> {
        Finished {
            outcome: &self.outcome,
            progress: self.progress.clone(),
            counters: self.counters.clone(),
            elapsed: self.elapsed,
            max_requests,
        }
    }
}

/// A future that follows an evaluation until it is told to stop.
pub type Following = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// How the person running evaluations follows them.
pub trait Watch: Sync {
    /// Follows the asking (a progress bar, a line now and then) until `stopped` turns true; spawned on the
    /// evaluation's runtime before the first request.
    fn follow(
        &self,
        progress: Arc<Progress>,
        scheduler: Scheduler,
        stopped: watch::Receiver<bool>,
    ) -> Following;
    /// A line about what is happening (a model loading, a study's cell starting).
    fn say(&self, line: &str);
}

/// Follows nothing and says nothing.
pub struct Unwatched;

impl Watch for Unwatched {
    fn follow(&self, _: Arc<Progress>, _: Scheduler, _: watch::Receiver<bool>) -> Following {
        Box::pin(async {})
    }
    fn say(&self, _: &str) {}
}

/// Says what `inner` says, but follows nothing: for evaluations running side by side.
pub struct Quiet<'a>(pub &'a dyn Watch);

impl Watch for Quiet<'_> {
    fn follow(&self, _: Arc<Progress>, _: Scheduler, _: watch::Receiver<bool>) -> Following {
        Box::pin(async {})
    }
    fn say(&self, line: &str) {
        self.0.say(line)
    }
}

/// The scoring's subgroup fields against the suite, before anything is asked: a field its cases lack stops the
/// evaluation instead of its scoring.
fn check_subgroups(config: &EvalConfig, scoring: &ScoringConfig) -> Result<(), ScoreError> {
    if scoring.by.is_empty() {
        return Ok(());
    }
    let suite = config.suite.load(config.text_only())?.suite;
    for spec in &scoring.by {
        nmb_results::subgroup::assign(&suite, spec)?;
    }
    Ok(())
}

/// Runs `job` on its own runtime: asks, then scores (unless it stopped early or was only planned), then writes
/// its report. `shared` is a scheduler shared with other evaluations (a study's), so that their calls keep one
/// global limit; without one, the evaluation makes its own.
pub fn run(
    job: Job<'_>,
    store: &Arc<Store>,
    shared: Option<Scheduler>,
    watch: &dyn Watch,
) -> Result<Done, JobError> {
    if let Some(scoring) = job.scoring {
        scoring
            .check()
            .map_err(|e| JobError::Scoring(Box::new(e)))?;
        check_subgroups(job.config, scoring).map_err(|e| JobError::Scoring(Box::new(e)))?;
    }
    let (config, invocation) = (job.config, job.invocation);
    if config.model.backend == BackendKind::Local {
        watch.say(&format!("loading local model {} ...", config.model.model));
    }
    let scheduler = shared.unwrap_or_else(|| config.scheduler(store, invocation.claiming.as_ref()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(JobError::Runtime)?;
    let progress = Arc::new(Progress::default());
    let started = Instant::now();
    let evaluated = runtime.block_on(async {
        let (stop, stopped) = watch::channel(false);
        let following = tokio::spawn(watch.follow(progress.clone(), scheduler.clone(), stopped));
        let evaluated = nmb_run::evaluate(
            config,
            invocation,
            store.clone(),
            &scheduler,
            progress.clone(),
        )
        .await;
        let _ = stop.send(true);
        let _ = following.await;
        evaluated
    });
    let evaluated = evaluated.map_err(|e| JobError::Evaluate(Box::new(e)))?;
    let outcome = evaluated.outcome;
    let mut done = Done {
        scores: None,
        progress: progress.snapshot(),
        counters: scheduler.counters(),
        elapsed: started.elapsed(),
        images_dropped: evaluated.images_dropped,
        report_html: None,
        outcome,
    };
    if invocation.plan_only {
        return Ok(done);
    }
    let run_id = done.outcome.run_id.clone();
    if let Some(scoring) = job.scoring.filter(|_| !done.outcome.stopped_early) {
        let scoring =
            nmb_score::score_suite(store, &run_id, &evaluated.suite, scoring, &connect_judge);
        let scores = runtime.block_on(scoring).map_err(|e| JobError::Score {
            run_id: run_id.clone(),
            source: Box::new(e),
        })?;
        done.scores = Some(scores);
    }
    if let Some(dir) = job.report {
        done.report_html = Some(write_report(store, &run_id, done.scores.clone(), dir)?);
    }
    Ok(done)
}

/// Judges connect like models do, `local:` ones included.
pub fn connect_judge(spec: &ModelSpec, transport: &Transport) -> Result<JudgeModel, ConnectError> {
    let options = ConnectOptions {
        transport: Some(transport.clone()),
        ..ConnectOptions::default()
    };
    let connected = connect_model(spec, &options)?;
    Ok(JudgeModel {
        spec: connected.spec.identity(),
        backend: connected.backend,
        identity: connected.identity,
    })
}

/// Writes every report format for one run and returns the HTML file's path.
fn write_report(
    store: &Store,
    run_id: &str,
    scores: Option<ScoreReport>,
    dir: &Path,
) -> Result<PathBuf, JobError> {
    let failed = |source| JobError::Report {
        run_id: run_id.to_string(),
        dir: dir.to_path_buf(),
        source: Box::new(source),
    };
    let run = nmb_report::load_run(store, run_id, scores).map_err(failed)?;
    let written =
        nmb_report::write_report(&[run], &nmb_report::ReportOptions::new(dir)).map_err(failed)?;
    written.html.ok_or(JobError::NoHtml)
}
