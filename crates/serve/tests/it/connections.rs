//! The connection cap on a real loopback listener: a newcomer at the cap takes the place of the connection that
//! has waited longest for a request, and is turned away with 503 only when every place is busy answering. (The
//! timeouts are checked through `nmb serve` itself, in the CLI's hostile corpus.)

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nmb_serve::{ConnectionLimits, ServeOptions};
use nmb_store::Store;

/// The viewer on an empty store with these limits; its `127.0.0.1:PORT`.
async fn start(limits: ConnectionLimits) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_dir(dir.path()).unwrap());
    let bound = nmb_serve::bind(&ServeOptions {
        port: 0,
        connections: limits,
        ..ServeOptions::default()
    })
    .await
    .unwrap();
    let addr = bound.local_addr().to_string();
    tokio::spawn(bound.run(store));
    (dir, addr)
}

/// The status line of `GET /` on a new connection.
fn get_root(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // A server turning the connection away may close it before the request is all sent.
    let _ = write!(
        s,
        "GET / HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines().next().unwrap_or("").to_string()
}

/// Whether the server closed `s` within `within`.
fn closes_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let until = Instant::now() + within;
    let mut buf = [0u8; 1024];
    while Instant::now() < until {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return true,
        }
    }
    false
}

fn limits(max_connections: usize) -> ConnectionLimits {
    ConnectionLimits {
        max_connections,
        ..ConnectionLimits::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newcomer_at_the_cap_takes_the_place_of_the_longest_waiting() {
    let (_dir, addr) = start(limits(2)).await;
    tokio::task::spawn_blocking(move || {
        let mut oldest = TcpStream::connect(&addr).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let mut newer = TcpStream::connect(&addr).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        // The default header timeout is 10 s: only the cap can close these now.
        assert!(get_root(&addr).starts_with("HTTP/1.1 200"));
        assert!(closes_within(&mut oldest, Duration::from_secs(2)));
        assert!(!closes_within(&mut newer, Duration::from_millis(300)));
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_every_place_busy_answering_a_newcomer_gets_503() {
    let (_dir, addr) = start(limits(1)).await;
    tokio::task::spawn_blocking(move || {
        // A form whose body never comes in full keeps its connection busy (until the 30 s body timeout).
        let mut busy = TcpStream::connect(&addr).unwrap();
        write!(
            busy,
            "POST /review/any/items/1 HTTP/1.1\r\nHost: {addr}\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nverdict="
        )
        .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(get_root(&addr).starts_with("HTTP/1.1 503"));
        drop(busy);
        // Its place is free again once it goes.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !get_root(&addr).starts_with("HTTP/1.1 200") {
            assert!(Instant::now() < deadline, "the place never came back");
            std::thread::sleep(Duration::from_millis(100));
        }
    })
    .await
    .unwrap();
}
