//! One module per subcommand. Each exposes a clap `Args` type and a `run` returning the exit code.

pub mod compare;
pub mod score;
pub mod suite;
