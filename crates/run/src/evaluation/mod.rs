//! The evaluation loop: from an [`EvalConfig`] to a stored run. [`evaluate`] loads the suite, connects the model
//! (API and `local:` models through [`crate::connect_model`], `human:` and `imported:` ones through
//! [`crate::stored`]) and runs [`evaluate_loaded`]: it opens the run (a new one, the unfinished run with the same
//! configuration hash, or the one `--resume` names), plans its pending samples, and sends each task's samples that
//! the store does not hold yet, a bounded number of tasks at once ([`task`]: what the response cache answers, then
//! the calls, each recorded as it returns; [`sampling`]: `n` or one call per sample, and what servers refused).
//! A process sharing the run with workers claims samples under a lease instead ([`claim`]).
//!
//! Every call is recorded in the store before its samples count as done, so a process killed at any moment loses
//! nothing that was paid for, and a resumed run sends only what is missing.

mod claim;
pub(crate) mod sampling;
mod task;

use std::collections::HashSet;
use std::sync::Arc;

use nmb_plan::{ImageCache, Plan, PlanError, PlanOptions, PlannedTask};
use nmb_record::{Batcher, Recorder};
use nmb_requests::{Backend, BackendKind, Scheduler};
use nmb_store::{RunInfo, RunStatus, RunSummary, SampleStatus, Store, StoreError};
use nmb_suite::Suite;

use crate::config::{
    build_manifest, config_hash, describe_difference, ConfigError, EvalConfig, EvalSettings,
    Invocation, Resume,
};
use crate::connect::{connect_model, ConnectError, ConnectOptions, ConnectedModel};
use crate::progress::Progress;
use crate::renders::StoreRenders;
use crate::stored::{connect_human, connect_replay, StoredError};

/// Why an evaluation could not be run.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Suite(#[from] nmb_suite::SourceError),
    #[error("cannot use model {spec}: {source}")]
    Connect {
        spec: String,
        #[source]
        source: Box<ConnectError>,
    },
    /// A person's or an imported model's answers cannot be set up.
    #[error("cannot use model {spec}: {source}")]
    Stored {
        spec: String,
        #[source]
        source: Box<StoredError>,
    },
    #[error("cannot plan the suite: {0}")]
    Plan(Box<PlanError>),
    #[error("the evaluation stopped: {0}")]
    Run(#[from] RunError),
    #[error("{spec} takes no reasoning effort (--reasoning-effort {effort}); OpenAI-wire and Gemini models do")]
    NoReasoningEffort {
        spec: String,
        effort: nmb_plan::ReasoningEffort,
    },
    #[error(transparent)]
    Batch(nmb_record::NoBatchApi),
    #[error("{spec} cannot take --thinking-budget {budget}: {why}")]
    ThinkingBudget {
        spec: String,
        budget: u32,
        why: String,
    },
}

impl From<PlanError> for EvalError {
    fn from(e: PlanError) -> Self {
        EvalError::Plan(Box::new(e))
    }
}

/// What one evaluation did.
pub struct Evaluated {
    pub outcome: RunOutcome,
    /// The suite as loaded, for scoring the run without reading it again.
    pub suite: Suite,
    /// The model cannot take images although the configuration shows them; the manifest records it.
    pub images_dropped: bool,
}

/// Runs (or resumes) the evaluation `config` describes and returns once every planned sample was attempted or
/// the invocation's request budget ran out. A `local:` model is loaded on a blocking thread first.
pub async fn evaluate(
    config: &EvalConfig,
    invocation: &Invocation,
    store: Arc<Store>,
    scheduler: &Scheduler,
    progress: Arc<Progress>,
) -> Result<Evaluated, EvalError> {
    let plan = config.plan_options()?;
    let suite = config.suite.load_checked(config.text_only())?.suite;
    let http = matches!(
        config.model.backend,
        BackendKind::OpenAi | BackendKind::Anthropic | BackendKind::Gemini
    );
    if config.limits.batch && !http {
        let spec = config.model.to_string();
        return Err(EvalError::Batch(nmb_record::NoBatchApi { spec }));
    }
    let model = connect(config, invocation, &store, &suite, &plan).await?;
    if let Some(effort) = config.params.reasoning_effort {
        if model.backend.reasoning_parameters().is_none() {
            let spec = config.model.to_string();
            return Err(EvalError::NoReasoningEffort { spec, effort });
        }
    }
    if let Some(budget) = config.params.thinking_budget {
        if let Err(why) = model.backend.thinking_budget(&config.params) {
            let spec = config.model.to_string();
            return Err(EvalError::ThinkingBudget { spec, budget, why });
        }
    }
    let images_dropped = !model.backend.supports_images() && config.inputs.includes_images();
    let settings = settings(config, invocation, plan, &model);
    let backend = if config.limits.batch {
        let identity = settings.model.as_str().to_string();
        let options = config.limits.batch_options();
        let batcher = Batcher::new(model.backend, store.clone(), identity, options);
        Arc::new(batcher.map_err(EvalError::Batch)?)
    } else {
        model.backend
    };
    let outcome = evaluate_loaded(
        &suite,
        store,
        scheduler.clone(),
        backend,
        settings,
        progress,
    )
    .await?;
    Ok(Evaluated {
        outcome,
        suite,
        images_dropped,
    })
}

/// A human's answers need the store and the suite as planned, an imported model's the answers the invocation
/// brought too; any other model only its spec (and [`connect_model`] refuses an imported model without its
/// answers).
async fn connect(
    config: &EvalConfig,
    invocation: &Invocation,
    store: &Arc<Store>,
    suite: &Suite,
    plan: &PlanOptions,
) -> Result<ConnectedModel, EvalError> {
    let spec = &config.model;
    let failed = |source: ConnectError| EvalError::Connect {
        spec: spec.to_string(),
        source: Box::new(source),
    };
    let stored = |source: StoredError| EvalError::Stored {
        spec: spec.to_string(),
        source: Box::new(source),
    };
    match (spec.backend, invocation.replay.as_deref()) {
        (BackendKind::Human, _) => {
            return connect_human(spec, store.clone(), suite, plan).map_err(|e| stored(e.into()))
        }
        (BackendKind::Imported, Some(replay)) => {
            return connect_replay(spec, replay, store.clone(), suite, plan)
                .map_err(|e| stored(e.into()))
        }
        _ => {}
    }
    let owned = spec.clone();
    let mut options = ConnectOptions {
        no_grammar: config.no_grammar,
        mmproj: config.mmproj.clone(),
        http: config.limits.http_options(),
        ..ConnectOptions::default()
    };
    if config.reasoning_model {
        options.backend.openai.reasoning = Some("--reasoning-model".into());
    }
    let connecting = tokio::task::spawn_blocking(move || connect_model(&owned, &options));
    match connecting.await {
        Ok(connected) => connected.map_err(failed),
        Err(e) => Err(failed(ConnectError::Stopped(e.to_string()))),
    }
}

fn settings(
    config: &EvalConfig,
    invocation: &Invocation,
    plan: PlanOptions,
    model: &ConnectedModel,
) -> EvalSettings {
    let mut settings = EvalSettings::new(model.spec.identity());
    settings.params = config.params.clone();
    settings.plan = plan;
    settings.concurrency = config.limits.in_flight() as usize;
    settings.per_backend = config.limits.in_flight() as usize;
    settings.max_requests = invocation.max_requests;
    settings.resume = invocation.resume.clone();
    settings.model_identity = model.identity.clone();
    let recorded = config.recorded();
    settings.suite_source = suite_record(&recorded.suite);
    settings.display_name = config.name.clone();
    settings.study = config.study.clone();
    settings.no_n = config.no_n;
    settings.plan_only = invocation.plan_only;
    settings.claiming = invocation.claiming.clone();
    settings.eval_config = serde_json::to_value(recorded).ok();
    settings
}

/// How the manifest names the suite, so that scoring can load it again.
fn suite_record(source: &nmb_suite::Source) -> nmb_store::SuiteSource {
    nmb_store::SuiteSource {
        suite_spec: Some(source.spec.clone()),
        answers_path: source.answers.as_ref().map(|p| p.display().to_string()),
        filters: Some(source.filters.iter().map(|f| f.to_string()).collect()),
        level: source.level.map(|l| l.to_string()),
        map: (!source.map.is_empty())
            .then(|| source.map.iter().map(|(f, c)| format!("{f}={c}")).collect()),
        images_root: source.images_root.as_ref().map(|p| p.display().to_string()),
        split: source.split.clone(),
    }
}

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
            .with_render_cache(Arc::new(StoreRenders(store.clone())))
            .with_max_side(backend.max_image_side()),
    );
    let plan = Plan::new(suite, &settings.plan, cache.clone())?;
    let manifest = build_manifest(suite, &settings, plan.samples(), backend.as_ref())?;
    let config_hash = config_hash(&manifest);
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
                    differs: describe_difference(&run.manifest, manifest),
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
