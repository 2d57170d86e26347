//! Runs written where other tools look: an Inspect AI eval log ([`inspect`]), an MLflow tracking server
//! ([`mlflow`]), and the headline numbers every
//! export shares ([`headline()`]). Both read the store and a run's score report; neither changes the store.

pub mod headline;
pub mod inspect;
pub mod mlflow;

pub use headline::{headline, Metric};
pub use inspect::inspect_log;
