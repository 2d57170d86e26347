//! The integration tests of `nmb-serve`: a store built through its public API, the viewer on a real loopback
//! listener, and plain HTTP requests against it.

mod cases;
mod connections;
mod pages;
mod perturbed;
mod review;
