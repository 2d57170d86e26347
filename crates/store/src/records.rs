//! Writing what happened: prompts and images (once each), API calls with their answers, cache hits.
//!
//! Every public write here is one immediate transaction that is committed before the call returns.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::db::{args, scalar, Db, DbResult};
use crate::error::{Result, StoreError};
use crate::keys::{canonical_json_str, now_ms};
use crate::limits::{self, OutOfRange};
use crate::{Store, WriteError};

/// The error classes nmb's scheduler produces. The store accepts any lower-case snake_case class, so a new
/// class elsewhere does not need a store change; this list is for documentation and reports.
pub const KNOWN_ERROR_CLASSES: &[&str] = &[
    "rate_limit",
    "server_error",
    "network",
    "timeout",
    "malformed_response",
    "refusal",
    "context_length",
    "unsupported_input",
    "auth",
    "client_error",
    "other",
    "no_answer",
    "response_too_large",
];

/// Image bytes to store, keyed by the SHA-256 of the bytes (lower-case hex).
#[derive(Debug, Clone, Copy)]
pub struct ImageInput<'a> {
    pub sha256: &'a str,
    pub mime: &'a str,
    pub bytes: &'a [u8],
}

/// Why a call or one of its choices failed. `class` is one of [`KNOWN_ERROR_CLASSES`] (or another snake_case
/// word); `message` must not contain secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorInfo<'a> {
    pub class: &'a str,
    pub message: &'a str,
}

/// One API call (all its retries together) for one turn of one task.
#[derive(Debug, Clone, Copy)]
pub struct CallRecord<'a> {
    pub run_id: &'a str,
    pub task_id: &'a str,
    pub turn_index: u32,
    /// Hash of the rendered conversation; the prompt must have been stored with [`Store::put_prompt`].
    pub prompt_hash: &'a str,
    /// `BACKEND:MODEL[@BASE_URL]`.
    pub model: &'a str,
    /// Decoding parameters as JSON; canonicalised before storing and hashing.
    pub params_json: &'a str,
    pub template_id: &'a str,
    pub template_hash: &'a str,
    /// `None` when the call succeeded.
    pub error: Option<ErrorInfo<'a>>,
    pub attempts: u32,
    /// The backend's raw response body (JSON text), stored once however many choices it holds.
    pub raw: Option<&'a str>,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    /// Of `tokens_out`, the reasoning; of `tokens_in`, those read from and written to a prompt cache.
    pub tokens: TokenDetail,
    pub latency_ms: Option<u64>,
    pub started_ms: i64,
    pub finished_ms: i64,
    /// The batch ([`crate::BatchRecord`]) the call was answered in; `None` for a call sent on its own.
    pub batch_id: Option<&'a str>,
}

/// What a call's tokens held besides the answer and the prompt: reasoning (part of the output) and a prompt
/// cache's reads and writes (part of the input). `None` where the API reported nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TokenDetail {
    pub reasoning: Option<u64>,
    pub cached_in: Option<u64>,
    pub cache_write: Option<u64>,
}

impl TokenDetail {
    /// Nothing reported.
    pub fn is_empty(&self) -> bool {
        *self == TokenDetail::default()
    }
}

/// What one sample got from a call. A call made with `n = 5` has five choices, sample indices 0..5.
#[derive(Debug, Clone, Copy)]
pub struct ChoiceRecord<'a> {
    pub sample_index: u32,
    /// Position of this answer in the raw body's list of choices.
    pub choice_index: u32,
    /// The extracted answer; required when neither the call nor the choice failed.
    pub text: Option<&'a str>,
    /// A reasoning model's thinking before the answer, kept apart from it.
    pub thinking: Option<&'a str>,
    /// Why the answer ended, as the API said it (`stop`, `length`, ...); `None` when it gave none.
    pub finish_reason: Option<&'a str>,
    /// A failure of this choice only (for example one choice stopped by a content filter). When the call
    /// failed, every choice fails with the call's error unless it names its own.
    pub error: Option<ErrorInfo<'a>>,
    /// This turn is the task's last: a successful answer completes the sample.
    pub final_turn: bool,
}

/// A stored successful answer that can stand in for a new request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CachedResponse {
    pub cache_key: String,
    pub call_id: i64,
    pub choice_index: u32,
    /// The run whose call produced the answer.
    pub origin_run_id: String,
    pub text: String,
    /// The thinking stored with the answer, which a cache hit keeps too.
    pub thinking: Option<String>,
    /// The finish reason stored with the answer, which a cache hit keeps too.
    pub finish_reason: Option<String>,
    pub tokens_in: Option<u64>,
    pub tokens_out: Option<u64>,
    pub latency_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SampleStatus {
    Pending,
    Ok,
    Errored,
}

impl SampleStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SampleStatus::Pending => "pending",
            SampleStatus::Ok => "ok",
            SampleStatus::Errored => "errored",
        }
    }

    pub fn parse(s: &str) -> Option<SampleStatus> {
        match s {
            "pending" => Some(SampleStatus::Pending),
            "ok" => Some(SampleStatus::Ok),
            "errored" => Some(SampleStatus::Errored),
            _ => None,
        }
    }
}

/// Where one sample stands (for deciding what a resumed run still has to do).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SampleState {
    pub task_id: String,
    pub sample_index: u32,
    pub status: SampleStatus,
    /// Turns answered successfully so far.
    pub turns_done: u32,
    pub error_class: Option<String>,
}

/// The outcome of one turn for one sample, as written to `turns` and folded into `samples`.
struct TurnWrite<'a> {
    run_id: &'a str,
    task_id: &'a str,
    sample_index: u32,
    turn_index: u32,
    cache_key: &'a [u8],
    call_id: i64,
    choice_index: u32,
    error: Option<ErrorInfo<'a>>,
    text: Option<&'a str>,
    thinking: Option<&'a str>,
    finish_reason: Option<&'a str>,
    cached: bool,
    final_turn: bool,
}

impl Store {
    /// Stores one image unless an image with that hash is already stored. Returns whether it was new. The
    /// declared hash is checked against the bytes before anything is written.
    pub fn put_image(&self, image: &ImageInput<'_>) -> Result<bool> {
        self.write("store an image", |db| self.insert_image(db, image))
    }

    /// Stores a rendered prompt (a JSON conversation whose images are referenced by sha256) and its images, each
    /// once across all runs. Returns whether the prompt was new.
    pub fn put_prompt(
        &self,
        prompt_hash: &str,
        body_json: &str,
        images: &[ImageInput<'_>],
    ) -> Result<bool> {
        // The usual case (every sample after the first) needs no write lock: a stored prompt was stored together
        // with its images, and its hash covers their hashes.
        if self.has_prompt(prompt_hash)? {
            return Ok(false);
        }
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(body_json) {
            return Err(self.invalid("prompt body", format!("prompt {prompt_hash}: {e}")));
        }
        let body = crate::packed::pack(body_json);
        self.write("store a prompt", |db| {
            for image in images {
                self.insert_image(db, image)?;
            }
            // Another writer may have stored it meanwhile; the first one wins.
            let added = db.exec(
                "INSERT INTO prompts (prompt_hash, created_ms, body) VALUES (?1, ?2, ?3)
                 ON CONFLICT (prompt_hash) DO NOTHING",
                args![prompt_hash, now_ms(), body.as_slice()],
            )?;
            Ok(added == 1)
        })
    }

    pub fn has_prompt(&self, prompt_hash: &str) -> Result<bool> {
        self.read("look up a prompt", |db| {
            Ok(scalar(
                db,
                "SELECT EXISTS (SELECT 1 FROM prompts WHERE prompt_hash = ?1)",
                args![prompt_hash],
            )?)
        })
    }

    /// Creates `pending` rows for every planned sample: `(task_id, number of samples)`. Existing rows are left
    /// alone, so calling it again on resume is harmless. Returns how many rows were added.
    pub fn plan_samples(&self, run_id: &str, tasks: &[(&str, u32)]) -> Result<u64> {
        self.write("plan samples", |db| {
            self.require_run(db, run_id)?;
            let now = now_ms();
            let mut added = 0u64;
            for (task_id, n) in tasks {
                for i in 0..*n {
                    added += db.exec(
                        "INSERT INTO samples (run_id, task_id, sample_index, status, created_ms, updated_ms)
                         VALUES (?1, ?2, ?3, 'pending', ?4, ?4) ON CONFLICT DO NOTHING",
                        args![run_id, *task_id, i, now],
                    )?;
                }
            }
            Ok(added)
        })
    }

    /// Records one API call and what each of its choices gave each sample, committed before returning.
    /// Returns the call's id.
    pub fn record_call(&self, call: &CallRecord<'_>, choices: &[ChoiceRecord<'_>]) -> Result<i64> {
        self.record_call_from(call, choices, None)
    }

    /// [`Store::record_call`], also noting which replica the call went to (the one that answered, if it
    /// succeeded): its base URL, as `nmb_requests::replica_name` gives it, without credentials or query string.
    /// It is not part of the call's identity: the cache key and the model are the same on every replica.
    pub fn record_call_from(
        &self,
        call: &CallRecord<'_>,
        choices: &[ChoiceRecord<'_>],
        replica: Option<&str>,
    ) -> Result<i64> {
        self.check_call(call, choices)?;
        let params = canonical_json_str(call.params_json);
        self.write("record a call", |db| {
            self.require_run(db, call.run_id)?;
            let prompt_id = self.require_prompt(db, call.prompt_hash)?;
            let context_id = intern_context(db, call, &params)?;
            let call_id = insert_call(db, call, replica, prompt_id, context_id, choices.len())?;
            for choice in choices {
                let key = crate::keys::cache_key_bytes(
                    call.model,
                    &params,
                    call.prompt_hash,
                    choice.sample_index,
                );
                write_turn(
                    db,
                    &TurnWrite {
                        run_id: call.run_id,
                        task_id: call.task_id,
                        sample_index: choice.sample_index,
                        turn_index: call.turn_index,
                        cache_key: &key,
                        call_id,
                        choice_index: choice.choice_index,
                        error: choice.error.or(call.error),
                        text: choice.text,
                        thinking: choice.thinking,
                        finish_reason: choice.finish_reason,
                        cached: false,
                        final_turn: choice.final_turn,
                    },
                )?;
            }
            Ok(call_id)
        })
    }

    /// The stored successful answer for `cache_key`, from any run. Errored answers never count.
    pub fn lookup_cache(&self, cache_key: &str) -> Result<Option<CachedResponse>> {
        let key = self.key_bytes(cache_key)?;
        self.read("look up the response cache", |db| {
            let Some(r) = db.query_opt(
                "SELECT t.call_id, t.choice_index, t.text, c.run_id, c.tokens_in, c.tokens_out, c.latency_ms,
                        t.thinking, t.finish_reason
                 FROM turns t JOIN calls c ON c.id = t.call_id
                 WHERE t.cache_key = ?1 AND t.status = 'ok'
                 ORDER BY t.call_id, t.id LIMIT 1",
                args![key.as_slice()],
            )?
            else {
                return Ok(None);
            };
            Ok(Some(CachedResponse {
                cache_key: cache_key.to_string(),
                call_id: r.get(0)?,
                choice_index: r.get(1)?,
                text: r.get::<Option<String>>(2)?.unwrap_or_default(),
                origin_run_id: r.get(3)?,
                tokens_in: opt_u64(r.get(4)?),
                tokens_out: opt_u64(r.get(5)?),
                latency_ms: opt_u64(r.get(6)?),
                thinking: r.get(7)?,
                finish_reason: r.get(8)?,
            }))
        })
    }

    /// Records that a sample's turn reused a stored answer instead of sending a request. Returns `false` when
    /// this run already holds exactly that answer for that turn (a resumed run revisiting its own work), which
    /// is not counted as a cache hit.
    pub fn record_cache_hit(
        &self,
        run_id: &str,
        task_id: &str,
        sample_index: u32,
        turn_index: u32,
        hit: &CachedResponse,
        final_turn: bool,
    ) -> Result<bool> {
        let key = self.key_bytes(&hit.cache_key)?;
        self.write("record a cache hit", |db| {
            self.require_run(db, run_id)?;
            let existing = db.query_opt(
                "SELECT call_id, choice_index, status FROM turns
                 WHERE run_id = ?1 AND task_id = ?2 AND sample_index = ?3 AND turn_index = ?4",
                args![run_id, task_id, sample_index, turn_index],
            )?;
            let already = match existing {
                Some(r) => {
                    r.get::<i64>(0)? == hit.call_id
                        && r.get::<u32>(1)? == hit.choice_index
                        && r.get::<String>(2)? == "ok"
                }
                None => false,
            };
            if already {
                update_sample_after_ok(db, run_id, task_id, sample_index, turn_index, final_turn)?;
                return Ok(false);
            }
            write_turn(
                db,
                &TurnWrite {
                    run_id,
                    task_id,
                    sample_index,
                    turn_index,
                    cache_key: &key,
                    call_id: hit.call_id,
                    choice_index: hit.choice_index,
                    error: None,
                    text: Some(&hit.text),
                    thinking: hit.thinking.as_deref(),
                    finish_reason: hit.finish_reason.as_deref(),
                    cached: true,
                    final_turn,
                },
            )?;
            Ok(true)
        })
    }

    /// Every sample of a run with its status, ordered by task and sample index.
    pub fn sample_states(&self, run_id: &str) -> Result<Vec<SampleState>> {
        let rows = self.read("list samples", |db| {
            Ok(db.query(
                "SELECT task_id, sample_index, status, turns_done, error_class FROM samples
                 WHERE run_id = ?1 ORDER BY task_id, sample_index",
                args![run_id],
            )?)
        })?;
        rows.iter()
            .map(|r| {
                let decode = |e| self.err("list samples", e);
                Ok(SampleState {
                    status: self.sample_status(&r.get::<String>(2).map_err(decode)?)?,
                    task_id: r.get(0).map_err(decode)?,
                    sample_index: r.get(1).map_err(decode)?,
                    turns_done: r.get(3).map_err(decode)?,
                    error_class: r.get(4).map_err(decode)?,
                })
            })
            .collect()
    }

    fn key_bytes(&self, cache_key: &str) -> Result<[u8; 32]> {
        let mut out = [0u8; 32];
        hex::decode_to_slice(cache_key, &mut out).map_err(|e| {
            self.invalid(
                "cache_key",
                format!("{cache_key:?} is not a key from cache_key() (64 hex digits): {e}"),
            )
        })?;
        Ok(out)
    }

    pub(crate) fn sample_status(&self, s: &str) -> Result<SampleStatus> {
        SampleStatus::parse(s)
            .ok_or_else(|| self.invalid("samples.status", format!("unknown status {s:?}")))
    }

    pub(crate) fn insert_image(
        &self,
        db: &mut dyn Db,
        image: &ImageInput<'_>,
    ) -> Result<bool, WriteError> {
        let known: bool = scalar(
            db,
            "SELECT EXISTS (SELECT 1 FROM images WHERE sha256 = ?1)",
            args![image.sha256],
        )?;
        if known {
            return Ok(false);
        }
        let actual = hex::encode(Sha256::digest(image.bytes));
        if actual != image.sha256 {
            return Err(StoreError::ImageHashMismatch {
                path: self.path.clone(),
                declared: image.sha256.to_string(),
                actual,
            }
            .into());
        }
        let added = db.exec(
            "INSERT INTO images (sha256, mime, size, created_ms, bytes) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (sha256) DO NOTHING",
            args![
                image.sha256,
                image.mime,
                image.bytes.len() as i64,
                now_ms(),
                image.bytes
            ],
        )?;
        Ok(added == 1)
    }

    pub(crate) fn require_run(&self, db: &mut dyn Db, run_id: &str) -> Result<(), WriteError> {
        let known: bool = scalar(
            db,
            "SELECT EXISTS (SELECT 1 FROM runs WHERE run_id = ?1)",
            args![run_id],
        )?;
        if known {
            Ok(())
        } else {
            Err(StoreError::UnknownRun {
                path: self.path.clone(),
                run_id: run_id.to_string(),
            }
            .into())
        }
    }

    fn require_prompt(&self, db: &mut dyn Db, prompt_hash: &str) -> Result<i64, WriteError> {
        let id: Option<i64> = scalar(
            db,
            "SELECT id FROM prompts WHERE prompt_hash = ?1",
            args![prompt_hash],
        )?;
        if let Some(id) = id {
            Ok(id)
        } else {
            Err(self
                .invalid(
                    "prompt_hash",
                    format!(
                        "prompt {prompt_hash} is not stored; call put_prompt before record_call"
                    ),
                )
                .into())
        }
    }
    fn check_call(&self, call: &CallRecord<'_>, choices: &[ChoiceRecord<'_>]) -> Result<()> {
        let at = || format!("call for task {} turn {}", call.task_id, call.turn_index);
        if choices.is_empty() {
            return Err(self.invalid(
                "choices",
                format!(
                    "{}: a call must name the samples it answered (or failed) for",
                    at()
                ),
            ));
        }
        let mut seen = HashSet::new();
        for c in choices {
            if !seen.insert(c.sample_index) {
                return Err(self.invalid(
                    "choices",
                    format!("{}: sample index {} appears twice", at(), c.sample_index),
                ));
            }
            let failed = c.error.is_some() || call.error.is_some();
            if !failed && c.text.is_none() {
                return Err(self.invalid(
                    "choices",
                    format!(
                        "{}: sample {} succeeded but has no text",
                        at(),
                        c.sample_index
                    ),
                ));
            }
        }
        self.check_numbers(call)
            .map_err(|e| self.invalid("calls", format!("{}: {e}", at())))?;
        for e in call
            .error
            .iter()
            .chain(choices.iter().filter_map(|c| c.error.as_ref()))
        {
            if !valid_class(e.class) {
                return Err(self.invalid(
                    "error_class",
                    format!("{}: {:?} is not a snake_case error class", at(), e.class),
                ));
            }
        }
        Ok(())
    }
}

impl Store {
    /// Every number of a call within its range ([`crate::limits`]).
    fn check_numbers(&self, call: &CallRecord<'_>) -> Result<(), OutOfRange> {
        let tokens = [
            ("tokens_in", call.tokens_in),
            ("tokens_out", call.tokens_out),
            ("tokens_reasoning", call.tokens.reasoning),
            ("tokens_cached_in", call.tokens.cached_in),
            ("tokens_cache_write", call.tokens.cache_write),
        ];
        for (field, value) in tokens {
            value.map_or(Ok(()), |v| limits::check_tokens(field, v))?;
        }
        call.latency_ms
            .map_or(Ok(()), |v| limits::check_latency_ms("latency_ms", v))
    }
}

fn valid_class(class: &str) -> bool {
    !class.is_empty()
        && class.len() <= 40
        && class
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

fn intern_context(db: &mut dyn Db, call: &CallRecord<'_>, params: &str) -> DbResult<i64> {
    let key = args![call.model, params, call.template_id, call.template_hash];
    db.exec(
        "INSERT INTO contexts (model, params, template_id, template_hash) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT DO NOTHING",
        key,
    )?;
    scalar(
        db,
        "SELECT id FROM contexts WHERE model = ?1 AND params = ?2 AND template_id = ?3 AND template_hash = ?4",
        key,
    )
}

fn insert_call(
    db: &mut dyn Db,
    call: &CallRecord<'_>,
    replica: Option<&str>,
    prompt_id: i64,
    context_id: i64,
    n_choices: usize,
) -> DbResult<i64> {
    scalar(
        db,
        "INSERT INTO calls (run_id, task_id, turn_index, prompt_id, context_id, n_choices, status,
                            error_class, error_message, attempts, tokens_in, tokens_out, latency_ms,
                            started_ms, finished_ms, raw, replica, tokens_reasoning, tokens_cached_in,
                            tokens_cache_write, batch_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20,
                 ?21)
         RETURNING id",
        args![
            call.run_id,
            call.task_id,
            call.turn_index,
            prompt_id,
            context_id,
            n_choices as i64,
            if call.error.is_some() {
                "errored"
            } else {
                "ok"
            },
            call.error.map(|e| e.class),
            call.error.map(|e| e.message),
            call.attempts,
            sql_u64(call.tokens_in),
            sql_u64(call.tokens_out),
            sql_u64(call.latency_ms),
            call.started_ms,
            call.finished_ms,
            call.raw.map(crate::packed::pack),
            replica,
            sql_u64(call.tokens.reasoning),
            sql_u64(call.tokens.cached_in),
            sql_u64(call.tokens.cache_write),
            call.batch_id,
        ],
    )
}

/// Writes (or replaces) one sample's turn and updates the sample. A new answer at turn k makes any later turns
/// of that sample stale, so they are removed.
fn write_turn(db: &mut dyn Db, t: &TurnWrite<'_>) -> DbResult<()> {
    let now = now_ms();
    ensure_sample(db, t.run_id, t.task_id, t.sample_index)?;
    db.exec(
        "INSERT INTO turns (run_id, task_id, sample_index, turn_index, cache_key, call_id, choice_index,
                            status, cached, recorded_ms, error_class, error_message, text, thinking,
                            finish_reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
         ON CONFLICT (run_id, task_id, sample_index, turn_index) DO UPDATE SET
             cache_key = excluded.cache_key, call_id = excluded.call_id,
             choice_index = excluded.choice_index, status = excluded.status, cached = excluded.cached,
             recorded_ms = excluded.recorded_ms, error_class = excluded.error_class,
             error_message = excluded.error_message, text = excluded.text,
             thinking = excluded.thinking, finish_reason = excluded.finish_reason",
        args![
            t.run_id,
            t.task_id,
            t.sample_index,
            t.turn_index,
            t.cache_key,
            t.call_id,
            t.choice_index,
            if t.error.is_some() { "errored" } else { "ok" },
            t.cached,
            now,
            t.error.map(|e| e.class),
            t.error.map(|e| e.message),
            t.text,
            t.thinking,
            t.finish_reason,
        ],
    )?;
    db.exec(
        "DELETE FROM turns WHERE run_id = ?1 AND task_id = ?2 AND sample_index = ?3 AND turn_index > ?4",
        args![t.run_id, t.task_id, t.sample_index, t.turn_index],
    )?;
    match t.error {
        None => update_sample_after_ok(
            db,
            t.run_id,
            t.task_id,
            t.sample_index,
            t.turn_index,
            t.final_turn,
        ),
        Some(e) => {
            db.exec(
                "UPDATE samples SET status = 'errored', turns_done = ?4, error_class = ?5,
                                    error_message = ?6, updated_ms = ?7
                 WHERE run_id = ?1 AND task_id = ?2 AND sample_index = ?3",
                args![
                    t.run_id,
                    t.task_id,
                    t.sample_index,
                    t.turn_index,
                    e.class,
                    e.message,
                    now
                ],
            )?;
            Ok(())
        }
    }
}

fn ensure_sample(db: &mut dyn Db, run_id: &str, task_id: &str, sample_index: u32) -> DbResult<()> {
    db.exec(
        "INSERT INTO samples (run_id, task_id, sample_index, status, created_ms, updated_ms)
         VALUES (?1, ?2, ?3, 'pending', ?4, ?4) ON CONFLICT DO NOTHING",
        args![run_id, task_id, sample_index, now_ms()],
    )?;
    Ok(())
}

fn update_sample_after_ok(
    db: &mut dyn Db,
    run_id: &str,
    task_id: &str,
    sample_index: u32,
    turn_index: u32,
    final_turn: bool,
) -> DbResult<()> {
    ensure_sample(db, run_id, task_id, sample_index)?;
    db.exec(
        "UPDATE samples SET status = ?4, turns_done = ?5, error_class = NULL, error_message = NULL,
                            updated_ms = ?6
         WHERE run_id = ?1 AND task_id = ?2 AND sample_index = ?3",
        args![
            run_id,
            task_id,
            sample_index,
            if final_turn { "ok" } else { "pending" },
            i64::from(turn_index) + 1,
            now_ms()
        ],
    )?;
    Ok(())
}
/// SQLite integers are signed; the numbers stored through this are checked against [`crate::limits`] first,
/// far below 2^63.
fn sql_u64(v: Option<u64>) -> Option<i64> {
    v.map(|x| i64::try_from(x).unwrap_or(i64::MAX))
}

pub(crate) fn opt_u64(v: Option<i64>) -> Option<u64> {
    v.map(|x| u64::try_from(x).unwrap_or(0))
}
