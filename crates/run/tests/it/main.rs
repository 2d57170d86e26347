//! nmb-run's integration tests, one binary: its behaviour through its library API, against the fake server over
//! loopback and a real SQLite store.

mod connect;
