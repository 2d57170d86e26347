//! A deterministic judge on the fake server, for scoring test runs with nmb-score's real engine: it answers the
//! equivalence, rubric and taxonomy questions in the JSON each one asks for, with values derived from a hash of
//! the question (so rescoring gives the same verdicts).

use std::path::PathBuf;
use std::sync::Arc;

use nmb_fake_server::{ReceivedPart, ReceivedRequest, Reply};
use nmb_judges::JudgeModel;
use nmb_requests::{
    ApiKey, BackendOptions, HttpOptions, ModelSpec, Scheduler, SchedulerConfig, Transport,
};
use nmb_results::ScoreReport;
use nmb_score::{BertScoreSetting, ScoreOptions};
use nmb_store::Store;
use nmb_suite::Suite;
use sha2::{Digest, Sha256};

pub const JUDGE_MODEL: &str = "judge-model";

fn text_of(req: &ReceivedRequest) -> String {
    req.messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            ReceivedPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn unit(text: &str, salt: u64) -> f64 {
    let h = Sha256::digest(format!("{salt}/{text}").as_bytes());
    u64::from_le_bytes(h[..8].try_into().unwrap()) as f64 / u64::MAX as f64
}

/// The judge's answer, or `None` when the request is not a judge question.
pub fn judge_reply(req: &ReceivedRequest) -> Option<Reply> {
    if req.model != JUDGE_MODEL {
        return None;
    }
    let text = text_of(req);
    let answer = if text.contains("{\"equivalent\"") {
        let yes = unit(&text, 1) < 0.5;
        serde_json::json!({"equivalent": yes, "rationale": "Judged on the granularity the key requires."}).to_string()
    } else if text.contains("Grade the MODEL ANSWER with the rubric") {
        let example = text.rsplit("{\"scores\": {").next().unwrap_or("");
        let dims: Vec<&str> = example
            .split("\": <")
            .filter_map(|chunk| chunk.rsplit('"').next())
            .filter(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .filter(|d| *d != "overall")
            .collect();
        let scores: serde_json::Map<String, serde_json::Value> = dims
            .iter()
            .enumerate()
            .map(|(i, d)| {
                (
                    d.to_string(),
                    serde_json::json!((unit(&text, 10 + i as u64) * 5.99) as u64),
                )
            })
            .collect();
        serde_json::json!({
            "scores": scores,
            "overall": (unit(&text, 2) * 5.99) as u64,
            "rationale": "Deterministic test judge: scores derived from a hash of the question.",
        })
        .to_string()
    } else if text.contains("Classify its main error") {
        let ids = [
            "perceptual_failure",
            "reasoning_failure",
            "knowledge_gap",
            "grounding_error",
            "visual_hallucination",
        ];
        let pick = ids[(unit(&text, 3) * ids.len() as f64) as usize % ids.len()];
        serde_json::json!({"category": pick, "justification": "Deterministic test judge."})
            .to_string()
    } else {
        return None;
    };
    Some(Reply::Texts(vec![answer; req.samples() as usize]))
}

/// MiniLM from `scripts/assets.sh` (skip locally, fail under CI without it).
pub fn minilm() -> Option<PathBuf> {
    nmb_test_support::assets::minilm_dir()
}

/// Scores a stored run with nmb-score's engine: the judge above (at `server_url`) for inconclusive matches,
/// rubric and taxonomy, and BERTScore with MiniLM when it is installed.
pub fn score(
    store: &Arc<Store>,
    server_url: &str,
    run_id: &str,
    suite: &Suite,
    resamples: usize,
) -> ScoreReport {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let spec_text = format!("openai:{JUDGE_MODEL}@{server_url}");
        let spec = ModelSpec::parse(&spec_text).unwrap();
        let transport = Transport::new(&HttpOptions::default()).unwrap();
        let options = BackendOptions {
            key: Some(ApiKey::new("test-key")),
            ..BackendOptions::default()
        };
        let backend = nmb_requests::connect(&spec, &transport, &options).unwrap();
        let mut opts = ScoreOptions {
            judges: vec![JudgeModel::new(&spec_text, backend)],
            ..ScoreOptions::default()
        };
        opts.bootstrap.resamples = resamples;
        opts.bertscore = match minilm() {
            Some(dir) => BertScoreSetting::model(dir, Some(6)),
            None => {
                eprintln!(
                    "note: MiniLM is not installed (scripts/assets.sh); scoring without BERTScore"
                );
                BertScoreSetting::Off
            }
        };
        let scheduler = Scheduler::new(SchedulerConfig::default());
        nmb_score::score_loaded(store, &scheduler, run_id, suite, &opts)
            .await
            .expect("scoring runs")
    })
}
