//! A check that a string (an API key in tests) is nowhere in a store: not in any file byte, not in any value.
//!
//! Scanning raw file bytes catches deleted data left in free pages; a long value can be split across overflow
//! pages, so every text and blob value is also read back and searched, compressed ones (prompt bodies, raw
//! responses) inflated.

use std::path::{Path, PathBuf};

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};

use crate::error::{Result, StoreError};
use crate::schema::classify;

/// Where a searched-for string was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretHit {
    /// In the bytes of the database file or its WAL/shared-memory/journal companions.
    File { path: PathBuf, offset: usize },
    /// In a stored value.
    Value { table: String, column: String },
}

/// Searches the database at `db_path` (and its `-wal`, `-shm`, `-journal` files) for `needle`. An empty result
/// means it is absent. Safe to call while a [`crate::Store`] has the file open.
pub fn find_bytes_in_store(db_path: &Path, needle: &[u8]) -> Result<Vec<SecretHit>> {
    if needle.is_empty() {
        return Err(StoreError::Invalid {
            path: db_path.to_path_buf(),
            field: "needle",
            message: "cannot search for an empty string".into(),
        });
    }
    let mut hits = Vec::new();
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = db_path.as_os_str().to_owned();
        name.push(suffix);
        let path = PathBuf::from(name);
        if !path.exists() {
            continue;
        }
        let bytes = std::fs::read(&path).map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })?;
        if let Some(offset) = find(&bytes, needle) {
            hits.push(SecretHit::File { path, offset });
        }
    }
    hits.extend(scan_values(db_path, needle)?);
    Ok(hits)
}

fn scan_values(db_path: &Path, needle: &[u8]) -> Result<Vec<SecretHit>> {
    let err = |e| classify(db_path, "scan stored values", e);
    let conn =
        Connection::open_with_flags(db_path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(err)?;
    let tables: Vec<String> = {
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .map_err(err)?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(err)?
    };
    let mut hits = Vec::new();
    for table in tables {
        let quoted = format!("\"{}\"", table.replace('"', "\"\""));
        let mut stmt = conn
            .prepare(&format!("SELECT * FROM {quoted}"))
            .map_err(err)?;
        let columns: Vec<String> = stmt.column_names().map(str::to_string).collect();
        let mut found = vec![false; columns.len()];
        let mut rows = stmt.query([]).map_err(err)?;
        while let Some(row) = rows.next().map_err(err)? {
            for (i, seen) in found.iter_mut().enumerate() {
                let hit = match row.get_ref(i).map_err(err)? {
                    ValueRef::Text(b) => find(b, needle).is_some(),
                    // Compressed columns are searched inflated too (images and other blobs simply fail to
                    // inflate).
                    v @ ValueRef::Blob(b) => {
                        find(b, needle).is_some()
                            || crate::db::sqlite::value_of(v)
                                .unpacked()
                                .ok()
                                .flatten()
                                .is_some_and(|t| find(t.as_bytes(), needle).is_some())
                    }
                    _ => false,
                };
                *seen |= hit;
            }
        }
        for (i, seen) in found.iter().enumerate() {
            if *seen {
                hits.push(SecretHit::Value {
                    table: table.clone(),
                    column: columns[i].clone(),
                });
            }
        }
    }
    Ok(hits)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
