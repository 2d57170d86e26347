//! The benchmark content model for nmb and the loaders that build it.
//!
//! This crate owns what a benchmark *is*: a [`Suite`] of [`Case`]s, each with images, EHR fields, notes and
//! [`Task`]s, each task with an optional [`Reference`]. It also owns reading suites from disk (the
//! Neural-MedBench site file, the native hand-written format, breadth datasets such as VQA-RAD and MedQA), the
//! bundled `sample` suite, validation problems, the suite content hash, and the typed [`Source`] an evaluation records
//! to load the same suite again. [`describe`] holds the plain-text views of a suite's counts and of one case that
//! `nmb suite stats` and `nmb suite show` print (and writes a case's rendered volume views).
//!
//! It does not own prompts (`nmb-plan`), model calls (`nmb-requests`), storage (`nmb-store`) or scoring
//! (`nmb-score`). Image bytes are handled by `nmb-imaging`; a suite holds image *sources* and never keeps
//! decoded pixels.

pub mod describe;
pub mod formats;
mod hash;
pub mod limits;
mod model;
pub mod neurovlm_schema;
mod problem;
pub mod sample;
mod source;

pub use formats::{
    check_images, load, stats, Filter, Format, ImageReport, LoadOptions, Loaded, SuiteStats,
};
pub use hash::{image_hash, suite_hash, task_hash};
pub use model::*;
pub use problem::{group_problems, Problem, ProblemGroup, Severity};
pub use source::{absolute_spec, parse_map, Source, SourceError};

/// NeuroVLM-Bench's answer schema (classes, subtypes, ICD-10 prefixes, allowed values, abstentions, aliases):
/// the `neurovlm:` loader checks labels against it and `nmb-score` reads answers with it.
pub const NEUROVLM_SCHEMA: &str = include_str!("../data/neurovlm.toml");

/// Errors that stop a suite from loading at all. Problems inside a readable suite are [`Problem`]s instead.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Image(#[from] nmb_imaging::ImageError),
    #[error("{0}")]
    Volume(#[from] nmb_imaging::VolumeError),
    /// Boxed, so that the errors that carry a `SuiteError` stay small.
    #[error("{0}")]
    Invalid(Box<Problem>),
    #[error("{0}")]
    Spec(String),
    /// A file over the size cap ([`limits::max_file_bytes`]) or not text.
    #[error("{0}")]
    File(limits::FileError),
}

impl From<limits::FileError> for SuiteError {
    fn from(e: limits::FileError) -> Self {
        match e {
            limits::FileError::Read { path, source } => SuiteError::Read { path, source },
            other => SuiteError::File(other),
        }
    }
}
