//! LLM judges: asking one model or a jury questions whose answers must be strict JSON, through the same
//! backends, scheduler, recorder and store as evaluation runs.
//!
//! - the panel ([`Panel`], [`judge`]): one judge run per judge and scored run, every question a sample, every
//!   attempt a recorded turn, answers reused from the store, each judge's repeats (`--judge-repeats`) combined
//!   by their median ([`judge::Repeated`]);
//! - the questions and the strict reading of their answers ([`prompts`]: clinical equivalence, rubric grading,
//!   the error taxonomy; [`rubric`]: the grading rubric as a judge reads and answers it; [`criteria`]: each
//!   criterion of a criterion rubric);
//! - the jury ([`jury`]): a jury's verdicts combined into one, and how much its judges agree;
//! - pairwise votes ([`pairwise`]): which of two answers is better, asked in both orders.
//!
//! What the judges' verdicts become (the per-sample verdict types, the recorded judge, the rubric as data, the
//! self-grading rule, stored pairwise votes) is `nmb-results`, so that readers of scores never link this crate.
//! When to ask which question, and what a verdict means for a score, is `nmb-score`. Judges are handed in
//! connected ([`JudgeModel`]); this crate does not load models.

pub mod criteria;
mod error;
pub mod judge;
pub mod jury;
pub mod pairwise;
pub mod prompts;
pub mod rubric;

pub use error::JudgeError;
pub use judge::{JudgeModel, Panel};
