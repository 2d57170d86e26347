//! nmb-store: the durable record of every evaluation run, in one embedded SQLite file or a shared PostgreSQL
//! database.
//!
//! It owns the database (default `./nmb-runs/nmb.sqlite`, or `postgres://…` with [`Store::connect`]): runs and
//! their manifests, images (once per content hash, across all runs), rendered prompts (once per prompt hash),
//! every API call with its raw body, usage, error class and the replica (server) that answered it, each sample's
//! answer per turn, the response cache, run summaries, score reports, and clinician review sets with their
//! append-only grades (for pairwise sets, their pairs and append-only votes), the human answers baseline runs
//! are built from, and the provider batches calls were sent in ([`BatchRecord`]). Every write that records a
//! response is its own committed transaction, so killing the process loses nothing that was committed. The
//! SQLite file is in WAL mode with `synchronous = NORMAL` (a power cut may lose the last few commits).
//!
//! Every query is written once against the `db` module's seam, which runs it on either engine; no other crate
//! sees SQL or knows which engine holds the data.
//!
//! It does not render prompts, talk to any API, classify errors or score answers: callers hand it finished
//! records. Error classes are plain strings (see [`KNOWN_ERROR_CLASSES`]). It never receives API keys.
//!
//! [`Store`] is `Send + Sync`; it keeps one connection behind a mutex, and every call is short, so async code may
//! call it directly.

mod batches;
mod copy;
mod db;
mod error;
mod fleet;
mod keys;
mod leases;
pub mod limits;
mod manifest;
mod packed;
mod pages;
mod query;
mod records;
mod renders;
mod reviews;
mod runs;
mod schema;
mod schema_pg;
mod scores;
mod secrets;
mod url_credentials;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::{Connection, TransactionBehavior};

use db::pg::PgStore;
use db::sqlite::SqliteDb;
use db::{Db, DbError};

pub use batches::{BatchRecord, BatchState, Resubmission};
pub use copy::CopyStats;
pub use error::{Result, StoreError};
pub use keys::{cache_key, canonical_json, canonical_json_str, format_utc_ms, now_ms};
pub use manifest::{
    default_display_name, InputMode, Manifest, Recorded, RunKind, SuiteSource, TemplateRef,
};
pub use pages::{CaseLookup, CasePage, SampleFilter, SamplePage, ScoreOutcome, TEXT_COUNT_CAP};
pub use query::{
    BatchUsage, CallInfo, LatencyStats, RunSummary, SampleRecord, StoredImage, TurnRecord,
};
pub use records::{
    CachedResponse, CallRecord, ChoiceRecord, ErrorInfo, ImageInput, SampleState, SampleStatus,
    TokenDetail, KNOWN_ERROR_CLASSES,
};
pub use renders::RenderView;
pub use reviews::{
    AssignedItem, CriteriaFile, Grade, HumanAnswer, NewReviewSet, NewReviewer, ReviewItem,
    ReviewPair, ReviewSet, ReviewerStatus, StoredGrade, StoredVote, Vote, VOTE_CHOICES,
};
pub use runs::{RunInfo, RunStatus};
pub use schema::{latest_version, Migration, APPLICATION_ID, BUSY_TIMEOUT, MIGRATIONS};
pub use scores::{SampleScoreRow, ScoreReportRecord};
pub use secrets::{find_bytes_in_store, SecretHit};
pub use url_credentials::scrub_text as scrub_url_credentials;

/// Runs directory used when none is configured.
pub const DEFAULT_RUNS_DIR: &str = "nmb-runs";
/// Name of the database file inside a runs directory.
pub const DB_FILE_NAME: &str = "nmb.sqlite";

/// The store. Cheap calls, one connection, safe to share between threads (`Arc<Store>`).
pub struct Store {
    /// The database file, or for PostgreSQL its URL without the password: what errors name.
    path: PathBuf,
    engine: Engine,
}

enum Engine {
    Sqlite(Mutex<Connection>),
    Postgres(Box<PgStore>),
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Store({})", self.path.display())
    }
}

/// Whether `location` names a PostgreSQL database (`postgres://…` or `postgresql://…`) rather than a file.
pub fn is_postgres_url(location: &str) -> bool {
    location.starts_with("postgres://") || location.starts_with("postgresql://")
}

/// `location` with any password replaced by `***`, fit for logs and errors.
pub fn redact_location(location: &str) -> String {
    db::pg::redact(location)
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
            engine: Engine::Sqlite(Mutex::new(conn)),
        })
    }

    /// Connects to the PostgreSQL database at `url` and brings its schema up to date (creating it in an empty
    /// database). The password, from the URL or `PGPASSWORD`-style parameters, is never kept in messages.
    pub fn connect(url: &str) -> Result<Store> {
        let path = PathBuf::from(redact_location(url));
        let pg = PgStore::connect(url).map_err(|message| StoreError::Connect {
            path: path.clone(),
            message: redact_in(&message, url),
        })?;
        let store = Store {
            path,
            engine: Engine::Postgres(Box::new(pg)),
        };
        schema_pg::migrate(&store)?;
        Ok(store)
    }

    /// A PostgreSQL URL ([`Store::connect`]) or else a runs directory ([`Store::open_dir`]).
    pub fn open_location(location: &str) -> Result<Store> {
        if is_postgres_url(location) {
            Store::connect(location)
        } else {
            Store::open_dir(location)
        }
    }

    /// The database file (or the PostgreSQL URL without its password).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn is_postgres(&self) -> bool {
        matches!(self.engine, Engine::Postgres(_))
    }

    /// Which engine holds the data: `"sqlite"` or `"postgres"`.
    pub fn engine_name(&self) -> &'static str {
        match self.engine {
            Engine::Sqlite(_) => "sqlite",
            Engine::Postgres(_) => "postgres",
        }
    }

    /// The schema version of the open database.
    pub fn schema_version(&self) -> Result<i64> {
        match &self.engine {
            Engine::Sqlite(_) => self.sqlite_conn("read the schema version", |c| {
                c.query_row("PRAGMA user_version", [], |r| r.get(0))
            }),
            Engine::Postgres(_) => self.read("read the schema version", |db| {
                Ok(
                    db::scalar::<Option<i64>>(db, "SELECT max(version) FROM migrations", &[])?
                        .unwrap_or(0),
                )
            }),
        }
    }

    /// Runs `f` on the SQLite connection under the lock, for diagnostics and tests; keep it short, other
    /// threads wait meanwhile. A PostgreSQL store refuses it.
    pub fn with_conn<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        self.sqlite_conn(op, f)
    }

    /// `PRAGMA integrity_check`: `["ok"]` for a sound file, otherwise SQLite's list of problems. PostgreSQL
    /// keeps its own integrity, so a PostgreSQL store answers `["ok"]` once it can be queried.
    pub fn integrity_check(&self) -> Result<Vec<String>> {
        if let Engine::Postgres(_) = self.engine {
            self.schema_version()?;
            return Ok(vec!["ok".into()]);
        }
        self.sqlite_conn("check integrity", |c| {
            let mut stmt = c.prepare("PRAGMA integrity_check")?;
            let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
            rows.collect()
        })
    }

    /// Copies the write-ahead log into the main file and truncates it (for measuring the file's size). Nothing
    /// to do on PostgreSQL.
    pub fn checkpoint(&self) -> Result<()> {
        if let Engine::Postgres(_) = self.engine {
            return Ok(());
        }
        self.sqlite_conn("checkpoint the WAL", |c| {
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        })
    }

    /// Runs `f` on a connection of either engine, outside a transaction.
    pub(crate) fn read<T: Send>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut dyn Db) -> Result<T, WriteError> + Send,
    ) -> Result<T> {
        let result = match &self.engine {
            Engine::Sqlite(conn) => f(&mut SqliteDb(&lock(conn))),
            Engine::Postgres(pg) => pg.run(|c| f(&mut c.db())),
        };
        result.map_err(|e| self.write_err(op, e))
    }

    /// Runs `f` in one transaction and commits it (SQLite: an immediate transaction, so writers queue).
    pub(crate) fn write<T: Send>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut dyn Db) -> Result<T, WriteError> + Send,
    ) -> Result<T> {
        let result = match &self.engine {
            Engine::Sqlite(conn) => sqlite_transaction(&mut lock(conn), f),
            Engine::Postgres(pg) => pg.run(|c| c.transaction(|tx| f(tx))),
        };
        result.map_err(|e| self.write_err(op, e))
    }

    fn sqlite_conn<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>,
    ) -> Result<T> {
        match &self.engine {
            Engine::Sqlite(conn) => f(&mut lock(conn)).map_err(|e| self.err(op, e.into())),
            Engine::Postgres(_) => Err(self.invalid(
                "engine",
                format!("{op}: this needs a SQLite store, and this store is PostgreSQL"),
            )),
        }
    }

    fn err(&self, op: &'static str, source: DbError) -> StoreError {
        match source {
            DbError::Sqlite(e) => schema::classify(&self.path, op, e),
            DbError::Postgres(source) => StoreError::Postgres {
                path: self.path.clone(),
                op,
                source,
            },
            DbError::Decode {
                column,
                expected,
                found,
            } => self.invalid(
                "column",
                format!("{op}: column {column} holds {found}, expected {expected}"),
            ),
        }
    }

    fn write_err(&self, op: &'static str, e: WriteError) -> StoreError {
        match e {
            WriteError::Db(e) => self.err(op, e),
            WriteError::Store(e) => e,
        }
    }

    fn invalid(&self, field: &'static str, message: String) -> StoreError {
        StoreError::Invalid {
            path: self.path.clone(),
            field,
            message,
        }
    }
}

fn lock(conn: &Mutex<Connection>) -> MutexGuard<'_, Connection> {
    // A panic in another thread while holding the lock cannot leave a half-done transaction behind (rusqlite
    // rolls back on drop), so the connection is still usable.
    conn.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn sqlite_transaction<T>(
    conn: &mut Connection,
    f: impl FnOnce(&mut dyn Db) -> Result<T, WriteError>,
) -> Result<T, WriteError> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let value = f(&mut SqliteDb(&tx))?;
    tx.commit()?;
    Ok(value)
}

/// `message` with the password of `url` blanked, wherever the client library quoted it.
fn redact_in(message: &str, url: &str) -> String {
    let redacted = redact_location(url);
    let mut out = message.replace(url, &redacted);
    if let Ok(config) = url.parse::<postgres::Config>() {
        if let Some(pw) = config.get_password().filter(|p| !p.is_empty()) {
            if let Ok(pw) = std::str::from_utf8(pw) {
                out = out.replace(pw, "***");
            }
        }
    }
    out
}

/// Errors inside a store operation: the engine's own (mapped with the operation name afterwards) or the
/// store's.
pub(crate) enum WriteError {
    Db(DbError),
    Store(StoreError),
}

impl From<DbError> for WriteError {
    fn from(e: DbError) -> Self {
        WriteError::Db(e)
    }
}

impl From<rusqlite::Error> for WriteError {
    fn from(e: rusqlite::Error) -> Self {
        WriteError::Db(DbError::Sqlite(e))
    }
}

impl From<postgres::Error> for WriteError {
    fn from(e: postgres::Error) -> Self {
        WriteError::Db(DbError::Postgres(e))
    }
}

impl From<StoreError> for WriteError {
    fn from(e: StoreError) -> Self {
        WriteError::Store(e)
    }
}
