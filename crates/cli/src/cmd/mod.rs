//! One module per subcommand. Each exposes a clap `Args` type and a `run` returning the exit code.

pub mod agreement;
pub mod answer;
pub mod bertscore;
pub mod compare;
pub mod eval;
pub mod export;
pub mod image;
pub mod import;
pub mod power;
pub mod report;
pub mod review;
pub mod rubric;
pub mod runs;
pub mod score;
pub mod serve;
pub mod store;
pub mod study;
pub mod suite;
pub mod worker;
