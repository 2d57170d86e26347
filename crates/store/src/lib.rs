//! nmb-store: the durable record of every evaluation run, in one embedded SQLite file.
//!
//! It owns the database in a runs directory (default `./nmb-runs/nmb.sqlite`): runs and their manifests, images
//! (once per content hash, across all runs), rendered prompts (once per prompt hash), every API call with its raw
//! body, usage, error class and the replica (server) that answered it, each sample's answer per turn, the
//! response cache, and run summaries. The file is in WAL mode with `synchronous = NORMAL`: every write that
//! records a response is its own committed transaction, so killing the process loses nothing that was committed
//! (a power cut may lose the last few commits).
//!
//! It does not render prompts, talk to any API, classify errors or score answers: callers hand it finished
//! records. Error classes are plain strings (see [`KNOWN_ERROR_CLASSES`]). It never receives API keys.
//!
//! [`Store`] is `Send + Sync`; it keeps one connection behind a mutex, and every call is short, so async code may
//! call it directly.

mod error;
mod keys;
mod manifest;
mod packed;
mod query;
mod records;
mod renders;
mod runs;
mod schema;
mod scores;
mod secrets;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::Connection;

pub use error::{Result, StoreError};
pub use keys::{cache_key, canonical_json, canonical_json_str, format_utc_ms, now_ms};
pub use manifest::{default_display_name, Manifest, Recorded, RunKind, SuiteSource, TemplateRef};
pub use query::{CallInfo, LatencyStats, RunSummary, SampleRecord, StoredImage, TurnRecord};
pub use records::{
    CachedResponse, CallRecord, ChoiceRecord, ErrorInfo, ImageInput, SampleState, SampleStatus,
    KNOWN_ERROR_CLASSES,
};
pub use renders::RenderView;
pub use runs::{RunInfo, RunStatus};
pub use schema::{latest_version, Migration, APPLICATION_ID, BUSY_TIMEOUT, MIGRATIONS};
pub use scores::{SampleScoreRow, ScoreReportRecord};
pub use secrets::{find_bytes_in_store, SecretHit};

/// Runs directory used when none is configured.
pub const DEFAULT_RUNS_DIR: &str = "nmb-runs";
/// Name of the database file inside a runs directory.
pub const DB_FILE_NAME: &str = "nmb.sqlite";

/// The store. Cheap calls, one connection, safe to share between threads (`Arc<Store>`).
pub struct Store {
    path: PathBuf,
    conn: Mutex<Connection>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.path.display())
    }
}

impl Store {
    /// Opens `DIR/nmb.sqlite`, creating the directory and the database if needed.
    pub fn open_dir(dir: impl AsRef<Path>) -> Result<Store> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
            path: dir.to_path_buf(),
            source,
        })?;
        Store::open(dir.join(DB_FILE_NAME))
    }

    /// Opens (or creates) the database file at `path` and brings its schema up to date.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        let path = path.as_ref().to_path_buf();
        let conn = schema::open_connection(&path)?;
        Ok(Store {
            path,
            conn: Mutex::new(conn),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version of the open file.
    pub fn schema_version(&self) -> Result<i64> {
        self.with_conn("read the schema version", |c| {
            c.query_row("PRAGMA user_version", [], |r| r.get(0))
        })
    }

    /// Runs `f` on the connection under the lock. For tables added by later crates and for diagnostics; keep it
    /// short, other threads wait meanwhile.
    pub fn with_conn<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        let mut conn = self.lock();
        f(&mut conn).map_err(|e| self.err(op, e))
    }

    /// `PRAGMA integrity_check`: `["ok"]` for a sound file, otherwise SQLite's list of problems.
    pub fn integrity_check(&self) -> Result<Vec<String>> {
        self.with_conn("check integrity", |c| {
            let mut stmt = c.prepare("PRAGMA integrity_check")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect()
        })
    }

    /// Copies the write-ahead log into the main file and truncates it (for measuring the file's size).
    pub fn checkpoint(&self) -> Result<()> {
        self.with_conn("checkpoint the WAL", |c| {
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        })
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic in another thread while holding the lock cannot leave a half-done transaction behind (rusqlite
        // rolls back on drop), so the connection is still usable.
        self.conn
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn err(&self, op: &'static str, source: rusqlite::Error) -> StoreError {
        schema::classify(&self.path, op, source)
    }

    fn invalid(&self, field: &'static str, message: String) -> StoreError {
        StoreError::Invalid {
            path: self.path.clone(),
            field,
            message,
        }
    }
}
