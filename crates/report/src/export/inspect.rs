//! A run as an Inspect AI eval log (`EvalLog`, log format version 2, as `inspect_ai.log.read_eval_log` reads a
//! `.json` log and `inspect view` shows it).
//!
//! The mapping: the eval spec names the run (`run_id`), the suite (`task`, `dataset`) and the model
//! (`PROVIDER/MODEL`, with its decoding parameters as `model_generate_config`); the plan has nmb's template as
//! one step and `generate` as the next; each planned sample of the run is one Inspect sample (`id` the task id,
//! `epoch` the sample index plus one), whose `input` is the first turn's prompt, `messages` the last turn's
//! prompt and answer, `output` the answer, `target` the reference the score report recorded (a diagnosis or
//! lesion type; empty where it recorded none), and `scores.nmb` the verdict: `value` 1 when correct and 0 when
//! wrong, for the samples that count towards accuracy only. Errored, pending and reference-less samples have no
//! score (they are not wrong answers) and errored ones carry their error. The results hold nmb's headline
//! numbers ([`super::headline()`]) as the `nmb` scorer's metrics, with `accuracy` as the headline metric; the
//! full score report stays in nmb.

use std::collections::BTreeMap;

use nmb_chat::{Role, StoredConversation, StoredPart};
use nmb_results::{SampleScore, SampleStatus, ScoreReport};
use nmb_store::{format_utc_ms, RunInfo, SampleRecord, Store};
use serde_json::{json, Map, Value};

use super::headline::headline;
use crate::ReportError;

/// The Inspect log format version written.
pub const LOG_VERSION: u32 = 2;
/// The scorer name under which every sample's verdict and the headline numbers appear.
pub const SCORER: &str = "nmb";

/// The eval log of `run_id` with the scores of `report` (its latest score report), as JSON.
pub fn inspect_log(
    store: &Store,
    run_id: &str,
    report: &ScoreReport,
) -> Result<Value, ReportError> {
    let run = store.run(run_id)?;
    let records = store.run_samples(run_id)?;
    let mut prompts = Prompts::new(store);
    let by_key: BTreeMap<(&str, u32), &SampleRecord> = records
        .iter()
        .map(|r| ((r.task_id.as_str(), r.sample_index), r))
        .collect();
    let model = model_name(&run.manifest.model);
    let mut samples = Vec::with_capacity(report.samples.len());
    for s in &report.samples {
        let record = by_key.get(&(s.task_id.as_str(), s.sample_index)).copied();
        samples.push(sample(s, record, &model, &mut prompts)?);
    }
    let (tokens_in, tokens_out) = records
        .iter()
        .flat_map(|r| &r.turns)
        .filter(|t| !t.cached)
        .fold((0u64, 0u64), |(i, o), t| {
            (
                i + t.call.tokens_in.unwrap_or(0),
                o + t.call.tokens_out.unwrap_or(0),
            )
        });
    let completed = report
        .samples
        .iter()
        .filter(|s| !matches!(s.status, SampleStatus::Pending | SampleStatus::Errored))
        .count();
    Ok(json!({
        "version": LOG_VERSION,
        "status": if run.status == nmb_store::RunStatus::Finished { "success" } else { "started" },
        "eval": spec(&run, report, &model),
        "plan": plan(&run),
        "results": results(report, completed),
        "stats": {
            "started_at": format_utc_ms(run.created_ms),
            "completed_at": format_utc_ms(run.updated_ms),
            "model_usage": {
                model.clone(): {
                    "input_tokens": tokens_in,
                    "output_tokens": tokens_out,
                    "total_tokens": tokens_in + tokens_out,
                }
            },
        },
        "tags": ["nmb"],
        "metadata": {},
        "samples": samples,
    }))
}

/// `PROVIDER/MODEL` as Inspect names models (`openai/gpt-4o`); the recorded spec has no credentials.
fn model_name(spec: &str) -> String {
    match nmb_chat::ModelSpec::parse(spec) {
        Ok(m) => format!("{}/{}", m.backend.as_str(), m.model),
        Err(_) => spec.to_string(),
    }
}

fn spec(run: &RunInfo, report: &ScoreReport, model: &str) -> Value {
    let m = &run.manifest;
    let sample_ids: Vec<&str> = report.tasks.iter().map(|t| t.task_id.as_str()).collect();
    let base_url = nmb_chat::ModelSpec::parse(&m.model)
        .ok()
        .and_then(|s| s.effective_base_url().map(str::to_string));
    json!({
        "run_id": run.run_id,
        "created": format_utc_ms(run.created_ms),
        "task": m.suite_id,
        "task_id": m.suite_hash,
        "task_version": m.suite_version.clone().unwrap_or_else(|| "0".into()),
        "task_attribs": {},
        "task_args": {},
        "dataset": {
            "name": m.suite_id,
            "samples": report.tasks.len(),
            "sample_ids": sample_ids,
        },
        "model": model,
        "model_base_url": base_url,
        "model_generate_config": generate_config(&m.params),
        "model_args": {},
        "config": {"epochs": m.samples},
        "packages": {"nmb": m.nmb_version},
        "metadata": {
            "nmb_run_id": run.run_id,
            "nmb_config_hash": run.config_hash,
            "nmb_scoring_config_hash": report.config.config_hash,
            "suite_hash": m.suite_hash,
            "template_id": m.template_id,
            "template_hash": m.template_hash,
            "model_spec": m.model,
            "params": m.params,
        },
    })
}

/// The decoding parameters Inspect's `GenerateConfig` has a field for; the others stay in the metadata.
fn generate_config(params: &Value) -> Value {
    let known = [
        "temperature",
        "top_p",
        "top_k",
        "max_tokens",
        "seed",
        "stop_seqs",
        "frequency_penalty",
        "presence_penalty",
    ];
    let mut out = Map::new();
    if let Some(obj) = params.as_object() {
        for key in known {
            if let Some(v) = obj.get(key).filter(|v| !v.is_null()) {
                out.insert(key.to_string(), v.clone());
            }
        }
    }
    Value::Object(out)
}

fn plan(run: &RunInfo) -> Value {
    let m = &run.manifest;
    json!({
        "name": "plan",
        "steps": [
            {"solver": "nmb_template", "params": {
                "template_id": m.template_id,
                "template_hash": m.template_hash,
                "input_mode": m.input_mode,
            }},
            {"solver": "generate", "params": {}},
        ],
        "config": generate_config(&m.params),
    })
}

fn results(report: &ScoreReport, completed: usize) -> Value {
    let metrics: Map<String, Value> = headline(report)
        .into_iter()
        .map(|m| {
            let v = json!({"name": m.name, "value": m.value});
            (m.name, v)
        })
        .collect();
    let o = &report.overall;
    json!({
        "total_samples": report.samples.len(),
        "completed_samples": completed,
        "scores": [{
            "name": SCORER,
            "scorer": SCORER,
            "scored_samples": o.n,
            "unscored_samples": report.samples.len().saturating_sub(o.n),
            "metrics": metrics,
        }],
        "headline": {"scorer": SCORER, "score": SCORER, "metric": "accuracy"},
    })
}

fn sample(
    s: &SampleScore,
    record: Option<&SampleRecord>,
    model: &str,
    prompts: &mut Prompts<'_>,
) -> Result<Value, ReportError> {
    let turns = record.map(|r| r.turns.as_slice()).unwrap_or_default();
    let input = match turns.first() {
        Some(t) => prompts.messages(&t.call.prompt_hash)?,
        None => Vec::new(),
    };
    let mut messages = match turns.last() {
        Some(t) => prompts.messages(&t.call.prompt_hash)?,
        None => Vec::new(),
    };
    let answer = record.and_then(|r| r.final_text.clone());
    let stop = turns.last().and_then(|t| t.finish_reason.clone());
    let mut output = json!({"model": model, "choices": []});
    if let Some(text) = &answer {
        let message =
            json!({"role": "assistant", "content": text, "source": "generate", "model": model});
        messages.push(message.clone());
        output = json!({
            "model": model,
            "choices": [{"message": message, "stop_reason": stop_reason(stop.as_deref())}],
            "completion": text,
        });
    }
    let mut out = json!({
        "id": s.task_id,
        "epoch": s.sample_index + 1,
        "input": input,
        "target": target(s),
        "messages": messages,
        "output": output,
        "metadata": metadata(s),
    });
    if let Some(correct) = s.correct.filter(|_| s.status.is_scored()) {
        out["scores"] = json!({SCORER: {
            "value": if correct { 1 } else { 0 },
            "answer": parsed_answer(s),
            "explanation": explanation(s),
            "metadata": {"status": s.status, "unresolved": s.unresolved},
        }});
    }
    if s.status == SampleStatus::Errored {
        let message = record
            .and_then(|r| r.error_message.clone())
            .or_else(|| s.error_class.clone())
            .unwrap_or_else(|| "the call failed".into());
        out["error"] = json!({"message": message, "traceback": "", "traceback_ansi": ""});
    }
    Ok(out)
}

/// Inspect's stop reasons (`stop`, `max_tokens`, ...) from the API's finish reason.
fn stop_reason(finish: Option<&str>) -> &'static str {
    match finish {
        Some("length" | "max_tokens" | "MAX_TOKENS") => "max_tokens",
        Some("content_filter" | "SAFETY") => "content_filter",
        _ => "stop",
    }
}

fn target(s: &SampleScore) -> String {
    s.diagnosis
        .as_ref()
        .map(|d| d.reference.clone())
        .or_else(|| s.lesion.as_ref().and_then(|l| l.reference_type.clone()))
        .unwrap_or_default()
}

fn parsed_answer(s: &SampleScore) -> Option<String> {
    let p = s.parsed.as_ref()?;
    p.final_diagnosis
        .clone()
        .or_else(|| p.differential.first().map(|d| d.diagnosis.clone()))
        .or_else(|| p.lesion_type.clone())
        .or_else(|| s.breadth.as_ref().and_then(|b| b.extracted.clone()))
}

fn explanation(s: &SampleScore) -> Option<String> {
    if let Some(e) = &s.parse_error {
        return Some(format!("parse failed: {e}"));
    }
    s.diagnosis.as_ref().map(|d| match d.matched_rank {
        Some(rank) => format!("reference matched at rank {rank}"),
        None => "reference not matched".to_string(),
    })
}

fn metadata(s: &SampleScore) -> Value {
    json!({
        "case_id": s.case_id,
        "task_id": s.task_id,
        "sample_index": s.sample_index,
        "family": s.family,
        "level": s.level,
        "status": s.status,
        "disease_group": s.disease_group,
        "modality": s.modality,
        "case_metadata": s.case_metadata,
        "error_class": s.error_class,
    })
}

/// Stored prompts as Inspect chat messages, each read once; images as `data:` URIs of their stored bytes.
struct Prompts<'a> {
    store: &'a Store,
    seen: BTreeMap<String, Vec<Value>>,
}

impl<'a> Prompts<'a> {
    fn new(store: &'a Store) -> Self {
        Prompts {
            store,
            seen: BTreeMap::new(),
        }
    }

    fn messages(&mut self, prompt_hash: &str) -> Result<Vec<Value>, ReportError> {
        if let Some(m) = self.seen.get(prompt_hash) {
            return Ok(m.clone());
        }
        let Some(body) = self.store.prompt_body(prompt_hash)? else {
            return Ok(Vec::new());
        };
        let conversation = StoredConversation::parse(&body).map_err(|e| ReportError::Scores {
            what: format!("stored prompt {prompt_hash}"),
            message: e.to_string(),
        })?;
        let mut out = Vec::with_capacity(conversation.messages.len());
        for m in &conversation.messages {
            let mut content = Vec::with_capacity(m.parts.len());
            for p in &m.parts {
                content.push(match p {
                    StoredPart::Text { text } => json!({"type": "text", "text": text}),
                    StoredPart::Image { image, mime } => self.image(image, mime)?,
                });
            }
            let role = match m.role {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            out.push(json!({"role": role, "content": content}));
        }
        self.seen.insert(prompt_hash.to_string(), out.clone());
        Ok(out)
    }

    fn image(&self, sha256: &str, mime: &str) -> Result<Value, ReportError> {
        use base64::Engine as _;
        Ok(match self.store.image(sha256)? {
            Some(img) => json!({"type": "image", "image": format!(
                "data:{};base64,{}",
                img.mime,
                base64::engine::general_purpose::STANDARD.encode(&img.bytes)
            )}),
            None => {
                json!({"type": "text", "text": format!("[image {sha256} ({mime}) not in the store]")})
            }
        })
    }
}
