//! The evaluation loop: a suite and a model go in, every task's sampled answers come out, stored as they arrive.
//!
//! This crate owns one thing: running a plan against a backend without ever losing or re-buying an answer. It
//! decides which run a call belongs to (a new one, or the unfinished run with the same configuration), which
//! samples still need work, which turns the store can answer from its response cache, and how the answers of one
//! call map onto samples. Every call is recorded in the store before its samples count as done, so a process
//! killed at any moment loses nothing that was paid for, and a resumed run sends only what is missing.
//!
//! Several processes can share one run (workers on a shared store, [`Claiming`]): each then claims tasks'
//! samples under a lease before planning them, renews its leases while it works, and claims again what a dead
//! worker's lease left behind; [`StoreFleet`] makes each server's concurrency limit and 429 pauses hold for all
//! of them.
//!
//! The crate reads as four parts:
//! - **what a run is** ([`config`]): [`EvalConfig`] (one evaluation as data, recorded in the run's manifest), what
//!   one invocation adds ([`Invocation`]), and the manifest and configuration hash the configuration produces;
//! - **the evaluation loop** ([`evaluate`], [`evaluate_loaded`]), with the dry run's [`estimate`] beside it;
//! - **backends**: [`connect_model`] turns a model name into a backend (API models through `nmb-requests`,
//!   `local:` models through `nmb-local`), for evaluations and for anything else that asks models (judges);
//!   models whose answers are already stored, a person's (`human:NAME`) and an imported run's (`imported:MODEL`),
//!   are one backend over those answers ([`stored`]), so `nmb import` and the answer pages build their runs
//!   through the same loop without asking anything;
//! - **imports** ([`import`]): the readers of answer files written outside nmb (a person's answers, the JSONL of
//!   NeuroVLM-Bench's runner), each checked whole before anything is kept.
//!
//! A model served by several replicas (`openai:m@http://a/v1,http://b/v1`) is one model: its manifest,
//! configuration hash, cache keys and call records name it by its first base URL alone
//! ([`nmb_requests::ModelIdentity`]), exactly as a run against that URL would, and each stored call
//! records the replica that answered it.
//!
//! It does not render prompts (`nmb-plan`), speak any wire format or retry (`nmb-requests`), run models
//! (`nmb-local`), or decide how rows are laid out on disk (`nmb-store`).

pub mod config;
mod connect;
mod estimate;
mod evaluation;
mod fleet;
pub mod import;
mod progress;
mod renders;
pub mod stored;
pub mod summary;
mod work;

pub use config::{
    Claiming, ConfigError, EvalConfig, EvalSettings, FewShot, Invocation, Limits, Resume,
    TemplateChoice, EVAL_CONFIG_VERSION, FEW_SHOT, FORCED as NO_N, PERTURBATION,
};
pub use connect::{connect_model, ConnectError, ConnectOptions, ConnectedModel};
pub use estimate::{check_perturbations, estimate, Estimate, TaskEstimate};
pub use evaluation::{evaluate, evaluate_loaded, EvalError, Evaluated, RunError, RunOutcome};
pub use fleet::StoreFleet;
pub use nmb_record::{CallResult, CallSpec, Prompt, Recorder};
pub use progress::{Progress, ProgressSnapshot};
pub use stored::{
    connect_human, connect_replay, HumanError, Replay, ReplayError, StoredAnswer, StoredBackend,
    StoredError,
};
pub use work::{runs_with_work, WorkError};
