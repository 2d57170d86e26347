//! nmb-study's integration tests, one binary: its behaviour through its library API, on run files in temporary
//! directories, against the fake server over loopback and a real SQLite store.

mod common;
mod matrix;
mod run_file;
mod running;
