//! Copying runs from one store to another (`nmb store copy`): SQLite to PostgreSQL, PostgreSQL to SQLite, or
//! between two stores of one engine.
//!
//! What a copied run takes along: its row (id, times, status, configuration hash and manifest text unchanged),
//! its samples, its calls with their raw bodies, prompts and contexts, every sample's turns, its score reports
//! (the report JSON byte for byte) with their per-sample rows, and the images its prompts reference. Reviews
//! are not stored yet (no table holds them); when they are, they belong here too.
//!
//! What stays behind: sample leases and the other state workers coordinate through (it names workers of the
//! source store; a copied sample is free), and the images no copied prompt references. Renders (the cross-run
//! cache of rendered volumes) belong to no run, so they are copied, with their images, only when every run is.
//!
//! Row ids (prompts, contexts, calls, turns) belong to each database: the target gives new ones and every
//! reference is rewritten. Prompts and images are found again by their hashes and contexts by their tuple, so
//! nothing the target already holds is stored twice. Compressed columns keep their bytes; plain-text bodies of
//! older SQLite stores are compressed on the way, so the text read back is the same.
//!
//! A cached turn points at the call that answered it, which may belong to another run; that run is copied too
//! (listed in [`CopyStats::cache_origin_run_ids`]), before the runs that use it. So are the runs of the judges
//! that scored a copied run ([`CopyStats::judge_run_ids`]): scoring it again in the target then finds their
//! verdicts instead of asking the judges again.
//!
//! Each run is written in one target transaction, so a failure leaves no half-copied run. A run the target
//! already holds with the same configuration is skipped, so copying again is harmless (but a run scored again
//! in the source after it was copied keeps its older reports in the target); with another configuration it
//! is an error, raised before anything is written.
//!
//! Copy finished runs: a run still being written may have moved on between the reads of its rows. Where several
//! runs hold an answer under one cache key, `lookup_cache` returns the one with the smallest call id; runs are
//! copied in the order of their first calls, so this holds across the copy unless their calls interleaved.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::db::{args, scalar, Db, FromValue, Row, Value};
use crate::error::{Result, StoreError};
use crate::{Store, WriteError};

/// What a copy did. Prompts, contexts and images count only the ones the target did not hold yet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CopyStats {
    /// Runs written to the target (cache origins included).
    pub runs: u64,
    /// Runs the target already held with the same configuration: left as they were.
    pub runs_skipped: u64,
    /// Runs not asked for, copied (or skipped) because runs asked for took cached answers from them.
    pub runs_added_for_cache_hits: u64,
    /// Runs not asked for, copied (or skipped) because they hold the calls of the judges that scored runs
    /// asked for: scoring again in the target then asks those judges nothing new.
    pub runs_added_for_judges: u64,
    pub samples: u64,
    pub calls: u64,
    pub turns: u64,
    pub prompts: u64,
    pub contexts: u64,
    pub images: u64,
    pub score_reports: u64,
    pub sample_scores: u64,
    /// Views of rendered volumes (only when every run is copied).
    pub renders: u64,
    pub copied_run_ids: Vec<String>,
    pub skipped_run_ids: Vec<String>,
    pub cache_origin_run_ids: Vec<String>,
    pub judge_run_ids: Vec<String>,
}

const RUN_COLUMNS: &[&str] = &[
    "run_id",
    "created_ms",
    "updated_ms",
    "status",
    "config_hash",
    "manifest",
];
/// Without `lease_owner` and `lease_until_ms`.
const SAMPLE_COLUMNS: &[&str] = &[
    "run_id",
    "task_id",
    "sample_index",
    "status",
    "turns_done",
    "error_class",
    "error_message",
    "created_ms",
    "updated_ms",
];
/// Without `id`, which the target gives.
const CALL_COLUMNS: &[&str] = &[
    "run_id",
    "task_id",
    "turn_index",
    "prompt_id",
    "context_id",
    "n_choices",
    "status",
    "error_class",
    "error_message",
    "attempts",
    "tokens_in",
    "tokens_out",
    "latency_ms",
    "started_ms",
    "finished_ms",
    "raw",
    "replica",
    "tokens_reasoning",
    "tokens_cached_in",
    "tokens_cache_write",
    "batch_id",
];
const TURN_COLUMNS: &[&str] = &[
    "run_id",
    "task_id",
    "sample_index",
    "turn_index",
    "cache_key",
    "call_id",
    "choice_index",
    "status",
    "cached",
    "recorded_ms",
    "error_class",
    "error_message",
    "text",
    "thinking",
    "finish_reason",
];
const REPORT_COLUMNS: &[&str] = &[
    "run_id",
    "config_hash",
    "created_ms",
    "updated_ms",
    "schema_version",
    "report",
    "headline",
];
const SCORE_COLUMNS: &[&str] = &[
    "run_id",
    "config_hash",
    "task_id",
    "sample_index",
    "case_id",
    "family",
    "level",
    "status",
    "correct",
    "matched_rank",
    "match_method",
    "rubric_overall",
    "bertscore_f",
    "error_category",
    "error_source",
    "disease_group",
];
const PROMPT_COLUMNS: &[&str] = &["prompt_hash", "created_ms", "body"];
const CONTEXT_COLUMNS: &[&str] = &["model", "params", "template_id", "template_hash"];
const IMAGE_COLUMNS: &[&str] = &["sha256", "mime", "size", "created_ms", "bytes"];
const RENDER_COLUMNS: &[&str] = &[
    "render_key",
    "idx",
    "sha256",
    "width",
    "height",
    "label",
    "created_ms",
];

impl Store {
    /// Copies the runs `run_ids` (every run when empty) with all they need into `to`: samples, calls, raw
    /// responses, prompts, images and score reports (byte for byte), and the runs their cached answers and
    /// their judges' verdicts came from. A run `to` already holds with the same configuration is skipped, one
    /// with another is an error before anything is written. Leases are not copied; renders only with every run.
    pub fn copy_runs_to(&self, to: &Store, run_ids: &[String]) -> Result<CopyStats> {
        if std::ptr::eq(self, to) {
            return Err(self.invalid("target", "cannot copy a store into itself".into()));
        }
        let plan = self.copy_plan(run_ids)?;
        let mut copier = Copier::new(self, to);
        copier.check_target(&plan)?;
        for group in plan.groups() {
            copier.copy_group(&group, &plan)?;
        }
        if run_ids.is_empty() {
            copier.copy_renders()?;
        }
        Ok(copier.stats)
    }

    /// The runs to copy: the ones asked for (all when none is) and, transitively, the runs their cached
    /// answers came from and their judges' runs.
    fn copy_plan(&self, run_ids: &[String]) -> Result<Plan> {
        let runs = self.read("list runs to copy", |db| {
            Ok(db.query("SELECT run_id, manifest FROM runs ORDER BY run_id", &[])?)
        })?;
        let mut judges: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut known = BTreeSet::new();
        for row in &runs {
            let run_id: String = self.source(row, 0, "list runs to copy")?;
            let manifest: String = self.source(row, 1, "list runs to copy")?;
            if let Some(scored) = judged_run(&manifest) {
                judges.entry(scored).or_default().push(run_id.clone());
            }
            known.insert(run_id);
        }
        if let Some(unknown) = run_ids.iter().find(|r| !known.contains(*r)) {
            return Err(StoreError::UnknownRun {
                path: self.path.clone(),
                run_id: unknown.clone(),
            });
        }
        let asked: BTreeSet<&String> = run_ids.iter().collect();
        let mut plan = Plan::default();
        let mut todo: Vec<String> = if run_ids.is_empty() {
            known.into_iter().collect()
        } else {
            run_ids.to_vec()
        };
        while let Some(run_id) = todo.pop() {
            if plan.deps.contains_key(&run_id) {
                continue;
            }
            let (origins, first_call) = self.cache_origins(&run_id)?;
            let judged_by = judges.get(&run_id).cloned().unwrap_or_default();
            let new = |r: &&String| !asked.is_empty() && !asked.contains(*r);
            plan.for_cache.extend(origins.iter().filter(new).cloned());
            plan.for_judges
                .extend(judged_by.iter().filter(new).cloned());
            todo.extend(origins.iter().chain(&judged_by).cloned());
            plan.first_call.insert(run_id.clone(), first_call);
            plan.deps.insert(run_id, origins);
        }
        plan.for_cache.retain(|r| !plan.for_judges.contains(r));
        Ok(plan)
    }

    /// The other runs whose calls this run's cached turns point at, and this run's first call id.
    fn cache_origins(&self, run_id: &str) -> Result<(BTreeSet<String>, i64)> {
        self.read("plan a copy", |db| {
            let origins = db
                .query(
                    "SELECT DISTINCT c.run_id FROM turns t JOIN calls c ON c.id = t.call_id
                     WHERE t.run_id = ?1 AND c.run_id <> ?1",
                    args![run_id],
                )?
                .iter()
                .map(|r| r.get::<String>(0))
                .collect::<Result<BTreeSet<_>, _>>()?;
            let first: Option<i64> = scalar(
                db,
                "SELECT min(id) FROM calls WHERE run_id = ?1",
                args![run_id],
            )?;
            Ok((origins, first.unwrap_or(i64::MAX)))
        })
    }

    /// A column of a row this store returned, a decoding failure blamed on this store.
    fn source<T: FromValue>(&self, row: &Row, column: usize, op: &'static str) -> Result<T> {
        row.get(column).map_err(|e| self.err(op, e))
    }
}

/// For a judge run's manifest, the run it scored. Read from the JSON itself, so that a manifest this build
/// cannot fully parse does not stop a copy.
fn judged_run(manifest: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(manifest).ok()?;
    if v.get("kind")?.as_str()? != "judge" {
        return None;
    }
    Some(v.get("scored_run_id")?.as_str()?.to_string())
}

/// The runs of a copy and which runs' calls each one's cached turns point at.
#[derive(Default)]
struct Plan {
    deps: BTreeMap<String, BTreeSet<String>>,
    /// The smallest call id of each run in the source (`i64::MAX` without calls): the order runs are copied in.
    first_call: BTreeMap<String, i64>,
    /// Runs not asked for that come along: for the cached answers of runs asked for, or as their judges.
    for_cache: BTreeSet<String>,
    for_judges: BTreeSet<String>,
}

impl Plan {
    /// The runs in groups, one transaction each, every group after those whose calls it points at, and
    /// otherwise in the order of their first calls. Runs that point at each other (runs written at the same
    /// time) share a group.
    fn groups(&self) -> Vec<Vec<String>> {
        let mut pending: Vec<BTreeSet<String>> = self
            .deps
            .keys()
            .map(|r| BTreeSet::from([r.clone()]))
            .collect();
        let mut done = BTreeSet::new();
        let mut out = Vec::new();
        while let Some(first) = (0..pending.len()).min_by_key(|&i| self.order_key(&pending[i])) {
            // Follow what the earliest group waits for, to a group that waits for nothing or round a loop.
            let mut path = vec![first];
            loop {
                let last = *path.last().expect("the path starts with a group");
                let Some(next) = self.waits_for(&pending[last], &done) else {
                    let group = pending.remove(last);
                    done.extend(group.iter().cloned());
                    out.push(group.into_iter().collect());
                    break;
                };
                let j = pending
                    .iter()
                    .position(|g| g.contains(next))
                    .expect("every run of the plan is in a group");
                if let Some(at) = path.iter().position(|&i| i == j) {
                    merge(&mut pending, path.split_off(at));
                    break;
                }
                path.push(j);
            }
        }
        out
    }

    /// A run outside `group`, not copied yet, whose calls the group's cached turns point at.
    fn waits_for<'p>(
        &'p self,
        group: &BTreeSet<String>,
        done: &BTreeSet<String>,
    ) -> Option<&'p String> {
        group
            .iter()
            .flat_map(|r| &self.deps[r])
            .find(|d| !group.contains(*d) && !done.contains(*d))
    }

    fn order_key<'p>(&self, group: &'p BTreeSet<String>) -> (i64, Option<&'p String>) {
        let first = group.iter().map(|r| self.first_call[r]).min();
        (first.unwrap_or(i64::MAX), group.first())
    }
}

/// One run's rows as the source holds them.
struct RunRows {
    run_id: String,
    run: Row,
    samples: Vec<Row>,
    /// With the source's `id` first.
    calls: Vec<Row>,
    turns: Vec<Row>,
    reports: Vec<Row>,
    scores: Vec<Row>,
}

/// The copy in progress: source ids mapped to target ids, and the counts so far.
struct Copier<'a> {
    from: &'a Store,
    to: &'a Store,
    prompts: HashMap<i64, i64>,
    contexts: HashMap<i64, i64>,
    calls: HashMap<i64, i64>,
    skipped: BTreeSet<String>,
    /// Skipped runs whose calls are in `calls`.
    mapped: BTreeSet<String>,
    stats: CopyStats,
}

impl<'a> Copier<'a> {
    fn new(from: &'a Store, to: &'a Store) -> Self {
        Copier {
            from,
            to,
            prompts: HashMap::new(),
            contexts: HashMap::new(),
            calls: HashMap::new(),
            skipped: BTreeSet::new(),
            mapped: BTreeSet::new(),
            stats: CopyStats::default(),
        }
    }

    /// Notes why runs not asked for come along, and sorts out which runs the target already holds before
    /// anything is written: the same configuration is skipped, another one is an error.
    fn check_target(&mut self, plan: &Plan) -> Result<()> {
        self.stats.cache_origin_run_ids = plan.for_cache.iter().cloned().collect();
        self.stats.runs_added_for_cache_hits = plan.for_cache.len() as u64;
        self.stats.judge_run_ids = plan.for_judges.iter().cloned().collect();
        self.stats.runs_added_for_judges = plan.for_judges.len() as u64;
        for run_id in plan.deps.keys() {
            let Some(existing) = config_hash(self.to, run_id)? else {
                continue;
            };
            let incoming = config_hash(self.from, run_id)?.unwrap_or_default();
            if existing != incoming {
                return Err(StoreError::RunConflict {
                    path: self.to.path.clone(),
                    run_id: run_id.clone(),
                    existing,
                    incoming,
                });
            }
            self.skipped.insert(run_id.clone());
        }
        Ok(())
    }

    fn copy_group(&mut self, group: &[String], plan: &Plan) -> Result<()> {
        let mut rows = Vec::new();
        for run_id in group {
            if self.skipped.contains(run_id) {
                self.stats.runs_skipped += 1;
                self.stats.skipped_run_ids.push(run_id.clone());
                continue;
            }
            for origin in &plan.deps[run_id] {
                if self.skipped.contains(origin) && !self.mapped.contains(origin) {
                    self.map_existing_calls(origin)?;
                }
            }
            rows.push(self.read_run(run_id)?);
        }
        if rows.is_empty() {
            return Ok(());
        }
        let to = self.to;
        to.write("copy a run", |db| self.write_runs(db, &rows))?;
        self.stats.runs += rows.len() as u64;
        self.stats
            .copied_run_ids
            .extend(rows.into_iter().map(|r| r.run_id));
        Ok(())
    }

    /// Maps the calls of a run both stores hold (copied earlier), so that cached turns pointing at them can be
    /// linked. Their order, tasks, turns and times must agree, or the two runs are not the same.
    fn map_existing_calls(&mut self, run_id: &str) -> Result<()> {
        let sql = "SELECT id, task_id, turn_index, started_ms, finished_ms FROM calls
                   WHERE run_id = ?1 ORDER BY id";
        let read = |store: &Store| {
            store.read("read a run's calls", |db| Ok(db.query(sql, args![run_id])?))
        };
        let (ours, theirs) = (read(self.from)?, read(self.to)?);
        let same = ours.len() == theirs.len()
            && ours.iter().zip(&theirs).all(|(a, b)| a.0[1..] == b.0[1..]);
        if !same {
            return Err(self.to.invalid(
                "run",
                format!(
                    "run {run_id} is already here but its calls differ from the source's, so the cached \
                     answers other runs took from it cannot be linked; copy into a store without it"
                ),
            ));
        }
        for (a, b) in ours.iter().zip(&theirs) {
            let old: i64 = self.source(a, 0, "map calls")?;
            let new: i64 = b.get(0).map_err(|e| self.to.err("map calls", e))?;
            self.calls.insert(old, new);
        }
        self.mapped.insert(run_id.to_string());
        Ok(())
    }

    /// Reads what the target will need of a run: turns first, then calls and samples, so that every row a
    /// turn refers to was written before it was read.
    fn read_run(&self, run_id: &str) -> Result<RunRows> {
        let select = |cols: &[&str], table: &str, order: &str| {
            format!(
                "SELECT {} FROM {table} WHERE run_id = ?1 ORDER BY {order}",
                cols.join(", ")
            )
        };
        let turns = select(TURN_COLUMNS, "turns", "id");
        let calls = select(&[&["id"], CALL_COLUMNS].concat(), "calls", "id");
        let samples = select(SAMPLE_COLUMNS, "samples", "task_id, sample_index");
        let run = select(RUN_COLUMNS, "runs", "run_id");
        let reports = select(REPORT_COLUMNS, "score_reports", "config_hash");
        let scores = select(
            SCORE_COLUMNS,
            "sample_scores",
            "config_hash, task_id, sample_index",
        );
        self.from.read("read a run to copy", |db| {
            let mut q = |sql: &str| db.query(sql, args![run_id]);
            let (turns, calls, samples) = (q(&turns)?, q(&calls)?, q(&samples)?);
            let run = q(&run)?.into_iter().next();
            let (reports, scores) = (q(&reports)?, q(&scores)?);
            let run = run.ok_or_else(|| StoreError::UnknownRun {
                path: self.from.path.clone(),
                run_id: run_id.to_string(),
            })?;
            Ok(RunRows {
                run_id: run_id.to_string(),
                run,
                samples,
                calls,
                turns,
                reports,
                scores,
            })
        })
    }

    /// Writes a group's runs (one transaction): rows that others refer to first, calls in the source's order.
    fn write_runs(&mut self, db: &mut dyn Db, runs: &[RunRows]) -> Result<(), WriteError> {
        for r in runs {
            db.exec(&insert_sql("runs", RUN_COLUMNS, ""), &r.run.0)?;
            self.stats.samples += insert_all(db, "samples", SAMPLE_COLUMNS, &r.samples)?;
        }
        let mut calls: Vec<&Row> = runs.iter().flat_map(|r| &r.calls).collect();
        calls.sort_by_key(|c| c.get::<i64>(0).unwrap_or(0));
        for call in calls {
            self.write_call(db, call)?;
        }
        for r in runs {
            for turn in &r.turns {
                self.write_turn(db, turn)?;
            }
            self.stats.score_reports +=
                insert_all(db, "score_reports", REPORT_COLUMNS, &r.reports)?;
            self.stats.sample_scores += insert_all(db, "sample_scores", SCORE_COLUMNS, &r.scores)?;
        }
        Ok(())
    }

    fn write_call(&mut self, db: &mut dyn Db, call: &Row) -> Result<(), WriteError> {
        let old_id: i64 = self.source(call, 0, "copy a call")?;
        let mut values = call.0[1..].to_vec();
        let prompt = self.source(call, 1 + col(CALL_COLUMNS, "prompt_id"), "copy a call")?;
        let context = self.source(call, 1 + col(CALL_COLUMNS, "context_id"), "copy a call")?;
        values[col(CALL_COLUMNS, "prompt_id")] = Value::Int(self.prompt(db, prompt)?);
        values[col(CALL_COLUMNS, "context_id")] = Value::Int(self.context(db, context)?);
        let raw = col(CALL_COLUMNS, "raw");
        values[raw] = packed(std::mem::replace(&mut values[raw], Value::Null));
        let new_id: i64 = scalar(
            db,
            &insert_sql("calls", CALL_COLUMNS, "RETURNING id"),
            &values,
        )?;
        self.calls.insert(old_id, new_id);
        self.stats.calls += 1;
        Ok(())
    }

    fn write_turn(&mut self, db: &mut dyn Db, turn: &Row) -> Result<(), WriteError> {
        let at = col(TURN_COLUMNS, "call_id");
        let old: i64 = self.source(turn, at, "copy a turn")?;
        let Some(&new) = self.calls.get(&old) else {
            return Err(self
                .from
                .invalid(
                    "turns.call_id",
                    format!("a turn points at call {old}, which is not part of the copy (was it written during it?)"),
                )
                .into());
        };
        let mut values = turn.0.clone();
        values[at] = Value::Int(new);
        db.exec(&insert_sql("turns", TURN_COLUMNS, ""), &values)?;
        self.stats.turns += 1;
        Ok(())
    }

    /// The target's id for the source's prompt `old`, copying the prompt (and its images) when the target
    /// does not hold its hash yet.
    fn prompt(&mut self, db: &mut dyn Db, old: i64) -> Result<i64, WriteError> {
        if let Some(&id) = self.prompts.get(&old) {
            return Ok(id);
        }
        let row = self.source_row("prompts", PROMPT_COLUMNS, "id = ?1", &Value::Int(old))?;
        let hash: String = self.source(&row, 0, "copy a prompt")?;
        let lookup = "SELECT id FROM prompts WHERE prompt_hash = ?1";
        let id = match scalar::<Option<i64>>(db, lookup, args![hash.as_str()])? {
            Some(id) => id,
            None => {
                self.write_prompt(db, row)?;
                scalar(db, lookup, args![hash.as_str()])?
            }
        };
        self.prompts.insert(old, id);
        Ok(id)
    }

    /// A prompt's images go first: a stored prompt always has its images.
    fn write_prompt(&mut self, db: &mut dyn Db, row: Row) -> Result<(), WriteError> {
        let body = row
            .unpacked(2)
            .map_err(|e| self.from.err("copy a prompt", e))?
            .unwrap_or_default();
        for sha256 in image_refs(&body) {
            self.image(db, &sha256)?;
        }
        let mut values = row.0;
        values[2] = packed(std::mem::replace(&mut values[2], Value::Null));
        let sql = insert_sql(
            "prompts",
            PROMPT_COLUMNS,
            "ON CONFLICT (prompt_hash) DO NOTHING",
        );
        self.stats.prompts += db.exec(&sql, &values)?;
        Ok(())
    }

    fn context(&mut self, db: &mut dyn Db, old: i64) -> Result<i64, WriteError> {
        if let Some(&id) = self.contexts.get(&old) {
            return Ok(id);
        }
        let row = self.source_row("contexts", CONTEXT_COLUMNS, "id = ?1", &Value::Int(old))?;
        let sql = insert_sql("contexts", CONTEXT_COLUMNS, "ON CONFLICT DO NOTHING");
        self.stats.contexts += db.exec(&sql, &row.0)?;
        let id = scalar(
            db,
            "SELECT id FROM contexts
             WHERE model = ?1 AND params = ?2 AND template_id = ?3 AND template_hash = ?4",
            &row.0,
        )?;
        self.contexts.insert(old, id);
        Ok(id)
    }

    /// Copies the image `sha256` unless the target holds it. A hash-like string in a prompt that names no
    /// stored image is not an image reference, and is passed over.
    fn image(&mut self, db: &mut dyn Db, sha256: &str) -> Result<(), WriteError> {
        let known: bool = scalar(
            db,
            "SELECT EXISTS (SELECT 1 FROM images WHERE sha256 = ?1)",
            args![sha256],
        )?;
        if known {
            return Ok(());
        }
        let sql = format!(
            "SELECT {} FROM images WHERE sha256 = ?1",
            IMAGE_COLUMNS.join(", ")
        );
        let Some(row) = self.from.read("read an image to copy", |src| {
            Ok(src.query_opt(&sql, args![sha256])?)
        })?
        else {
            return Ok(());
        };
        let bytes: Vec<u8> = self.source(&row, col(IMAGE_COLUMNS, "bytes"), "copy an image")?;
        let actual = hex::encode(Sha256::digest(&bytes));
        if actual != sha256 {
            return Err(StoreError::ImageHashMismatch {
                path: self.from.path.clone(),
                declared: sha256.to_string(),
                actual,
            }
            .into());
        }
        let sql = insert_sql("images", IMAGE_COLUMNS, "ON CONFLICT (sha256) DO NOTHING");
        self.stats.images += db.exec(&sql, &row.0)?;
        Ok(())
    }

    /// Every render, with its images, in one transaction; keys the target holds are left as they are (a key
    /// always renders the same views).
    fn copy_renders(&mut self) -> Result<()> {
        let sql = format!(
            "SELECT {} FROM renders ORDER BY render_key, idx",
            RENDER_COLUMNS.join(", ")
        );
        let rows = self
            .from
            .read("read renders to copy", |db| Ok(db.query(&sql, &[])?))?;
        if rows.is_empty() {
            return Ok(());
        }
        let to = self.to;
        to.write("copy renders", |db| {
            let insert = insert_sql("renders", RENDER_COLUMNS, "ON CONFLICT DO NOTHING");
            for row in &rows {
                let sha256: String =
                    self.source(row, col(RENDER_COLUMNS, "sha256"), "copy renders")?;
                self.image(db, &sha256)?;
                self.stats.renders += db.exec(&insert, &row.0)?;
            }
            Ok(())
        })
    }

    /// One row of the source, which must exist (the row referring to it does).
    fn source_row(&self, table: &str, cols: &[&str], filter: &str, key: &Value) -> Result<Row> {
        let sql = format!("SELECT {} FROM {table} WHERE {filter}", cols.join(", "));
        let row = self.from.read("read a row to copy", |db| {
            Ok(db.query_opt(&sql, std::slice::from_ref(key))?)
        })?;
        row.ok_or_else(|| {
            self.from.invalid(
                "reference",
                format!("no row of {table} where {filter} with ?1 = {key:?}"),
            )
        })
    }

    fn source<T: FromValue>(&self, row: &Row, column: usize, op: &'static str) -> Result<T> {
        self.from.source(row, column, op)
    }
}

fn config_hash(store: &Store, run_id: &str) -> Result<Option<String>> {
    store.read("look up a run", |db| {
        Ok(scalar(
            db,
            "SELECT config_hash FROM runs WHERE run_id = ?1",
            args![run_id],
        )?)
    })
}

/// Replaces the groups at `indices` by their union.
fn merge(pending: &mut Vec<BTreeSet<String>>, mut indices: Vec<usize>) {
    indices.sort_unstable_by(|a, b| b.cmp(a));
    let merged = indices
        .into_iter()
        .flat_map(|i| pending.remove(i))
        .collect();
    pending.push(merged);
}

/// `INSERT INTO table (cols) VALUES (?1, …) tail`.
fn insert_sql(table: &str, cols: &[&str], tail: &str) -> String {
    let marks: Vec<String> = (1..=cols.len()).map(|i| format!("?{i}")).collect();
    format!(
        "INSERT INTO {table} ({}) VALUES ({}) {tail}",
        cols.join(", "),
        marks.join(", ")
    )
}

fn insert_all(
    db: &mut dyn Db,
    table: &str,
    cols: &[&str],
    rows: &[Row],
) -> Result<u64, WriteError> {
    let sql = insert_sql(table, cols, "");
    let mut added = 0;
    for row in rows {
        added += db.exec(&sql, &row.0)?;
    }
    Ok(added)
}

/// The position of `name` in `cols`; the names are this module's constants, so a miss is a bug here.
fn col(cols: &[&str], name: &str) -> usize {
    cols.iter()
        .position(|c| *c == name)
        .unwrap_or_else(|| panic!("no column {name} in {cols:?}"))
}

/// A compressed text column as the target stores it: compressed bytes as they are, plain text (rows of older
/// SQLite stores) compressed, since PostgreSQL's column holds bytes only.
fn packed(v: Value) -> Value {
    match v {
        Value::Text(t) => Value::Blob(crate::packed::pack(&t)),
        other => other,
    }
}

/// The image hashes a prompt body mentions: every string of 64 lower-case hex digits in it, whatever the
/// layout of the body (it changed over time); [`Copier::image`] passes over the ones that name no image.
fn image_refs(body: &str) -> BTreeSet<String> {
    fn walk(v: &serde_json::Value, out: &mut BTreeSet<String>) {
        match v {
            serde_json::Value::String(s) if is_sha256(s) => {
                out.insert(s.clone());
            }
            serde_json::Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
            serde_json::Value::Object(map) => map.values().for_each(|i| walk(i, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    if let Ok(v) = serde_json::from_str(body) {
        walk(&v, &mut out);
    }
    out
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(deps: &[(&str, &[&str], i64)]) -> Plan {
        let mut p = Plan::default();
        for (run, origins, first) in deps {
            let origins = origins.iter().map(|s| s.to_string()).collect();
            p.deps.insert(run.to_string(), origins);
            p.first_call.insert(run.to_string(), *first);
        }
        p
    }

    #[test]
    fn runs_go_after_their_cache_origins_and_in_call_order() {
        let p = plan(&[("a", &["c"], 5), ("b", &[], 9), ("c", &[], 7)]);
        assert_eq!(p.groups(), vec![vec!["c"], vec!["a"], vec!["b"]]);
    }

    #[test]
    fn runs_that_took_answers_from_each_other_share_a_group() {
        let p = plan(&[
            ("a", &["b"], 1),
            ("b", &["a"], 2),
            ("c", &["b"], 0),
            ("d", &[], 3),
        ]);
        assert_eq!(p.groups(), vec![vec!["a", "b"], vec!["c"], vec!["d"]]);
        let p = plan(&[
            ("a", &["b"], 1),
            ("b", &["c"], 2),
            ("c", &["a"], 4),
            ("d", &[], 3),
        ]);
        assert_eq!(p.groups(), vec![vec!["a", "b", "c"], vec!["d"]]);
    }

    #[test]
    fn image_references_are_found_in_either_body_layout() {
        let h = "ab".repeat(32);
        let new = format!(
            r#"{{"messages":[{{"role":"user","parts":[{{"image":"{h}","mime":"image/png"}}]}}]}}"#
        );
        let old = format!(
            r#"[{{"role":"user","parts":[{{"image":{{"sha256":"{h}"}}}},{{"text":"x"}}]}}]"#
        );
        for body in [new, old] {
            assert_eq!(image_refs(&body), BTreeSet::from([h.clone()]));
        }
        assert!(image_refs(&"AB".repeat(32)).is_empty());
    }
}
