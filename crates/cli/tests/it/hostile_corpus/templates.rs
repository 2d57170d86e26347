//! Hostile chat templates that would run without end or grow without bound.

use std::path::Path;

use super::{check_all, Case};

/// Every case of this kind, written under `dir`.
pub fn cases(dir: &Path) -> Vec<Case> {
    let _ = dir;
    Vec::new()
}

#[test]
fn every_templates_case_ends_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    check_all(cases(tmp.path()));
}
