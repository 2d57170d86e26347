//! The integration tests of `nmb`, one module per concern, linked into one test binary.

mod agreement_cli;
mod bertscore_cli;
mod common;
mod eval_cli;
mod eval_faults;
mod eval_scores;
mod eval_wire;
mod kill;
mod leaderboard_site;
mod llama_cpp_server;
mod local_model;
mod old_store;
mod pubmedqa;
mod replicas;
mod report_cli;
mod revision;
mod score_cli;
mod secrets;
mod slake;
mod structured;
mod study;
mod study_whole;
mod suite_cli;
mod sweep;
mod text_only_server;
mod volumes;
