//! Reading a run a page at a time, for viewers (`nmb serve`): a filtered, paged list of samples with their
//! turns, one sample, and one sample's score row. Nothing here loads a whole run.

use crate::db::{args, scalar, Value};
use crate::error::Result;
use crate::query::{sample_columns, SampleRecord, SAMPLE_JOINS};
use crate::records::SampleStatus;
use crate::scores::{score_row, SampleScoreRow, SCORE_COLUMNS};
use crate::Store;

/// Which samples of a run a page lists; every field that is set must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SampleFilter {
    pub status: Option<SampleStatus>,
    /// The sample's final error class, exactly.
    pub error_class: Option<String>,
    /// Task ids starting with this, ignoring ASCII case.
    pub task_prefix: Option<String>,
    /// Text that some turn's answer contains, ignoring ASCII case; `%` and `_` are literal.
    pub text: Option<String>,
}

/// One page of samples and how many samples match in all.
#[derive(Debug, Clone, PartialEq)]
pub struct SamplePage {
    pub total: u64,
    /// In task id and sample index order, each with its turns.
    pub samples: Vec<SampleRecord>,
}

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
        sql
    }
}

impl Store {
    /// The samples of a run that match `filter`, `limit` of them from `offset` in task id and sample index
    /// order, with their turns, and how many match in all. An unknown run is an error.
    pub fn sample_page(
        &self,
        run_id: &str,
        filter: &SampleFilter,
        offset: u64,
        limit: u64,
    ) -> Result<SamplePage> {
        self.run(run_id)?;
        let mut params = vec![Value::from(run_id)];
        let conditions = filter.conditions(&mut params);
        let count_sql = format!("SELECT count(*) FROM samples s WHERE s.run_id = ?1{conditions}");
        let n = params.len();
        let page_sql = format!(
            "SELECT {} FROM (SELECT s.run_id, s.task_id, s.sample_index, s.status, s.turns_done, s.error_class,
                           s.error_message
                    FROM samples s WHERE s.run_id = ?1{conditions}
                    ORDER BY s.task_id, s.sample_index LIMIT ?{} OFFSET ?{}) s {SAMPLE_JOINS}
             ORDER BY s.task_id, s.sample_index, t.turn_index",
            sample_columns(),
            n + 1,
            n + 2
        );
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let mut page_params = params.clone();
        page_params.push(Value::Int(clamp(limit)));
        page_params.push(Value::Int(clamp(offset)));
        let op = "read a page of samples";
        let (total, rows) = self.read(op, |db| {
            let total: i64 = scalar(db, &count_sql, &params)?;
            Ok((total, db.query(&page_sql, &page_params)?))
        })?;
        Ok(SamplePage {
            total: crate::query::nonneg(total),
            samples: self.fold_samples(op, &rows)?,
        })
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
             WHERE run_id = ?1 AND task_id = ?2 AND sample_index = ?3
               AND config_hash = (SELECT config_hash FROM score_reports WHERE run_id = ?1
                                  ORDER BY updated_ms DESC, config_hash LIMIT 1)"
        );
        self.read("read a sample's score", |db| {
            match db.query_opt(&sql, args![run_id, task_id, sample_index])? {
                Some(r) => Ok(Some(score_row(&r)?)),
                None => Ok(None),
            }
        })
    }
}
