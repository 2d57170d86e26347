//! Helpers shared by tests and benches that drive the fake server: real PNG images and process measurements
//! (CPU time, peak memory) on Linux.

use std::process::{Child, ExitStatus};
use std::time::Duration;

/// A real PNG of RGB noise (see `nmb_test_support::images::noise_png`).
pub use nmb_test_support::images::noise_png;

/// The PNG with a tEXt chunk inserted after IHDR: a valid, distinct image without re-encoding.
pub fn with_text_chunk(png: &[u8], text: &str) -> Vec<u8> {
    const AFTER_IHDR: usize = 8 + 25;
    let mut data = b"Comment\0".to_vec();
    data.extend_from_slice(text.as_bytes());
    let mut chunk = Vec::with_capacity(data.len() + 12);
    chunk.extend_from_slice(&(data.len() as u32).to_be_bytes());
    chunk.extend_from_slice(b"tEXt");
    chunk.extend_from_slice(&data);
    let crc = crc32(&chunk[4..]);
    chunk.extend_from_slice(&crc.to_be_bytes());
    let mut out = Vec::with_capacity(png.len() + chunk.len());
    out.extend_from_slice(&png[..AFTER_IHDR]);
    out.extend_from_slice(&chunk);
    out.extend_from_slice(&png[AFTER_IHDR..]);
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
}

fn rusage(who: libc::c_int) -> libc::rusage {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut u) };
    u
}

/// User + system CPU time of this process so far.
pub fn self_cpu() -> Duration {
    let u = rusage(libc::RUSAGE_SELF);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Peak resident memory of this process (ru_maxrss), in KiB.
pub fn peak_rss_kb() -> u64 {
    rusage(libc::RUSAGE_SELF).ru_maxrss.max(0) as u64
}

/// utime + stime of another live process, from /proc/PID/stat.
pub fn proc_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_comm = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // after "pid (comm)": field 3 is index 0, so utime (14) and stime (15) are 11 and 12
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_secs_f64(ticks as f64 / hz as f64)
}

/// A field of /proc/PID/status in KiB (e.g. `VmHWM`, the peak resident set).
pub fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// What a finished child process used: CPU time (user + system) and peak resident memory.
#[derive(Debug, Clone, Copy)]
pub struct ChildUsage {
    pub status: ExitStatus,
    pub cpu: Duration,
    pub user: Duration,
    pub system: Duration,
    pub max_rss_kb: u64,
}

/// Waits for `child` with `wait4`, which reports the child's own resource usage (not its children's).
pub fn wait_with_usage(child: &mut Child) -> std::io::Result<ChildUsage> {
    use std::os::unix::process::ExitStatusExt;
    let pid = child.id() as libc::pid_t;
    let mut status: libc::c_int = 0;
    // SAFETY: wait4 writes into the zeroed struct and the status integer we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut u) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let (user, system) = (tv(u.ru_utime), tv(u.ru_stime));
    Ok(ChildUsage {
        status: ExitStatus::from_raw(status),
        cpu: user + system,
        user,
        system,
        max_rss_kb: u.ru_maxrss.max(0) as u64,
    })
}

/// The argument that makes a bench binary serve as the fake server (see [`serve_if_child`]).
pub const CHILD_FLAG: &str = "--fake-server-child";

/// In a binary that runs the fake server as a child of itself (so its CPU and memory are measured apart): when
/// `args` (without the program name) start with [`CHILD_FLAG`], serves with the rest of them as `nmb-fake-server`
/// options and never returns; otherwise returns.
pub fn serve_if_child(args: &[String]) {
    if args.first().map(String::as_str) != Some(CHILD_FLAG) {
        return;
    }
    if let Err(e) = crate::run_cli(&args[1..]) {
        eprintln!("{e}");
        std::process::exit(2);
    }
    std::process::exit(0);
}

/// Starts this binary again as the fake server with `server_args` and returns the child and its port, read from
/// the `LISTENING <port>` line.
pub fn spawn_child_server(server_args: &[&str]) -> std::io::Result<(Child, u16)> {
    use std::io::BufRead;
    let exe = std::env::current_exe()?;
    let mut child = std::process::Command::new(exe)
        .arg(CHILD_FLAG)
        .args(server_args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| std::io::Error::other("no stdout"))?;
    let mut line = String::new();
    std::io::BufReader::new(stdout).read_line(&mut line)?;
    let port = line
        .trim()
        .strip_prefix("LISTENING ")
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("unexpected server output {line:?}")))?;
    Ok((child, port))
}

/// `ms` since the Unix epoch as RFC 3339 in UTC with microseconds, as Anthropic writes times.
pub fn rfc3339(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let rest = ms.rem_euclid(86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    let (h, min, s, milli) = (
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000,
    );
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{min:02}:{s:02}.{milli:03}000Z")
}
