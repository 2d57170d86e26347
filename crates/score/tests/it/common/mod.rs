//! A scripted model and scripted judges on the loopback fake server, and the expected outcome of every sample,
//! written down independently of the scoring code (from the design below, not from its output).
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_fake_server::{Config, FakeServer, Fault, ReceivedRequest, Reply};
use nmb_judges::JudgeModel;
use nmb_requests::{
    connect, Backend, BackendOptions, HttpOptions, ModelSpec, Scheduler, SchedulerConfig, Transport,
};
use nmb_run::{evaluate_loaded, EvalSettings, Progress};
use nmb_store::Store;
use nmb_suite::{Family, Suite};

pub const SAMPLES: u32 = 5;
pub const MODEL: &str = "neuro-vlm";

/// The judge answers "equivalent" for exactly this candidate (for the SIVD task, whose key does not list it).
pub const JUDGE_APPROVED: &str = "Subcortical arteriosclerotic leukoencephalopathy";
/// A wrong diagnosis for rationale answers.
pub const WRONG_DX: &str = "Neurosarcoidosis";
pub const WRONG_LOCATION: &str = "right cerebellar hemisphere";
pub const WRONG_RATIONALE: &str =
    "Granulomatous inflammation of the meninges explains all of the findings.";

/// Rank of the correct diagnosis in sample answers of differential tasks, cycled through.
const RANKS: [Option<u32>; 8] = [
    Some(1),
    Some(2),
    None,
    Some(1),
    Some(4),
    Some(1),
    None,
    Some(3),
];

/// What one sample is designed to be.
#[derive(Debug, Clone)]
pub struct Planned {
    pub task_id: String,
    pub case_id: String,
    pub family: Family,
    pub level: nmb_suite::Level,
    pub disease_group: Option<String>,
    pub sample: u32,
    pub answer: String,
    pub errored: bool,
    pub parse_failed: bool,
    pub correct: bool,
    /// Differential and rationale: rank of the reference in the answer.
    pub rank: Option<u32>,
    /// The first entry needs the judge to decide (a judge-approved or broader term at rank 1).
    pub needs_judge_at_rank_1: bool,
    /// The answer's rationale is the reference rationale verbatim.
    pub verbatim_rationale: bool,
}

/// Wrong entries for differential answers: diseases no sample case resembles (and, for the stroke case, the
/// broader "Stroke" first, which only a judge can rule on).
fn wrong_pool(task: &nmb_suite::Task) -> Vec<String> {
    let r = task.reference.as_ref().unwrap();
    let mut pool = Vec::new();
    if r.diagnosis
        .as_deref()
        .unwrap_or("")
        .contains("ischaemic stroke")
    {
        pool.push("Stroke".to_string());
    }
    pool.extend(
        [
            "Neurosarcoidosis",
            "Wernicke encephalopathy",
            "Myasthenia gravis",
            "Guillain-Barre syndrome",
            "Huntington disease",
        ]
        .map(String::from),
    );
    pool.truncate(5);
    pool
}

pub fn design(suite: &Suite) -> Vec<Planned> {
    let mut out = Vec::new();
    let first_lesion = suite
        .tasks()
        .find(|(_, t)| t.family == Family::Lesion)
        .unwrap()
        .1
        .id
        .clone();
    let first_consult = suite
        .tasks()
        .find(|(_, t)| !t.turns.is_empty())
        .unwrap()
        .1
        .id
        .clone();
    for (t_index, (case, task)) in suite.tasks().enumerate() {
        let r = task.reference.clone().unwrap();
        for i in 0..SAMPLES {
            let mut p = Planned {
                task_id: task.id.clone(),
                case_id: case.id.clone(),
                family: task.family,
                level: task.level,
                disease_group: task.metadata.get("disease_group").cloned(),
                sample: i,
                answer: String::new(),
                errored: task.id == first_consult && i == 4,
                parse_failed: false,
                correct: false,
                rank: None,
                needs_judge_at_rank_1: false,
                verbatim_rationale: false,
            };
            match task.family {
                Family::Differential => {
                    let rank = RANKS[(t_index * 3 + i as usize) % RANKS.len()];
                    let sivd = r.diagnosis.as_deref() == Some("SIVD");
                    let correct_entry = if sivd {
                        JUDGE_APPROVED.to_string()
                    } else {
                        r.diagnosis.clone().unwrap()
                    };
                    let mut entries = wrong_pool(task);
                    if let Some(k) = rank {
                        entries.insert(k as usize - 1, correct_entry);
                    }
                    entries.truncate(5);
                    p.needs_judge_at_rank_1 =
                        entries[0] == JUDGE_APPROVED || entries[0] == "Stroke";
                    let rationale = r
                        .rationale
                        .clone()
                        .unwrap_or_else(|| "Typical clinical and imaging picture.".into());
                    p.verbatim_rationale = r.rationale.is_some();
                    let items: Vec<serde_json::Value> = entries
                        .iter()
                        .map(|d| serde_json::json!({"diagnosis": d, "evidence": "as described"}))
                        .collect();
                    p.answer = serde_json::json!({
                        "differential": items,
                        "final_diagnosis": entries[0],
                        "rationale": rationale,
                    })
                    .to_string();
                    p.rank = rank;
                    p.correct = rank == Some(1);
                }
                Family::Rationale => {
                    p.correct = !(t_index + i as usize).is_multiple_of(3);
                    let (dx, why) = if p.correct {
                        (r.diagnosis.clone().unwrap(), r.rationale.clone().unwrap())
                    } else {
                        (WRONG_DX.to_string(), WRONG_RATIONALE.to_string())
                    };
                    p.verbatim_rationale = p.correct;
                    p.rank = p.correct.then_some(1);
                    p.answer = format!("Diagnosis: {dx}\nRationale: {why}");
                }
                Family::Lesion => {
                    if task.id == first_lesion && i == 2 {
                        p.parse_failed = true;
                        p.answer = "I am not sure what this shows.".into();
                    } else {
                        p.correct = (t_index + i as usize) % 4 != 1;
                        let location = if p.correct {
                            r.lesion_location.clone().unwrap()
                        } else {
                            WRONG_LOCATION.into()
                        };
                        p.answer = serde_json::json!({
                            "lesion_type": r.lesion_type,
                            "location": location,
                            "findings": "as seen",
                        })
                        .to_string();
                    }
                }
                other => panic!("the sample suite has no {other} tasks"),
            }
            if p.errored {
                p.correct = false;
                p.rank = None;
            }
            out.push(p);
        }
    }
    out
}

/// Which task a model request is about: the case by its notes, the family by the template's instruction.
fn identify<'a>(
    req: &ReceivedRequest,
    planned: &'a [Planned],
    notes: &BTreeMap<String, String>,
) -> Vec<&'a Planned> {
    let text = req.all_text();
    let family = if text.contains("ranked differential diagnosis of up to 5") {
        Family::Differential
    } else if text.contains("Identify the lesion") {
        Family::Lesion
    } else {
        Family::Rationale
    };
    let case = notes
        .iter()
        .find(|(_, n)| text.contains(n.as_str()))
        .map(|(c, _)| c.clone())
        .expect("request names a known case");
    planned
        .iter()
        .filter(|p| p.case_id == case && p.family == family)
        .collect()
}

pub fn model_responder(suite: &Suite, planned: Vec<Planned>) -> nmb_fake_server::Responder {
    let notes: BTreeMap<String, String> = suite
        .cases
        .iter()
        .map(|c| (c.id.clone(), c.notes.chars().take(60).collect()))
        .collect();
    Arc::new(move |req: &ReceivedRequest| {
        let samples = identify(req, &planned, &notes);
        match req.params.seed {
            // One sample per call (multi-turn): the seed is the sample index.
            Some(seed) if req.samples() == 1 => {
                let p = samples
                    .iter()
                    .find(|p| u64::from(p.sample) == seed)
                    .unwrap();
                if p.errored {
                    return Reply::Fault(Fault::Status(400));
                }
                Reply::Texts(vec![p.answer.clone()])
            }
            _ => Reply::Texts(
                samples
                    .iter()
                    .take(req.samples() as usize)
                    .map(|p| p.answer.clone())
                    .collect(),
            ),
        }
    })
}

/// Constant rubric scores per judge and family: (judge model, family) -> score for every dimension, overall.
pub fn rubric_score(judge: &str, family: &str) -> (u8, u8) {
    match (judge, family) {
        ("judge-a", "differential") => (4, 4),
        ("judge-a", "lesion") => (3, 2),
        ("judge-a", _) => (2, 3),
        ("judge-b", "differential") => (5, 3),
        ("judge-b", "lesion") => (1, 2),
        (_, _) => (1, 1),
    }
}

pub fn taxonomy_class(judge: &str, family: &str) -> &'static str {
    match (judge, family) {
        (_, "differential") => "reasoning_failure",
        ("judge-a", "lesion") => "perceptual_failure",
        (_, "lesion") => "grounding_error",
        _ => "knowledge_gap",
    }
}

/// The task whose correct answers judge-b never grades validly.
pub fn rubric_refused_by_b(suite: &Suite) -> String {
    suite
        .tasks()
        .find(|(_, t)| t.family == Family::Lesion)
        .unwrap()
        .1
        .id
        .clone()
}

fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    let from = text.find(start).map(|i| i + start.len()).unwrap_or(0);
    let to = text[from..]
        .find(end)
        .map(|i| from + i)
        .unwrap_or(text.len());
    &text[from..to]
}

/// Scripted judges (model name `judge-a` / `judge-b`), answering by the question's content.
pub fn judge_responder(refused_rubric: String) -> nmb_fake_server::Responder {
    Arc::new(move |req: &ReceivedRequest| {
        let text = req.all_text();
        let judge = req.model.as_str();
        let reasked = text.contains("could not be used");
        if text.contains("Candidate diagnosis:") || text.contains("Candidate lesion") {
            let candidate = between(&text, "<<<ANSWER\n", "\nANSWER>>>");
            if candidate == JUDGE_APPROVED && judge == "judge-a" && !reasked {
                return Reply::Texts(vec!["Yes, these are the same disease.".into()]);
            }
            let yes = candidate == JUDGE_APPROVED;
            return Reply::Texts(vec![format!(
                "{{\"equivalent\": {yes}, \"rationale\": \"scripted\"}}"
            )]);
        }
        let family = between(&text, "TASK (", ",").to_string();
        if text.contains("Grade the MODEL ANSWER") {
            let case = between(&text, "CASE ", "\n");
            if judge == "judge-b"
                && family == "lesion"
                && refused_rubric == format!("{case}/lesion")
                && refused_answer(&text)
            {
                return Reply::Texts(vec!["{\"scores\": {\"diagnostic_correctness\": 9}}".into()]);
            }
            let (d, o) = rubric_score(judge, &family);
            return Reply::Texts(vec![format!(
                "```json\n{{\"scores\": {{\"diagnostic_correctness\": {d}, \"multimodal_integration\": {d}, \
                 \"differential_reasoning\": {d}, \"lesion_localisation\": {d}, \"clinical_safety\": {d}}}, \
                 \"overall\": {o}, \"rationale\": \"scripted\"}}\n```"
            )]);
        }
        if text.contains("was graded WRONG") {
            return Reply::Texts(vec![format!(
                "{{\"category\": \"{}\", \"justification\": \"scripted {family}\"}}",
                taxonomy_class(judge, &family)
            )]);
        }
        Reply::Texts(vec!["unexpected question".into()])
    })
}

/// Judge-b never grades the correct answers of the first lesion task validly (each one is re-asked until the
/// re-asks run out).
fn refused_answer(text: &str) -> bool {
    !text.contains(WRONG_LOCATION) && !text.contains("I am not sure")
}

/// Whether judge-b's rubric answer for this sample is invalid.
pub fn rubric_refused(p: &Planned, refused_task: &str) -> bool {
    p.task_id == refused_task && p.correct && !p.parse_failed
}

pub struct Env {
    pub dir: tempfile::TempDir,
    pub store: Arc<Store>,
    pub suite: Suite,
    pub planned: Vec<Planned>,
    pub model_server: FakeServer,
    pub judge_server: FakeServer,
    pub run_id: String,
    pub scheduler: Scheduler,
}

fn backend(spec: &str) -> Arc<dyn Backend> {
    let spec = ModelSpec::parse(spec).unwrap();
    let transport = Transport::new(&HttpOptions::default()).unwrap();
    connect(&spec, &transport, &BackendOptions::default()).unwrap()
}

/// Runs the sample suite through `nmb_run::evaluate_loaded` against the scripted model and starts the judge server.
pub async fn setup() -> Env {
    let suite = nmb_suite::sample::build();
    let planned = design(&suite);
    let model_server = FakeServer::start(Config {
        responder: model_responder(&suite, planned.clone()),
        ..Config::default()
    })
    .await
    .unwrap();
    let judge_server = FakeServer::start(Config {
        responder: judge_responder(rubric_refused_by_b(&suite)),
        ..Config::default()
    })
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_dir(dir.path()).unwrap());
    let scheduler = Scheduler::new(SchedulerConfig::default());
    let spec = format!("openai:{MODEL}@{}/v1", model_server.url());
    let mut settings = EvalSettings::new(nmb_requests::ModelIdentity::of_text(&spec));
    settings.plan.samples = Some(SAMPLES);
    let outcome = evaluate_loaded(
        &suite,
        store.clone(),
        scheduler.clone(),
        backend(&spec),
        settings,
        Arc::new(Progress::default()),
    )
    .await
    .unwrap();
    assert_eq!(
        outcome.summary.samples_errored, 1,
        "the design has one errored sample"
    );
    Env {
        dir,
        store,
        suite,
        planned,
        model_server,
        judge_server,
        run_id: outcome.run_id,
        scheduler,
    }
}

impl Env {
    pub fn judge(&self, name: &str) -> JudgeModel {
        let spec = format!("openai:{name}@{}/v1", self.judge_server.url());
        JudgeModel::new(&spec, backend(&spec))
    }
}

/// Reading (a) by brute force: the share of k-subsets of n samples (c correct) holding a correct one.
pub fn pass_at_k_enumerated(n: usize, c: usize, k: usize) -> f64 {
    let (mut hit, mut total) = (0u64, 0u64);
    for subset in 0u32..(1u32 << n) {
        if subset.count_ones() as usize == k {
            total += 1;
            if subset & ((1u32 << c) - 1) != 0 {
                hit += 1;
            }
        }
    }
    hit as f64 / total as f64
}
