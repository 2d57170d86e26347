//! One task's samples: answer what the store already holds, send the rest, record every call as it returns.

use std::sync::Arc;

use futures::future::join_all;
use nmb_plan::chat::{messages_hash, Message, Part};
use nmb_plan::{conversation_for_turn, PlannedTask};
use nmb_requests::{ChatRequest, Completion};
use nmb_store::{
    cache_key, now_ms, CachedResponse, CallRecord, ChoiceRecord, ErrorInfo, ImageInput,
};

use crate::{config, Ctx, RunError};

/// A rendered conversation and its hash.
struct Prompt {
    messages: Vec<Message>,
    hash: String,
}

/// What a call gave one sample: its answer, or the class of the failure.
type SampleResult = (u32, Result<String, String>);

/// Runs the samples `todo` of one task. Failures of calls are recorded as errored samples; only store failures
/// come back as errors, because then nothing more can be recorded safely.
pub(crate) async fn run_task(
    ctx: &Arc<Ctx>,
    planned: &PlannedTask,
    todo: &[u32],
) -> Result<(), RunError> {
    let params_json = config::params_json(&ctx.settings, &planned.output);
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
        match lookup(ctx, params_json, &prompt, i)? {
            Some(hit) => record_hit(ctx, planned, i, 0, &hit, true)?,
            None => missing.push(i),
        }
    }
    if missing.len() > 1 && ctx.backend.supports_n() {
        let Some(results) = call(ctx, planned, 0, &prompt, &missing, params_json, true).await?
        else {
            return Ok(());
        };
        let answered: Vec<u32> = results.iter().map(|(i, _)| *i).collect();
        missing.retain(|i| !answered.contains(i));
    }
    let singles = missing.iter().map(|i| {
        call(
            ctx,
            planned,
            0,
            &prompt,
            std::slice::from_ref(i),
            params_json,
            true,
        )
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
    for turn in 0..turns {
        let prompt = prepare(ctx, planned, turn, &answers)?;
        let final_turn = turn + 1 == turns;
        if let Some(hit) = lookup(ctx, params_json, &prompt, sample)? {
            record_hit(ctx, planned, sample, turn, &hit, final_turn)?;
            answers.push(hit.text);
            continue;
        }
        let results = call(
            ctx,
            planned,
            turn,
            &prompt,
            &[sample],
            params_json,
            final_turn,
        )
        .await?;
        match results.and_then(|r| r.into_iter().next()) {
            Some((_, Ok(text))) => answers.push(text),
            // Errored, or the request budget ran out: the sample stops here and stays resumable.
            _ => return Ok(()),
        }
    }
    Ok(())
}

/// Renders turn `turn` for one sample and makes sure the prompt (and its images) are stored.
fn prepare(
    ctx: &Ctx,
    planned: &PlannedTask,
    turn: usize,
    answers: &[String],
) -> Result<Prompt, RunError> {
    let messages = conversation_for_turn(planned, turn, answers)?;
    let hash = messages_hash(&messages);
    let prompt = Prompt { messages, hash };
    store_prompt(ctx, &prompt)?;
    Ok(prompt)
}

fn store_prompt(ctx: &Ctx, prompt: &Prompt) -> Result<(), RunError> {
    let mut stored = ctx.stored_prompts.lock().unwrap_or_else(|p| p.into_inner());
    if stored.contains(&prompt.hash) {
        return Ok(());
    }
    let mut images = Vec::new();
    for part in prompt.messages.iter().flat_map(|m| &m.parts) {
        if let Part::Image(img) = part {
            if !images.iter().any(|i: &ImageInput| i.sha256 == img.sha256) {
                images.push(ImageInput {
                    sha256: &img.sha256,
                    mime: &img.mime,
                    bytes: &img.bytes,
                });
            }
        }
    }
    let body = nmb_plan::chat::stored_prompt_body(&prompt.messages);
    ctx.store.put_prompt(&prompt.hash, &body, &images)?;
    stored.insert(prompt.hash.clone());
    Ok(())
}

fn lookup(
    ctx: &Ctx,
    params_json: &str,
    prompt: &Prompt,
    sample: u32,
) -> Result<Option<CachedResponse>, RunError> {
    let key = cache_key(&ctx.model, params_json, &prompt.hash, sample);
    Ok(ctx.store.lookup_cache(&key)?)
}

fn record_hit(
    ctx: &Ctx,
    planned: &PlannedTask,
    sample: u32,
    turn: usize,
    hit: &CachedResponse,
    final_turn: bool,
) -> Result<(), RunError> {
    ctx.store.record_cache_hit(
        &ctx.run_id,
        &planned.task_id,
        sample,
        turn as u32,
        hit,
        final_turn,
    )?;
    ctx.progress.cache_hit();
    if final_turn {
        ctx.progress.sample_ok();
    }
    Ok(())
}

/// Sends one call for `samples` (n = their number) and records it. Returns `None` when the request budget is
/// spent (nothing was sent), else what each answered sample got; samples past the choices the server returned
/// are left out of the result, so the caller can ask for them again.
async fn call(
    ctx: &Ctx,
    planned: &PlannedTask,
    turn: usize,
    prompt: &Prompt,
    samples: &[u32],
    params_json: &str,
    final_turn: bool,
) -> Result<Option<Vec<SampleResult>>, RunError> {
    if !ctx.progress.take_request(ctx.settings.max_requests) {
        return Ok(None);
    }
    let mut params = ctx.settings.params.clone();
    if let [only] = samples {
        // Each sample gets its own seed so that separate calls differ and reruns reproduce where seeds count.
        params.seed = Some(params.seed.unwrap_or(0) + u64::from(*only));
    }
    let request = ChatRequest {
        messages: prompt.messages.clone(),
        params,
        n: samples.len() as u32,
        output: planned.output.clone(),
    };
    let started_ms = now_ms();
    let outcome = ctx.scheduler.run(&ctx.lane, &request).await;
    let finished_ms = now_ms();
    let results = match &outcome.result {
        Ok(c) => answered(samples, c),
        Err(e) => samples
            .iter()
            .map(|i| (*i, Err(e.class.as_str().to_string())))
            .collect(),
    };
    let error_message = outcome.result.as_ref().err().map(|e| e.message.clone());
    let error = outcome.result.as_ref().err().map(|e| ErrorInfo {
        class: e.class.as_str(),
        message: error_message.as_deref().unwrap_or(""),
    });
    let completion = outcome.result.as_ref().ok();
    let raw = match &outcome.result {
        Ok(c) => Some(c.raw.as_str()),
        Err(e) => e.raw.as_deref(),
    };
    let refusal = ErrorInfo {
        class: "refusal",
        message: "the provider refused or filtered this answer",
    };
    let choices: Vec<ChoiceRecord> = results
        .iter()
        .enumerate()
        .map(|(j, (i, r))| ChoiceRecord {
            sample_index: *i,
            choice_index: j as u32,
            text: r.as_ref().ok().map(String::as_str),
            error: match r {
                Err(class) if class == "refusal" && completion.is_some() => Some(refusal),
                _ => None,
            },
            final_turn,
        })
        .collect();
    let record = CallRecord {
        run_id: &ctx.run_id,
        task_id: &planned.task_id,
        turn_index: turn as u32,
        prompt_hash: &prompt.hash,
        model: &ctx.model,
        params_json,
        template_id: &planned.template_id,
        template_hash: &planned.template_hash,
        error,
        attempts: outcome.attempts,
        raw,
        tokens_in: completion.map(|c| c.usage.input_tokens),
        tokens_out: completion.map(|c| c.usage.output_tokens),
        latency_ms: Some(outcome.response_latency().as_millis() as u64),
        started_ms,
        finished_ms,
    };
    ctx.store.record_call(&record, &choices)?;
    count(ctx, completion, &results, final_turn);
    Ok(Some(results))
}

/// Maps the completion's choices onto the samples in order; refused choices become errors.
fn answered(samples: &[u32], completion: &Completion) -> Vec<SampleResult> {
    samples
        .iter()
        .zip(&completion.choices)
        .map(|(i, choice)| {
            if choice.refused {
                (*i, Err("refusal".to_string()))
            } else {
                (*i, Ok(choice.text.clone()))
            }
        })
        .collect()
}

fn count(ctx: &Ctx, completion: Option<&Completion>, results: &[SampleResult], final_turn: bool) {
    if let Some(c) = completion {
        ctx.progress
            .call_sent(c.usage.input_tokens, c.usage.output_tokens);
    }
    for (_, r) in results {
        match r {
            Ok(_) if final_turn => ctx.progress.sample_ok(),
            Ok(_) => {}
            Err(_) => ctx.progress.sample_errored(),
        }
    }
}
