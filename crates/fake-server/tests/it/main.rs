//! The fake server's simulated models, at the library level.

mod vision;
