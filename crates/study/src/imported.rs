//! The run of a model's answers imported from another program's output (`imported:MODEL`, `nmb import
//! --format neurovlm-run`), built by the same evaluation every run takes, its answers brought by the invocation
//! ([`nmb_run::stored::replay`]): nothing is sent to any server.

use std::path::PathBuf;
use std::sync::Arc;

use nmb_run::import::neurovlm_run::ImportedModel;
use nmb_run::stored::latest_run;
use nmb_run::{EvalConfig, EvalError, Invocation, Replay, Resume, RunError, TemplateChoice};
use nmb_score::ScoringConfig;
use nmb_store::{RunInfo, RunStatus, Store};

use crate::job::{self, Done, Job, JobError, Watch};

/// One imported model's run on a suite, and how it is scored.
#[derive(Debug, Clone)]
pub struct ImportedRun {
    /// The suite as the answers were matched against it (`--suite`, `--images-root`, `--map`).
    pub suite: nmb_suite::Source,
    /// The prompt the other program sent, when given (a plain prompt file is the system message).
    pub template: Option<PathBuf>,
    pub model: ImportedModel,
    /// The name reports show [default: the model as the file names it].
    pub name: Option<String>,
    /// Score the run once built; `None` leaves it unscored.
    pub scoring: Option<ScoringConfig>,
}

/// What building an imported run did.
pub enum Imported {
    /// The same file was imported before into this finished run, which is left as it is.
    Already { run_id: String },
    /// The run was built (or an interrupted import of it resumed).
    Built(Box<Done>),
}

/// Why an imported run could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ImportedRunError {
    #[error(transparent)]
    Store(Box<nmb_store::StoreError>),
    #[error("cannot read the prompt file {path}: {source}")]
    Prompt {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Job(#[from] JobError),
}

impl ImportedRun {
    /// The evaluation the run is: the model's spec and recorded parameters, one sample per task, the prompt.
    pub fn config(&self) -> EvalConfig {
        let mut config = EvalConfig::new(self.suite.clone(), self.model.spec.clone());
        config.samples = Some(1);
        config.params = self.model.params.clone();
        config.template = self.template.clone().map(TemplateChoice::File);
        let name = self.name.clone();
        config.name = name.or_else(|| Some(self.model.spec.model.clone()));
        config
    }

    /// The answers with what the file says of the model, and the prompt file's SHA-256 when one was given.
    fn replay(&self) -> Result<Replay, ImportedRunError> {
        let prompt = self.template.as_deref();
        self.model.replay_with_prompt(prompt).map_err(|source| {
            let path = self.template.clone().unwrap_or_default();
            ImportedRunError::Prompt { path, source }
        })
    }

    /// Builds the run; leaves it as it is when this very import finished before (asking again would only
    /// record the file's errors a second time), and resumes an interrupted one.
    pub fn build(
        &self,
        store: &Arc<Store>,
        suite_hash: &str,
        watch: &dyn Watch,
    ) -> Result<Imported, ImportedRunError> {
        let config = self.config();
        let replay = Arc::new(self.replay()?);
        let latest = latest_run(store, &self.model.spec, suite_hash)
            .map_err(|e| ImportedRunError::Store(Box::new(e)))?;
        if let Some(run) = latest {
            if same_import(&run, &config, &replay) && run.status == RunStatus::Finished {
                return Ok(Imported::Already { run_id: run.run_id });
            }
            let resume = Resume::Run(run.run_id.clone());
            match self.evaluate(&config, &replay, resume, store, watch) {
                // Another file, prompt or suite: a new run.
                Err(e) if config_mismatch(&e) => {}
                other => return Ok(Imported::Built(Box::new(other?))),
            }
        }
        let done = self.evaluate(&config, &replay, Resume::Fresh, store, watch)?;
        Ok(Imported::Built(Box::new(done)))
    }

    fn evaluate(
        &self,
        config: &EvalConfig,
        replay: &Arc<Replay>,
        resume: Resume,
        store: &Arc<Store>,
        watch: &dyn Watch,
    ) -> Result<Done, JobError> {
        let invocation = Invocation {
            resume,
            replay: Some(replay.clone()),
            ..Invocation::default()
        };
        let job = Job {
            config,
            invocation: &invocation,
            scoring: self.scoring.as_ref(),
            report: None,
        };
        job::run(job, store, None, watch)
    }
}

/// Whether `run` was made by this configuration from these answers.
fn same_import(run: &RunInfo, config: &EvalConfig, replay: &Replay) -> bool {
    let recorded = serde_json::to_value(config.recorded()).ok();
    run.manifest.eval_config == recorded
        && run.manifest.model_identity.as_ref() == Some(&replay.model_identity())
}

fn config_mismatch(e: &JobError) -> bool {
    matches!(
        e,
        JobError::Evaluate(e) if matches!(**e, EvalError::Run(RunError::ConfigMismatch { .. }))
    )
}
