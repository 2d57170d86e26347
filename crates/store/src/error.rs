//! Typed errors. Every variant that touches the database names the file.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create runs directory {path}: {source}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a usable nmb store: the file is not a SQLite database or is corrupt ({message})")]
    NotADatabase { path: PathBuf, message: String },
    #[error("{path} is a SQLite database of another program, not an nmb store ({detail})")]
    Foreign { path: PathBuf, detail: String },
    #[error("{path} has store schema version {found}, newer than the {supported} this nmb understands; use a newer nmb")]
    TooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("store {path}: {op} failed: {source}")]
    Sqlite {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error("store {path}: {op} failed: {source}")]
    Postgres {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: postgres::Error,
    },
    #[error("cannot connect to the store at {path}: {message}")]
    Connect { path: PathBuf, message: String },
    #[error("store {path}: unknown run {run_id}")]
    UnknownRun { path: PathBuf, run_id: String },
    #[error(
        "store {path} already holds run {run_id} with another configuration (config hash {existing}, the copy's \
         is {incoming}); nothing was copied"
    )]
    RunConflict {
        path: PathBuf,
        run_id: String,
        existing: String,
        incoming: String,
    },
    #[error("store {path}: invalid {field}: {message}")]
    Invalid {
        path: PathBuf,
        field: &'static str,
        message: String,
    },
    #[error("store {path}: image declared as sha256 {declared} but its bytes hash to {actual}")]
    ImageHashMismatch {
        path: PathBuf,
        declared: String,
        actual: String,
    },
    #[error("store {path}: stored {what} is not valid JSON: {source}")]
    Json {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;
