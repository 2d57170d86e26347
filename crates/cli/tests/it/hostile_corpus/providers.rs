//! Hostile provider behaviour at its limits: retry hints and waits too long to honour, quota refusals, batch results with foreign error codes.

use std::path::Path;

use super::{check_all, Case};

/// Every case of this kind, written under `dir`.
pub fn cases(dir: &Path) -> Vec<Case> {
    let _ = dir;
    Vec::new()
}

#[test]
fn every_providers_case_ends_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    check_all(cases(tmp.path()));
}
