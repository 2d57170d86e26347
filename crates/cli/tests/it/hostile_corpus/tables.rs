//! Hostile tables: crafted Parquet footers and schemas, large CSV files, deeply nested JSON.

use std::path::Path;

use super::{check_all, Case};

/// Every case of this kind, written under `dir`.
pub fn cases(dir: &Path) -> Vec<Case> {
    let _ = dir;
    Vec::new()
}

#[test]
fn every_tables_case_ends_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    check_all(cases(tmp.path()));
}
