//! The viewer under abuse: idle, slow and too many connections. Each case starts `nmb serve` on a free port with
//! short timeouts, abuses it over real sockets, and checks that it closed every abusive connection within the
//! timeout it was given (and a margin) and still answers a normal request.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use super::{check_all, Case};
use crate::common::nmb_command;

/// The timeouts every case starts the viewer with, in seconds.
const TIMEOUT_S: u64 = 2;
/// How late past its timeout a connection may still be open.
const MARGIN: Duration = Duration::from_millis(1500);

/// Every case of this kind, written under `dir`.
pub fn cases(dir: &Path) -> Vec<Case> {
    let runs = dir.join("viewer-runs");
    // An empty store: the runs list is the normal request, and it must still list afterwards.
    nmb_store::Store::open_dir(&runs).expect("a store");
    vec![
        Case::custom("two thousand idle connections", &runs, {
            let runs = runs.clone();
            move || idle_flood(&runs, 2000)
        }),
        Case::custom("slowloris headers", &runs, {
            let runs = runs.clone();
            move || slowloris(&runs, 20)
        }),
        Case::custom("a half-sent body", &runs, {
            let runs = runs.clone();
            move || half_sent_body(&runs)
        }),
        Case::custom("a kept-alive connection left idle", &runs, {
            let runs = runs.clone();
            move || idle_keep_alive(&runs)
        }),
    ]
}

/// `nmb serve --port 0` with every timeout [`TIMEOUT_S`], killed when dropped.
pub(super) struct Viewer {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Viewer {
    pub fn start(runs: &Path, extra: &[&str]) -> Result<Viewer, String> {
        let t = TIMEOUT_S.to_string();
        let mut child = nmb_command(runs)
            .args([
                "serve",
                "--port",
                "0",
                "--header-timeout",
                &t,
                "--body-timeout",
                &t,
            ])
            .args(["--idle-timeout", &t])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("nmb serve does not start: {e}"))?;
        let stdout = child.stdout.take().expect("piped stdout");
        let mut viewer = Viewer {
            child,
            addr: String::new(),
        };
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let url = line.trim().strip_prefix("nmb serve: http://");
        viewer.addr = url
            .ok_or_else(|| format!("nmb serve printed {line:?}, not its URL"))?
            .trim_end_matches('/')
            .to_string();
        Ok(viewer)
    }

    /// A plain GET of `path` on a connection of its own: the status line, or why there was none.
    pub fn get(&self, path: &str) -> Result<String, String> {
        let mut s = TcpStream::connect(&self.addr).map_err(|e| format!("connect: {e}"))?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let request = format!(
            "GET {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        );
        s.write_all(request.as_bytes())
            .map_err(|e| format!("send: {e}"))?;
        let mut response = String::new();
        s.read_to_string(&mut response)
            .map_err(|e| format!("GET {path}: {e}"))?;
        Ok(response.lines().next().unwrap_or("").to_string())
    }

    /// Fails unless `GET path` answers 200.
    pub fn answers(&self, path: &str) -> Result<(), String> {
        let status = self.get(path)?;
        match status.starts_with("HTTP/1.1 200") {
            true => Ok(()),
            false => Err(format!("GET {path} answered {status:?}")),
        }
    }

    fn connect(&self) -> Result<TcpStream, String> {
        TcpStream::connect(&self.addr).map_err(|e| format!("connect: {e}"))
    }
}

impl Drop for Viewer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the server has closed `s`: end of file or a reset, after whatever it sent first.
fn closed(s: &mut TcpStream) -> bool {
    let _ = s.set_nonblocking(true);
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

/// Raises this process's open-file limit to its hard limit, so it can hold `n` connections.
fn allow_open_files(n: u64) -> Result<(), String> {
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        let mut limit: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err("cannot read the open-file limit".into());
        }
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
        if (limit.rlim_max as u64) < n + 64 {
            return Err(format!(
                "the open-file hard limit is {}, too low to open {n} connections",
                limit.rlim_max
            ));
        }
    }
    Ok(())
}

/// `n` connections that send nothing: the viewer must still answer a normal request among them, and close every
/// one of them within its header timeout.
fn idle_flood(runs: &Path, n: u64) -> Result<(), String> {
    allow_open_files(n)?;
    let viewer = Viewer::start(runs, &[])?;
    let started = Instant::now();
    let mut idle = Vec::new();
    for _ in 0..n {
        idle.push(viewer.connect()?);
    }
    let opened = Instant::now();
    viewer.answers("/")?;
    // The last connection opened is the last whose time runs out.
    let deadline = opened + Duration::from_secs(TIMEOUT_S) + MARGIN;
    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
    let open = idle.iter_mut().map(closed).filter(|c| !c).count();
    if open > 0 {
        return Err(format!(
            "{open} of {n} idle connections still open {:?} after the last opened ({:?} after the first; header \
             timeout {TIMEOUT_S} s)",
            opened.elapsed(),
            started.elapsed()
        ));
    }
    viewer.answers("/")
}

/// `n` connections that send a header line every 300 ms and never finish: each must be closed within the header
/// timeout however long it keeps sending, while a normal request is answered.
fn slowloris(runs: &Path, n: usize) -> Result<(), String> {
    let viewer = Viewer::start(runs, &[])?;
    let started = Instant::now();
    let mut slow: Vec<Option<TcpStream>> = Vec::new();
    for _ in 0..n {
        let mut s = viewer.connect()?;
        let head = format!("GET / HTTP/1.1\r\nHost: {}\r\n", viewer.addr);
        s.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
        slow.push(Some(s));
    }
    let give_up = started + Duration::from_secs(TIMEOUT_S) + MARGIN;
    while Instant::now() < give_up && slow.iter().any(Option::is_some) {
        std::thread::sleep(Duration::from_millis(300));
        for slot in &mut slow {
            let Some(s) = slot else { continue };
            if closed(s) || s.write_all(b"X-Slow: 1\r\n").is_err() {
                *slot = None;
            }
        }
    }
    let open = slow.iter().filter(|s| s.is_some()).count();
    if open > 0 {
        return Err(format!(
            "{open} of {n} slow connections still open after {:?} (header timeout {TIMEOUT_S} s)",
            started.elapsed()
        ));
    }
    viewer.answers("/")
}

/// A form POST that sends 10 of the 1,000 bytes it announces (under every body limit, so it is read): the viewer must give up on the body within its
/// body timeout, close the connection and still answer.
fn half_sent_body(runs: &Path) -> Result<(), String> {
    let viewer = Viewer::start(runs, &[])?;
    let mut s = viewer.connect()?;
    let head = format!(
        "POST /review/any/items/1 HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-www-form-urlencoded\r\n\
         Content-Length: 1000\r\n\r\nverdict=co",
        viewer.addr
    );
    s.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
    let sent = Instant::now();
    let deadline = sent + Duration::from_secs(TIMEOUT_S) + MARGIN;
    while !closed(&mut s) {
        if Instant::now() > deadline {
            return Err(format!(
                "the half-sent body's connection is still open after {:?} (body timeout {TIMEOUT_S} s)",
                sent.elapsed()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    viewer.answers("/")
}

/// One answered request on a kept-alive connection, then nothing: closed within the idle timeout.
fn idle_keep_alive(runs: &Path) -> Result<(), String> {
    let viewer = Viewer::start(runs, &[])?;
    let mut s = viewer.connect()?;
    let request = format!("GET /style.css HTTP/1.1\r\nHost: {}\r\n\r\n", viewer.addr);
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut first = [0u8; 12];
    s.read_exact(&mut first)
        .map_err(|e| format!("no answer: {e}"))?;
    if &first != b"HTTP/1.1 200" {
        return Err(format!("answered {:?}", String::from_utf8_lossy(&first)));
    }
    let answered = Instant::now();
    let deadline = answered + Duration::from_secs(TIMEOUT_S) + MARGIN;
    while !closed(&mut s) {
        if Instant::now() > deadline {
            return Err(format!(
                "the idle kept-alive connection is still open after {:?} (idle timeout {TIMEOUT_S} s)",
                answered.elapsed()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    viewer.answers("/")
}

#[test]
fn every_viewer_case_ends_cleanly() {
    let tmp = tempfile::tempdir().unwrap();
    check_all(cases(tmp.path()));
}
