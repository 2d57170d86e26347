//! Calibrating graders against clinicians.
//!
//! This crate owns reading clinician and judge ratings (`annotator,item,dimension,score` CSV, see
//! [`Ratings`]) and measuring agreement on each rubric dimension: between every pair of annotators, within the
//! clinicians, within the judges (a jury), and between each judge and the clinicians' consensus; and, given a pass
//! threshold, each judge's pass rate corrected for its sensitivity and specificity against the clinicians
//! (Rogan–Gladen), and where each judge stands among the clinicians ([`Standing`]); and, for criterion marks
//! (`criterion:*` dimensions, met 1 / not met 0), each judge's and each clinician's balanced F1 against the
//! clinicians, HealthBench's meta-evaluation ([`criteria`]). Every statistic carries a seeded bootstrap interval.
//!
//! It does not compute the statistics themselves (`nmb-stats`), call judges or score runs (`nmb-score`), or
//! parse command lines (`nmb`). Annotators are judges when named as such in [`AgreementOptions`] or when their
//! name starts with `judge:`; everyone else counts as a clinician.

mod analysis;
pub mod criteria;
mod estimate;
mod ratings;
mod standing;
mod text;

use std::path::PathBuf;

pub use analysis::{
    analyse, AgreementOptions, AgreementReport, AnnotatorSummary, CalibratedPassRate,
    CorrectedPassRate, DimensionReport, GroupAgreement, JudgeAgreement, MeasureResult,
    PairAgreement, Role,
};
pub use ratings::{Rating, Ratings, REQUIRED_COLUMNS};
pub use standing::{standing, Standing};
pub use text::render_text;

#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    #[error("cannot read ratings file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}", problems.join("\n"))]
    Invalid { problems: Vec<String> },
}
