//! Clinician review sets and human answers (tables `review_*`, `human_answers`).
//!
//! A review set is a shuffled list of (run, task, sample) items, each reviewer's assigned items in their own
//! order, and each reviewer's token (only its SHA-256 is stored). Grades are appended and never updated: the
//! newest row per (set, reviewer, item) is the grade, and every earlier row stays as the audit trail. Which items
//! a set holds, who sees what and how tokens are made is `nmb-review`'s business; this module only stores it.
//!
//! A pairwise set (`review_pairs`) has a second answer to the same task for each item: the item's own row is
//! shown as A, the pair's as B, so the order each pair is shown in is what the rows say. Its reviewers vote
//! (`review_votes`: A, B, tie or neither acceptable) instead of grading, appended the same way.
//!
//! Human answers are what a clinician answered to a suite's tasks, appended the same way (newest per task and
//! turn wins); the run of model `human:NAME` is built from them.

use std::collections::BTreeMap;

use crate::db::{args, scalar, Db, DbResult, Row};
use crate::error::Result;
use crate::keys::now_ms;
use crate::Store;

/// One item of a review set: a sample of a run, under a blinded number.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewItem {
    /// 1-based, in shuffled order; the only id a reviewer ever sees.
    pub item_no: u32,
    pub run_id: String,
    pub task_id: String,
    pub sample_index: u32,
    /// Graded by every reviewer (the overlap share, for inter-rater agreement).
    pub shared: bool,
}

/// A reviewer of a new set: their name, their token's SHA-256 (hex) and their items in the order they see them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewReviewer {
    pub reviewer: String,
    pub token_sha256: String,
    pub items: Vec<u32>,
}

/// Everything `nmb review create` stores, in one transaction.
#[derive(Debug, Clone)]
pub struct NewReviewSet {
    pub set_id: String,
    pub rubric_hash: String,
    /// The rubric file's text, so pages can show its anchors.
    pub rubric: String,
    pub seed: u64,
    pub overlap: f64,
    pub runs: Vec<String>,
    pub items: Vec<ReviewItem>,
    pub reviewers: Vec<NewReviewer>,
    /// Reviewers see each answer's thinking (collapsed) beside the answer.
    pub show_thinking: bool,
    /// The criterion rubric reviewers mark criteria of, when the set has one.
    pub criteria: Option<CriteriaFile>,
}

/// A criterion rubric file kept with a review set: its name (whose extension says its form) and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriteriaFile {
    pub name: String,
    pub text: String,
}

/// The answer shown as B beside item `item_no` of a pairwise set (the item's own answer is A).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewPair {
    pub item_no: u32,
    pub run_id: String,
    pub sample_index: u32,
}

/// The choices of a pairwise vote, as stored.
pub const VOTE_CHOICES: [&str; 4] = ["a", "b", "tie", "neither"];

/// A reviewer's pairwise vote: one of [`VOTE_CHOICES`] (`neither`: both answers are unacceptable).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vote {
    pub choice: String,
    pub comment: Option<String>,
}

/// A stored vote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredVote {
    pub id: i64,
    pub reviewer: String,
    pub item_no: u32,
    pub created_ms: i64,
    pub vote: Vote,
}

/// A stored review set.
#[derive(Debug, Clone, PartialEq)]
pub struct ReviewSet {
    pub set_id: String,
    pub created_ms: i64,
    pub rubric_hash: String,
    pub rubric: String,
    pub seed: u64,
    pub overlap: f64,
    pub runs: Vec<String>,
    /// Reviewers see each answer's thinking; `false` for sets stored before schema v13.
    pub show_thinking: bool,
    /// Reviewers vote between two answers ([`ReviewPair`]) rather than grade one.
    pub pairwise: bool,
    /// The set's criterion rubric; `None` without one and for sets stored before criteria.
    pub criteria: Option<CriteriaFile>,
}

/// A reviewer's progress, for `nmb review status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewerStatus {
    pub reviewer: String,
    pub revoked_ms: Option<i64>,
    pub assigned: u32,
    /// Items whose newest grade has a verdict other than `skip`.
    pub graded: u32,
    pub skipped: u32,
    /// Grade rows written, edits included.
    pub grade_rows: u32,
}

/// An item as one reviewer sees it: their position and the sample behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssignedItem {
    /// 1-based position in this reviewer's list.
    pub position: u32,
    pub total: u32,
    pub item: ReviewItem,
}

/// A reviewer's grade of one item.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grade {
    /// `correct`, `partly`, `incorrect`, `skip`, or `None` while the reviewer has only filled in part of it.
    pub verdict: Option<String>,
    /// Rubric dimension (and `overall`) to score.
    pub scores: BTreeMap<String, u8>,
    pub taxonomy: Option<String>,
    pub comment: Option<String>,
    /// Criterion id to met (`true`) or not met, for sets with a criterion rubric; empty otherwise.
    pub criteria: BTreeMap<String, bool>,
}

/// A stored grade row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredGrade {
    pub id: i64,
    pub reviewer: String,
    pub item_no: u32,
    pub created_ms: i64,
    pub rubric_hash: String,
    pub grade: Grade,
}

/// A human's answer to one turn of a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanAnswer {
    pub task_id: String,
    pub turn_index: u32,
    pub created_ms: i64,
    /// Where it came from: `review-answer` (the answer page) or the imported file's name.
    pub source: String,
    pub text: String,
}

impl Store {
    /// Stores a new review set with its items, reviewers and assignments.
    pub fn create_review_set(&self, set: &NewReviewSet) -> Result<()> {
        self.create_set_with_pairs(set, &[])
    }

    /// Stores a new pairwise set: [`Store::create_review_set`] and the B answer of every item, in one
    /// transaction.
    pub fn create_pairwise_review_set(
        &self,
        set: &NewReviewSet,
        pairs: &[ReviewPair],
    ) -> Result<()> {
        self.create_set_with_pairs(set, pairs)
    }

    fn create_set_with_pairs(&self, set: &NewReviewSet, pairs: &[ReviewPair]) -> Result<()> {
        let runs = serde_json::to_string(&set.runs).expect("a list of strings serialises");
        let now = now_ms();
        self.write("create a review set", |db| {
            db.exec(
                "INSERT INTO review_sets (set_id, created_ms, rubric_hash, rubric, seed, overlap, runs,
                                          show_thinking, criteria_name, criteria)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                args![
                    set.set_id.as_str(),
                    now,
                    set.rubric_hash.as_str(),
                    set.rubric.as_str(),
                    set.seed as i64,
                    set.overlap,
                    runs,
                    set.show_thinking,
                    set.criteria.as_ref().map(|c| c.name.as_str()),
                    set.criteria.as_ref().map(|c| c.text.as_str())
                ],
            )?;
            for item in &set.items {
                db.exec(
                    "INSERT INTO review_items (set_id, item_no, run_id, task_id, sample_index, shared)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    args![
                        set.set_id.as_str(),
                        item.item_no,
                        item.run_id.as_str(),
                        item.task_id.as_str(),
                        item.sample_index,
                        item.shared
                    ],
                )?;
            }
            for p in pairs {
                db.exec(
                    "INSERT INTO review_pairs (set_id, item_no, run_id, sample_index) VALUES (?1, ?2, ?3, ?4)",
                    args![set.set_id.as_str(), p.item_no, p.run_id.as_str(), p.sample_index],
                )?;
            }
            for r in &set.reviewers {
                insert_reviewer(db, &set.set_id, r, now)?;
            }
            Ok(())
        })
    }

    /// A review set by id.
    pub fn review_set(&self, set_id: &str) -> Result<Option<ReviewSet>> {
        self.read("read a review set", |db| {
            let row = db.query_opt(
                &format!("SELECT {SET_COLUMNS} FROM review_sets s WHERE set_id = ?1"),
                args![set_id],
            )?;
            Ok(row.map(|r| review_set_of(&r)).transpose()?)
        })
    }

    /// Every review set, newest first.
    pub fn list_review_sets(&self) -> Result<Vec<ReviewSet>> {
        self.read("list review sets", |db| {
            let rows = db.query(
                &format!(
                    "SELECT {SET_COLUMNS} FROM review_sets s ORDER BY created_ms DESC, set_id"
                ),
                args![],
            )?;
            Ok(rows.iter().map(review_set_of).collect::<DbResult<_>>()?)
        })
    }

    /// Every item of a set, in item order.
    pub fn review_items(&self, set_id: &str) -> Result<Vec<ReviewItem>> {
        self.read("read a review set's items", |db| {
            let rows = db.query(
                "SELECT item_no, run_id, task_id, sample_index, shared FROM review_items
                 WHERE set_id = ?1 ORDER BY item_no",
                args![set_id],
            )?;
            Ok(rows.iter().map(item_of).collect::<DbResult<_>>()?)
        })
    }

    /// The (set, reviewer) a token hash belongs to, unless that reviewer was revoked.
    pub fn reviewer_by_token(&self, token_sha256: &str) -> Result<Option<(String, String)>> {
        self.read("find a reviewer by token", |db| {
            let row = db.query_opt(
                "SELECT set_id, reviewer FROM review_reviewers
                 WHERE token_sha256 = ?1 AND revoked_ms IS NULL",
                args![token_sha256],
            )?;
            Ok(row
                .map(|r| Ok::<_, crate::db::DbError>((r.get(0)?, r.get(1)?)))
                .transpose()?)
        })
    }

    /// Each reviewer's progress, by name.
    pub fn review_status(&self, set_id: &str) -> Result<Vec<ReviewerStatus>> {
        self.read("read review progress", |db| {
            let rows = db.query(
                &format!(
                    "SELECT r.reviewer, r.revoked_ms,
                        (SELECT count(*) FROM review_assignments a
                         WHERE a.set_id = r.set_id AND a.reviewer = r.reviewer),
                        (SELECT count(*) FROM review_grades g
                         WHERE g.set_id = r.set_id AND g.reviewer = r.reviewer
                           AND g.verdict IS NOT NULL AND g.verdict <> 'skip' AND {NEWEST_GRADE}),
                        (SELECT count(*) FROM review_grades g
                         WHERE g.set_id = r.set_id AND g.reviewer = r.reviewer AND g.verdict = 'skip'
                           AND {NEWEST_GRADE}),
                        (SELECT count(*) FROM review_grades g
                         WHERE g.set_id = r.set_id AND g.reviewer = r.reviewer),
                        (SELECT count(DISTINCT v.item_no) FROM review_votes v
                         WHERE v.set_id = r.set_id AND v.reviewer = r.reviewer),
                        (SELECT count(*) FROM review_votes v
                         WHERE v.set_id = r.set_id AND v.reviewer = r.reviewer)
                     FROM review_reviewers r WHERE r.set_id = ?1 ORDER BY r.reviewer"
                ),
                args![set_id],
            )?;
            rows.iter()
                .map(|r| {
                    Ok(ReviewerStatus {
                        reviewer: r.get(0)?,
                        revoked_ms: r.get(1)?,
                        assigned: r.get(2)?,
                        // A set holds grades or votes, never both: a voted item counts as graded.
                        graded: r.get::<u32>(3)? + r.get::<u32>(6)?,
                        skipped: r.get(4)?,
                        grade_rows: r.get::<u32>(5)? + r.get::<u32>(7)?,
                    })
                })
                .collect::<DbResult<_>>()
                .map_err(Into::into)
        })
    }

    /// Revokes a reviewer's token; `false` when the set has no such reviewer (or it was already revoked).
    pub fn revoke_reviewer(&self, set_id: &str, reviewer: &str) -> Result<bool> {
        self.write("revoke a reviewer", |db| {
            let changed = db.exec(
                "UPDATE review_reviewers SET revoked_ms = ?3
                 WHERE set_id = ?1 AND reviewer = ?2 AND revoked_ms IS NULL",
                args![set_id, reviewer, now_ms()],
            )?;
            Ok(changed == 1)
        })
    }

    /// The item at `position` (1-based) of a reviewer's list, or `None` past either end.
    pub fn assigned_item(
        &self,
        set_id: &str,
        reviewer: &str,
        position: u32,
    ) -> Result<Option<AssignedItem>> {
        self.read("read a reviewer's item", |db| {
            let total: u32 = scalar(
                db,
                "SELECT count(*) FROM review_assignments WHERE set_id = ?1 AND reviewer = ?2",
                args![set_id, reviewer],
            )?;
            let row = db.query_opt(
                "SELECT i.item_no, i.run_id, i.task_id, i.sample_index, i.shared
                 FROM review_assignments a
                 JOIN review_items i ON i.set_id = a.set_id AND i.item_no = a.item_no
                 WHERE a.set_id = ?1 AND a.reviewer = ?2 AND a.position = ?3",
                args![set_id, reviewer, position],
            )?;
            Ok(row
                .map(|r| {
                    Ok::<_, crate::db::DbError>(AssignedItem {
                        position,
                        total,
                        item: item_of(&r)?,
                    })
                })
                .transpose()?)
        })
    }

    /// The first position in a reviewer's list with no grade yet (where they resume); `None` when every item has
    /// one.
    pub fn first_ungraded(&self, set_id: &str, reviewer: &str) -> Result<Option<u32>> {
        self.read("find where a reviewer resumes", |db| {
            Ok(scalar(
                db,
                "SELECT min(a.position) FROM review_assignments a
                 WHERE a.set_id = ?1 AND a.reviewer = ?2 AND NOT EXISTS (
                     SELECT 1 FROM review_grades g
                     WHERE g.set_id = a.set_id AND g.reviewer = a.reviewer AND g.item_no = a.item_no
                       AND g.verdict IS NOT NULL) AND NOT EXISTS (
                     SELECT 1 FROM review_votes v
                     WHERE v.set_id = a.set_id AND v.reviewer = a.reviewer AND v.item_no = a.item_no)",
                args![set_id, reviewer],
            )?)
        })
    }

    /// Appends a grade; the item must be assigned to the reviewer. Returns the new row's id.
    pub fn append_grade(
        &self,
        set_id: &str,
        reviewer: &str,
        item_no: u32,
        rubric_hash: &str,
        grade: &Grade,
    ) -> Result<i64> {
        let scores = serde_json::to_string(&grade.scores).expect("a map of scores serialises");
        let criteria = (!grade.criteria.is_empty())
            .then(|| serde_json::to_string(&grade.criteria).expect("a map of marks serialises"));
        self.write("store a grade", |db| {
            Ok(scalar(
                db,
                "INSERT INTO review_grades
                     (set_id, reviewer, item_no, created_ms, rubric_hash, verdict, scores, taxonomy, comment,
                      criteria)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
                 RETURNING id",
                args![
                    set_id,
                    reviewer,
                    item_no,
                    now_ms(),
                    rubric_hash,
                    grade.verdict.as_deref(),
                    scores,
                    grade.taxonomy.as_deref(),
                    grade.comment.as_deref(),
                    criteria
                ],
            )?)
        })
    }

    /// The newest grade of every (reviewer, item) of a set, by reviewer then item.
    pub fn latest_grades(&self, set_id: &str) -> Result<Vec<StoredGrade>> {
        self.read("read a review set's grades", |db| {
            let rows = db.query(
                &format!(
                    "{GRADE_SELECT} WHERE g.set_id = ?1 AND {NEWEST_GRADE}
                     ORDER BY g.reviewer, g.item_no"
                ),
                args![set_id],
            )?;
            Ok(rows.iter().map(grade_of).collect::<DbResult<_>>()?)
        })
    }

    /// Every grade row one reviewer wrote for one item, oldest first (the audit trail).
    pub fn grade_history(
        &self,
        set_id: &str,
        reviewer: &str,
        item_no: u32,
    ) -> Result<Vec<StoredGrade>> {
        self.read("read a grade's history", |db| {
            let rows = db.query(
                &format!(
                    "{GRADE_SELECT} WHERE g.set_id = ?1 AND g.reviewer = ?2 AND g.item_no = ?3
                     ORDER BY g.id"
                ),
                args![set_id, reviewer, item_no],
            )?;
            Ok(rows.iter().map(grade_of).collect::<DbResult<_>>()?)
        })
    }

    /// Every B answer of a pairwise set, in item order (empty for a set that grades).
    pub fn review_pairs(&self, set_id: &str) -> Result<Vec<ReviewPair>> {
        self.read("read a review set's pairs", |db| {
            let rows = db.query(
                "SELECT item_no, run_id, sample_index FROM review_pairs WHERE set_id = ?1 ORDER BY item_no",
                args![set_id],
            )?;
            Ok(rows.iter().map(pair_of).collect::<DbResult<_>>()?)
        })
    }

    /// The B answer of one item of a pairwise set.
    pub fn review_pair(&self, set_id: &str, item_no: u32) -> Result<Option<ReviewPair>> {
        self.read("read a review pair", |db| {
            let row = db.query_opt(
                "SELECT item_no, run_id, sample_index FROM review_pairs WHERE set_id = ?1 AND item_no = ?2",
                args![set_id, item_no],
            )?;
            Ok(row.map(|r| pair_of(&r)).transpose()?)
        })
    }

    /// Appends a vote; the item must be assigned to the reviewer. Returns the new row's id.
    pub fn append_vote(
        &self,
        set_id: &str,
        reviewer: &str,
        item_no: u32,
        vote: &Vote,
    ) -> Result<i64> {
        self.write("store a vote", |db| {
            Ok(scalar(
                db,
                "INSERT INTO review_votes (set_id, reviewer, item_no, created_ms, choice, comment)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 RETURNING id",
                args![
                    set_id,
                    reviewer,
                    item_no,
                    now_ms(),
                    vote.choice.as_str(),
                    vote.comment.as_deref()
                ],
            )?)
        })
    }

    /// The newest vote of every (reviewer, item) of a set, by reviewer then item.
    pub fn latest_votes(&self, set_id: &str) -> Result<Vec<StoredVote>> {
        self.read("read a review set's votes", |db| {
            let rows = db.query(
                "SELECT v.id, v.reviewer, v.item_no, v.created_ms, v.choice, v.comment FROM review_votes v
                 WHERE v.set_id = ?1 AND v.id = (
                     SELECT max(w.id) FROM review_votes w
                     WHERE w.set_id = v.set_id AND w.reviewer = v.reviewer AND w.item_no = v.item_no)
                 ORDER BY v.reviewer, v.item_no",
                args![set_id],
            )?;
            Ok(rows.iter().map(vote_of).collect::<DbResult<_>>()?)
        })
    }

    /// Every vote one reviewer cast on one item, oldest first (the audit trail).
    pub fn vote_history(
        &self,
        set_id: &str,
        reviewer: &str,
        item_no: u32,
    ) -> Result<Vec<StoredVote>> {
        self.read("read a vote's history", |db| {
            let rows = db.query(
                "SELECT v.id, v.reviewer, v.item_no, v.created_ms, v.choice, v.comment FROM review_votes v
                 WHERE v.set_id = ?1 AND v.reviewer = ?2 AND v.item_no = ?3 ORDER BY v.id",
                args![set_id, reviewer, item_no],
            )?;
            Ok(rows.iter().map(vote_of).collect::<DbResult<_>>()?)
        })
    }

    /// Appends a human's answer to one turn of a task. Returns the new row's id.
    pub fn append_human_answer(
        &self,
        human: &str,
        suite_hash: &str,
        answer: &HumanAnswer,
    ) -> Result<i64> {
        self.write("store a human answer", |db| {
            Ok(scalar(
                db,
                "INSERT INTO human_answers (human, suite_hash, task_id, turn_index, created_ms, source, text)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                 RETURNING id",
                args![
                    human,
                    suite_hash,
                    answer.task_id.as_str(),
                    answer.turn_index,
                    answer.created_ms,
                    answer.source.as_str(),
                    answer.text.as_str()
                ],
            )?)
        })
    }

    /// The newest answer of a human to each turn of each task of a suite, by task then turn.
    pub fn human_answers(&self, human: &str, suite_hash: &str) -> Result<Vec<HumanAnswer>> {
        self.read("read human answers", |db| {
            let rows = db.query(
                "SELECT a.task_id, a.turn_index, a.created_ms, a.source, a.text FROM human_answers a
                 WHERE a.human = ?1 AND a.suite_hash = ?2 AND a.id = (
                     SELECT max(b.id) FROM human_answers b
                     WHERE b.human = a.human AND b.suite_hash = a.suite_hash AND b.task_id = a.task_id
                       AND b.turn_index = a.turn_index)
                 ORDER BY a.task_id, a.turn_index",
                args![human, suite_hash],
            )?;
            rows.iter()
                .map(|r| {
                    Ok(HumanAnswer {
                        task_id: r.get(0)?,
                        turn_index: r.get(1)?,
                        created_ms: r.get(2)?,
                        source: r.get(3)?,
                        text: r.get(4)?,
                    })
                })
                .collect::<DbResult<_>>()
                .map_err(Into::into)
        })
    }
}

/// A review set's columns; `s` is `review_sets`.
const SET_COLUMNS: &str = "set_id, created_ms, rubric_hash, rubric, seed, overlap, runs, show_thinking, \
                           CASE WHEN EXISTS (SELECT 1 FROM review_pairs p WHERE p.set_id = s.set_id) \
                           THEN 1 ELSE 0 END, criteria_name, criteria";

/// Grade row `g` is the newest of its reviewer and item (the grade; older rows are its history).
const NEWEST_GRADE: &str = "g.id = (SELECT max(h.id) FROM review_grades h \
                            WHERE h.set_id = g.set_id AND h.reviewer = g.reviewer AND h.item_no = g.item_no)";

const GRADE_SELECT: &str =
    "SELECT g.id, g.reviewer, g.item_no, g.created_ms, g.rubric_hash, g.verdict, \
                            g.scores, g.taxonomy, g.comment, g.criteria FROM review_grades g";

fn insert_reviewer(db: &mut dyn Db, set_id: &str, r: &NewReviewer, now: i64) -> DbResult<()> {
    db.exec(
        "INSERT INTO review_reviewers (set_id, reviewer, token_sha256, created_ms) VALUES (?1, ?2, ?3, ?4)",
        args![set_id, r.reviewer.as_str(), r.token_sha256.as_str(), now],
    )?;
    for (i, item_no) in r.items.iter().enumerate() {
        db.exec(
            "INSERT INTO review_assignments (set_id, reviewer, position, item_no) VALUES (?1, ?2, ?3, ?4)",
            args![set_id, r.reviewer.as_str(), i as i64 + 1, *item_no],
        )?;
    }
    Ok(())
}

fn review_set_of(r: &Row) -> DbResult<ReviewSet> {
    let runs: String = r.get(6)?;
    Ok(ReviewSet {
        set_id: r.get(0)?,
        created_ms: r.get(1)?,
        rubric_hash: r.get(2)?,
        rubric: r.get(3)?,
        seed: r.get::<i64>(4)? as u64,
        overlap: r.get(5)?,
        runs: serde_json::from_str(&runs).map_err(|_| crate::db::DbError::Decode {
            column: 6,
            expected: "a JSON list of run ids",
            found: "other JSON",
        })?,
        show_thinking: r.get(7)?,
        pairwise: r.get(8)?,
        criteria: match (r.get::<Option<String>>(9)?, r.get::<Option<String>>(10)?) {
            (Some(name), Some(text)) => Some(CriteriaFile { name, text }),
            _ => None,
        },
    })
}

fn pair_of(r: &Row) -> DbResult<ReviewPair> {
    Ok(ReviewPair {
        item_no: r.get(0)?,
        run_id: r.get(1)?,
        sample_index: r.get(2)?,
    })
}

fn vote_of(r: &Row) -> DbResult<StoredVote> {
    Ok(StoredVote {
        id: r.get(0)?,
        reviewer: r.get(1)?,
        item_no: r.get(2)?,
        created_ms: r.get(3)?,
        vote: Vote {
            choice: r.get(4)?,
            comment: r.get(5)?,
        },
    })
}

fn item_of(r: &Row) -> DbResult<ReviewItem> {
    Ok(ReviewItem {
        item_no: r.get(0)?,
        run_id: r.get(1)?,
        task_id: r.get(2)?,
        sample_index: r.get(3)?,
        shared: r.get(4)?,
    })
}

fn grade_of(r: &Row) -> DbResult<StoredGrade> {
    let scores: String = r.get(6)?;
    Ok(StoredGrade {
        id: r.get(0)?,
        reviewer: r.get(1)?,
        item_no: r.get(2)?,
        created_ms: r.get(3)?,
        rubric_hash: r.get(4)?,
        grade: Grade {
            verdict: r.get(5)?,
            scores: serde_json::from_str(&scores).map_err(|_| crate::db::DbError::Decode {
                column: 6,
                expected: "a JSON object of dimension scores",
                found: "other JSON",
            })?,
            taxonomy: r.get(7)?,
            comment: r.get(8)?,
            criteria: match r.get::<Option<String>>(9)? {
                None => BTreeMap::new(),
                Some(text) => {
                    serde_json::from_str(&text).map_err(|_| crate::db::DbError::Decode {
                        column: 9,
                        expected: "a JSON object of criterion marks",
                        found: "other JSON",
                    })?
                }
            },
        },
    })
}
