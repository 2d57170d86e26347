//! What a review set is built from: the rubric reviewers grade with, and the answered samples of the runs.

use std::path::Path;

use nmb_results::criteria::CriterionRubric;
use nmb_results::Rubric;
use nmb_store::{CriteriaFile, ReviewSet, SampleStatus, Store};

use crate::{Candidate, ReviewError};

/// The criterion rubric at `path`, checked, as the set stores it: its name and its text.
pub fn load_criteria(path: &Path) -> Result<CriteriaFile, ReviewError> {
    let rubric = CriterionRubric::load(path)?;
    let text =
        nmb_suite::limits::read_to_string_io(path).map_err(|source| ReviewError::RubricRead {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(CriteriaFile {
        name: rubric.source,
        text,
    })
}

/// A stored set's criterion rubric, parsed; `None` when the set has none.
pub fn set_criteria(set: &ReviewSet) -> Result<Option<CriterionRubric>, ReviewError> {
    set.criteria
        .as_ref()
        .map(|c| CriterionRubric::parse(&c.text, &c.name).map_err(ReviewError::from))
        .transpose()
}

/// The rubric at `path` (default: the bundled neurology rubric) and its text as read, which the review set
/// stores beside its hash so that grades can always be read against the rubric they were given under.
pub fn load_rubric(path: Option<&Path>) -> Result<(Rubric, String), ReviewError> {
    match path {
        None => Ok((
            Rubric::builtin(),
            nmb_results::rubric::BUILTIN_NEUROLOGY_V1.to_string(),
        )),
        Some(p) => {
            let text = nmb_suite::limits::read_to_string_io(p).map_err(|source| {
                ReviewError::RubricRead {
                    path: p.to_path_buf(),
                    source,
                }
            })?;
            let rubric = Rubric::parse(&text, &p.display().to_string()).map_err(|source| {
                ReviewError::Rubric {
                    path: p.to_path_buf(),
                    source: Box::new(source),
                }
            })?;
            Ok((rubric, text))
        }
    }
}

/// The answered samples of the runs (errored and pending ones have no answer to grade).
pub fn candidates(store: &Store, runs: &[String]) -> Result<Vec<Candidate>, ReviewError> {
    let mut out = Vec::new();
    for run_id in runs {
        let in_run = |source| ReviewError::Run {
            run_id: run_id.clone(),
            source: Box::new(source),
        };
        store.run(run_id).map_err(in_run)?;
        let states = store.sample_states(run_id)?;
        let answered = states.into_iter().filter(|s| s.status == SampleStatus::Ok);
        out.extend(answered.map(|s| Candidate {
            run_id: run_id.clone(),
            task_id: s.task_id,
            sample_index: s.sample_index,
        }));
    }
    Ok(out)
}
