//! The integration tests of `nmb-requests`, one module per concern, linked into one test binary.

mod caps;
mod common;
mod faults;
mod providers;
mod reasoning;
mod replicas;
mod secrets;
mod wire;
