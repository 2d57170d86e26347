//! What a report reads about one run: the store's record (manifest, summary, every sample with its turns and
//! calls, the prompts and their images) and, when the run was scored, its [`ScoreReport`].

use std::collections::BTreeMap;

use nmb_chat::StoredConversation;
use nmb_results::{SampleScore, ScoreReport};
use nmb_store::{Manifest, RunInfo, RunSummary, SampleRecord, Store};
use serde::Serialize;

use crate::thumbs;
pub use crate::thumbs::Thumbnail;
use crate::ReportError;

/// The prompt of one task as sent at its last turn: the user text of every turn and every image it carried (by
/// content hash).
#[derive(Debug, Clone, Default, Serialize)]
pub struct TaskPrompt {
    /// The user text of every turn (images left out).
    pub text: String,
    /// Image content hashes, in prompt order.
    pub images: Vec<String>,
}

/// One run as a report sees it.
#[derive(Debug, Clone)]
pub struct RunData {
    pub info: RunInfo,
    /// The manifest in its typed form (fields missing from an old manifest are empty).
    pub manifest: Manifest,
    pub summary: RunSummary,
    pub samples: Vec<SampleRecord>,
    /// `None` when the run has not been scored yet: the report then shows answers, errors and usage only.
    pub scores: Option<ScoreReport>,
    /// By task id.
    pub prompts: BTreeMap<String, TaskPrompt>,
    /// By image content hash.
    pub thumbnails: BTreeMap<String, Thumbnail>,
    /// Judges measured against clinicians, one per review set that covers the run (filled by the caller, from
    /// `nmb_review::run_calibrations`; empty otherwise).
    pub calibrations: Vec<nmb_review::RunCalibration>,
    /// Clinicians' pairwise rankings, one per pairwise review set that covers the run (filled by the caller,
    /// from `nmb_review::run_pairwise`; empty otherwise).
    pub pairwise: Vec<nmb_review::PairwiseRanking>,
    /// What showing the model's thinking did to the judges, when the run was scored both ways (filled by the
    /// caller, from `nmb_score::stored_probe`; `None` otherwise).
    pub thinking_probe: Option<nmb_results::thinking_probe::ThinkingProbe>,
}

impl RunData {
    /// The name every table, chart and export shows: `--name`, else a local model's file stem, else the model id.
    pub fn name(&self) -> String {
        self.manifest.display_name()
    }

    /// The model spec without backend URL (what identifies the model; [`RunData::name`] is what is shown).
    pub fn model(&self) -> &str {
        let m = self.manifest.model.as_str();
        m.split('@').next().unwrap_or(m)
    }

    /// The model name without the backend prefix (`openai:gpt-4o` -> `gpt-4o`).
    pub fn model_name(&self) -> &str {
        let m = self.model();
        m.split_once(':').map_or(m, |(_, name)| name)
    }

    /// Scored samples by (task id, sample index).
    pub fn scored(&self) -> BTreeMap<(&str, u32), &SampleScore> {
        self.scores
            .iter()
            .flat_map(|s| &s.samples)
            .map(|s| ((s.task_id.as_str(), s.sample_index), s))
            .collect()
    }

    /// The suite has breadth tasks (closed/open VQA, multiple choice) in its scores.
    pub fn has_breadth(&self) -> bool {
        self.scores
            .iter()
            .flat_map(|s| &s.samples)
            .any(|s| s.family.is_breadth())
    }

    pub fn has_depth(&self) -> bool {
        self.scores
            .iter()
            .flat_map(|s| &s.samples)
            .any(|s| s.family.is_depth())
    }
}

/// Reads one run from the store. `scores` is the run's score report, when it has one.
pub fn load_run(
    store: &Store,
    run_id: &str,
    scores: Option<ScoreReport>,
) -> Result<RunData, ReportError> {
    let info = store.run(run_id)?;
    let manifest = info.manifest.clone();
    let summary = store.summary(run_id)?;
    let samples = store.run_samples(run_id)?;
    let prompts = task_prompts(store, &samples)?;
    let mut thumbnails = BTreeMap::new();
    for sha in prompts.values().flat_map(|p| &p.images) {
        if thumbnails.contains_key(sha) {
            continue;
        }
        let thumb = match store.image(sha)? {
            Some(img) => thumbs::thumbnail(&img.bytes),
            None => thumbs::missing(sha),
        };
        thumbnails.insert(sha.clone(), thumb);
    }
    Ok(RunData {
        info,
        manifest,
        summary,
        samples,
        scores,
        prompts,
        thumbnails,
        calibrations: Vec::new(),
        pairwise: Vec::new(),
        thinking_probe: None,
    })
}

/// The prompt of every task as of its last answered turn (so a multi-turn consult shows every turn's text and
/// images), read once per distinct prompt hash.
fn task_prompts(
    store: &Store,
    samples: &[SampleRecord],
) -> Result<BTreeMap<String, TaskPrompt>, ReportError> {
    let mut last: BTreeMap<&str, (u32, &str)> = BTreeMap::new();
    for s in samples {
        for t in &s.turns {
            let entry = last
                .entry(s.task_id.as_str())
                .or_insert((t.turn_index, &t.call.prompt_hash));
            if t.turn_index > entry.0 {
                *entry = (t.turn_index, &t.call.prompt_hash);
            }
        }
    }
    let mut by_hash: BTreeMap<&str, TaskPrompt> = BTreeMap::new();
    let mut out = BTreeMap::new();
    for (task, (_, hash)) in last {
        if !by_hash.contains_key(hash) {
            let body = store.prompt_body(hash)?.unwrap_or_default();
            by_hash.insert(hash, parse_prompt(&body));
        }
        out.insert(task.to_string(), by_hash[hash].clone());
    }
    Ok(out)
}

/// The user messages' text, turn after turn, and their images; the model's own earlier answers are shown with
/// the samples instead. A body that is not a stored conversation gives an empty prompt.
fn parse_prompt(body: &str) -> TaskPrompt {
    let mut prompt = TaskPrompt::default();
    let Ok(stored) = StoredConversation::parse(body) else {
        return prompt;
    };
    for (turn, m) in stored.user_messages().enumerate() {
        if turn > 0 {
            prompt
                .text
                .push_str(&format!("\n\n--- turn {} ---\n\n", turn + 1));
        }
        prompt.text.push_str(&m.text());
        for sha in m.images() {
            if !prompt.images.iter().any(|i| i == sha) {
                prompt.images.push(sha.to_string());
            }
        }
    }
    prompt
}

/// The newest score report stored for a run (written by `nmb score`), or `None` when it was never scored.
pub fn stored_scores(store: &Store, run_id: &str) -> Result<Option<ScoreReport>, ReportError> {
    nmb_results::stored::latest(store, run_id).map_err(|e| ReportError::Scores {
        what: format!("the stored score report of run {run_id}"),
        message: e.to_string(),
    })
}

/// A score report from a JSON file (`nmb score RUN --json > FILE`).
pub fn scores_from_file(path: &std::path::Path) -> Result<ScoreReport, ReportError> {
    let text = nmb_suite::limits::read_to_string_io(path).map_err(|source| ReportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| ReportError::Scores {
        what: path.display().to_string(),
        message: format!("{e}; expected the JSON that `nmb score RUN --json` prints"),
    })
}

/// Score reports from JSON files (`--scores FILE`), by run id; two files for the same run are an error.
pub fn score_files(
    paths: &[std::path::PathBuf],
) -> Result<BTreeMap<String, ScoreReport>, ReportError> {
    let mut out = BTreeMap::new();
    for p in paths {
        let report = scores_from_file(p)?;
        if out.insert(report.run_id.clone(), report).is_some() {
            return Err(ReportError::SecondScores(p.clone()));
        }
    }
    Ok(out)
}
