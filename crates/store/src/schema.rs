//! Opening a database file safely and migrating its schema.
//!
//! The schema version lives in `PRAGMA user_version`; `application_id` marks the file as an nmb store so that a
//! foreign SQLite file is refused rather than altered. Each migration runs in one immediate transaction, so two
//! processes opening the same new file at once cannot both apply it.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, TransactionBehavior};

use crate::error::{Result, StoreError};
use crate::keys::now_ms;

/// `application_id` of an nmb store: "NMB1" in ASCII.
pub const APPLICATION_ID: i64 = 0x4E4D_4231;

/// How long a writer waits for another connection's lock before giving up.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// One schema step. New tables and columns come in a new step appended to the list; never edit a released one.
pub struct Migration {
    pub version: i64,
    pub description: &'static str,
    pub sql: &'static str,
}

pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "runs, images, prompts, samples, calls, turns",
        sql: V1,
    },
    Migration {
        version: 2,
        description: "score reports and per-sample scores (nmb-score)",
        sql: V2,
    },
    Migration {
        version: 3,
        description: "prompt bodies may be zlib-compressed (BLOB)",
        sql: V3,
    },
    Migration {
        version: 4,
        description: "volume renders: (source hash, options) -> the PNG views they gave",
        sql: V4,
    },
    Migration {
        version: 5,
        description: "calls.replica: the server (base URL) that answered a call",
        sql: V5,
    },
    Migration {
        version: 6,
        description:
            "samples.lease_owner, lease_until_ms: which worker holds a sample, and until when",
        sql: V6,
    },
    Migration {
        version: 7,
        description:
            "fleet_slots, fleet_pauses: per-server limits and 429 pauses shared by workers",
        sql: V7,
    },
    Migration {
        version: 8,
        description:
            "score_reports.headline, a report's headline alone; score_reports as a rowid table",
        sql: V8,
    },
    Migration {
        version: 9,
        description: "clinician review sets, reviewers, items, append-only grades; human answers; \
                      sample_scores.disease_group",
        sql: V9,
    },
    Migration {
        version: 10,
        description:
            "turns_text, a trigram index of the answers; indexes of score outcomes and cached turns",
        sql: V10,
    },
    Migration {
        version: 11,
        description: "turns.thinking, a reasoning model's thinking apart from its answer; calls.tokens_reasoning, \
                      tokens_cached_in, tokens_cache_write",
        sql: V11,
    },
    Migration {
        version: 12,
        description: "batches and batch_items, provider batch submissions recorded before they are sent; \
                      calls.batch_id",
        sql: V12,
    },
    Migration {
        version: 13,
        description: "review_sets.show_thinking: whether a set's reviewers see each answer's thinking",
        sql: V13,
    },
    Migration {
        version: 14,
        description: "review_pairs and review_votes: pairwise review sets and their appended votes",
        sql: V14_PAIRWISE,
    },
    Migration {
        version: 15,
        description: "review_sets.criteria_name, criteria: a set's criterion rubric; review_grades.criteria: \
                      a reviewer's criterion marks",
        sql: V15_CRITERIA,
    },
    Migration {
        version: 16,
        description: "turns.finish_reason: why the model stopped (the API's finish reason, verbatim)",
        sql: V16_FINISH,
    },
];

/// The newest schema version this build writes.
pub fn latest_version() -> i64 {
    MIGRATIONS.last().map(|m| m.version).unwrap_or(0)
}

const V1: &str = r#"
CREATE TABLE migrations (
    version     INTEGER PRIMARY KEY,
    description TEXT NOT NULL,
    applied_ms  INTEGER NOT NULL
);

CREATE TABLE runs (
    run_id      TEXT PRIMARY KEY,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('running', 'finished', 'interrupted')),
    config_hash TEXT NOT NULL,
    manifest    TEXT NOT NULL CHECK (json_valid(manifest))
);
CREATE INDEX runs_by_config ON runs (config_hash, created_ms);

-- One row per distinct image content, shared by every prompt and run.
CREATE TABLE images (
    sha256     TEXT PRIMARY KEY,
    mime       TEXT NOT NULL,
    size       INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    bytes      BLOB NOT NULL
);

-- One row per distinct rendered conversation; images are referenced by sha256, never inlined.
CREATE TABLE prompts (
    id          INTEGER PRIMARY KEY,
    prompt_hash TEXT NOT NULL UNIQUE,
    created_ms  INTEGER NOT NULL,
    body        TEXT NOT NULL CHECK (json_valid(body))
);

-- Interned (model, params, template) tuples so each call row carries a small integer instead of four strings.
CREATE TABLE contexts (
    id            INTEGER PRIMARY KEY,
    model         TEXT NOT NULL,
    params        TEXT NOT NULL,
    template_id   TEXT NOT NULL,
    template_hash TEXT NOT NULL,
    UNIQUE (model, params, template_id, template_hash)
);

-- Exactly one row per planned sample of a run.
CREATE TABLE samples (
    run_id        TEXT NOT NULL REFERENCES runs (run_id),
    task_id       TEXT NOT NULL,
    sample_index  INTEGER NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('pending', 'ok', 'errored')),
    turns_done    INTEGER NOT NULL DEFAULT 0,
    error_class   TEXT,
    error_message TEXT,
    created_ms    INTEGER NOT NULL,
    updated_ms    INTEGER NOT NULL,
    PRIMARY KEY (run_id, task_id, sample_index)
) WITHOUT ROWID;

-- One row per API call (its retries included): what went over the wire and what came back.
-- A call that returned n choices has one raw body here and n rows in `turns`.
CREATE TABLE calls (
    id            INTEGER PRIMARY KEY,
    run_id        TEXT NOT NULL REFERENCES runs (run_id),
    task_id       TEXT NOT NULL,
    turn_index    INTEGER NOT NULL,
    prompt_id     INTEGER NOT NULL REFERENCES prompts (id),
    context_id    INTEGER NOT NULL REFERENCES contexts (id),
    n_choices     INTEGER NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('ok', 'errored')),
    error_class   TEXT,
    error_message TEXT,
    attempts      INTEGER NOT NULL,
    tokens_in     INTEGER,
    tokens_out    INTEGER,
    latency_ms    INTEGER,
    started_ms    INTEGER NOT NULL,
    finished_ms   INTEGER NOT NULL,
    raw           TEXT
);
CREATE INDEX calls_by_run ON calls (run_id);

-- What each sample got at each turn: its own choice of a call, or a cached answer (`cached` = 1, and `call_id`
-- then points at the call that produced it, possibly in another run).
CREATE TABLE turns (
    id            INTEGER PRIMARY KEY,
    run_id        TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    sample_index  INTEGER NOT NULL,
    turn_index    INTEGER NOT NULL,
    cache_key     BLOB NOT NULL, -- the 32 bytes behind cache_key()'s hex
    call_id       INTEGER NOT NULL REFERENCES calls (id),
    choice_index  INTEGER NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('ok', 'errored')),
    cached        INTEGER NOT NULL DEFAULT 0,
    recorded_ms   INTEGER NOT NULL,
    error_class   TEXT,
    error_message TEXT,
    text          TEXT,
    UNIQUE (run_id, task_id, sample_index, turn_index),
    FOREIGN KEY (run_id, task_id, sample_index) REFERENCES samples (run_id, task_id, sample_index)
);
-- Only successful answers are cache entries; errored ones are retried.
CREATE INDEX turns_ok_by_key ON turns (cache_key) WHERE status = 'ok';
"#;

/// Scores written by `nmb-score`: one report per (run, scoring configuration), rewritten when the same
/// configuration is scored again, and one row per sample for SQL queries. Judges' own calls are ordinary runs
/// (manifest `kind` = `judge`) in the tables above.
/// Prompt bodies repeat the template's text in every prompt, and were most of a stored sample's bytes. From v3
/// on a body is a BLOB holding zlib-compressed JSON; bodies stored before stay plain JSON TEXT (readers take
/// both, see `crate::packed`). `calls.raw` needs no change: it never had a JSON check, and takes either type.
/// The column is copied, dropped and renamed because SQLite cannot relax a column's CHECK in place.
const V4: &str = r#"
-- One row per view of a rendered volume. The key hashes the source's content, the render options and the
-- renderer version; the PNG itself is an ordinary row of images, stored once by its hash.
CREATE TABLE renders (
    render_key TEXT NOT NULL,
    idx        INTEGER NOT NULL,
    sha256     TEXT NOT NULL REFERENCES images (sha256),
    width      INTEGER NOT NULL,
    height     INTEGER NOT NULL,
    label      TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (render_key, idx)
);
"#;

/// A model may be served by several replicas (`openai:m@http://a/v1,http://b/v1`); each call records the one
/// its last attempt went to, the one that answered when it succeeded: the base URL without credentials or
/// query string. The model itself (in `contexts`) stays the same whichever replica answered. NULL for calls
/// stored before v5, for in-process models, and for calls recorded without one.
const V5: &str = r#"
ALTER TABLE calls ADD COLUMN replica TEXT;
"#;

/// Workers sharing a run claim its samples for a while (a lease) and keep renewing the claim; a sample whose
/// lease ran out (its worker died) is claimed again by another. NULL when nobody holds the sample.
const V6: &str = r#"
ALTER TABLE samples ADD COLUMN lease_owner TEXT;
ALTER TABLE samples ADD COLUMN lease_until_ms INTEGER;
"#;

/// Processes sharing a store share each server's concurrency limit (one row per slot, held by a worker until
/// `until_ms`) and its 429 pauses (nobody sends to the server before `until_ms`).
const V7: &str = r#"
CREATE TABLE fleet_slots (
    server   TEXT NOT NULL,
    slot     INTEGER NOT NULL,
    holder   TEXT,
    until_ms INTEGER,
    PRIMARY KEY (server, slot)
);
CREATE TABLE fleet_pauses (
    server   TEXT PRIMARY KEY,
    until_ms INTEGER NOT NULL
);
"#;

/// A report holds every sample's scoring (tens of megabytes for a large run); viewers want only its headline.
/// `headline` is the JSON object `{"overall": …, "by_level_family": …}` taken from the report when it is saved
/// (a member the report lacks is null), so reading it never reads the report; existing reports get theirs here.
///
/// `score_reports` also stops being a `WITHOUT ROWID` table: there each row, report and all, is a key of the
/// table's b-tree, so every key lookup (a `sample_scores` row's foreign key check, finding a run's latest
/// report) read whole reports, which made saving a large run's report quadratic. As an ordinary table with the
/// headline before the report, lookups go through the primary key's index and read no report. `sample_scores`
/// is rebuilt with it, so dropping the old table cascades into no rows.
const V8: &str = r#"
CREATE TABLE score_reports_v8 (
    run_id         TEXT NOT NULL REFERENCES runs (run_id),
    config_hash    TEXT NOT NULL,
    created_ms     INTEGER NOT NULL,
    updated_ms     INTEGER NOT NULL,
    schema_version INTEGER NOT NULL,
    headline       TEXT,
    report         TEXT NOT NULL CHECK (json_valid(report)),
    PRIMARY KEY (run_id, config_hash)
);
INSERT INTO score_reports_v8 (run_id, config_hash, created_ms, updated_ms, schema_version, headline, report)
SELECT run_id, config_hash, created_ms, updated_ms, schema_version,
       json_object('overall', json_extract(report, '$.overall'),
                   'by_level_family', json_extract(report, '$.by_level_family')),
       report
FROM score_reports;

CREATE TABLE sample_scores_v8 (
    run_id         TEXT NOT NULL,
    config_hash    TEXT NOT NULL,
    task_id        TEXT NOT NULL,
    sample_index   INTEGER NOT NULL,
    case_id        TEXT NOT NULL,
    family         TEXT NOT NULL,
    level          TEXT NOT NULL,
    status         TEXT NOT NULL,
    correct        INTEGER,
    matched_rank   INTEGER,
    match_method   TEXT,
    rubric_overall REAL,
    bertscore_f    REAL,
    error_category TEXT,
    error_source   TEXT,
    PRIMARY KEY (run_id, config_hash, task_id, sample_index),
    FOREIGN KEY (run_id, config_hash) REFERENCES score_reports_v8 (run_id, config_hash) ON DELETE CASCADE
) WITHOUT ROWID;
INSERT INTO sample_scores_v8 SELECT run_id, config_hash, task_id, sample_index, case_id, family, level, status,
    correct, matched_rank, match_method, rubric_overall, bertscore_f, error_category, error_source
FROM sample_scores;

DROP TABLE sample_scores;
DROP TABLE score_reports;
ALTER TABLE score_reports_v8 RENAME TO score_reports;
ALTER TABLE sample_scores_v8 RENAME TO sample_scores;
"#;

/// Blinded clinician review and human answers. A review set holds shuffled (run, task, sample) items; each reviewer
/// has a hashed token and a list of assigned items in their own order. Grades are appended, never updated: the
/// newest row per (set, reviewer, item) is the grade, the rest is the audit trail. `human_answers` holds what a
/// clinician answered to a suite's tasks (appended the same way), from which the run of model `human:NAME` is
/// built. `sample_scores.disease_group` lets viewers filter by it.
const V9: &str = r#"
CREATE TABLE review_sets (
    set_id      TEXT PRIMARY KEY,
    created_ms  INTEGER NOT NULL,
    rubric_hash TEXT NOT NULL,
    rubric      TEXT NOT NULL,
    seed        INTEGER NOT NULL,
    overlap     REAL NOT NULL,
    runs        TEXT NOT NULL CHECK (json_valid(runs))
);
CREATE TABLE review_reviewers (
    set_id       TEXT NOT NULL REFERENCES review_sets (set_id),
    reviewer     TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    created_ms   INTEGER NOT NULL,
    revoked_ms   INTEGER,
    PRIMARY KEY (set_id, reviewer)
);
CREATE TABLE review_items (
    set_id       TEXT NOT NULL REFERENCES review_sets (set_id),
    item_no      INTEGER NOT NULL,
    run_id       TEXT NOT NULL REFERENCES runs (run_id),
    task_id      TEXT NOT NULL,
    sample_index INTEGER NOT NULL,
    shared       INTEGER NOT NULL,
    PRIMARY KEY (set_id, item_no)
);
CREATE TABLE review_assignments (
    set_id   TEXT NOT NULL,
    reviewer TEXT NOT NULL,
    position INTEGER NOT NULL,
    item_no  INTEGER NOT NULL,
    PRIMARY KEY (set_id, reviewer, position),
    UNIQUE (set_id, reviewer, item_no),
    FOREIGN KEY (set_id, reviewer) REFERENCES review_reviewers (set_id, reviewer),
    FOREIGN KEY (set_id, item_no) REFERENCES review_items (set_id, item_no)
);
CREATE TABLE review_grades (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    set_id      TEXT NOT NULL,
    reviewer    TEXT NOT NULL,
    item_no     INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL,
    rubric_hash TEXT NOT NULL,
    verdict     TEXT CHECK (verdict IN ('correct', 'partly', 'incorrect', 'skip')),
    scores      TEXT NOT NULL CHECK (json_valid(scores)),
    taxonomy    TEXT,
    comment     TEXT,
    FOREIGN KEY (set_id, reviewer, item_no) REFERENCES review_assignments (set_id, reviewer, item_no)
);
CREATE INDEX review_grades_latest ON review_grades (set_id, reviewer, item_no, id);
CREATE TABLE human_answers (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    human      TEXT NOT NULL,
    suite_hash TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    turn_index INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    source     TEXT NOT NULL,
    text       TEXT NOT NULL
);
CREATE INDEX human_answers_latest ON human_answers (human, suite_hash, task_id, turn_index, id);
ALTER TABLE sample_scores ADD COLUMN disease_group TEXT;
"#;

/// Indexes for the viewer's pages (`nmb serve`), none of which changes what a query returns.
///
/// `turns_text` is an FTS5 index of `turns.text` with the `trigram` tokenizer: it keeps the trigrams only (the
/// text stays in `turns`, which the index names as its external content), folded to lower case, without
/// positions (`detail = none`, a quarter of the size of a positional index) and without per-row sizes
/// (`columnsize = 0`: nothing ranks results). A search takes the turns holding a text's trigrams (up to twelve of
/// them) from it and checks their text itself, so the index only has to find a superset. Triggers keep it in
/// step with every write of `turns` in the same transaction; a migration that rebuilds `turns` must recreate
/// them. The `rebuild` fills it from the answers already stored (3 s for 100,000 answers of 400 bytes). Writing
/// a turn costs about 60 µs more for a short answer and 130 µs for 2 KB: FTS5 writes its pending trigrams out at
/// the start of every later statement of the transaction, so each turn becomes a segment to merge.
///
/// `sample_scores_by_outcome` serves the score filters `correct` / `wrong` in key order, so that a deep page
/// skips index entries instead of whole score rows; `turns_cached` counts a run's cached turns (every run
/// page's summary) without reading the run's turns, and costs nothing for the uncached ones.
const V10: &str = r#"
CREATE VIRTUAL TABLE turns_text USING fts5 (
    text,
    content = 'turns', content_rowid = 'id',
    tokenize = 'trigram case_sensitive 0', detail = none, columnsize = 0
);
CREATE TRIGGER turns_text_insert AFTER INSERT ON turns BEGIN
    INSERT INTO turns_text (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER turns_text_delete AFTER DELETE ON turns BEGIN
    INSERT INTO turns_text (turns_text, rowid, text) VALUES ('delete', old.id, old.text);
END;
-- An upsert names `text` whether or not it changes; only a change touches the index.
CREATE TRIGGER turns_text_update AFTER UPDATE OF id, text ON turns
WHEN old.id IS NOT new.id OR old.text IS NOT new.text BEGIN
    INSERT INTO turns_text (turns_text, rowid, text) VALUES ('delete', old.id, old.text);
    INSERT INTO turns_text (rowid, text) VALUES (new.id, new.text);
END;
INSERT INTO turns_text (turns_text) VALUES ('rebuild');

CREATE INDEX sample_scores_by_outcome ON sample_scores (run_id, config_hash, correct, task_id, sample_index);
CREATE INDEX turns_cached ON turns (run_id) WHERE cached = 1;
"#;

/// A reasoning model's thinking, kept apart from the answer in `text` (which the search index covers: the
/// thinking is not searched); what a call's output and input held of reasoning and of a prompt cache. Absent
/// (NULL) for everything stored before, and for models that report none.
const V11: &str = r#"
ALTER TABLE turns ADD COLUMN thinking TEXT;
ALTER TABLE calls ADD COLUMN tokens_reasoning INTEGER;
ALTER TABLE calls ADD COLUMN tokens_cached_in INTEGER;
ALTER TABLE calls ADD COLUMN tokens_cache_write INTEGER;
"#;

/// A provider batch is recorded with every request's custom id before it is submitted, so that a killed process
/// resumes polling it instead of submitting again; a call answered through one names it.
const V12: &str = r#"
CREATE TABLE batches (
    batch_id    TEXT PRIMARY KEY,
    model       TEXT NOT NULL,
    provider    TEXT NOT NULL,
    provider_id TEXT,
    state       TEXT NOT NULL,
    requests    INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL
);
CREATE TABLE batch_items (
    batch_id  TEXT NOT NULL REFERENCES batches (batch_id),
    custom_id TEXT NOT NULL,
    position  INTEGER NOT NULL,
    PRIMARY KEY (batch_id, custom_id)
);
CREATE INDEX batch_items_by_custom_id ON batch_items (custom_id);
ALTER TABLE calls ADD COLUMN batch_id TEXT;
"#;

/// Sets made before it showed no thinking (reviewer pages had none), so 0 keeps them as they were.
const V13: &str = r#"
ALTER TABLE review_sets ADD COLUMN show_thinking INTEGER NOT NULL DEFAULT 0;
"#;

const V15_CRITERIA: &str = r#"
ALTER TABLE review_sets ADD COLUMN criteria_name TEXT;
ALTER TABLE review_sets ADD COLUMN criteria TEXT;
ALTER TABLE review_grades ADD COLUMN criteria TEXT;
"#;

/// Why an answer ended, as the API said it (`stop`, `length`, `max_tokens`, `MAX_TOKENS`, ...): an answer cut
/// at the token limit is told apart from one the model ended. NULL for everything stored before, and where the
/// API gave none.
const V16_FINISH: &str = r#"
ALTER TABLE turns ADD COLUMN finish_reason TEXT;
"#;

const V3: &str = r#"
ALTER TABLE prompts ADD COLUMN body_v3 BLOB;
UPDATE prompts SET body_v3 = body;
ALTER TABLE prompts DROP COLUMN body;
ALTER TABLE prompts RENAME COLUMN body_v3 TO body;
"#;

const V2: &str = r#"
CREATE TABLE score_reports (
    run_id         TEXT NOT NULL REFERENCES runs (run_id),
    config_hash    TEXT NOT NULL,
    created_ms     INTEGER NOT NULL,
    updated_ms     INTEGER NOT NULL,
    schema_version INTEGER NOT NULL,
    report         TEXT NOT NULL CHECK (json_valid(report)),
    PRIMARY KEY (run_id, config_hash)
) WITHOUT ROWID;

CREATE TABLE sample_scores (
    run_id         TEXT NOT NULL,
    config_hash    TEXT NOT NULL,
    task_id        TEXT NOT NULL,
    sample_index   INTEGER NOT NULL,
    case_id        TEXT NOT NULL,
    family         TEXT NOT NULL,
    level          TEXT NOT NULL,
    status         TEXT NOT NULL,
    correct        INTEGER,
    matched_rank   INTEGER,
    match_method   TEXT,
    rubric_overall REAL,
    bertscore_f    REAL,
    error_category TEXT,
    error_source   TEXT,
    PRIMARY KEY (run_id, config_hash, task_id, sample_index),
    FOREIGN KEY (run_id, config_hash) REFERENCES score_reports (run_id, config_hash) ON DELETE CASCADE
) WITHOUT ROWID;
"#;

/// Opens (creating if absent) and migrates the store at `path`.
pub fn open_connection(path: &Path) -> Result<Connection> {
    let sql_err = |op: &'static str| move |source: rusqlite::Error| classify(path, op, source);
    let mut conn = Connection::open(path).map_err(sql_err("open"))?;
    conn.busy_timeout(BUSY_TIMEOUT)
        .map_err(sql_err("set busy_timeout"))?;
    check_identity(&conn, path)?;
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .map_err(sql_err("enable WAL"))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::Invalid {
            path: path.to_path_buf(),
            field: "journal_mode",
            message: format!("SQLite kept journal mode {mode:?}; WAL is required (is the file on a network drive?)"),
        });
    }
    conn.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")
        .map_err(sql_err("set pragmas"))?;
    migrate(&mut conn, path)?;
    Ok(conn)
}

/// Maps SQLite's "not a database" family to a clear error; everything else keeps its operation name.
pub(crate) fn classify(path: &Path, op: &'static str, source: rusqlite::Error) -> StoreError {
    match source.sqlite_error_code() {
        Some(ErrorCode::NotADatabase) | Some(ErrorCode::DatabaseCorrupt) => {
            StoreError::NotADatabase {
                path: path.to_path_buf(),
                message: source.to_string(),
            }
        }
        _ => StoreError::Sqlite {
            path: path.to_path_buf(),
            op,
            source,
        },
    }
}

/// Refuses files that belong to another program or to a newer nmb, before anything is written to them.
fn check_identity(conn: &Connection, path: &Path) -> Result<()> {
    let read = |sql: &str| -> Result<i64> {
        conn.query_row(sql, [], |r| r.get(0))
            .map_err(|e| classify(path, "read the file header", e))
    };
    let app_id = read("PRAGMA application_id")?;
    let version = read("PRAGMA user_version")?;
    let objects = read("SELECT count(*) FROM sqlite_master")?;
    if app_id == 0 && version == 0 && objects == 0 {
        return Ok(()); // empty or new file: ours to initialise
    }
    if app_id != APPLICATION_ID {
        return Err(StoreError::Foreign {
            path: path.to_path_buf(),
            detail: format!(
                "application_id {app_id:#x}, expected {APPLICATION_ID:#x}; {objects} schema objects present"
            ),
        });
    }
    if version > latest_version() {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
            supported: latest_version(),
        });
    }
    Ok(())
}

fn migrate(conn: &mut Connection, path: &Path) -> Result<()> {
    for m in MIGRATIONS {
        let err = |e| classify(path, "migrate the schema", e);
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        // Re-read inside the write lock: another process may have migrated meanwhile.
        let current: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(err)?;
        if current >= m.version {
            continue;
        }
        tx.execute_batch(m.sql).map_err(err)?;
        tx.execute(
            "INSERT INTO migrations (version, description, applied_ms) VALUES (?1, ?2, ?3)",
            rusqlite::params![m.version, m.description, now_ms()],
        )
        .map_err(err)?;
        // PRAGMAs take no bound parameters; both values are compile-time integers.
        tx.execute_batch(&format!(
            "PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {};",
            m.version
        ))
        .map_err(err)?;
        tx.commit().map_err(err)?;
    }
    Ok(())
}

/// Pairwise review sets (`nmb review create --mode pairwise`): the second answer of each item (the first is the
/// item's own `review_items` row, shown as A), and the reviewers' votes, appended as grades are.
const V14_PAIRWISE: &str = r#"
CREATE TABLE review_pairs (
    set_id       TEXT NOT NULL,
    item_no      INTEGER NOT NULL,
    run_id       TEXT NOT NULL REFERENCES runs (run_id),
    sample_index INTEGER NOT NULL,
    PRIMARY KEY (set_id, item_no),
    FOREIGN KEY (set_id, item_no) REFERENCES review_items (set_id, item_no)
);
CREATE TABLE review_votes (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    set_id     TEXT NOT NULL,
    reviewer   TEXT NOT NULL,
    item_no    INTEGER NOT NULL,
    created_ms INTEGER NOT NULL,
    choice     TEXT NOT NULL CHECK (choice IN ('a', 'b', 'tie', 'neither')),
    comment    TEXT,
    FOREIGN KEY (set_id, reviewer, item_no) REFERENCES review_assignments (set_id, reviewer, item_no)
);
CREATE INDEX review_votes_latest ON review_votes (set_id, reviewer, item_no, id);
"#;
