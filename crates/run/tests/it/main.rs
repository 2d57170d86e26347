//! nmb-run's integration tests, one binary: its behaviour through its library API, against the fake server over
//! loopback and a real SQLite store.

mod common;
mod connect;
mod evaluate;
mod stored;
