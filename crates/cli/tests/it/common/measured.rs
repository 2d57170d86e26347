//! Running `nmb` to its end while measuring it: how it ended (exit code or the signal that killed it), what it
//! printed, its wall time and its peak RSS (from `wait4`, the only way to read a child's own peak).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How one run of the binary ended.
pub struct Run {
    /// The exit code, or minus the signal that ended the process (an abort is -6).
    pub code: i32,
    pub stderr: String,
    pub stdout: String,
    pub took: Duration,
    pub peak_rss_kb: i64,
}

impl Run {
    /// Everything the process printed, stdout then stderr.
    pub fn said(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Runs the command with no stdin, killing it past `kill_after`, and reads its peak RSS from `wait4`.
// The child is reaped by `wait4` itself (std's `wait` would not give the rusage), so it never lingers.
#[allow(clippy::zombie_processes)]
pub fn run(mut command: Command, kill_after: Duration) -> Run {
    let tmp = tempfile::tempdir().unwrap();
    let (out, err) = (tmp.path().join("out"), tmp.path().join("err"));
    command
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(&err).unwrap());
    let started = Instant::now();
    let child = command.spawn().expect("running nmb");
    let pid = child.id() as libc::pid_t;
    let (status, usage) = loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value for wait4 to overwrite.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: pid is our own child, not yet reaped (std's Child is never waited on here).
        let done = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if done == pid {
            break (status, usage);
        }
        if started.elapsed() > kill_after {
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -libc::WTERMSIG(status)
    };
    Run {
        code,
        stdout: String::from_utf8_lossy(&std::fs::read(out).unwrap_or_default()).into_owned(),
        stderr: String::from_utf8_lossy(&std::fs::read(err).unwrap_or_default()).into_owned(),
        took: started.elapsed(),
        peak_rss_kb: usage.ru_maxrss,
    }
}
