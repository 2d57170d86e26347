//! nmb-review: blinded clinician review of stored answers.
//!
//! It owns the rules of a review: which answers go into a review set and in what order each reviewer sees them
//! ([`assign`]: shuffled, an overlap share graded by everyone), reviewer tokens (random, 256 bits; only their
//! SHA-256 is stored: [`new_token`], [`hash_token`]), checking a grade a reviewer submits against the rubric
//! ([`check_grade`]), and turning a review set's stored grades, beside the judges' stored rubric scores, into
//! the ratings `nmb-calibration` measures agreement on ([`review_ratings`]). It also owns how a review's
//! agreement and corrected rates are shown ([`tables`]: one set of tables, and the "Judges against clinicians"
//! section that the report and `nmb serve`'s run page both render from them).
//! A set can be pairwise ([`assign_pairs`]): two runs' answers to the same task side by side, in a recorded
//! random order, and a vote between them ([`check_vote`]); its votes become a Bradley–Terry ranking with
//! Davidson's ties, style-controlled, with bootstrap intervals over tasks ([`run_pairwise`]).
//! It also reads what a set is built from: the rubric file ([`load_rubric`]) and the answered samples of the runs
//! ([`candidates`]).
//!
//! It does not store anything itself (`nmb-store` holds sets, grades and tokens' hashes), serve pages
//! (`nmb-serve`), compute agreement statistics (`nmb-calibration`, `nmb-stats`), score or ask a model (it reads
//! scores through `nmb-results`; judges' pairwise votes are asked by `nmb-judges` over [`pairs_to_judge`]) or
//! parse command lines (`nmb`).

mod assign;
pub mod bias;
mod calibration;
mod create;
mod grade;
mod inputs;
mod judge_votes;
mod pairwise;
mod plan;
mod preference;
mod ratings;
mod status;
pub mod tables;
mod token;

pub use assign::{assign, AssignOptions, Assignment, Candidate};
pub use calibration::{review_options, run_calibrations, RunCalibration, DEFAULT_RUBRIC_PASS};
pub use create::{create_set, CreatedSet, NewSet};
pub use grade::{check_grade, GradeForm, COMMENT_LIMIT, TAXONOMY, VERDICTS};
pub use inputs::{candidates, load_criteria, load_rubric, set_criteria};
pub use judge_votes::{
    judges_beside_clinicians, pairs_to_judge, stored_judge_pairwise, AnswerRef, JudgePairwise,
    SetPairs,
};
pub use pairwise::{
    assign_pairs, check_vote, pair_candidates, PairAssignment, PairCandidate, VoteForm,
};
pub use plan::{review_plan, JudgePlan, ReviewPlan};
pub use preference::{
    pair_votes, rank_votes, run_pairwise, ModelRating, PairVote, PairwiseRanking, Style,
    RATING_BASE, RATING_SCALE,
};
pub use ratings::{
    item_key, review_ratings, ReviewRatings, GRADER, VERDICT_DIMENSION, VERDICT_PASS,
};
pub use status::{status_json, status_text, thinking_line};
pub use token::{hash_token, new_set_id, new_token};

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("review: {0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] nmb_store::StoreError),
    #[error(transparent)]
    Results(Box<nmb_results::ResultsError>),
    #[error("review of run {run_id}: {source}")]
    Run {
        run_id: String,
        #[source]
        source: Box<nmb_store::StoreError>,
    },
    #[error("cannot read the rubric {path}: {source}")]
    RubricRead {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("rubric {path}: {source}")]
    Rubric {
        path: std::path::PathBuf,
        #[source]
        source: Box<nmb_results::ResultsError>,
    },
}

impl From<nmb_results::ResultsError> for ReviewError {
    fn from(e: nmb_results::ResultsError) -> Self {
        ReviewError::Results(Box::new(e))
    }
}
