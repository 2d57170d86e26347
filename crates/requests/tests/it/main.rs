//! The integration tests of `nmb-requests`, one module per concern, linked into one test binary.

mod common;
mod faults;
mod replicas;
mod secrets;
mod wire;
