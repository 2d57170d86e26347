//! The integration tests of `nmb-score`, one module per concern, linked into one test binary.

mod breadth_real;
mod common;
mod criteria;
mod criteria_simulation;
mod e2e;
mod neurovlm_parity;
