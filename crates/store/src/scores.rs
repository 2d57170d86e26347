//! Score reports (tables `score_reports` and `sample_scores`): the JSON report of one scoring of a run, keyed by
//! (run, scoring configuration hash), with one queryable row per sample. `nmb-score` decides what a report holds;
//! this module only stores and finds it.

use crate::db::{args, scalar, DbResult, Row};

use crate::error::Result;
use crate::keys::now_ms;
use crate::Store;

/// One sample's scores as a queryable row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleScoreRow {
    pub task_id: String,
    pub sample_index: u32,
    pub case_id: String,
    pub family: String,
    pub level: String,
    pub status: String,
    pub correct: Option<bool>,
    pub matched_rank: Option<u32>,
    pub match_method: Option<String>,
    pub rubric_overall: Option<f64>,
    pub bertscore_f: Option<f64>,
    pub error_category: Option<String>,
    pub error_source: Option<String>,
    /// The case's (or task's) `disease_group` metadata; `None` without one, and for rows stored before v9.
    pub disease_group: Option<String>,
}

/// A report to store: its JSON text and rows.
#[derive(Debug, Clone, Copy)]
pub struct ScoreReportRecord<'a> {
    pub run_id: &'a str,
    pub config_hash: &'a str,
    /// The version of the report's JSON layout.
    pub schema_version: i64,
    pub report_json: &'a str,
    pub samples: &'a [SampleScoreRow],
}

impl Store {
    /// Writes a report and its rows in one transaction, replacing a report with the same configuration hash.
    pub fn save_score_report(&self, r: &ScoreReportRecord<'_>) -> Result<()> {
        let headline = headline_of(r.report_json);
        self.write("store a score report", |db| {
            db.exec(
                "INSERT INTO score_reports (run_id, config_hash, created_ms, updated_ms, schema_version, report,
                     headline)
                 VALUES (?1, ?2, ?3, ?3, ?4, ?5, ?6)
                 ON CONFLICT (run_id, config_hash) DO UPDATE SET
                     updated_ms = excluded.updated_ms, schema_version = excluded.schema_version,
                     report = excluded.report, headline = excluded.headline",
                args![
                    r.run_id,
                    r.config_hash,
                    now_ms(),
                    r.schema_version,
                    r.report_json,
                    headline.as_deref()
                ],
            )?;
            db.exec(
                "DELETE FROM sample_scores WHERE run_id = ?1 AND config_hash = ?2",
                args![r.run_id, r.config_hash],
            )?;
            for s in r.samples {
                db.exec(
                    "INSERT INTO sample_scores (run_id, config_hash, task_id, sample_index, case_id, family, level,
                         status, correct, matched_rank, match_method, rubric_overall, bertscore_f, error_category,
                         error_source, disease_group)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
                    args![
                        r.run_id,
                        r.config_hash,
                        s.task_id.as_str(),
                        s.sample_index,
                        s.case_id.as_str(),
                        s.family.as_str(),
                        s.level.as_str(),
                        s.status.as_str(),
                        s.correct,
                        s.matched_rank,
                        s.match_method.as_deref(),
                        s.rubric_overall,
                        s.bertscore_f,
                        s.error_category.as_deref(),
                        s.error_source.as_deref(),
                        s.disease_group.as_deref(),
                    ],
                )?;
            }
            Ok(())
        })
    }

    /// The JSON of the most recently written report of `run_id`, if it was ever scored.
    pub fn latest_score_report(&self, run_id: &str) -> Result<Option<String>> {
        self.read("read a score report", |db| {
            Ok(scalar(
                db,
                "SELECT report FROM score_reports WHERE run_id = ?1
                 ORDER BY updated_ms DESC, config_hash LIMIT 1",
                args![run_id],
            )?)
        })
    }

    /// The headline of the most recently written report of `run_id` (the one [`Store::latest_score_report`]
    /// returns): the JSON object `{"overall": …, "by_level_family": …}` with those two members of the report
    /// (null where the report lacks one), and for a report with a `stability` member that member and
    /// `config.judges` as `judges` (a headline saved by an earlier version lacks these two), read without
    /// reading the report itself. `None` when the run was never scored.
    pub fn latest_score_headline(&self, run_id: &str) -> Result<Option<String>> {
        self.read("read a score report's headline", |db| {
            let headline: Option<Option<String>> = db
                .query_opt(
                    "SELECT headline FROM score_reports WHERE run_id = ?1
                     ORDER BY updated_ms DESC, config_hash LIMIT 1",
                    args![run_id],
                )?
                .map(|r| r.get(0))
                .transpose()?;
            Ok(headline.flatten())
        })
    }

    /// The JSON of the report of `run_id` scored with configuration `config_hash`.
    pub fn score_report(&self, run_id: &str, config_hash: &str) -> Result<Option<String>> {
        self.read("read a score report", |db| {
            Ok(scalar(
                db,
                "SELECT report FROM score_reports WHERE run_id = ?1 AND config_hash = ?2",
                args![run_id, config_hash],
            )?)
        })
    }

    /// The per-sample rows of a stored report, in task and sample order.
    pub fn sample_score_rows(
        &self,
        run_id: &str,
        config_hash: &str,
    ) -> Result<Vec<SampleScoreRow>> {
        self.read("read sample scores", |db| {
            let rows = db.query(
                &format!(
                    "SELECT {SCORE_COLUMNS} FROM sample_scores WHERE run_id = ?1 AND config_hash = ?2
                     ORDER BY task_id, sample_index"
                ),
                args![run_id, config_hash],
            )?;
            Ok(rows
                .iter()
                .map(score_row)
                .collect::<DbResult<Vec<_>>>()?)
        })
    }
}

/// The columns of `sample_scores` that [`score_row`] reads.
pub(crate) const SCORE_COLUMNS: &str =
    "task_id, sample_index, case_id, family, level, status, correct, \
     matched_rank, match_method, rubric_overall, bertscore_f, error_category, error_source, disease_group";

pub(crate) fn score_row(r: &Row) -> DbResult<SampleScoreRow> {
    Ok(SampleScoreRow {
        task_id: r.get(0)?,
        sample_index: r.get(1)?,
        case_id: r.get(2)?,
        family: r.get(3)?,
        level: r.get(4)?,
        status: r.get(5)?,
        correct: r.get(6)?,
        matched_rank: r.get(7)?,
        match_method: r.get(8)?,
        rubric_overall: r.get(9)?,
        bertscore_f: r.get(10)?,
        error_category: r.get(11)?,
        error_source: r.get(12)?,
        disease_group: r.get(13)?,
    })
}

/// The `headline` column of a report: `{"overall": …, "by_level_family": …}` (null where it lacks one), and when
/// the report has a `stability` member (its judges were asked more than once) that member and the judges of
/// its configuration (`config.judges`) as `judges`, so a viewer can list the unstable items and link each
/// repeat's judge run without reading the report. `None` when the report is not a JSON object, which the
/// database then refuses.
fn headline_of(report_json: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Config {
        #[serde(default)]
        judges: serde_json::Value,
    }
    #[derive(serde::Deserialize)]
    struct Headline {
        #[serde(default)]
        overall: serde_json::Value,
        #[serde(default)]
        by_level_family: serde_json::Value,
        #[serde(default)]
        stability: serde_json::Value,
        config: Option<Config>,
    }
    let h: Headline = serde_json::from_str(report_json).ok()?;
    let mut head = serde_json::json!({"overall": h.overall, "by_level_family": h.by_level_family});
    if !h.stability.is_null() {
        head["stability"] = h.stability;
        head["judges"] = h.config.map_or(serde_json::Value::Null, |c| c.judges);
    }
    Some(head.to_string())
}
