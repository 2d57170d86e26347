//! The read model of scores: every type `nmb score` writes (as JSON and into the store) and every reader reads
//! back, and the pure computations readers need over them.
//!
//! - the score report ([`ScoreReport`], [`report`]): the recorded scoring configuration, per-task scores, the
//!   aggregates and breakdowns with their confidence intervals, judge agreement, and the comparison of two runs
//!   ([`Comparison`], computed by [`compare::compare`]);
//! - per-sample scores ([`SampleScore`], [`sample`]), built by one constructor ([`SampleScore::new`]);
//! - the data of the report's sections: stability across judge repeats with the rule that calls an item unstable
//!   ([`stability`]), revision across consult turns ([`revision`]), NeuroVLM-Bench's structured numbers with
//!   their efficiency figures ([`structured`]), criterion rubrics with HealthBench's scoring rule
//!   ([`criteria`]), label sets ([`label_set`]), the thinking probe ([`thinking_probe`]), costs and prices
//!   ([`cost`]), and the breakdown by a field of the cases with its subgroups' intervals ([`subgroup`]);
//! - the grading rubric as data ([`rubric`]), which review forms show, and model families with the
//!   self-grading rule ([`family`]);
//! - score reports in the store ([`stored`]), and judges' pairwise votes as they are stored ([`pairwise`]).
//!
//! It does not parse answers, match diagnoses or ask judges (that is `nmb-score` and `nmb-judges`), so a reader
//! of scores (the report, the viewer, review) links no HTTP backend and no recorder. Besides `nmb-chat` (model
//! specs, for model families) and `nmb-stats` (estimates, and the statistics of the comparison and the
//! efficiency figures), it depends on `nmb-store`, only to read and write stored score reports, and on
//! `nmb-suite`, for the families and levels every score is grouped by and the size caps of the rubric files it
//! reads, and on `nmb-table`, to quote a line of a bad criteria file in its error; none asks a model.

pub mod compare;
pub mod cost;
pub mod criteria;
mod error;
pub mod family;
pub mod label_set;
pub mod multiplicity;
pub mod pairwise;
pub mod power;
pub mod probe;
pub mod report;
pub mod revision;
pub mod rubric;
pub mod sample;
pub mod stability;
pub mod stored;
pub mod structured;
pub mod subgroup;
pub mod subgroup_breakdown;
pub mod thinking_probe;

pub use error::ResultsError;
pub use report::*;
pub use rubric::Rubric;
pub use sample::*;
