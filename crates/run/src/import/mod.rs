//! The readers of answer files written outside nmb, each checked whole before anything is kept: a person's
//! answers ([`human`]: JSONL of `{"task_id", "answer" | "differential", "turn"}` objects, appended to the store's
//! human answers) and the JSONL NeuroVLM-Bench's runner writes ([`neurovlm_run`]: one [`Replay`](crate::Replay)
//! per model it asked). Every problem names the file, its line and the field; any one of them means nothing is
//! stored or imported. A file is read whole, under the suite loaders' size cap.
//!
//! What they read becomes a run through the stored-answer backend ([`crate::stored`]) and the ordinary
//! evaluation (`nmb_study`'s `HumanRun` and `ImportedRun`).

pub mod human;
pub mod neurovlm_run;

use std::path::{Path, PathBuf};

/// Why a file of answers cannot be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file has problems, each `FILE:LINE: FIELD: what is wrong`; nothing of it may be kept.
    #[error("{} problem(s) in {file}; nothing was {kept}:\n  {}", problems.len(), problems.join("\n  "))]
    Problems {
        file: String,
        problems: Vec<String>,
        /// What would have become of the answers: `stored` (a person's) or `imported` (a runner's).
        kept: &'static str,
    },
    /// A runner's file whose every line names an image the suite does not hold.
    #[error("{file}: no line matches a case of the suite; nothing was imported")]
    NoMatch { file: String },
    /// A model spec given for a person ([`human::human_spec`]) names another kind of model.
    #[error("{text:?} is not a person: expected human:NAME")]
    NotAPerson { text: String },
    #[error(transparent)]
    Spec(#[from] nmb_requests::SpecError),
}

/// The file's text and its name as problems give it (the path as given).
fn read_text(path: &Path) -> Result<(String, String), ImportError> {
    let text = nmb_suite::limits::read_to_string_io(path).map_err(|source| ImportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    Ok((path.display().to_string(), text))
}
