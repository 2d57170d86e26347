//! The integration tests of `nmb-report`, one module per concern, linked into one test binary.

mod common;
mod neurovlm;
mod sample_report;
mod sections;
mod sweep;
mod two_axis;
mod xss;
