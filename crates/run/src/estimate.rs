//! What an evaluation would send, per task and in all (a dry run, a study's budget): the suite planned as
//! [`crate::evaluate`] plans it, nothing sent or stored.

use std::sync::Arc;

use nmb_plan::{Plan, PlanOptions, PlanSummary, PlannedTask};
use nmb_requests::BackendKind;
use nmb_suite::{Family, Level, Suite};
use serde::Serialize;

use crate::config::EvalConfig;
use crate::evaluation::EvalError;

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
    /// The images of every sample's whole conversation, each once, and their estimated tokens: what a judge that
    /// sees the images (`--judge-images same`) is sent with each question about the samples.
    pub conversation_images: u64,
    pub conversation_image_tokens: u64,
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

/// Checks each perturbation against the suite without reading an image (a sequence no image has, a case with
/// no other case of its modality to take images from), so that a list is refused before any run sends anything.
pub fn check_perturbations(
    config: &EvalConfig,
    perturbations: &[nmb_imaging::Perturbation],
) -> Result<(), EvalError> {
    let suite = config.suite.load_checked(config.text_only())?.suite;
    for p in perturbations {
        let mut options = config.plan_options()?;
        options.perturbation = Some(p.clone());
        Plan::new(&suite, &options, Arc::default())?;
    }
    Ok(())
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
    let (mut conversation_images, mut conversation_image_tokens) = (0, 0);
    for item in plan {
        match item {
            Ok(task) => {
                total.add(&task);
                let samples = u64::from(task.samples);
                for turn in &task.turns {
                    conversation_images += samples * turn.user.image_count() as u64;
                    conversation_image_tokens += samples * turn.image_tokens;
                }
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
        conversation_images,
        conversation_image_tokens,
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
