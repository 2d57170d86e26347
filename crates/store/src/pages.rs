//! Reading a run a page at a time, for viewers (`nmb serve`): a filtered, paged list of samples with their
//! turns and score rows, one case's samples, one sample, and one sample's score row. Nothing here loads a whole
//! run or a whole score report.

use std::fmt::Write;

use crate::db::{args, scalar, Value};
use crate::error::Result;
use crate::query::{sample_columns, SampleRecord, SAMPLE_JOINS};
use crate::records::SampleStatus;
use crate::scores::{score_row, SampleScoreRow, SCORE_COLUMNS};
use crate::Store;

/// Which samples of a run a page lists; every field that is set must hold. The fields after `text` read the
/// sample's row in the run's latest score report (the one [`Store::latest_score_report`] returns), so a sample
/// without one, or any sample of an unscored run, matches none of them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleFilter {
    pub status: Option<SampleStatus>,
    /// The sample's final error class, exactly.
    pub error_class: Option<String>,
    /// Task ids starting with this, ignoring ASCII case.
    pub task_prefix: Option<String>,
    /// Text that some turn's answer contains, ignoring ASCII case; `%` and `_` are literal.
    pub text: Option<String>,
    /// How the answer was scored.
    pub outcome: Option<ScoreOutcome>,
    /// The error-taxonomy category of a wrong answer (`reasoning_failure`, …), exactly.
    pub error_category: Option<String>,
    /// The task's level, exactly.
    pub level: Option<String>,
    /// The task's family, exactly.
    pub family: Option<String>,
    /// The case's disease group, ignoring ASCII case.
    pub disease_group: Option<String>,
}

/// How a sample's answer was scored, as a filter reads it from its score row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScoreOutcome {
    /// Counted correct.
    Correct,
    /// Counted wrong; unparseable answers are wrong too.
    Wrong,
    /// The answer could not be parsed (score status `parse_failed`).
    Unparseable,
}

impl ScoreOutcome {
    pub const ALL: [ScoreOutcome; 3] = [
        ScoreOutcome::Correct,
        ScoreOutcome::Wrong,
        ScoreOutcome::Unparseable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ScoreOutcome::Correct => "correct",
            ScoreOutcome::Wrong => "wrong",
            ScoreOutcome::Unparseable => "unparseable",
        }
    }

    /// The outcome [`ScoreOutcome::as_str`] names.
    pub fn parse(text: &str) -> Option<ScoreOutcome> {
        ScoreOutcome::ALL.into_iter().find(|o| o.as_str() == text)
    }
}

/// One page of samples and how many samples match in all.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplePage {
    /// How many samples match; with `total_exact` false, a lower bound (a text search stops counting at
    /// [`TEXT_COUNT_CAP`] matches, or at the end of the page asked for when that is further).
    pub total: u64,
    pub total_exact: bool,
    /// In task id and sample index order, each with its turns.
    pub samples: Vec<SampleRecord>,
    /// The rows of these samples in the run's latest score report, in the same order; a sample without one
    /// (or every sample, when the run is unscored) has none here.
    pub scores: Vec<SampleScoreRow>,
}

/// A text search counts its matches no further than this (or the end of the page asked for, when further):
/// counting every match of a common word reads every matching answer, which is what made such a search page slow.
pub const TEXT_COUNT_CAP: u64 = 1000;

/// How [`Store::case_samples`] found a case's tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaseLookup {
    /// By the `case_id` of the rows of the run's latest score report.
    Scores,
    /// The run's latest score report has no rows for the case (or the run is unscored): by the task id prefix
    /// `CASE/`, which the built-in formats give every task; a task named otherwise is missed.
    TaskPrefix,
}

/// One page of a case's samples, and how its tasks were found.
#[derive(Debug, Clone, PartialEq)]
pub struct CasePage {
    pub found_by: CaseLookup,
    pub page: SamplePage,
}

/// The latest score report of run `?1` (what [`Store::latest_score_report`] returns), as a subquery.
const LATEST_CONFIG: &str = "(SELECT config_hash FROM score_reports WHERE run_id = ?1
                              ORDER BY updated_ms DESC, config_hash LIMIT 1)";

/// Which page of a selection, in which order (the samples' key, spelled over `s` or the joined `sc`).
struct Page {
    offset: u64,
    limit: u64,
    order: &'static str,
}

/// Task ids per `IN (…)` list, well under either engine's limit on parameters.
const IN_CHUNK: usize = 500;

/// `text` as a `LIKE` pattern matching itself literally, with `!` as the escape character.
fn like_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    for c in text.chars() {
        if matches!(c, '!' | '%' | '_') {
            out.push('!');
        }
        out.push(c);
    }
    out
}

/// Appends `value` to `args` and returns its placeholder.
fn bind(args: &mut Vec<Value>, value: impl Into<Value>) -> String {
    args.push(value.into());
    format!("?{}", args.len())
}

/// The most trigrams a search looks up in the text index. Any subset of a text's trigrams finds a superset of
/// the turns holding it, and each trigram costs a read of its list of turns; twelve keep long searches cheap.
const MAX_TRIGRAMS: usize = 12;

/// An FTS5 query on `turns_text` that every turn holding `text` (ignoring ASCII case) matches: distinct
/// trigrams of `text`, at most [`MAX_TRIGRAMS`] spread over it, each a quoted string (so that nothing in it is
/// query syntax), all required. `None` when the index cannot answer: fewer than three characters (no trigram),
/// or a NUL, which the tokenizer skips.
fn trigram_query(text: &str) -> Option<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() < 3 || chars.contains(&'\0') {
        return None;
    }
    let mut seen = std::collections::HashSet::new();
    let trigrams: Vec<String> = chars
        .windows(3)
        .map(|w| w.iter().collect::<String>())
        .filter(|t| seen.insert(t.to_ascii_lowercase()))
        .collect();
    let n = trigrams.len();
    let picked: Vec<String> = (0..n.min(MAX_TRIGRAMS))
        .map(|i| {
            if n <= MAX_TRIGRAMS {
                i
            } else {
                i * (n - 1) / (MAX_TRIGRAMS - 1)
            }
        })
        .map(|i| format!("\"{}\"", trigrams[i].replace('"', "\"\"")))
        .collect();
    Some(picked.join(" AND "))
}

/// How a text search reads the answers; each way finds the same samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TextSearch {
    /// PostgreSQL: each sample's turns, lower-cased on both sides (its `LIKE` heeds case).
    Portable,
    /// SQLite: each sample's turns, in the page's order. A page stops reading at its end, so the first pages
    /// of a common word are cheap; a count reads the whole run.
    Walk,
    /// SQLite: the run's turns, in one pass over them.
    RunTurns,
    /// SQLite: the turns that the trigram index names (of every run), each checked. Cheap for a rare word,
    /// dearer per turn than the other ways; a text of fewer than three characters is read as [`Self::RunTurns`].
    Indexed,
}

/// `AND` the condition that some turn of sample `s` holds `text`, ignoring ASCII case, with `%` and `_`
/// literal, read the `search` way. SQLite's `LIKE` ignores ASCII case, as `lower()` does (and costs a fifth
/// less without it). The trigram index folds case beyond ASCII too and names every turn holding all the
/// trigrams asked for, so `LIKE` checks each turn it names: that check keeps the result exact.
fn text_condition(text: &str, args: &mut Vec<Value>, search: TextSearch) -> String {
    let pattern = format!("%{}%", like_literal(text));
    let trigrams = match search {
        TextSearch::Indexed => trigram_query(text),
        _ => None,
    };
    if let Some(query) = trigrams {
        let (query, pattern) = (bind(args, query), bind(args, pattern));
        // CROSS JOIN keeps the index first: left to itself the planner walks the run's turns and searches the
        // index once for each (seconds for a common word in 100,000 turns).
        return format!(
            " AND (s.task_id, s.sample_index) IN (SELECT q.task_id, q.sample_index
               FROM turns_text CROSS JOIN turns q ON q.id = turns_text.rowid
               WHERE turns_text MATCH {query} AND q.run_id = ?1 AND q.text LIKE {pattern} ESCAPE '!')"
        );
    }
    let pattern = bind(args, pattern);
    let same_sample =
        "q.run_id = s.run_id AND q.task_id = s.task_id AND q.sample_index = s.sample_index";
    match search {
        TextSearch::Portable => format!(
            " AND EXISTS (SELECT 1 FROM turns q WHERE {same_sample}
               AND lower(q.text) LIKE lower(CAST({pattern} AS TEXT)) ESCAPE '!')"
        ),
        TextSearch::Walk => format!(
            " AND EXISTS (SELECT 1 FROM turns q WHERE {same_sample} AND q.text LIKE {pattern} ESCAPE '!')"
        ),
        TextSearch::RunTurns | TextSearch::Indexed => format!(
            " AND (s.task_id, s.sample_index) IN (SELECT q.task_id, q.sample_index FROM turns q
               WHERE q.run_id = ?1 AND q.text LIKE {pattern} ESCAPE '!')"
        ),
    }
}

/// How a page's text search goes on this store: [`TextPlan::count`] for the count, then
/// [`TextPlan::listing`] for the page.
#[derive(Debug, Clone, Copy)]
struct TextPlan {
    count: TextSearch,
    /// The run's samples (SQLite only).
    samples: u64,
    /// Turns the trigram index names (of every run, no more than `samples`): at least the matches, so an
    /// estimate of them where the count stopped at its cap (SQLite only; `samples` without an index query).
    named: u64,
}

impl TextPlan {
    /// The way to list the samples of a page ending at `end` of `total` matches. A walk in the page's order
    /// reads about `end × samples / total` samples and stops; the count's way goes through every match, each
    /// about twice as dear as a sample walked (measured on 100,000 samples), and sorts them.
    fn listing(&self, total: u64, end: u64) -> TextSearch {
        if self.count == TextSearch::Portable {
            return TextSearch::Portable;
        }
        let walked = u128::from(end) * u128::from(self.samples);
        if walked <= 2 * u128::from(total) * u128::from(total) {
            TextSearch::Walk
        } else {
            self.count
        }
    }
}

impl SampleFilter {
    /// The `AND …` conditions on `samples s` of run `?1` for this filter, with their arguments appended to
    /// `args` (whose length so far numbers the placeholders); the text search reads the `search` way.
    fn conditions(&self, args: &mut Vec<Value>, search: TextSearch) -> String {
        let mut sql = String::new();
        if let Some(status) = self.status {
            let _ = write!(sql, " AND s.status = {}", bind(args, status.as_str()));
        }
        if let Some(class) = &self.error_class {
            let _ = write!(sql, " AND s.error_class = {}", bind(args, class));
        }
        if let Some(prefix) = self.task_prefix.as_deref().filter(|p| !p.is_empty()) {
            let p = bind(args, format!("{}%", like_literal(prefix)));
            let _ = write!(
                sql,
                " AND lower(s.task_id) LIKE lower(CAST({p} AS TEXT)) ESCAPE '!'"
            );
        }
        if let Some(text) = self.text.as_deref().filter(|t| !t.is_empty()) {
            sql.push_str(&text_condition(text, args, search));
        }
        for (column, value) in [
            ("sc.error_category", &self.error_category),
            ("sc.level", &self.level),
            ("sc.family", &self.family),
        ] {
            if let Some(v) = value {
                let _ = write!(sql, " AND {column} = {}", bind(args, v));
            }
        }
        if let Some(group) = &self.disease_group {
            let p = bind(args, group);
            let _ = write!(
                sql,
                " AND lower(sc.disease_group) = lower(CAST({p} AS TEXT))"
            );
        }
        sql.push_str(match self.outcome {
            Some(ScoreOutcome::Correct) => " AND sc.correct = 1",
            Some(ScoreOutcome::Wrong) => " AND sc.correct = 0",
            Some(ScoreOutcome::Unparseable) => " AND sc.status = 'parse_failed'",
            None => "",
        });
        sql
    }

    /// Whether a condition reads the sample's score row.
    fn reads_scores(&self) -> bool {
        self.outcome.is_some()
            || self.error_category.is_some()
            || self.level.is_some()
            || self.family.is_some()
            || self.disease_group.is_some()
    }

    /// The page's order: the samples' key, spelled as the score rows' when they are joined, so that the
    /// engine may walk the report's rows in key order instead of sorting the join (three times faster deep into
    /// a run of 100,000 samples on SQLite).
    fn order(&self) -> &'static str {
        if self.reads_scores() {
            "sc.task_id, sc.sample_index"
        } else {
            "s.task_id, s.sample_index"
        }
    }

    /// The samples of run `run_id` this filter selects, joining each sample's row of the latest score report
    /// when a condition reads it; the text search reads the `search` way.
    fn selection(&self, run_id: &str, search: TextSearch) -> Selection {
        let join = if self.reads_scores() {
            format!(
                " JOIN sample_scores sc ON sc.run_id = s.run_id AND sc.task_id = s.task_id
                   AND sc.sample_index = s.sample_index AND sc.config_hash = {LATEST_CONFIG}"
            )
        } else {
            String::new()
        };
        let mut params = vec![Value::from(run_id)];
        let conditions = self.conditions(&mut params, search);
        Selection {
            sql: format!("samples s{join} WHERE s.run_id = ?1{conditions}"),
            params,
        }
    }
}

/// `FROM … WHERE …` (without those words) over `samples s`, and its arguments, `?1` being the run.
struct Selection {
    sql: String,
    params: Vec<Value>,
}

impl Store {
    /// The samples of a run that match `filter`, `limit` of them from `offset` in task id and sample index
    /// order, with their turns and score rows, and how many match in all. An unknown run is an error.
    pub fn sample_page(
        &self,
        run_id: &str,
        filter: &SampleFilter,
        offset: u64,
        limit: u64,
    ) -> Result<SamplePage> {
        self.run(run_id)?;
        let op = "read a page of samples";
        let plan = self.text_plan(run_id, filter)?;
        let counted = filter.selection(run_id, plan.count);
        let searching = filter.text.as_deref().is_some_and(|t| !t.is_empty());
        let (total, total_exact) = if searching {
            let cap = TEXT_COUNT_CAP.max(offset.saturating_add(limit));
            let n = self.count_up_to(op, &counted, cap.saturating_add(1))?;
            (n.min(cap), n <= cap)
        } else {
            (self.count_of(op, &counted)?, true)
        };
        // A capped count says little of how common the text is; what the index named says more.
        let matches = if total_exact {
            total
        } else {
            total.max(plan.named)
        };
        let search = plan.listing(matches, offset.saturating_add(limit));
        let listed = if search == plan.count {
            counted
        } else {
            filter.selection(run_id, search)
        };
        let page = Page {
            offset,
            limit,
            order: filter.order(),
        };
        let mut out = self.page_of(op, run_id, &listed, page, total)?;
        out.total_exact = total_exact;
        Ok(out)
    }

    /// How the text search of `filter` (if it has one) goes on this store. On SQLite the trigram index is
    /// asked how many turns it names, counting no further than five times [`TEXT_COUNT_CAP`] (or the run's
    /// samples): below that its turns are checked one by one; above it the text is common, and walking the
    /// run's samples in order reaches the capped count sooner; when it names as many turns as the run has
    /// samples, one pass over the run's own turns is cheapest (the index spans every run of the store).
    fn text_plan(&self, run_id: &str, filter: &SampleFilter) -> Result<TextPlan> {
        if self.is_postgres() {
            return Ok(TextPlan {
                count: TextSearch::Portable,
                samples: 0,
                named: 0,
            });
        }
        let Some(text) = filter.text.as_deref().filter(|t| !t.is_empty()) else {
            return Ok(TextPlan {
                count: TextSearch::Walk,
                samples: 0,
                named: 0,
            });
        };
        let query = trigram_query(text);
        let (samples, named, probe) = self.read("plan a text search", |db| {
            let samples: i64 = scalar(
                db,
                "SELECT count(*) FROM samples WHERE run_id = ?1",
                args![run_id],
            )?;
            // The index is asked no further than this: past it the text is common enough that walking the
            // run's samples in order finds the counted matches (no more than the cap) sooner.
            let probe = samples.min(5 * TEXT_COUNT_CAP as i64);
            let named: i64 = match &query {
                Some(q) => scalar(
                    db,
                    "SELECT count(*) FROM (SELECT 1 FROM turns_text WHERE turns_text MATCH ?1 LIMIT ?2) named",
                    args![q.as_str(), probe],
                )?,
                None => samples,
            };
            Ok((samples, named, probe))
        })?;
        Ok(TextPlan {
            count: if named < probe {
                TextSearch::Indexed
            } else if named < samples {
                TextSearch::Walk
            } else {
                TextSearch::RunTurns
            },
            samples: crate::query::nonneg(samples),
            named: crate::query::nonneg(named),
        })
    }

    /// The samples of one case of a run, `limit` of them from `offset` in task id and sample index order, with
    /// their turns and score rows. The case's tasks are those of its rows in the run's latest score report; a
    /// run without any (unscored) falls back on the task id prefix `CASE_ID/`. An unknown run is an error; an
    /// unknown case is an empty page.
    pub fn case_samples(
        &self,
        run_id: &str,
        case_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<CasePage> {
        self.run(run_id)?;
        let scored: Option<i64> = self.read("find a case's score rows", |db| {
            Ok(scalar(
                db,
                &format!(
                    "SELECT 1 FROM sample_scores WHERE run_id = ?1 AND config_hash = {LATEST_CONFIG}
                     AND case_id = ?2 LIMIT 1"
                ),
                args![run_id, case_id],
            )?)
        })?;
        let (found_by, selection, key) = match scored {
            Some(_) => (
                CaseLookup::Scores,
                format!(
                    "samples s WHERE s.run_id = ?1 AND s.task_id IN (SELECT task_id FROM sample_scores
                       WHERE run_id = ?1 AND config_hash = {LATEST_CONFIG} AND case_id = ?2)"
                ),
                case_id.to_string(),
            ),
            // substr rather than LIKE: LIKE ignores case on SQLite and not on PostgreSQL.
            None => (
                CaseLookup::TaskPrefix,
                "samples s WHERE s.run_id = ?1
                   AND substr(s.task_id, 1, length(CAST(?2 AS TEXT))) = CAST(?2 AS TEXT)"
                    .to_string(),
                format!("{case_id}/"),
            ),
        };
        let selection = Selection {
            sql: selection,
            params: vec![Value::from(run_id), Value::from(key)],
        };
        let page = Page {
            offset,
            limit,
            order: "s.task_id, s.sample_index",
        };
        let op = "read a case's samples";
        let total = self.count_of(op, &selection)?;
        let page = self.page_of(op, run_id, &selection, page, total)?;
        Ok(CasePage { found_by, page })
    }

    /// How many samples `selection` holds, counting no further than `limit`.
    fn count_up_to(&self, op: &'static str, selection: &Selection, limit: u64) -> Result<u64> {
        let sql = format!(
            "SELECT count(*) FROM (SELECT 1 FROM {} LIMIT ?{}) capped",
            selection.sql,
            selection.params.len() + 1
        );
        let mut params = selection.params.clone();
        params.push(Value::Int(i64::try_from(limit).unwrap_or(i64::MAX)));
        let total: i64 = self.read(op, |db| Ok(scalar(db, &sql, &params)?))?;
        Ok(crate::query::nonneg(total))
    }

    /// How many samples `selection` holds.
    fn count_of(&self, op: &'static str, selection: &Selection) -> Result<u64> {
        let sql = format!("SELECT count(*) FROM {}", selection.sql);
        let total: i64 = self.read(op, |db| Ok(scalar(db, &sql, &selection.params)?))?;
        Ok(crate::query::nonneg(total))
    }

    /// A `page` of run `run_id`'s samples in `selection` (of `total` samples), with their turns and score rows.
    fn page_of(
        &self,
        op: &'static str,
        run_id: &str,
        selection: &Selection,
        page: Page,
        total: u64,
    ) -> Result<SamplePage> {
        if page.offset >= total || page.limit == 0 {
            return Ok(SamplePage {
                total,
                total_exact: true,
                samples: Vec::new(),
                scores: Vec::new(),
            });
        }
        let n = selection.params.len();
        let sql = format!(
            "SELECT {} FROM (SELECT s.run_id, s.task_id, s.sample_index, s.status, s.turns_done, s.error_class,
                           s.error_message
                    FROM {}
                    ORDER BY {} LIMIT ?{} OFFSET ?{}) s {SAMPLE_JOINS}
             ORDER BY s.task_id, s.sample_index, t.turn_index",
            sample_columns(),
            selection.sql,
            page.order,
            n + 1,
            n + 2
        );
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let mut params = selection.params.clone();
        params.push(Value::Int(clamp(page.limit)));
        params.push(Value::Int(clamp(page.offset)));
        let rows = self.read(op, |db| Ok(db.query(&sql, &params)?))?;
        let samples = self.fold_samples(op, &rows)?;
        let scores = self.scores_of(run_id, &samples)?;
        Ok(SamplePage {
            total,
            total_exact: true,
            samples,
            scores,
        })
    }

    /// The latest report's rows of `samples`, in their order: looked up by their tasks, a few hundred at a time.
    fn scores_of(&self, run_id: &str, samples: &[SampleRecord]) -> Result<Vec<SampleScoreRow>> {
        let mut tasks: Vec<&str> = samples.iter().map(|s| s.task_id.as_str()).collect();
        tasks.dedup();
        let mut rows = Vec::new();
        for chunk in tasks.chunks(IN_CHUNK) {
            let list: Vec<String> = (0..chunk.len()).map(|i| format!("?{}", i + 2)).collect();
            let sql = format!(
                "SELECT {SCORE_COLUMNS} FROM sample_scores
                 WHERE run_id = ?1 AND config_hash = {LATEST_CONFIG} AND task_id IN ({})",
                list.join(", ")
            );
            let mut params = vec![Value::from(run_id)];
            params.extend(chunk.iter().map(|t| Value::from(*t)));
            let got = self.read("read a page's score rows", |db| {
                Ok(db
                    .query(&sql, &params)?
                    .iter()
                    .map(score_row)
                    .collect::<crate::db::DbResult<Vec<_>>>()?)
            })?;
            rows.extend(got);
        }
        // In the page's order, only the page's samples (a task may have samples on the next page).
        let mut by_key: std::collections::HashMap<(String, u32), SampleScoreRow> = rows
            .into_iter()
            .map(|r| ((r.task_id.clone(), r.sample_index), r))
            .collect();
        Ok(samples
            .iter()
            .filter_map(|s| by_key.remove(&(s.task_id.clone(), s.sample_index)))
            .collect())
    }

    /// One sample of a run with its turns; `None` when the run or the sample does not exist.
    pub fn sample_record(
        &self,
        run_id: &str,
        task_id: &str,
        sample_index: u32,
    ) -> Result<Option<SampleRecord>> {
        let sql = format!(
            "SELECT {} FROM samples s {SAMPLE_JOINS}
             WHERE s.run_id = ?1 AND s.task_id = ?2 AND s.sample_index = ?3
             ORDER BY t.turn_index",
            sample_columns()
        );
        let op = "read a sample";
        let rows = self.read(op, |db| {
            Ok(db.query(&sql, args![run_id, task_id, sample_index])?)
        })?;
        Ok(self.fold_samples(op, &rows)?.into_iter().next())
    }

    /// One sample's row in the run's latest stored score report (the one [`Store::latest_score_report`]
    /// returns); `None` when the run was not scored or the report has no row for it.
    pub fn latest_sample_score(
        &self,
        run_id: &str,
        task_id: &str,
        sample_index: u32,
    ) -> Result<Option<SampleScoreRow>> {
        let sql = format!(
            "SELECT {SCORE_COLUMNS} FROM sample_scores
             WHERE run_id = ?1 AND task_id = ?2 AND sample_index = ?3 AND config_hash = {LATEST_CONFIG}"
        );
        self.read("read a sample's score", |db| {
            match db.query_opt(&sql, args![run_id, task_id, sample_index])? {
                Some(r) => Ok(Some(score_row(&r)?)),
                None => Ok(None),
            }
        })
    }

    /// The size in bytes of the run's latest score report (the one [`Store::latest_score_report`] returns),
    /// read without reading the report, so a viewer can decide whether reading it is cheap; `None` when the
    /// run was never scored.
    pub fn latest_score_report_bytes(&self, run_id: &str) -> Result<Option<u64>> {
        let bytes: Option<i64> = self.read("measure a score report", |db| {
            Ok(scalar(
                db,
                &format!(
                    "SELECT octet_length(report) FROM score_reports
                     WHERE run_id = ?1 AND config_hash = {LATEST_CONFIG}"
                ),
                args![run_id],
            )?)
        })?;
        Ok(bytes.map(crate::query::nonneg))
    }
}
