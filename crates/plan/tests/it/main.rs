//! The integration tests of `nmb-plan`, one module per concern, linked into one test binary.

mod common;
mod perturb;
mod plan;
mod prompts;
mod sample_suite;
mod variants;
mod volumes;
