//! Errors from loading templates and planning tasks. Each names the template, case, task or image concerned.

use std::path::PathBuf;

use nmb_imaging::{ImageError, ImageFormat};

#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("cannot read template file {path}: {source}")]
    TemplateRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Syntax errors, undefined variables, failed expressions, missing blocks.
    #[error("template {template}: {message}")]
    Template { template: String, message: String },
    /// The template did not place each of a message's images exactly once, or mangled an image marker.
    #[error("template {template}, task {task}: {message}")]
    ImagePlacement {
        template: String,
        task: String,
        message: String,
    },
    #[error("case {case}, image {image} ({source_desc}): {source}")]
    Image {
        case: String,
        image: String,
        source_desc: String,
        #[source]
        source: ImageError,
    },
    #[error(
        "case {case}, image {image} ({source_desc}): {format} images cannot be sent to a model as they are; \
         expected PNG, JPEG, GIF or WebP, or a volume (DICOM, NIfTI) given as a file path so it can be rendered"
    )]
    UnsupportedImageFormat {
        case: String,
        image: String,
        source_desc: String,
        format: ImageFormat,
    },
    #[error(
        "case {case}, image {image} ({source_desc}): bytes changed since the suite was loaded \
         (sha256 was {expected}, now {actual})"
    )]
    ImageChanged {
        case: String,
        image: String,
        source_desc: String,
        expected: String,
        actual: String,
    },
    #[error("case {case}, image {image}: {message}")]
    Volume {
        case: String,
        image: String,
        message: String,
    },
    /// A caller asked for a turn the task does not have, or gave too few earlier answers.
    #[error("task {task}: {message}")]
    Turn { task: String, message: String },
    /// Any of the above, for one task of a plan.
    #[error("task {task}: {source}")]
    InTask {
        task: String,
        #[source]
        source: Box<PlanError>,
    },
    /// A few-shot example that cannot be shown (its image unreadable).
    #[error("few-shot example {at}: {message}")]
    FewShot { at: String, message: String },
    /// Few-shot examples given where a task or template cannot take them.
    #[error("few-shot examples: {0}")]
    FewShotUse(String),
    /// A perturbation that cannot be carried out on this suite (`PlanOptions::perturbation`).
    #[error("--perturb {message}")]
    Perturbation { message: String },
    #[error("suite default {key}: {message}")]
    SuiteDefault { key: String, message: String },
}
