//! One module per subcommand. Each exposes a clap `Args` type and a `run` returning the exit code.

pub mod agreement;
pub mod bertscore;
pub mod report;
pub mod suite;
