//! What a run is. [`EvalConfig`] is one evaluation described as data: `nmb eval`, run-file cells, workers, human
//! imports and the answer pages all build one and hand it to the evaluation loop, with what one invocation adds
//! ([`Invocation`]: resume, a request budget, claiming, an import's answers), which is never recorded.
//!
//! Once its model is connected, a configuration becomes the [`EvalSettings`] the loop runs with, and those the
//! run's manifest: the suite, template and model recorded, the [`EvalConfig`] itself (so a worker
//! on another machine runs the same evaluation without anyone writing command lines), and the configuration hash
//! a run is found and resumed by.

mod manifest;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nmb_plan::{GenParams, InputMode, PlanOptions, Template};
use nmb_requests::{HttpOptions, ModelSpec, RetryPolicy, Scheduler, SchedulerConfig};
use nmb_store::Store;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::fleet::StoreFleet;
use crate::stored::Replay;

pub use manifest::EvalSettings;
pub(crate) use manifest::{
    build_manifest, config_hash, describe_difference, params_adjusted, params_json,
};
pub use manifest::{FEW_SHOT, FORCED, PERTURBATION};

/// The layout version of a recorded [`EvalConfig`]; a reader refuses a newer one instead of misreading it.
pub const EVAL_CONFIG_VERSION: u32 = 1;

/// What one evaluation asks, of which model, on which suite, and how hard it may push the servers. Everything
/// here is recorded in the run's manifest (paths made absolute by [`EvalConfig::recorded`]); what belongs to one
/// invocation only (resume, a request budget, sharing the run with workers) is in [`Invocation`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalConfig {
    pub version: u32,
    pub suite: nmb_suite::Source,
    #[serde(serialize_with = "spec_text", deserialize_with = "parse_spec")]
    pub model: ModelSpec,
    /// The name reports show [default: a local model's file stem, else the model id].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The study (run file) the run belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub study: Option<String>,
    pub inputs: InputMode,
    /// Answers per task [default: the suite's `samples`, else 5].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u32>,
    /// Ask every sample in a request of its own even where the API has `n`.
    #[serde(default)]
    pub no_n: bool,
    /// Ask an OpenAI-wire model as OpenAI's reasoning models require from the first request
    /// (`max_completion_tokens`, no `temperature` other than 1, no `top_p`), where nmb would otherwise wait for
    /// the server to refuse them. Models on OpenAI's own API are known by name.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reasoning_model: bool,
    /// Decode a `local:` model without grammar: answers asked for JSON are not held to their schema. Recorded
    /// in the model identity either way (see [`crate::ConnectOptions::no_grammar`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_grammar: bool,
    /// A vision projector (`mmproj` GGUF) a `local:` model sees images through (`--mmproj`). Recorded in the
    /// model identity with its hash (see [`crate::ConnectOptions::mmproj`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mmproj: Option<PathBuf>,
    /// Only the first N tasks, in suite order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
    pub params: GenParams,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplateChoice>,
    /// The language prompts ask answers in [default: the suite's]; `""` for no instruction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_language: Option<String>,
    /// A context probe (`--probe`): the wrong diagnosis suggested to each probed task. Part of the run's
    /// identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<nmb_plan::Probe>,
    /// Few-shot examples before each question ([`FewShot`]). Part of the run's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub few_shot: Option<FewShot>,
    /// Change the images the model sees (`--perturb`): one perturbation per run, seeded by the sampling seed
    /// (0 without one). Recorded in the manifest and its configuration hash only when given.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "perturbation_text",
        deserialize_with = "parse_perturbation"
    )]
    pub perturb: Option<nmb_imaging::Perturbation>,
    pub limits: Limits,
}

/// Where a run's few-shot examples come from. Recorded as a path (an examples file) or as `{"k", "from"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FewShot {
    /// NeuroVLM-Bench's examples file (`--few-shot FILE.csv`), its images under the suite's images root: tasks
    /// are asked as the authors' runner asks them with examples ([`nmb_plan::few_shot`]).
    File(PathBuf),
    /// `k` example tasks of each task's family from the suite `from` (`--few-shot K --few-shot-from
    /// SUITE[:FILTER]`), chosen with the sampling seed (0 without one): see [`nmb_plan::ExamplePool`].
    Examples { k: u32, from: nmb_suite::Source },
}

/// The prompt template for every family instead of the built-in ones. Recorded as the text a user types:
/// `bundled:NAME` or a file path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateChoice {
    Bundled(String),
    File(PathBuf),
}

/// How hard one invocation may push the servers. Not part of what the run is: two invocations of one run may
/// differ here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// Requests in flight at once.
    pub concurrency: u32,
    /// On a shared store: requests in flight to each server across every process [default: `concurrency`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet_limit: Option<u32>,
    /// Seconds one attempt may take before it counts as a timeout.
    pub timeout_secs: f64,
    /// Retries of a failed request.
    pub max_retries: u32,
    /// Send through the provider's batch API: calls wait for their batch (up to a day) and cost its price.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub batch: bool,
    /// Seconds between polls of a submitted batch [default: 30].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_poll_secs: Option<f64>,
    /// Requests in the model's submitted, unfinished batches at once [default: `nmb_record::BATCH_IN_FLIGHT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_max_requests: Option<u32>,
    /// The most MiB one response (or one line of a batch's output) may take [default: 1 MiB plus 64 bytes per
    /// token each sample may generate, `nmb_requests::response_cap`]. It cannot change an honest answer, so it
    /// is not part of the run's configuration hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_response_mib: Option<u64>,
}

impl Limits {
    /// Calls in flight at once: `concurrency`, or with `batch` as many as a round of batches holds (a call
    /// waiting for its batch puts no load on a server).
    pub fn in_flight(&self) -> u32 {
        if self.batch {
            let round = u32::try_from(nmb_record::BATCH_IN_FLIGHT).unwrap_or(u32::MAX);
            self.concurrency.max(round)
        } else {
            self.concurrency
        }
    }

    /// How HTTP models are read: each exchange by the attempt's deadline, each response under its cap.
    pub fn http_options(&self) -> HttpOptions {
        HttpOptions {
            request_timeout: Some(Duration::from_secs_f64(self.timeout_secs)),
            max_response_bytes: self.max_response_mib.map(|m| m.saturating_mul(1 << 20)),
            ..HttpOptions::default()
        }
    }

    /// How the batcher gathers and polls.
    pub fn batch_options(&self) -> nmb_record::BatchOptions {
        let secs = self.batch_poll_secs.unwrap_or(f64::NAN);
        let mut options = nmb_record::BatchOptions::polling_every(secs);
        if let Some(n) = self.batch_max_requests {
            options.max_enqueued = (n as usize).max(1);
        }
        options
    }

    /// The scheduler's limits.
    pub fn scheduler_config(&self) -> SchedulerConfig {
        SchedulerConfig {
            global_limit: self.in_flight() as usize,
            timeout: Duration::from_secs_f64(self.timeout_secs),
            retry: RetryPolicy {
                max_retries: self.max_retries,
                ..RetryPolicy::default()
            },
            ..SchedulerConfig::default()
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            concurrency: 16,
            fleet_limit: None,
            timeout_secs: 300.0,
            max_retries: 6,
            batch: false,
            batch_poll_secs: None,
            batch_max_requests: None,
            max_response_mib: None,
        }
    }
}

/// What one invocation adds to a configuration: which run it writes into, how much it may send, whether it
/// shares the run with other processes. Never recorded.
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    pub resume: Resume,
    /// Send at most this many requests, then stop; the run stays resumable.
    pub max_requests: Option<u64>,
    /// Create the run and its pending samples, then stop: workers do the rest.
    pub plan_only: bool,
    /// Share the run with other processes, claiming samples under a lease.
    pub claiming: Option<Claiming>,
    /// The answers of an imported model (`imported:MODEL`), read from another program's output by `nmb import`;
    /// the only way such a model answers (see [`crate::stored::replay`]).
    pub replay: Option<Arc<Replay>>,
}

/// How to pick the run an invocation writes into.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Resume {
    /// Resume the latest unfinished run with the same configuration, else start a new one.
    #[default]
    Auto,
    /// Always start a new run (stored answers are still reused through the response cache).
    Fresh,
    /// Resume this run; it must have the same configuration.
    Run(String),
}

/// How a process shares a run with others (`nmb worker`, or `nmb eval` on a shared store).
#[derive(Debug, Clone)]
pub struct Claiming {
    /// Unique among the workers: host, process id and start time.
    pub worker_id: String,
    /// How long a claim lasts without renewal; a killed worker's samples come back after this.
    pub lease: Duration,
    /// When this worker started: samples that errored before are worth one more try, later ones are not.
    pub started_ms: i64,
}

impl Claiming {
    /// How long a claim lasts without renewal, unless a worker says otherwise.
    pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

    /// This process's claims, unique across machines and restarts: host, process id and start time.
    pub fn for_this_process(lease: Duration) -> Claiming {
        let host = std::fs::read_to_string("/etc/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "host".into());
        let started_ms = nmb_store::now_ms();
        Claiming {
            worker_id: format!("{host}:{}:{started_ms}", std::process::id()),
            lease,
            started_ms,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("no bundled template {name:?}; expected one of {}", nmb_plan::variant_names().collect::<Vec<_>>().join(", "))]
    NoSuchTemplate { name: String },
    #[error("cannot use template {path}: {source}")]
    Template {
        path: PathBuf,
        #[source]
        source: Box<nmb_plan::PlanError>,
    },
    #[error("--few-shot {path}: {message}")]
    FewShot { path: PathBuf, message: String },
    #[error("--few-shot-from {spec}: {message}")]
    FewShotFrom { spec: String, message: String },
    #[error("recorded evaluation configuration: {0}")]
    Unreadable(#[from] serde_json::Error),
    #[error("the run's configuration has layout version {found}; this nmb reads up to {EVAL_CONFIG_VERSION} (use a newer nmb)")]
    Newer { found: u32 },
}

impl EvalConfig {
    /// A configuration with every default: `nmb eval --suite SUITE --model MODEL`.
    pub fn new(suite: nmb_suite::Source, model: ModelSpec) -> Self {
        EvalConfig {
            version: EVAL_CONFIG_VERSION,
            suite,
            model,
            name: None,
            study: None,
            inputs: InputMode::Full,
            samples: None,
            no_n: false,
            reasoning_model: false,
            no_grammar: false,
            mmproj: None,
            limit: None,
            params: GenParams::default(),
            template: None,
            answer_language: None,
            probe: None,
            few_shot: None,
            perturb: None,
            limits: Limits::default(),
        }
    }

    /// The configuration as the manifest keeps it: every path absolute where it exists here, so a worker or a
    /// later scoring started from another directory finds the same files.
    pub fn recorded(&self) -> EvalConfig {
        let template = match &self.template {
            Some(TemplateChoice::File(p)) => Some(TemplateChoice::File(
                std::path::absolute(p).unwrap_or_else(|_| p.clone()),
            )),
            other => other.clone(),
        };
        EvalConfig {
            suite: self.suite.absolute(),
            template,
            few_shot: self.few_shot.as_ref().map(|f| match f {
                FewShot::File(p) => {
                    FewShot::File(std::path::absolute(p).unwrap_or_else(|_| p.clone()))
                }
                FewShot::Examples { k, from } => FewShot::Examples {
                    k: *k,
                    from: from.absolute(),
                },
            }),
            ..self.clone()
        }
    }

    /// Reads a recorded configuration, refusing one written by a newer layout.
    pub fn from_recorded(value: &serde_json::Value) -> Result<EvalConfig, ConfigError> {
        let config: EvalConfig = serde_json::from_value(value.clone())?;
        if config.version > EVAL_CONFIG_VERSION {
            return Err(ConfigError::Newer {
                found: config.version,
            });
        }
        Ok(config)
    }

    /// Whether the suite is asked without images (some loaders keep questions whose image is missing then).
    pub fn text_only(&self) -> bool {
        self.inputs == InputMode::Text
    }

    /// The planner's options, with the template read from its file.
    pub fn plan_options(&self) -> Result<PlanOptions, ConfigError> {
        let template = self
            .template
            .as_ref()
            .map(TemplateChoice::load)
            .transpose()?;
        Ok(PlanOptions {
            template,
            input_mode: self.inputs,
            samples: self.samples,
            limit: self.limit.map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
            answer_language: self.answer_language.clone(),
            probe: self.probe.clone(),
            few_shot: self.few_shot_examples()?,
            examples: self.example_pool()?,
            perturbation: self.perturb.clone(),
            perturb_seed: self.params.seed.unwrap_or(0),
            ..PlanOptions::default()
        })
    }

    /// The few-shot examples, read with their images, where the configuration has them.
    fn few_shot_examples(&self) -> Result<Option<Arc<nmb_plan::RunnerShots>>, ConfigError> {
        let Some(FewShot::File(path)) = &self.few_shot else {
            return Ok(None);
        };
        let refused = |message: String| ConfigError::FewShot {
            path: path.clone(),
            message,
        };
        let root = self.suite.images_root.as_deref();
        let examples = nmb_suite::formats::few_shot::read_examples(path, root)
            .map_err(|e| refused(e.to_string()))?;
        let shots = nmb_plan::RunnerShots::load(&examples).map_err(|e| refused(e.to_string()))?;
        Ok(Some(Arc::new(shots)))
    }

    /// The suite the examples are drawn from, loaded and hashed, where the configuration asks for examples.
    fn example_pool(&self) -> Result<Option<Arc<nmb_plan::ExamplePool>>, ConfigError> {
        let Some(FewShot::Examples { k, from }) = &self.few_shot else {
            return Ok(None);
        };
        let refused = |message: String| ConfigError::FewShotFrom {
            spec: from.spec.clone(),
            message,
        };
        let suite = from
            .load_checked(self.text_only())
            .map_err(|e| refused(e.to_string()))?
            .suite;
        let named = serde_json::to_value(from)?;
        let seed = self.params.seed.unwrap_or(0);
        let pool = nmb_plan::ExamplePool::new(suite, *k as usize, seed, named)
            .map_err(|e| refused(e.to_string()))?;
        Ok(Some(Arc::new(pool)))
    }

    /// A scheduler for this evaluation alone. A process sharing the run with others (`claiming`) shares each
    /// server's limit and its 429 pauses with them through the store.
    pub fn scheduler(&self, store: &Arc<Store>, claiming: Option<&Claiming>) -> Scheduler {
        let scheduler = Scheduler::new(self.limits.scheduler_config());
        match claiming {
            Some(c) => scheduler.with_fleet(Arc::new(StoreFleet::new(
                store.clone(),
                c.worker_id.clone(),
                self.limits.fleet_limit.unwrap_or(self.limits.in_flight()),
                Duration::from_secs_f64(self.limits.timeout_secs) + Duration::from_secs(10),
            ))),
            None => scheduler,
        }
    }
}

impl TemplateChoice {
    /// `bundled:NAME` names a bundled variant unless a file has that path.
    pub fn parse(text: &str) -> TemplateChoice {
        match text.strip_prefix("bundled:") {
            Some(name) if !Path::new(text).exists() => TemplateChoice::Bundled(name.to_string()),
            _ => TemplateChoice::File(PathBuf::from(text)),
        }
    }

    pub fn load(&self) -> Result<Template, ConfigError> {
        match self {
            TemplateChoice::Bundled(name) => Template::variant(name)
                .ok_or_else(|| ConfigError::NoSuchTemplate { name: name.clone() }),
            TemplateChoice::File(path) => {
                Template::from_file(path).map_err(|source| ConfigError::Template {
                    path: path.clone(),
                    source: Box::new(source),
                })
            }
        }
    }
}

impl std::fmt::Display for TemplateChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TemplateChoice::Bundled(name) => write!(f, "bundled:{name}"),
            TemplateChoice::File(path) => write!(f, "{}", path.display()),
        }
    }
}

impl Serialize for TemplateChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TemplateChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(match text.strip_prefix("bundled:") {
            Some(name) => TemplateChoice::Bundled(name.to_string()),
            None => TemplateChoice::File(PathBuf::from(text)),
        })
    }
}

fn perturbation_text<S: Serializer>(
    p: &Option<nmb_imaging::Perturbation>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.collect_str(p),
        None => s.serialize_none(),
    }
}

fn parse_perturbation<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<nmb_imaging::Perturbation>, D::Error> {
    let text = Option::<String>::deserialize(d)?;
    text.map(|t| t.parse().map_err(serde::de::Error::custom))
        .transpose()
}

fn spec_text<S: Serializer>(spec: &ModelSpec, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(spec)
}

fn parse_spec<'de, D: Deserializer<'de>>(d: D) -> Result<ModelSpec, D::Error> {
    let text = String::deserialize(d)?;
    ModelSpec::parse(&text).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_configuration_round_trips_through_its_recorded_form() {
        let mut config = EvalConfig::new(
            nmb_suite::Source::new("sample"),
            ModelSpec::parse("openai:m@http://a:1/v1,http://b:2/v1").unwrap(),
        );
        config.samples = Some(3);
        config.template = Some(TemplateChoice::Bundled("order".into()));
        config.params.seed = Some(7);
        let value = serde_json::to_value(config.recorded()).unwrap();
        assert_eq!(value["model"], "openai:m@http://a:1/v1,http://b:2/v1");
        assert_eq!(value["template"], "bundled:order");
        let back = EvalConfig::from_recorded(&value).unwrap();
        assert_eq!(back, config.recorded());
    }

    #[test]
    fn a_newer_layout_is_refused_rather_than_misread() {
        let config = EvalConfig::new(
            nmb_suite::Source::new("sample"),
            ModelSpec::parse("openai:m").unwrap(),
        );
        let mut value = serde_json::to_value(&config).unwrap();
        value["version"] = (EVAL_CONFIG_VERSION + 1).into();
        let err = EvalConfig::from_recorded(&value).unwrap_err();
        assert!(matches!(err, ConfigError::Newer { .. }), "{err}");
    }
}
