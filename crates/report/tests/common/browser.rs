//! Headless Debian `chromium`: dump a page's DOM after load, take screenshots. `scripts/chromium.sh` (called by
//! scripts/test.sh) installs it; without it the browser tests skip with a message.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// `NMB_CHROMIUM`, else `chromium` / `chromium-browser` on PATH.
pub fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("NMB_CHROMIUM")
        .map(PathBuf::from)
        .filter(|p| p.exists())
    {
        return Some(p);
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return Some(p);
            }
        }
    }
    eprintln!(
        "SKIPPED: headless chromium is not installed (scripts/chromium.sh installs Debian's chromium; \
         scripts/test.sh runs it), so the browser checks cannot run"
    );
    None
}

/// Where screenshots are kept: `target/report-screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target.join("report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(bin: &Path, extra: &[String], page: &Path) -> (String, String) {
    let profile = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(bin);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
    ])
    .arg(format!("--user-data-dir={}", profile.path().display()))
    .args(extra)
    .arg(format!("file://{}", page.canonicalize().unwrap().display()))
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("chromium starts");
    let started = Instant::now();
    // Read both pipes on threads so a chatty browser cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).ok();
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).ok();
        s
    });
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            child.kill().ok();
            child.wait().ok();
            panic!("chromium did not finish within 120 s on {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (out_t.join().unwrap(), err_t.join().unwrap())
}

/// The DOM after load (and after any script the page ran), plus chromium's log (console messages included).
pub fn dump_dom(bin: &Path, page: &Path) -> (String, String) {
    run(
        bin,
        &["--dump-dom".into(), "--virtual-time-budget=3000".into()],
        page,
    )
}

/// A PNG of the page at `width` × `height` CSS pixels.
pub fn screenshot(bin: &Path, page: &Path, png: &Path, width: u32, height: u32) {
    let _ = std::fs::remove_file(png);
    let (_, log) = run(
        bin,
        &[
            format!("--screenshot={}", png.display()),
            format!("--window-size={width},{height}"),
            "--virtual-time-budget=3000".into(),
        ],
        page,
    );
    assert!(
        png.is_file(),
        "chromium wrote no screenshot to {}; log:\n{log}",
        png.display()
    );
}
