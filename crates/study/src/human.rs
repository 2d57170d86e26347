//! The run of a person's stored answers on a suite (`human:NAME`), built by the very evaluation
//! `nmb eval --model human:NAME --samples 1` runs. `nmb import` and the answer pages build it the same way.

use std::path::PathBuf;
use std::sync::Arc;

use nmb_requests::ModelSpec;
use nmb_run::stored::latest_run;
use nmb_run::{Claiming, EvalConfig, EvalError, Invocation, Resume, RunError};
use nmb_score::ScoringConfig;
use nmb_store::Store;

use crate::job::{self, Done, Job, JobError, Watch};

/// A person's run on a suite, and how it is scored.
#[derive(Debug, Clone)]
pub struct HumanRun {
    /// The suite as `nmb eval --suite` names it.
    pub suite: String,
    pub answer_key: Option<PathBuf>,
    /// `human:NAME`.
    pub spec: ModelSpec,
    /// The name reports show [default: "NAME (human)"].
    pub display_name: Option<String>,
    /// Score the run once built; `None` leaves it unscored.
    pub scoring: Option<ScoringConfig>,
}

impl HumanRun {
    /// Builds the run, or resumes the person's newest run on the suite when its configuration is this one (it
    /// is unless an answer it recorded was changed since; see `nmb_run::stored::human`).
    pub fn build(
        &self,
        store: &Arc<Store>,
        suite_hash: &str,
        claiming: Option<Claiming>,
        watch: &dyn Watch,
    ) -> Result<Done, HumanRunError> {
        let latest = latest_run(store, &self.spec, suite_hash)
            .map_err(|e| HumanRunError::Latest(Box::new(e)))?;
        if let Some(run) = latest {
            let resume = Resume::Run(run.run_id.clone());
            match self.evaluate(resume, store, claiming.clone(), watch) {
                // A changed answer (or another configuration): a new run.
                Err(e) if config_mismatch(&e) => {}
                other => return other.map_err(HumanRunError::from),
            }
        }
        Ok(self.evaluate(Resume::Fresh, store, claiming, watch)?)
    }

    /// The evaluation `nmb eval --model human:NAME --samples 1` runs, into the run `resume` names.
    fn evaluate(
        &self,
        resume: Resume,
        store: &Arc<Store>,
        claiming: Option<Claiming>,
        watch: &dyn Watch,
    ) -> Result<Done, JobError> {
        let suite = nmb_suite::Source {
            answers: self.answer_key.clone(),
            ..nmb_suite::Source::new(&self.suite)
        };
        let mut config = EvalConfig::new(suite, self.spec.clone());
        config.samples = Some(1);
        let name =
            (self.display_name.clone()).unwrap_or_else(|| format!("{} (human)", self.spec.model));
        config.name = Some(name);
        let invocation = Invocation {
            resume,
            claiming,
            ..Invocation::default()
        };
        let job = Job {
            config: &config,
            invocation: &invocation,
            scoring: self.scoring.as_ref(),
            report: None,
        };
        job::run(job, store, None, watch)
    }
}

/// Why a person's run could not be built.
#[derive(Debug, thiserror::Error)]
pub enum HumanRunError {
    #[error(transparent)]
    Latest(Box<nmb_store::StoreError>),
    #[error(transparent)]
    Job(#[from] JobError),
}

fn config_mismatch(e: &JobError) -> bool {
    matches!(
        e,
        JobError::Evaluate(e) if matches!(**e, EvalError::Run(RunError::ConfigMismatch { .. }))
    )
}
