//! The private PostgreSQL server of `nmb_test_support::postgres`, for real: databases that do not see each
//! other, a server that outlives the thread that started it, and one that is gone, directory and all, once its
//! process ends.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use nmb_test_support::postgres::cluster;

#[test]
fn fresh_databases_do_not_share_tables() {
    let Some(pg) = cluster() else { return };
    let a = pg.fresh_database();
    let b = pg.fresh_database();
    assert_ne!(a, b);
    let prefix = format!(
        "postgres://nmb:{}@127.0.0.1:{}/t_",
        pg.password(),
        pg.port()
    );
    assert!(a.starts_with(&prefix) && b.starts_with(&prefix));
    assert_eq!(pg.psql(&a, "SELECT 1"), "1");
    assert_eq!(
        pg.psql(
            &a,
            "CREATE TABLE t(x int); INSERT INTO t VALUES (1), (2), (3); SELECT count(*) FROM t"
        ),
        "3"
    );
    assert_eq!(pg.psql(&a, "SELECT to_regclass('t') IS NOT NULL"), "t");
    assert_eq!(pg.psql(&b, "SELECT to_regclass('t') IS NULL"), "t");
    assert_eq!(
        pg.psql(&b, "SELECT count(*) FROM pg_tables WHERE tablename = 't'"),
        "0"
    );
    // A name works as well as a URL; several columns come `|`-separated.
    let name = a.rsplit('/').next().unwrap();
    assert_eq!(
        pg.psql(name, "SELECT current_user, current_database()"),
        format!("nmb|{name}")
    );
}

#[test]
fn failures_panic_without_the_password() {
    let Some(pg) = cluster() else { return };
    let db = pg.fresh_database();
    let err = std::panic::catch_unwind(|| pg.psql(&db, "SELECT * FROM no_such_table")).unwrap_err();
    let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("no_such_table"), "{msg}");
    assert!(!msg.contains(pg.password()));
    let debug = format!("{pg:?}");
    assert!(
        !debug.contains(pg.password()) && debug.contains("***"),
        "{debug}"
    );
}

/// The server's parent-death signal is tied to the thread that spawned it: it must not be a test's thread.
#[test]
fn the_server_outlives_the_thread_that_started_it() {
    let Some(db) = std::thread::spawn(|| cluster().map(|pg| pg.fresh_database()))
        .join()
        .unwrap()
    else {
        return;
    };
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(cluster().unwrap().psql(&db, "SELECT 40 + 2"), "42");
}

/// Run as a child by the test below: starts its own server, says where, and ends.
#[test]
fn child_starts_a_server_and_ends() {
    if std::env::var_os("NMB_PG_CHILD").is_none() {
        return;
    }
    let pg = cluster().expect("the parent found PostgreSQL");
    let db = pg.fresh_database();
    assert_eq!(pg.psql(&db, "SELECT 1"), "1");
    println!("NMB_PG_CHILD port={} dir={}", pg.port(), pg.dir().display());
}

/// When a test process ends, its server is killed and its directory removed.
#[test]
fn the_server_and_its_directory_go_with_the_process() {
    if cluster().is_none() {
        return;
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["child_starts_a_server_and_ends", "--exact", "--nocapture"])
        .env("NMB_PG_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("NMB_PG_CHILD "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let (port, dir) = line.split_once(' ').unwrap();
    let port: u16 = port.strip_prefix("port=").unwrap().parse().unwrap();
    let dir = PathBuf::from(dir.strip_prefix("dir=").unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    while dir.exists() || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "{} or port {port} still there",
            dir.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
