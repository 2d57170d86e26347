//! Reading a run a page at a time, for viewers (`nmb serve`): a filtered, paged list of samples with their
//! turns and score rows, one case's samples, one sample, and one sample's score row. Nothing here loads a whole
//! run or a whole score report.

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
    pub total: u64,
    /// In task id and sample index order, each with its turns.
    pub samples: Vec<SampleRecord>,
    /// The rows of these samples in the run's latest score report, in the same order; a sample without one
    /// (or every sample, when the run is unscored) has none here.
    pub scores: Vec<SampleScoreRow>,
}

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

impl SampleFilter {
    /// The `AND …` conditions on `samples s` for this filter, with their arguments appended to `args` (whose
    /// length so far numbers the placeholders).
    fn conditions(&self, args: &mut Vec<Value>) -> String {
        let mut sql = String::new();
        let mut push = |cond: &str, value: Value| {
            args.push(value);
            sql.push_str(&cond.replace("?N", &format!("?{}", args.len())));
        };
        if let Some(status) = self.status {
            push(" AND s.status = ?N", status.as_str().into());
        }
        if let Some(class) = &self.error_class {
            push(" AND s.error_class = ?N", class.into());
        }
        if let Some(prefix) = self.task_prefix.as_deref().filter(|p| !p.is_empty()) {
            push(
                " AND lower(s.task_id) LIKE lower(CAST(?N AS TEXT)) ESCAPE '!'",
                format!("{}%", like_literal(prefix)).into(),
            );
        }
        if let Some(text) = self.text.as_deref().filter(|t| !t.is_empty()) {
            push(
                " AND EXISTS (SELECT 1 FROM turns q WHERE q.run_id = s.run_id AND q.task_id = s.task_id
                   AND q.sample_index = s.sample_index AND lower(q.text) LIKE lower(CAST(?N AS TEXT)) ESCAPE '!')",
                format!("%{}%", like_literal(text)).into(),
            );
        }
        let outcome = match self.outcome {
            Some(ScoreOutcome::Correct) => " AND sc.correct = 1",
            Some(ScoreOutcome::Wrong) => " AND sc.correct = 0",
            Some(ScoreOutcome::Unparseable) => " AND sc.status = 'parse_failed'",
            None => "",
        };
        for (column, value) in [
            ("sc.error_category", &self.error_category),
            ("sc.level", &self.level),
            ("sc.family", &self.family),
        ] {
            if let Some(v) = value {
                push(&format!(" AND {column} = ?N"), v.into());
            }
        }
        if let Some(group) = &self.disease_group {
            push(
                " AND lower(sc.disease_group) = lower(CAST(?N AS TEXT))",
                group.into(),
            );
        }
        sql.push_str(outcome);
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

    /// `FROM … WHERE …` (without those words) of the samples of run `?1` this filter selects, joining each
    /// sample's row of the latest score report when a condition reads it.
    fn selection(&self, args: &mut Vec<Value>) -> String {
        let join = if self.reads_scores() {
            format!(
                " JOIN sample_scores sc ON sc.run_id = s.run_id AND sc.task_id = s.task_id
                   AND sc.sample_index = s.sample_index AND sc.config_hash = {LATEST_CONFIG}"
            )
        } else {
            String::new()
        };
        format!(
            "samples s{join} WHERE s.run_id = ?1{}",
            self.conditions(args)
        )
    }
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
        let mut params = vec![Value::from(run_id)];
        let selection = filter.selection(&mut params);
        let page = Page {
            offset,
            limit,
            order: filter.order(),
        };
        self.page_of("read a page of samples", run_id, &selection, params, page)
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
        let params = vec![Value::from(run_id), Value::from(key)];
        let page = Page {
            offset,
            limit,
            order: "s.task_id, s.sample_index",
        };
        let page = self.page_of("read a case's samples", run_id, &selection, params, page)?;
        Ok(CasePage { found_by, page })
    }

    /// A `page` of run `run_id`'s samples `FROM selection` (a `FROM … WHERE …` over `samples s` whose arguments
    /// are `params`, `?1` being the run), with their turns and score rows, and the count of all of them.
    fn page_of(
        &self,
        op: &'static str,
        run_id: &str,
        selection: &str,
        params: Vec<Value>,
        page: Page,
    ) -> Result<SamplePage> {
        let count_sql = format!("SELECT count(*) FROM {selection}");
        let n = params.len();
        let page_sql = format!(
            "SELECT {} FROM (SELECT s.run_id, s.task_id, s.sample_index, s.status, s.turns_done, s.error_class,
                           s.error_message
                    FROM {selection}
                    ORDER BY {} LIMIT ?{} OFFSET ?{}) s {SAMPLE_JOINS}
             ORDER BY s.task_id, s.sample_index, t.turn_index",
            sample_columns(),
            page.order,
            n + 1,
            n + 2
        );
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let mut page_params = params.clone();
        page_params.push(Value::Int(clamp(page.limit)));
        page_params.push(Value::Int(clamp(page.offset)));
        let (total, rows) = self.read(op, |db| {
            let total: i64 = scalar(db, &count_sql, &params)?;
            Ok((total, db.query(&page_sql, &page_params)?))
        })?;
        let samples = self.fold_samples(op, &rows)?;
        let scores = self.scores_of(run_id, &samples)?;
        Ok(SamplePage {
            total: crate::query::nonneg(total),
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
