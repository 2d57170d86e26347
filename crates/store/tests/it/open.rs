use crate::common;

use common::*;
use nmb_store::{Store, StoreError, DB_FILE_NAME};

#[test]
fn a_runs_directory_is_created_with_a_wal_database() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("nested").join("nmb-runs");
    let store = Store::open_dir(&runs).unwrap();
    assert_eq!(store.path(), runs.join(DB_FILE_NAME));
    let (mode, sync, fk, timeout): (String, i64, i64, i64) = store
        .with_conn("read pragmas", |c| {
            Ok((
                c.query_row("PRAGMA journal_mode", [], |r| r.get(0))?,
                c.query_row("PRAGMA synchronous", [], |r| r.get(0))?,
                c.query_row("PRAGMA foreign_keys", [], |r| r.get(0))?,
                c.query_row("PRAGMA busy_timeout", [], |r| r.get(0))?,
            ))
        })
        .unwrap();
    assert_eq!(mode, "wal");
    assert_eq!(sync, 1, "synchronous = NORMAL");
    assert_eq!(fk, 1);
    assert!(timeout >= 1000);
    assert_eq!(store.integrity_check().unwrap(), vec!["ok".to_string()]);
}

#[test]
fn a_file_that_is_not_a_database_gives_a_clear_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.sqlite");
    std::fs::write(&path, vec![0x5Au8; 8192]).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::NotADatabase { .. }), "{err:?}");
    assert!(err.to_string().contains("garbage.sqlite"), "{err}");
    // The file was not touched.
    assert_eq!(std::fs::read(&path).unwrap(), vec![0x5Au8; 8192]);
}

#[test]
fn a_corrupted_store_is_reported_not_panicked_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nmb.sqlite");
    {
        let store = Store::open(&path).unwrap();
        let run = store.create_run("cfg", &manifest()).unwrap();
        for i in 0..50 {
            record_ok(&store, &run.run_id, &format!("t{i}"), 0, &"x".repeat(500));
        }
        store.checkpoint().unwrap();
    }
    // Overwrite everything after the header page with noise.
    let mut bytes = std::fs::read(&path).unwrap();
    for (i, b) in bytes.iter_mut().enumerate().skip(4096) {
        *b = (i * 31 % 251) as u8;
    }
    std::fs::write(&path, &bytes).unwrap();
    let result = Store::open(&path).and_then(|s| {
        let runs = s.list_runs()?;
        let report = s.integrity_check()?;
        Ok((runs, report))
    });
    match result {
        Err(e) => assert!(e.to_string().contains("nmb.sqlite"), "{e}"),
        Ok((_, report)) => assert_ne!(
            report,
            vec!["ok".to_string()],
            "corruption must be detected"
        ),
    }
}

#[test]
fn a_foreign_sqlite_database_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('ada');")
            .unwrap();
    }
    let before = std::fs::read(&path).unwrap();
    let err = Store::open(&path).unwrap_err();
    assert!(matches!(err, StoreError::Foreign { .. }), "{err:?}");
    assert!(err.to_string().contains("other.db"), "{err}");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "a foreign file must not be modified"
    );
}

#[test]
fn a_store_from_a_newer_nmb_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nmb.sqlite");
    drop(Store::open(&path).unwrap());
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA user_version = 999;").unwrap();
    }
    let err = Store::open(&path).unwrap_err();
    assert!(
        matches!(err, StoreError::TooNew { found: 999, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("nmb.sqlite"));
}

#[test]
fn a_runs_directory_that_cannot_be_created_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, b"x").unwrap();
    let err = Store::open_dir(file.join("runs")).unwrap_err();
    assert!(matches!(err, StoreError::CreateDir { .. }), "{err:?}");
}
