//! From an [`EvalConfig`] to a stored run: load the suite, connect the model, run, and what a dry run would send.

use std::sync::Arc;

use nmb_plan::{Plan, PlanOptions, PlanSummary, PlannedTask};
use nmb_record::Batcher;
use nmb_requests::{BackendKind, Scheduler};
use nmb_store::Store;
use nmb_suite::{Family, Level, Suite};
use serde::Serialize;

use crate::eval_config::{ConfigError, EvalConfig, Invocation};
use crate::{
    connect_human, connect_model, connect_replay, evaluate_loaded, ConnectError, ConnectOptions,
    ConnectedModel, EvalSettings, Progress, RunError, RunOutcome,
};

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
    #[error("cannot plan the suite: {0}")]
    Plan(Box<nmb_plan::PlanError>),
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

impl From<nmb_plan::PlanError> for EvalError {
    fn from(e: nmb_plan::PlanError) -> Self {
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
/// brought too; any other model only its spec.
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
    if spec.backend == BackendKind::Human {
        return connect_human(spec, store.clone(), suite, plan).map_err(|e| failed(e.into()));
    }
    if spec.backend == BackendKind::Imported {
        let replay = invocation.replay.as_deref();
        return connect_replay(spec, replay, store.clone(), suite, plan)
            .map_err(|e| failed(e.into()));
    }
    let owned = spec.clone();
    let mut options = ConnectOptions {
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
    }
}

/// What a dry run counts for one task.
#[derive(Debug, Clone, Serialize)]
pub struct TaskEstimate {
    pub task_id: String,
    pub family: Family,
    pub level: Level,
    pub turns: usize,
    pub samples: u32,
    pub requests: u64,
    pub images_sent: u64,
    pub est_input_tokens: u64,
}

impl TaskEstimate {
    /// The largest prompt of one request: the task's estimated input per request, plus each earlier answer of a
    /// consult at `max_tokens`.
    pub fn largest_prompt(&self, max_tokens: u32) -> f64 {
        let per_request = self.est_input_tokens as f64 / self.requests.max(1) as f64;
        per_request + self.turns.saturating_sub(1) as f64 * f64::from(max_tokens)
    }
}

/// What an evaluation would send, per task and in all; nothing is sent or stored.
#[derive(Debug, Clone)]
pub struct Estimate {
    /// The suite's id, as loaded.
    pub suite_id: String,
    pub samples: u32,
    pub total: PlanSummary,
    pub requests: u64,
    pub tasks: Vec<TaskEstimate>,
    /// Answers (samples x turns).
    pub answers: u64,
    /// Output tokens at most: answers x max_tokens.
    pub max_output: u64,
    /// One request returns every sample of a single-turn task (the API's `n`).
    pub native_n: bool,
}

impl Estimate {
    /// The dry run as one JSON object (`nmb eval --dry-run --json`); `config` is the evaluation estimated.
    pub fn json(&self, config: &EvalConfig) -> serde_json::Value {
        let total = &self.total;
        serde_json::json!({
            "dry_run": true,
            "suite": self.suite_id,
            "model": config.model.to_string(),
            "inputs": config.inputs.as_str(),
            "samples": self.samples,
            "tasks": total.tasks,
            "tasks_failed": total.tasks_failed,
            "requests": self.requests,
            "answers": self.answers,
            "images_sent": total.images_sent,
            "est_text_tokens": total.est_text_tokens,
            "est_image_tokens": total.est_image_tokens,
            "est_input_tokens": total.est_input_tokens,
            "max_output_tokens": self.max_output,
            "errors": total.errors,
            "per_task": self.tasks,
        })
    }

    /// The dry run as text lines, each ending in a newline: a heading, one row per task, what could not be
    /// planned, and the totals; `config` is the evaluation estimated.
    pub fn text(&self, config: &EvalConfig) -> String {
        use std::fmt::Write as _;
        let total = &self.total;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "dry run: nothing is sent or stored. Suite {}, model {}, inputs {}, {} sample(s) per task.",
            self.suite_id,
            config.model,
            config.inputs.as_str(),
            self.samples,
        );
        let _ = writeln!(
            out,
            "{:<40} {:<16} {:<10} {:>5} {:>8} {:>7} {:>10}",
            "task", "family", "level", "turns", "requests", "images", "est.tokens"
        );
        for t in &self.tasks {
            let _ = writeln!(
                out,
                "{:<40} {:<16} {:<10} {:>5} {:>8} {:>7} {:>10}",
                t.task_id,
                t.family.as_str(),
                t.level.as_str(),
                t.turns,
                t.requests,
                t.images_sent,
                t.est_input_tokens
            );
        }
        for e in &total.errors {
            let _ = writeln!(out, "cannot plan: {e}");
        }
        let how = if self.native_n {
            "one request per single-turn task with n samples"
        } else {
            "one request per sample and turn"
        };
        let _ = writeln!(
            out,
            "{} task(s), {} request(s) ({how}), {} answer(s), {} image part(s) sent",
            total.tasks, self.requests, self.answers, total.images_sent
        );
        let _ = writeln!(
            out,
            "estimated input tokens: {} (text {} + images {}); output at most {} ({} answers x max_tokens {})",
            total.est_input_tokens,
            total.est_text_tokens,
            total.est_image_tokens,
            self.max_output,
            self.answers,
            config.params.max_tokens
        );
        out.push_str(
            "(estimates: text 4 characters per token, images by OpenAI's tile rule; see nmb-plan's estimate docs)\n",
        );
        out
    }
}

/// Plans the configuration's suite without sending anything, for a dry run or a study's budget.
pub fn estimate(config: &EvalConfig) -> Result<Estimate, EvalError> {
    let options = config.plan_options()?;
    let suite = config.suite.load_checked(config.text_only())?.suite;
    estimate_loaded(config, &suite, &options)
}

fn estimate_loaded(
    config: &EvalConfig,
    suite: &Suite,
    options: &PlanOptions,
) -> Result<Estimate, EvalError> {
    let plan = Plan::new(suite, options, Arc::default())?;
    let samples = plan.samples();
    let native_n = !config.no_n
        && matches!(
            config.model.backend,
            BackendKind::OpenAi | BackendKind::Gemini
        );
    let mut total = PlanSummary::default();
    let mut tasks = Vec::new();
    for item in plan {
        match item {
            Ok(task) => {
                total.add(&task);
                tasks.push(task_estimate(&task, native_n));
            }
            Err(e) => total.add_error(&e),
        }
    }
    let answers = total.requests;
    Ok(Estimate {
        suite_id: suite.id.clone(),
        samples,
        requests: tasks.iter().map(|t| t.requests).sum(),
        tasks,
        answers,
        max_output: answers * u64::from(config.params.max_tokens),
        total,
        native_n,
    })
}

fn task_estimate(task: &PlannedTask, native_n: bool) -> TaskEstimate {
    let mut one = PlanSummary::default();
    one.add(task);
    let requests = if native_n && task.turn_count() <= 1 {
        1
    } else {
        task.requests()
    };
    TaskEstimate {
        task_id: task.task_id.clone(),
        family: task.family,
        level: task.level,
        turns: task.turn_count(),
        samples: task.samples,
        requests,
        images_sent: one.images_sent,
        est_input_tokens: one.est_input_tokens,
    }
}
