//! Which runs of a shared store a worker can work on, each with the evaluation its manifest records.

use nmb_store::{now_ms, Manifest, RunKind, RunStatus, Store, StoreError};

use crate::{ConfigError, EvalConfig};

/// Why a run cannot be worked on.
#[derive(Debug, thiserror::Error)]
pub enum WorkError {
    #[error("no run {run_id}: {source}")]
    NoRun {
        run_id: String,
        #[source]
        source: Box<StoreError>,
    },
    #[error(transparent)]
    Store(Box<StoreError>),
    #[error("run {run_id}: {why}")]
    Unusable { run_id: String, why: String },
}

impl From<StoreError> for WorkError {
    fn from(e: StoreError) -> Self {
        WorkError::Store(Box::new(e))
    }
}

/// The run `only` names, or every unfinished model run with work left, newest first; each with its recorded
/// configuration.
pub fn runs_with_work(
    store: &Store,
    only: Option<&str>,
) -> Result<Vec<(String, EvalConfig)>, WorkError> {
    if let Some(id) = only {
        let run = store.run(id).map_err(|source| WorkError::NoRun {
            run_id: id.to_string(),
            source: Box::new(source),
        })?;
        return Ok(vec![(
            run.run_id.clone(),
            recorded(&run.run_id, &run.manifest)?,
        )]);
    }
    let mut out = Vec::new();
    for run in store.list_runs()? {
        let open = run.status == RunStatus::Running && run.manifest.kind == RunKind::Model;
        if open && run.manifest.eval_config.is_some() && store.work_left(&run.run_id, now_ms())? > 0
        {
            out.push((run.run_id.clone(), recorded(&run.run_id, &run.manifest)?));
        }
    }
    Ok(out)
}

/// The evaluation a run's manifest records.
fn recorded(run_id: &str, manifest: &Manifest) -> Result<EvalConfig, WorkError> {
    let unusable = |why: &str| WorkError::Unusable {
        run_id: run_id.to_string(),
        why: why.to_string(),
    };
    match &manifest.eval_config {
        Some(value) => EvalConfig::from_recorded(value)
            .map_err(|e: ConfigError| unusable(&e.to_string())),
        None if manifest.worker_args.is_some() => Err(unusable(
            "it was planned by an older nmb, which recorded command-line arguments instead of a configuration; \
             plan it again with `nmb eval --plan-only` (stored answers are reused, none is asked twice)",
        )),
        None => Err(unusable(
            "it did not record its configuration (it was not made by `nmb eval`)",
        )),
    }
}
