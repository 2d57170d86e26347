//! Headless Debian `chromium`: dump a page's DOM after load, take screenshots, or drive a page through
//! chromedriver (WebDriver) as a person would. `scripts/chromium.sh` (called by scripts/test.sh) installs both;
//! without them the browser tests skip with a message, and fail under `CI=true`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::need;

/// `NMB_CHROMIUM`, else `chromium` / `chromium-browser` on PATH; `None` after a message locally, a failure under
/// `CI=true` (see [`need()`]).
pub fn chromium() -> Option<PathBuf> {
    let env = std::env::var_os("NMB_CHROMIUM")
        .map(PathBuf::from)
        .filter(|p| p.exists());
    need(
        "headless chromium",
        "scripts/chromium.sh installs Debian's chromium; scripts/test.sh runs it",
        env.or_else(|| on_path(&["chromium", "chromium-browser"])),
    )
}

/// `NMB_CHROMEDRIVER`, else `chromedriver` on PATH (Debian's `chromium-driver`), with the same rule.
pub fn chromedriver() -> Option<PathBuf> {
    let env = std::env::var_os("NMB_CHROMEDRIVER")
        .map(PathBuf::from)
        .filter(|p| p.exists());
    need(
        "chromedriver",
        "scripts/chromium.sh installs Debian's chromium-driver; scripts/test.sh runs it",
        env.or_else(|| on_path(&["chromedriver"])),
    )
}

fn on_path(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

/// Where screenshots are kept: `target/report-screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::assets::repo_root().join("target"));
    let dir = target.join("report-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn run(bin: &Path, extra: &[String], page: &Path) -> (String, String) {
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    open(bin, extra, &url)
}

/// The DOM of `url` after load, with Chromium's extra flags `extra` (`--host-resolver-rules=...`, say), plus its
/// log.
pub fn dump_url(bin: &Path, url: &str, extra: &[String]) -> (String, String) {
    let mut args = vec!["--dump-dom".into(), "--virtual-time-budget=3000".into()];
    args.extend(extra.iter().cloned());
    open(bin, &args, url)
}

fn open(bin: &Path, extra: &[String], url: &str) -> (String, String) {
    let profile = tempfile::tempdir().expect("a temp profile dir");
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
    .arg(url)
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
            panic!("chromium did not finish within 120 s on {url}");
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

/// Flags for headless Chromium on a closed machine (no sandbox as root, no background network).
pub const HEADLESS_ARGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,1600",
];

/// A chromedriver process serving one headless Chromium session; both end when it is dropped.
pub struct WebDriver {
    child: std::process::Child,
    /// The session, for `fantoccini`'s calls.
    pub client: fantoccini::Client,
    _profile: tempfile::TempDir,
}

impl WebDriver {
    /// Starts chromedriver and a session, or `None` (after [`need()`]) without chromium or chromedriver.
    pub async fn start() -> Option<WebDriver> {
        let chromium = chromium()?;
        let driver = chromedriver()?;
        let port = free_port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::tempdir().expect("a temp profile dir");
        let mut args: Vec<String> = HEADLESS_ARGS.iter().map(|s| s.to_string()).collect();
        args.push(format!("--user-data-dir={}", profile.path().display()));
        let caps = serde_json::json!({
            "goog:chromeOptions": {"binary": chromium, "args": args}
        });
        let caps = caps.as_object().cloned().unwrap_or_default();
        let url = format!("http://127.0.0.1:{port}");
        // Several crates enable different rustls crypto providers; name one, as reqwest does.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let started = Instant::now();
        let client = loop {
            match fantoccini::ClientBuilder::rustls()
                .expect("a TLS config")
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(_) if started.elapsed() < Duration::from_secs(30) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Err(e) => panic!("no WebDriver session on {url}: {e}"),
            }
        };
        Some(WebDriver {
            child,
            client,
            _profile: profile,
        })
    }

    /// Ends the session (call before dropping, so Chromium exits cleanly).
    pub async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

impl Drop for WebDriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on loopback")
}
