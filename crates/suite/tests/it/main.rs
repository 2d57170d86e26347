//! The integration tests of `nmb-suite`, one module per concern, linked into one test binary.

mod breadth;
mod common;
mod hash;
mod malformed;
mod native;
mod neurovlm;
mod sample;
mod site;
mod table;
