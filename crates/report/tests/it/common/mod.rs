//! Shared by the report tests and the report benchmark: real runs against the loopback fake server, a scripted
//! model with a given skill, a deterministic judge for scoring them with nmb-score's engine, and headless
//! Chromium.
#![allow(dead_code)]

pub mod judge;

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_fake_server::{Config, FakeServer, ReceivedRequest, Reply};
use nmb_requests::{
    ApiKey, BackendOptions, HttpOptions, ModelSpec, Scheduler, SchedulerConfig, Transport,
};
use nmb_run::{evaluate_loaded, EvalSettings, Progress, Resume};
use nmb_store::Store;
use nmb_suite::{Family, Suite};
use sha2::{Digest, Sha256};

/// What a scripted model knows about one case: a text that identifies the case in a prompt, the right answer,
/// and a wrong one.
#[derive(Clone, Debug)]
pub struct CaseKey {
    /// `breadth` or `depth`: skills can differ by axis.
    pub axis: &'static str,
    pub marker: String,
    pub right: String,
    pub wrong: String,
}

/// Answers by case, for [`scripted_model`].
#[derive(Clone, Debug, Default)]
pub struct AnswerBook {
    pub cases: Vec<CaseKey>,
    /// Answers by model: a text for every request, overriding everything (the XSS test's payload).
    pub fixed: BTreeMap<String, String>,
}

impl AnswerBook {
    pub fn merge(mut self, other: AnswerBook) -> AnswerBook {
        self.cases.extend(other.cases);
        self.fixed.extend(other.fixed);
        self
    }

    /// Depth cases: answer with a JSON object that serves every depth family (differential, lesion, rationale).
    pub fn depth(suite: &Suite) -> AnswerBook {
        // One answer per case that serves all its tasks: the case's references merged field by field.
        let refs: Vec<(String, nmb_suite::Reference)> = suite
            .cases
            .iter()
            .filter_map(|c| {
                let mut merged = nmb_suite::Reference::default();
                for r in c.tasks.iter().filter_map(|t| t.reference.as_ref()) {
                    merged.diagnosis = merged.diagnosis.or(r.diagnosis.clone());
                    merged.lesion_type = merged.lesion_type.or(r.lesion_type.clone());
                    merged.lesion_location = merged.lesion_location.or(r.lesion_location.clone());
                    merged.rationale = merged.rationale.or(r.rationale.clone());
                    if merged.differential.is_empty() {
                        merged.differential = r.differential.clone();
                    }
                }
                merged.diagnosis.is_some().then(|| (marker(c), merged))
            })
            .collect();
        let mut cases = Vec::new();
        for (i, (m, r)) in refs.iter().enumerate() {
            let other = &refs[(i + 1) % refs.len()].1;
            cases.push(CaseKey {
                axis: "depth",
                marker: m.clone(),
                right: depth_answer(r),
                wrong: depth_answer(other),
            });
        }
        AnswerBook {
            cases,
            fixed: BTreeMap::new(),
        }
    }

    /// Multiple-choice cases: "Answer: X" with the key, or with the next letter.
    pub fn choice(suite: &Suite) -> AnswerBook {
        let mut cases = Vec::new();
        for c in &suite.cases {
            for t in c
                .tasks
                .iter()
                .filter(|t| t.family == Family::MultipleChoice)
            {
                let Some(key) = t.reference.as_ref().and_then(|r| r.choice.clone()) else {
                    continue;
                };
                let pos = t.options.iter().position(|(l, _)| *l == key).unwrap_or(0);
                let wrong = &t.options[(pos + 1) % t.options.len()].0;
                cases.push(CaseKey {
                    axis: "breadth",
                    marker: t.question.clone(),
                    right: format!("The best option is {key}.\nAnswer: {key}"),
                    wrong: format!("Answer: {wrong}"),
                });
            }
        }
        AnswerBook {
            cases,
            fixed: BTreeMap::new(),
        }
    }
}

/// The text of a case that identifies it in a rendered prompt.
fn marker(c: &nmb_suite::Case) -> String {
    let text = if c.notes.is_empty() {
        c.ehr
            .first()
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| c.id.clone())
    } else {
        c.notes.clone()
    };
    text.chars().take(60).collect()
}

fn depth_answer(r: &nmb_suite::Reference) -> String {
    let dx = r.diagnosis.clone().unwrap_or_default();
    let mut differential =
        vec![serde_json::json!({"rank": 1, "diagnosis": dx, "evidence": "imaging and history"})];
    for (i, d) in r
        .differential
        .iter()
        .filter(|d| **d != dx)
        .take(2)
        .enumerate()
    {
        differential
            .push(serde_json::json!({"rank": i + 2, "diagnosis": d, "evidence": "less likely"}));
    }
    serde_json::json!({
        "differential": differential,
        "final_diagnosis": dx,
        "lesion_type": r.lesion_type,
        "location": r.lesion_location,
        "rationale": r.rationale.clone().unwrap_or_else(|| format!("The findings fit {dx}.")),
    })
    .to_string()
}

/// A responder for the fake server: model `M` answers right with probability `skill["M/AXIS"]` (else
/// `skill["M"]`, else one half), decided per sample from a hash of the conversation, so the same prompt always
/// gets the same answer.
pub fn scripted_model(
    book: Arc<AnswerBook>,
    skill: BTreeMap<String, f64>,
) -> nmb_fake_server::Responder {
    Arc::new(move |req: &ReceivedRequest| {
        if let Some(reply) = judge::judge_reply(req) {
            return reply;
        }
        if let Some(text) = book.fixed.get(&req.model) {
            return Reply::Texts(vec![text.clone(); req.samples() as usize]);
        }
        let all_text: String = req
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter_map(|p| match p {
                nmb_fake_server::ReceivedPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let case = book.cases.iter().find(|c| all_text.contains(&c.marker));
        let p = case
            .and_then(|c| skill.get(&format!("{}/{}", req.model, c.axis)))
            .or_else(|| skill.get(&req.model))
            .copied()
            .unwrap_or(0.5);
        let texts = (0..req.samples())
            .map(|i| match case {
                Some(c) if draw(&req.conversation_sha256, i) < p => c.right.clone(),
                Some(c) => c.wrong.clone(),
                None => "I do not know.".to_string(),
            })
            .collect();
        Reply::Texts(texts)
    })
}

fn draw(conversation: &str, sample: u64) -> f64 {
    let h = Sha256::digest(format!("{conversation}/{sample}").as_bytes());
    u64::from_le_bytes(h[..8].try_into().unwrap()) as f64 / u64::MAX as f64
}

/// Starts the fake server with `responder`.
pub fn server(responder: nmb_fake_server::Responder) -> FakeServer {
    let config = Config {
        responder,
        ..Config::default()
    };
    FakeServer::start_in_background(config, 2).expect("fake server starts")
}

/// Runs `suite` on `openai:MODEL@server` with `samples` samples per task; returns the run id.
pub fn run_model(
    store: &Arc<Store>,
    server: &FakeServer,
    suite: &Suite,
    model: &str,
    samples: u32,
) -> String {
    run_model_with(store, server, suite, model, samples, None, None)
}

/// [`run_model`] with a template for every family and a display name.
pub fn run_model_with(
    store: &Arc<Store>,
    server: &FakeServer,
    suite: &Suite,
    model: &str,
    samples: u32,
    template: Option<nmb_plan::Template>,
    name: Option<String>,
) -> String {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let spec_text = format!("openai:{model}@{}", server.url());
        let spec = ModelSpec::parse(&spec_text).unwrap();
        let transport = Transport::new(&HttpOptions::default()).unwrap();
        let options = BackendOptions {
            key: Some(ApiKey::new("test-key")),
            ..BackendOptions::default()
        };
        let backend = nmb_requests::connect(&spec, &transport, &options).unwrap();
        let scheduler = Scheduler::new(SchedulerConfig::default());
        let mut settings = EvalSettings::new(nmb_requests::ModelIdentity::of_text(&spec_text));
        settings.plan.samples = Some(samples);
        settings.plan.template = template;
        settings.display_name = name;
        settings.resume = Resume::Fresh;
        let outcome = evaluate_loaded(
            suite,
            store.clone(),
            scheduler,
            backend,
            settings,
            Arc::new(Progress::default()),
        )
        .await
        .expect("evaluation runs");
        outcome.run_id
    })
}

/// A multiple-choice JSONL file (MedQA shape) of `n` synthetic questions, written into `dir`.
pub fn mcq_file(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
    let words = [
        "aphasia",
        "ataxia",
        "chorea",
        "dystonia",
        "myoclonus",
        "neglect",
        "ptosis",
        "tremor",
    ];
    let mut lines = String::new();
    for i in 0..n {
        let letters = ["A", "B", "C", "D"];
        let options: serde_json::Map<String, serde_json::Value> = letters
            .iter()
            .enumerate()
            .map(|(j, l)| {
                (
                    l.to_string(),
                    serde_json::json!(format!(
                        "{} type {}",
                        words[(i + j) % words.len()],
                        i * 4 + j
                    )),
                )
            })
            .collect();
        let key = letters[i % 4];
        let row = serde_json::json!({
            "realidx": format!("q{i:03}"),
            "question": format!("Synthetic breadth question number {i}: which sign is meant?"),
            "options": options,
            "answer_idx": key,
            "answer": options[key],
        });
        lines.push_str(&row.to_string());
        lines.push('\n');
    }
    let path = dir.join("breadth").join("mcq.jsonl");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, lines).unwrap();
    path
}

/// Loads a suite from a path (format detected).
pub fn load_suite(path: &std::path::Path) -> Suite {
    nmb_suite::load(
        &path.display().to_string(),
        &nmb_suite::LoadOptions::default(),
    )
    .expect("suite loads")
    .suite
}
