//! The evaluation loop: a suite and a model go in, every task's sampled answers come out, stored as they arrive.
//!
//! This crate owns one thing: running a plan against a backend without ever losing or re-buying an answer. It
//! decides which run a call belongs to (a new one, or the unfinished run with the same configuration), which
//! samples still need work, which turns the store can answer from its response cache, and how the answers of one
//! call map onto samples. Every call is recorded in the store before its samples count as done, so a process
//! killed at any moment loses nothing that was paid for, and a resumed run sends only what is missing.
//!
//! Several processes can share one run (workers on a shared store, [`Claiming`]): each then claims tasks'
//! samples under a lease before planning them, renews its leases while it works, and claims again what a dead
//! worker's lease left behind; [`StoreFleet`] makes each server's concurrency limit and 429 pauses hold for all
//! of them.
//!
//! It also turns a model name into a backend ([`connect_model`]: API models through `nmb-requests`, `local:`
//! models through `nmb-local`), for evaluations and for anything else that asks models (judges), and builds the
//! backend of a human baseline, `human:NAME`, from a person's answers in the store ([`connect_human`], [`human`]),
//! checks a file of such answers before storing them, and gives the answer pages each task's opening turn. The
//! backend of an imported run, `imported:MODEL`, answers with what another program already got from the model
//! ([`replay`]), so `nmb import` builds its runs through the same loop without asking anything.
//!
//! A model served by several replicas (`openai:m@http://a/v1,http://b/v1`) is one model: its manifest,
//! configuration hash, cache keys and call records name it by its first base URL alone
//! ([`nmb_requests::ModelIdentity`]), exactly as a run against that URL would, and each stored call
//! records the replica that answered it.
//!
//! It does not render prompts (`nmb-plan`), speak any wire format or retry (`nmb-requests`), run models
//! (`nmb-local`), or decide how rows are laid out on disk (`nmb-store`).

mod claim;
mod config;
mod connect;
mod eval_config;
mod evaluation;
mod fleet;
pub mod human;
mod progress;
mod renders;
pub mod replay;
mod sampling;
pub mod summary;
mod task;
mod work;

use std::collections::HashSet;
use std::sync::Arc;

use nmb_plan::{ImageCache, Plan, PlanError, PlanOptions, PlannedTask};
use nmb_requests::{Backend, Scheduler};
use nmb_store::{RunInfo, RunStatus, RunSummary, SampleStatus, Store, StoreError};
use nmb_suite::Suite;

pub use config::{Claiming, EvalSettings, Resume};
pub use connect::{connect_model, ConnectError, ConnectOptions, ConnectedModel};
pub use eval_config::{
    ConfigError, EvalConfig, Invocation, Limits, TemplateChoice, EVAL_CONFIG_VERSION,
};
pub use evaluation::{estimate, evaluate, Estimate, EvalError, Evaluated, TaskEstimate};
pub use fleet::StoreFleet;
pub use human::{connect_human, HumanBackend, HumanError};
pub use nmb_record::{CallResult, CallSpec, Prompt, Recorder};
pub use progress::{Progress, ProgressSnapshot};
pub use replay::{connect_replay, Replay, ReplayAnswer, ReplayBackend, ReplayError};
pub use sampling::FORCED as NO_N;
pub use work::{runs_with_work, WorkError};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Suite(#[from] nmb_suite::SuiteError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("a task worker stopped unexpectedly: {0}")]
    Worker(String),
    #[error("run {0} not found in the store")]
    UnknownRun(String),
    #[error("run {run_id} was made with a different configuration ({differs}); start a new run instead of resuming it")]
    ConfigMismatch { run_id: String, differs: String },
}

/// What happened in one invocation.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_id: String,
    /// The run existed before this invocation (explicit `--resume` or the automatic resume of an unfinished run).
    pub resumed: bool,
    /// The request budget (`--max-requests`) ran out before every sample was done.
    pub stopped_early: bool,
    /// Tasks that could not be planned (for example an unreadable image), with the reason.
    pub plan_errors: Vec<String>,
    pub summary: RunSummary,
}

impl RunOutcome {
    /// Every sample of the run errored: none has an answer and none is left to ask (a run stopped by its request
    /// budget, or shared with workers still at it, is not judged yet). Nothing can be scored; `nmb eval` then
    /// exits non-zero, so that scripts and CI see it.
    pub fn all_errored(&self) -> bool {
        let s = &self.summary;
        s.samples_ok == 0 && s.samples_pending == 0 && s.samples_errored > 0
    }

    /// What to say of a run whose every sample errored: the error classes, and what to do about each.
    pub fn all_errored_message(&self) -> Option<String> {
        if !self.all_errored() {
            return None;
        }
        let s = &self.summary;
        let classes: Vec<String> = s
            .errors_by_class
            .iter()
            .map(|(class, n)| format!("{class} {n}"))
            .collect();
        let hints: Vec<&str> = s
            .errors_by_class
            .keys()
            .filter_map(|c| class_hint(c))
            .collect();
        let mut text = format!(
            "every sample errored ({}); nothing can be scored. `nmb runs show {}` lists the errors",
            classes.join(", "),
            s.run_id
        );
        for hint in hints {
            text.push_str("; ");
            text.push_str(hint);
        }
        Some(text)
    }
}

/// What to check when every sample errored with `class`.
fn class_hint(class: &str) -> Option<&'static str> {
    match class {
        "auth" => Some("auth: check the API key variable (OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY)"),
        "client_error" => Some(
            "client_error: the server refused the requests; a parameter the model does not take can be left \
             out (--reasoning-model for OpenAI-style reasoning models)",
        ),
        "network" => Some("network: is the server up at the base URL?"),
        "unsupported_input" => Some(nmb_requests::error::UNSUPPORTED_INPUT_HINT),
        "context_length" => Some("context_length: the prompt is too long for the model; try --inputs text"),
        "quota_exhausted" => Some(
            "quota_exhausted: the account's quota or credit is used up; --resume RUN_ID asks again once it is \
             renewed",
        ),
        "rate_limit" => Some(
            "rate_limit: the server kept refusing for its rate limit, or asked to wait longer than a call waits \
             (`nmb runs show` gives its words); a lower --concurrency or a later --resume may get through",
        ),
        "response_too_large" => Some(
            "response_too_large: the server sent more than any answer to these requests can take (1 MiB plus \
             64 bytes per token each sample may generate); --max-response-mib raises the cap",
        ),
        "timeout" => Some("timeout: no whole answer came within --timeout (headers and body)"),
        _ => None,
    }
}

/// Shared state of one invocation, handed to every task.
pub(crate) struct Ctx {
    pub recorder: Recorder,
    pub samples: sampling::Sampling,
    pub settings: EvalSettings,
    pub progress: Arc<Progress>,
}

/// Runs (or resumes) an evaluation of an already loaded `suite` on a connected `backend` and returns once every
/// planned sample was attempted or the request budget ran out. [`evaluate`] does the loading and connecting from
/// an [`EvalConfig`].
pub async fn evaluate_loaded(
    suite: &Suite,
    store: Arc<Store>,
    scheduler: Scheduler,
    backend: Arc<dyn Backend>,
    settings: EvalSettings,
    progress: Arc<Progress>,
) -> Result<RunOutcome, RunError> {
    let cache = Arc::new(
        ImageCache::default()
            .with_render_cache(Arc::new(renders::StoreRenders(store.clone())))
            .with_max_side(backend.max_image_side()),
    );
    let plan = Plan::new(suite, &settings.plan, cache.clone())?;
    let manifest = config::manifest(suite, &settings, plan.samples(), backend.as_ref())?;
    let config_hash = config::config_hash(&manifest);
    let (mut run, resumed) = open_run(&store, &settings.resume, &config_hash, &manifest)?;
    let run_id = run.run_id.clone();
    rename(&store, &mut run, settings.display_name.as_deref())?;
    join_study(&store, &mut run, settings.study.as_deref())?;
    store.set_status(&run_id, RunStatus::Running)?;
    let planned_samples = plan_samples(&store, &run_id, suite, &settings.plan, plan.samples())?;
    if settings.plan_only {
        return Ok(RunOutcome {
            summary: store.summary(&run_id)?,
            run_id,
            resumed,
            stopped_early: false,
            plan_errors: Vec::new(),
        });
    }
    let done = finished_samples(&store, &run_id)?;
    progress.start(planned_samples, done.len() as u64);

    let lane = scheduler.lane(backend.clone(), settings.per_backend.max(1));
    let samples = sampling::Sampling::new(
        store.clone(),
        &run_id,
        backend.clone(),
        &run.manifest,
        settings.no_n,
    );
    // A resumed run made by an older nmb, or asked now with --reasoning-model, records what it sends.
    samples.note_adjustments()?;
    let recorder = Recorder::new(
        store.clone(),
        scheduler,
        lane,
        &run_id,
        settings.model.clone(),
    );
    let ctx = Arc::new(Ctx {
        recorder,
        samples,
        settings,
        progress: progress.clone(),
    });
    let plan_errors = match ctx.settings.claiming.clone() {
        None => drive(&ctx, plan, |p| unfinished(p, &done)).await?,
        Some(claiming) => {
            let shared = claim::Shared {
                store: &store,
                run_id: &run_id,
                suite,
                cache: &cache,
                claiming: &claiming,
            };
            claim::drive_claimed(&ctx, shared).await?
        }
    };

    let summary = store.summary(&run_id)?;
    let stopped_early = ctx.progress.budget_exhausted();
    let status = if summary.samples_pending == 0 {
        RunStatus::Finished
    } else if ctx.settings.claiming.is_some() {
        // Other workers may still be at it; the last one to finish marks the run finished.
        RunStatus::Running
    } else {
        RunStatus::Interrupted
    };
    store.set_status(&run_id, status)?;
    let summary = store.summary(&run_id)?;
    Ok(RunOutcome {
        run_id,
        resumed,
        stopped_early,
        plan_errors,
        summary,
    })
}

/// Plans tasks one at a time and runs them with a bounded number in flight, so memory stays bounded. Stops at the
/// first store failure, since nothing more could be recorded safely.
async fn drive(
    ctx: &Arc<Ctx>,
    plan: Plan<'_>,
    todo_of: impl Fn(&PlannedTask) -> Vec<u32>,
) -> Result<Vec<String>, RunError> {
    let in_flight = Arc::new(tokio::sync::Semaphore::new(
        ctx.settings.concurrency.max(1) * 2,
    ));
    let mut joins = tokio::task::JoinSet::new();
    let mut plan_errors = Vec::new();
    let mut failure = None;
    for planned in plan {
        if ctx.progress.budget_exhausted() {
            break;
        }
        while let Some(joined) = joins.try_join_next() {
            note_failure(joined, &mut failure);
        }
        if failure.is_some() {
            break;
        }
        let planned: PlannedTask = match planned {
            Ok(p) => p,
            Err(e) => {
                tracing::error!("{e}");
                plan_errors.push(e.to_string());
                continue;
            }
        };
        let todo = todo_of(&planned);
        if todo.is_empty() {
            continue;
        }
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            break;
        };
        let ctx = ctx.clone();
        joins.spawn(async move {
            let result = task::run_task(&ctx, &planned, &todo).await;
            drop(permit);
            result
        });
    }
    while let Some(joined) = joins.join_next().await {
        note_failure(joined, &mut failure);
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(plan_errors),
    }
}

/// The samples of a task that `done` does not hold.
fn unfinished(planned: &PlannedTask, done: &HashSet<(String, u32)>) -> Vec<u32> {
    (0..planned.samples)
        .filter(|i| !done.contains(&(planned.task_id.clone(), *i)))
        .collect()
}

fn note_failure(
    joined: Result<Result<(), RunError>, tokio::task::JoinError>,
    failure: &mut Option<RunError>,
) {
    let error = match joined {
        Ok(Ok(())) => return,
        Ok(Err(e)) => e,
        Err(e) => RunError::Worker(e.to_string()),
    };
    tracing::error!("{error}");
    failure.get_or_insert(error);
}

fn open_run(
    store: &Store,
    resume: &Resume,
    config_hash: &str,
    manifest: &nmb_store::Manifest,
) -> Result<(RunInfo, bool), RunError> {
    match resume {
        Resume::Run(id) => {
            let run = store
                .get_run(id)?
                .ok_or_else(|| RunError::UnknownRun(id.clone()))?;
            if run.config_hash != config_hash {
                return Err(RunError::ConfigMismatch {
                    run_id: id.clone(),
                    differs: config::describe_difference(&run.manifest, manifest),
                });
            }
            Ok((run, true))
        }
        Resume::Auto => match store.find_resumable(config_hash)? {
            Some(run) => Ok((run, true)),
            None => Ok((store.create_run(config_hash, manifest)?, false)),
        },
        Resume::Fresh => Ok((store.create_run(config_hash, manifest)?, false)),
    }
}

/// A resumed run takes the `--name` given now (the name is not part of the configuration).
fn rename(store: &Store, run: &mut RunInfo, name: Option<&str>) -> Result<(), RunError> {
    if name.is_none() || run.manifest.display_name.as_deref() == name {
        return Ok(());
    }
    run.manifest.display_name = name.map(str::to_string);
    store.update_manifest(&run.run_id, &run.manifest)?;
    Ok(())
}

/// A resumed run joins the study it is resumed by (the study is not part of the configuration either).
fn join_study(store: &Store, run: &mut RunInfo, study: Option<&str>) -> Result<(), RunError> {
    if study.is_none() || run.manifest.study.as_deref() == study {
        return Ok(());
    }
    run.manifest.study = study.map(str::to_string);
    store.update_manifest(&run.run_id, &run.manifest)?;
    Ok(())
}

/// Creates the pending sample rows for every task in scope (a no-op for rows that exist) and returns how many
/// samples the run has in all.
fn plan_samples(
    store: &Store,
    run_id: &str,
    suite: &Suite,
    options: &PlanOptions,
    samples: u32,
) -> Result<u64, RunError> {
    let tasks: Vec<(&str, u32)> = suite
        .tasks()
        .take(options.limit.unwrap_or(usize::MAX))
        .map(|(_, t)| (t.id.as_str(), samples))
        .collect();
    store.plan_samples(run_id, &tasks)?;
    Ok(tasks.len() as u64 * u64::from(samples))
}

fn finished_samples(store: &Store, run_id: &str) -> Result<HashSet<(String, u32)>, RunError> {
    Ok(store
        .sample_states(run_id)?
        .into_iter()
        .filter(|s| s.status == SampleStatus::Ok)
        .map(|s| (s.task_id, s.sample_index))
        .collect())
}
