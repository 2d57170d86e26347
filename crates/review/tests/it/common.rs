//! What the tests share: runs of the `sample` suite answered by a fake model on loopback and scored by a
//! scripted judge on another, in a real SQLite store in a temporary directory; and grades written through the
//! store's API, as the reviewer pages write them.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use nmb_fake_server::{default_reply, Config, FakeServer, ReceivedRequest, Reply};
use nmb_judges::JudgeModel;
use nmb_requests::{ModelSpec, Transport};
use nmb_results::ScoreReport;
use nmb_run::{evaluate, ConnectError, ConnectOptions, EvalConfig, Invocation, Progress};
use nmb_score::{BertScoreSetting, ScoringConfig};
use nmb_store::{Grade, Store};

pub fn store(dir: &Path) -> Arc<Store> {
    Arc::new(Store::open_dir(dir).expect("store opens"))
}

/// A fake model whose every answer starts with `tag` (the fake server's own answers to the sample suite
/// otherwise), so that two models' answers to the same task differ.
pub fn model(tag: &'static str) -> FakeServer {
    let reply = move |req: &ReceivedRequest| match default_reply(req) {
        Reply::Texts(texts) => {
            Reply::Texts(texts.into_iter().map(|t| format!("{tag}{t}")).collect())
        }
        other => other,
    };
    let config = Config {
        responder: Arc::new(reply),
        ..Config::default()
    };
    FakeServer::start_in_background(config, 1).expect("fake model starts")
}

/// A scripted judge: rubric scores from 1 to 5 that vary with the conversation, "not equivalent" to every
/// question whether two diagnoses are the same, and one error class for every wrong answer.
pub fn judge() -> FakeServer {
    let reply = |req: &ReceivedRequest| {
        let text = req.all_text();
        let answer = if text.contains("Candidate") && text.contains("\"equivalent\"") {
            r#"{"equivalent": false, "rationale": "scripted"}"#.to_string()
        } else if text.contains("Grade the MODEL ANSWER") {
            let s = (req.conversation_sha256.as_bytes()[0] % 5) + 1;
            format!(
                r#"{{"scores": {{"diagnostic_correctness": {s}, "multimodal_integration": {s}, "differential_reasoning": {s}, "lesion_localisation": {s}, "clinical_safety": {s}}}, "overall": {s}, "rationale": "scripted"}}"#
            )
        } else {
            r#"{"category": "knowledge_gap", "justification": "scripted"}"#.to_string()
        };
        Reply::Texts(vec![answer])
    };
    let config = Config {
        responder: Arc::new(reply),
        ..Config::default()
    };
    FakeServer::start_in_background(config, 1).expect("fake judge starts")
}

/// `nmb eval --suite sample --model openai:NAME@SERVER/v1 --samples SAMPLES --limit LIMIT`; the run's id.
pub fn eval(
    store: &Arc<Store>,
    server: &FakeServer,
    name: &str,
    samples: u32,
    limit: Option<u64>,
) -> String {
    let spec = ModelSpec::parse(&format!("openai:{name}@{}/v1", server.url())).unwrap();
    let mut config = EvalConfig::new(nmb_suite::Source::new("sample"), spec);
    config.samples = Some(samples);
    config.limit = limit;
    config.limits.max_retries = 0;
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let scheduler = config.scheduler(store, None);
    let evaluated = runtime.block_on(evaluate(
        &config,
        &Invocation::default(),
        store.clone(),
        &scheduler,
        Arc::new(Progress::default()),
    ));
    let outcome = evaluated.expect("the evaluation").outcome;
    assert_eq!(outcome.summary.samples_ok, outcome.summary.samples_total);
    outcome.run_id
}

/// Judges connect as `nmb score` connects them.
fn connect_judge(spec: &ModelSpec, transport: &Transport) -> Result<JudgeModel, ConnectError> {
    let options = ConnectOptions {
        transport: Some(transport.clone()),
        ..ConnectOptions::default()
    };
    let connected = nmb_run::connect_model(spec, &options)?;
    Ok(JudgeModel {
        spec: connected.spec.identity(),
        backend: connected.backend,
        identity: connected.identity,
    })
}

/// `nmb score RUN --judge openai:judge-x@JUDGE/v1 --no-bertscore --resamples 200`; the stored report.
pub fn score(store: &Arc<Store>, run_id: &str, judge: &FakeServer) -> ScoreReport {
    let config = ScoringConfig {
        judges: vec![ModelSpec::parse(&format!("openai:judge-x@{}/v1", judge.url())).unwrap()],
        bertscore: BertScoreSetting::Off,
        bootstrap: nmb_stats::BootstrapConfig {
            resamples: 200,
            ..Default::default()
        },
        ..ScoringConfig::default()
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime
        .block_on(nmb_score::score_run(store, run_id, &config, &connect_judge))
        .expect("scoring")
}

/// The scored samples of a report: item key (`RUN/TASK#SAMPLE`) -> (the grader's correctness, the judge's
/// overall rubric score).
pub fn judged(report: &ScoreReport) -> BTreeMap<String, (bool, u8)> {
    let mut out = BTreeMap::new();
    for s in &report.samples {
        let overall = s
            .rubric
            .as_ref()
            .and_then(|r| r.judges.first())
            .and_then(|j| j.overall);
        if let (Some(correct), Some(overall)) = (s.correct, overall) {
            let key = nmb_review::item_key(&report.run_id, &s.task_id, s.sample_index);
            out.insert(key, (correct, overall));
        }
    }
    out
}

/// The scoring's correctness decision on every scored sample: item key -> correct.
pub fn decisions(report: &ScoreReport) -> BTreeMap<String, bool> {
    let scored = (report.samples.iter()).filter(|s| {
        matches!(
            s.status,
            nmb_results::SampleStatus::Ok | nmb_results::SampleStatus::ParseFailed
        )
    });
    scored
        .filter_map(|s| {
            Some((
                nmb_review::item_key(&report.run_id, &s.task_id, s.sample_index),
                s.correct?,
            ))
        })
        .collect()
}

/// The judge's annotator name in ratings (`judge:` and its recorded spec).
pub fn judge_annotator(report: &ScoreReport) -> String {
    let rubric = report
        .samples
        .iter()
        .find_map(|s| s.rubric.as_ref())
        .expect("a rubric grade");
    format!("judge:{}", rubric.judges[0].judge)
}

/// A grade with a verdict and an overall score.
pub fn grade(verdict: &str, overall: u8) -> Grade {
    Grade {
        verdict: Some(verdict.into()),
        scores: [("overall".to_string(), overall)].into(),
        taxonomy: None,
        comment: None,
        criteria: BTreeMap::new(),
    }
}

/// Every item of `reviewer` in the order they see them: (item number, item key).
pub fn assigned(store: &Store, set: &str, reviewer: &str) -> Vec<(u32, String)> {
    let mut out = Vec::new();
    while let Some(a) = store
        .assigned_item(set, reviewer, out.len() as u32 + 1)
        .unwrap()
    {
        let i = a.item;
        out.push((
            i.item_no,
            nmb_review::item_key(&i.run_id, &i.task_id, i.sample_index),
        ));
    }
    out
}

/// Grades every item of `reviewer` with `verdict_of(position, key)` (1-based position), overall 3.
pub fn grade_all(
    store: &Store,
    set: &str,
    reviewer: &str,
    verdict_of: impl Fn(usize, &str) -> &'static str,
) -> usize {
    let hash = store.review_set(set).unwrap().unwrap().rubric_hash;
    let items = assigned(store, set, reviewer);
    for (position, (item_no, key)) in items.iter().enumerate() {
        let g = grade(verdict_of(position + 1, key), 3);
        store
            .append_grade(set, reviewer, *item_no, &hash, &g)
            .unwrap();
    }
    items.len()
}
