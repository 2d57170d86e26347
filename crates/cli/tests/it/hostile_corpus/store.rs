//! Hostile numbers at the limits of what a store can hold, from servers and from stores that already hold them.

use std::path::Path;

use super::{check_all, Case};

/// Every case of this kind, written under `dir`.
pub fn cases(dir: &Path) -> Vec<Case> {
    let _ = dir;
    Vec::new()
}

#[test]
fn every_store_case_ends_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    check_all(cases(tmp.path()));
}
