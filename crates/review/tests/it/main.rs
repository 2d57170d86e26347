//! nmb-review's integration tests, one binary: its behaviour through its library API, on runs of the `sample`
//! suite answered and judged by fake servers over loopback, in a real SQLite store.

mod agreement;
mod common;
mod create;
mod grades;
mod pairwise;
