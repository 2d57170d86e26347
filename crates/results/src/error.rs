//! Why reading or computing over scores can fail: a stored report that cannot be read, a rubric or criterion
//! rubric file that is not one, a statistic that cannot be computed.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    #[error(transparent)]
    Store(#[from] nmb_store::StoreError),
    #[error("statistics: {0}")]
    Stats(#[from] nmb_stats::StatsError),
    #[error("rubric {source_name}: {message}")]
    Rubric {
        source_name: String,
        message: String,
    },
    #[error("criterion rubric {source_name}, line {line}: {message}")]
    Criteria {
        source_name: String,
        line: usize,
        message: String,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("stored score report for run {run_id} cannot be read: {message}")]
    StoredReport { run_id: String, message: String },
    #[error("no stored scores for run {run_id}; run `nmb score {run_id}` first")]
    NotScored { run_id: String },
}
