//! Why scoring can fail. Judges that fail or answer badly are not errors (their verdicts are recorded as
//! missing); these are the failures that stop a scoring.

use std::path::PathBuf;

/// Errors a judge connector (`ConnectJudges`) gives back, whatever their type.
pub type ConnectError = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    #[error(transparent)]
    Store(#[from] nmb_store::StoreError),
    #[error(transparent)]
    Results(#[from] nmb_results::ResultsError),
    /// A `--by` field the suite cannot be broken down by (a case lacks it, a band list overlaps or leaves gaps).
    #[error(transparent)]
    Subgroup(#[from] nmb_results::subgroup::SubgroupError),
    #[error(transparent)]
    Judge(#[from] nmb_judges::JudgeError),
    #[error("run {run_id} has answers for task {task_id}, which suite {suite_id} does not contain; score it against the suite (and answer key, filters) it was run on")]
    UnknownTask {
        run_id: String,
        task_id: String,
        suite_id: String,
    },
    #[error("taxonomy labels {path}, line {line}: {message}")]
    Labels {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("BERTScore: {0}")]
    BertScore(#[from] nmb_bertscore::BertScoreError),
    #[error("no built-in BERTScore baseline for the model in {dir} (nmb ships one for all-MiniLM-L6-v2 only, recognised by its weights); pass --bertscore-rescale FILE with a baseline in bert-score's LAYER,P,R,F format")]
    NoBaseline { dir: PathBuf },
    #[error("statistics: {0}")]
    Stats(#[from] nmb_stats::StatsError),
    #[error("suite: {0}")]
    Suite(#[from] nmb_suite::SuiteError),
    #[error(
        "run {run_id} holds judge calls, not model answers; score the run it judged ({judged})"
    )]
    JudgeRun { run_id: String, judged: String },
    #[error("run {run_id} was made on suite {suite_id:?}, and its manifest does not say where that suite is; pass --suite (and --answers if it has an answer key)")]
    SuiteUnknown { run_id: String, suite_id: String },
    #[error("run {run_id}: run manifest {field} {value:?}: {message}")]
    ManifestSource {
        run_id: String,
        /// `filter`, `level` or `map`.
        field: &'static str,
        value: String,
        message: String,
    },
    #[error(transparent)]
    LoadSuite(#[from] nmb_suite::SourceError),
    #[error("judge {spec} cannot judge: {reason}")]
    BadJudge { spec: String, reason: String },
    #[error("price of {model}: prices are numbers of dollars per million tokens from 0 to at most 1000000, for a named model or *")]
    Price { model: String },
    #[error(transparent)]
    Transport(#[from] nmb_requests::TransportError),
    #[error("judge {spec} cannot be shown images ({why}); --judge-images same needs judges that take images: choose an API judge with vision, or score with --judge-images none")]
    JudgeWithoutImages { spec: String, why: String },
    #[error("run {run_id}, task {task_id} sample {sample}: image {sha256} the model was shown is not in the store (--judge-images same sends the exact bytes)")]
    ImageMissing {
        run_id: String,
        task_id: String,
        sample: u32,
        sha256: String,
    },
    #[error("cannot use judge {spec}: {source}")]
    ConnectJudge {
        spec: String,
        #[source]
        source: ConnectError,
    },
}
