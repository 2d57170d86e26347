//! Checks that need image bytes (every image resolves, is a known format and decodes in full) and the counts
//! behind `nmb suite stats`.

use std::collections::BTreeMap;

use nmb_imaging::{ImageError, ImageFormat, ImageSource};
use serde::Serialize;

use super::Loaded;
use crate::{suite_hash, Image, Problem, Suite};

/// What reading the start of every image found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ImageReport {
    /// Image slots in cases and turns.
    pub images: usize,
    /// Format name (`png`, `jpeg`, ...) → count, for images whose bytes were recognised.
    pub formats: BTreeMap<String, usize>,
    /// One error per image that is missing, empty, not a known format, or does not decode.
    pub problems: Vec<Problem>,
}

/// Reads and decodes every image of the suite in full, one at a time (see `nmb_imaging::verify`).
pub fn check_images(suite: &Suite) -> ImageReport {
    let mut report = ImageReport::default();
    for case in &suite.cases {
        for (i, image) in case.images.iter().enumerate() {
            report.check(&case.id, format!("images[{i}]"), image);
        }
        for task in &case.tasks {
            for (t, turn) in task.turns.iter().enumerate() {
                for (i, image) in turn.images.iter().enumerate() {
                    report.check(
                        &case.id,
                        format!("task {} turns[{t}].images[{i}]", task.id),
                        image,
                    );
                }
            }
        }
    }
    report
}

impl ImageReport {
    fn check(&mut self, case_id: &str, field: String, image: &Image) {
        self.images += 1;
        if image.render.is_some() {
            return self.check_volume(case_id, field, image);
        }
        match verify_source(&image.source) {
            Ok(format) => *self.formats.entry(format.name().to_string()).or_default() += 1,
            Err(e) => {
                let file = match &image.origin {
                    Some(origin) => origin.clone(),
                    None => image.source.describe(),
                };
                let message = match &e {
                    ImageError::Decode { .. } => {
                        format!("{e}; expected a complete image that decodes")
                    }
                    _ => e.to_string(),
                };
                let problem = Problem::error(file, message).case(case_id).field(field);
                self.problems.push(problem);
            }
        }
    }
}

impl ImageReport {
    /// A volume is rendered in full, so an unsupported transfer syntax or a bad option shows up here.
    fn check_volume(&mut self, case_id: &str, field: String, image: &Image) {
        let (Some(path), Some(opts)) = (image.source.path(), &image.render) else {
            return;
        };
        match nmb_imaging::render_path(path, opts) {
            Ok((_, meta)) => {
                *self
                    .formats
                    .entry(meta.format.name().to_string())
                    .or_default() += 1
            }
            Err(e) => {
                let problem = Problem::error(path.display().to_string(), e.to_string())
                    .case(case_id)
                    .field(field);
                self.problems.push(problem);
            }
        }
    }
}

fn verify_source(source: &ImageSource) -> Result<ImageFormat, ImageError> {
    nmb_imaging::verify(&source.read()?)
}

/// The counts printed by `nmb suite stats --json`.
#[derive(Debug, Clone, Serialize)]
pub struct SuiteStats {
    pub id: String,
    pub version: String,
    pub format: String,
    /// The suite content hash; `None` when an image could not be read to hash it.
    pub hash: Option<String>,
    /// Every case slot in the input, empty placeholders included (`cases_with_content + empty_cases`).
    pub cases: usize,
    /// Cases that are loaded and can be run.
    pub cases_with_content: usize,
    pub empty_cases: usize,
    pub tasks: usize,
    pub images: usize,
    pub image_formats: BTreeMap<String, usize>,
    pub by_family: BTreeMap<String, usize>,
    pub by_level: BTreeMap<String, usize>,
    /// Tasks with a reference answer.
    pub with_reference: usize,
    /// Later turns across all multi-turn tasks.
    pub turns: usize,
    /// Case language → number of cases (`unknown` where none is recorded).
    pub languages: BTreeMap<String, usize>,
    /// Problems found while loading and checking images.
    pub errors: usize,
    pub warnings: usize,
}

/// Counts for a loaded suite; `images` is the result of [`check_images`] on the same suite.
pub fn stats(loaded: &Loaded, images: &ImageReport) -> SuiteStats {
    let suite = &loaded.suite;
    let mut by_family = BTreeMap::new();
    let mut by_level = BTreeMap::new();
    for (_, task) in suite.tasks() {
        *by_family
            .entry(task.family.as_str().to_string())
            .or_default() += 1;
        *by_level.entry(task.level.as_str().to_string()).or_default() += 1;
    }
    let mut languages = BTreeMap::new();
    for case in &suite.cases {
        let lang = case.language.clone().unwrap_or_else(|| "unknown".into());
        *languages.entry(lang).or_default() += 1;
    }
    let image_errors = images.problems.len();
    SuiteStats {
        id: suite.id.clone(),
        version: suite.version.clone(),
        format: suite.format.clone(),
        hash: suite_hash(suite).ok(),
        cases: suite.cases.len() + suite.empty_cases.len(),
        cases_with_content: suite.cases.len(),
        empty_cases: suite.empty_cases.len(),
        tasks: suite.task_count(),
        images: images.images,
        image_formats: images.formats.clone(),
        by_family,
        by_level,
        with_reference: suite.tasks().filter(|(_, t)| t.reference.is_some()).count(),
        turns: suite.tasks().map(|(_, t)| t.turns.len()).sum(),
        languages,
        errors: loaded.error_count() + image_errors,
        warnings: loaded.warning_count(),
    }
}
