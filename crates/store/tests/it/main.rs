//! The integration tests of `nmb-store`, one module per concern, linked into one test binary.

mod batches;
mod cache;
mod common;
mod concurrency;
mod copy;
mod crash;
mod dedup;
mod leases;
mod limits;
mod open;
mod pages;
mod postgres;
mod replicas;
mod reviews;
mod runs;
mod search;
mod secrets;
