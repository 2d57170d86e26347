//! One task's samples: answer what the store already holds, send the rest, record every call as it returns.

use std::sync::Arc;

use futures::future::join_all;
use nmb_plan::{conversation_for_turn, PlannedTask};
use nmb_record::{CallResult, CallSpec, Prompt};

use super::{Ctx, RunError};
use crate::config::params_json;

/// Runs the samples `todo` of one task. Failures of calls are recorded as errored samples; only store failures
/// come back as errors, because then nothing more can be recorded safely.
pub(crate) async fn run_task(
    ctx: &Arc<Ctx>,
    planned: &PlannedTask,
    todo: &[u32],
) -> Result<(), RunError> {
    let params_json = params_json(&ctx.settings, &planned.output);
    if planned.turn_count() <= 1 {
        return single_turn(ctx, planned, todo, &params_json).await;
    }
    let runs = todo
        .iter()
        .map(|i| multi_turn(ctx, planned, *i, &params_json));
    join_all(runs).await.into_iter().collect()
}

async fn single_turn(
    ctx: &Arc<Ctx>,
    planned: &PlannedTask,
    todo: &[u32],
    params_json: &str,
) -> Result<(), RunError> {
    let prompt = prepare(ctx, planned, 0, &[])?;
    let mut missing = Vec::new();
    for &i in todo {
        match ctx.recorder.lookup(params_json, &prompt, i)? {
            Some(hit) => record_hit(ctx, planned, i, 0, &hit, true)?,
            None => missing.push(i),
        }
    }
    if missing.len() > 1 && ctx.samples.native_n() {
        let first = Turn::first(&prompt);
        let Some(result) = call(ctx, planned, first, &missing, params_json).await? else {
            return Ok(());
        };
        let rejected = result.error.as_ref().is_some_and(nmb_requests::rejects_n);
        if rejected {
            ctx.samples.fall_back(result.error.as_ref())?;
        } else {
            let answered: Vec<u32> = result.samples.iter().map(|(i, _)| *i).collect();
            missing.retain(|i| !answered.contains(i));
        }
    }
    let singles = missing.iter().map(|i| {
        let first = Turn::first(&prompt);
        call(ctx, planned, first, std::slice::from_ref(i), params_json)
    });
    for r in join_all(singles).await {
        r?;
    }
    Ok(())
}

async fn multi_turn(
    ctx: &Arc<Ctx>,
    planned: &PlannedTask,
    sample: u32,
    params_json: &str,
) -> Result<(), RunError> {
    let turns = planned.turn_count();
    let mut answers: Vec<String> = Vec::with_capacity(turns);
    // What each answer sends back with it in later turns (a provider's signed thinking), whether it came
    // from this call or, after a resume, from the store.
    let mut replay: Vec<Option<serde_json::Value>> = Vec::with_capacity(turns);
    for index in 0..turns {
        let prompt = prepare(ctx, planned, index, &answers)?;
        let final_turn = index + 1 == turns;
        if let Some(hit) = ctx.recorder.lookup(params_json, &prompt, sample)? {
            record_hit(ctx, planned, sample, index, &hit, final_turn)?;
            if !final_turn {
                replay.push(ctx.recorder.replay_of(&hit)?);
            }
            answers.push(hit.text);
            continue;
        }
        let turn = Turn {
            index,
            prompt: &prompt,
            replay: &replay,
            final_turn,
        };
        let Some(mut result) = call(ctx, planned, turn, &[sample], params_json).await? else {
            return Ok(());
        };
        match result.samples.pop() {
            Some((_, Ok(text))) => {
                answers.push(text);
                replay.push(result.replays.pop().flatten());
            }
            // Errored: the sample stops here and stays resumable.
            _ => return Ok(()),
        }
    }
    Ok(())
}

/// One turn of a task, as a call asks it.
#[derive(Clone, Copy)]
struct Turn<'a> {
    index: usize,
    prompt: &'a Prompt,
    /// What the earlier answers send back ([`nmb_record::CallSpec::replay`]).
    replay: &'a [Option<serde_json::Value>],
    final_turn: bool,
}

impl<'a> Turn<'a> {
    /// The first and only turn of a single-turn task.
    fn first(prompt: &'a Prompt) -> Self {
        Turn {
            index: 0,
            prompt,
            replay: &[],
            final_turn: true,
        }
    }
}

/// Renders turn `turn` for one sample and makes sure the prompt (and its images) are stored.
fn prepare(
    ctx: &Ctx,
    planned: &PlannedTask,
    turn: usize,
    answers: &[String],
) -> Result<Prompt, RunError> {
    let messages = conversation_for_turn(planned, turn, answers)?;
    Ok(ctx.recorder.prompt(messages)?)
}

fn record_hit(
    ctx: &Ctx,
    planned: &PlannedTask,
    sample: u32,
    turn: usize,
    hit: &nmb_store::CachedResponse,
    final_turn: bool,
) -> Result<(), RunError> {
    ctx.recorder
        .record_hit(&planned.task_id, sample, turn as u32, hit, final_turn)?;
    ctx.progress.cache_hit();
    if final_turn {
        ctx.progress.sample_ok();
    }
    Ok(())
}

/// Sends one call for `samples` (n = their number) and records it. Returns `None` when the request budget is
/// spent (nothing was sent).
async fn call(
    ctx: &Ctx,
    planned: &PlannedTask,
    turn: Turn<'_>,
    samples: &[u32],
    params_json: &str,
) -> Result<Option<CallResult>, RunError> {
    if !ctx.progress.take_request(ctx.settings.max_requests) {
        return Ok(None);
    }
    let mut params = ctx.settings.params.clone();
    if let [only] = samples {
        // Each sample gets its own seed so that separate calls differ and reruns reproduce where seeds count.
        params.seed = Some(params.seed.unwrap_or(0) + u64::from(*only));
    }
    let spec = CallSpec {
        task_id: &planned.task_id,
        turn: turn.index as u32,
        prompt: turn.prompt,
        samples,
        params: &params,
        output: &planned.output,
        params_json,
        template_id: &planned.template_id,
        template_hash: &planned.template_hash,
        final_turn: turn.final_turn,
        replay: turn.replay,
    };
    let result = ctx.recorder.call(spec).await?;
    ctx.samples.note_adjustments()?;
    // A rejected `n` is asked again one sample at a time: its samples are not errored yet.
    let retried = result.error.as_ref().is_some_and(nmb_requests::rejects_n) && samples.len() > 1;
    count(ctx, &result, turn.final_turn, retried);
    Ok(Some(result))
}

fn count(ctx: &Ctx, result: &CallResult, final_turn: bool, retried: bool) {
    if let Some(u) = result.usage {
        ctx.progress.call_sent(u.input_tokens, u.output_tokens);
    }
    for (_, r) in &result.samples {
        match r {
            Ok(_) if final_turn => ctx.progress.sample_answered(),
            Ok(_) => {}
            Err(_) if retried => {}
            Err(_) => ctx.progress.sample_errored(),
        }
    }
}
