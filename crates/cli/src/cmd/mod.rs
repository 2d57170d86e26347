//! One module per subcommand. Each exposes a clap `Args` type and a `run` returning the exit code.

pub mod eval;
pub mod runs;
pub mod suite;
