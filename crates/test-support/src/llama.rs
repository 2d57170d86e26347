//! llama.cpp's real OpenAI-compatible server (PyPI `xllamacpp`, started by `scripts/llama-server.py`) as a child
//! process, for end-to-end tests of the `openai` backend against a real model.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::assets::{py_dir, repo_root};
use crate::need;

/// A running server; killed when dropped.
pub struct LlamaServer {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub url: String,
}

impl LlamaServer {
    /// Starts the server on `gguf`, or returns `None` (after [`need()`]) when Python's `xllamacpp` is not
    /// installed. Panics when it is installed but does not start.
    pub fn start(gguf: &Path) -> Option<LlamaServer> {
        need(
            "Python's xllamacpp (llama.cpp's server)",
            "scripts/assets.sh installs it into .nmb-assets/py",
            xllamacpp_importable().then_some(()),
        )?;
        let mut child = Command::new("python3")
            .arg(repo_root().join("scripts/llama-server.py"))
            .arg(gguf)
            .env("PYTHONPATH", py_dir())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting python3 scripts/llama-server.py");
        let stdout = child.stdout.take().expect("the server's stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_default();
        let Some(url) = line.trim().strip_prefix("LISTENING ").map(str::to_string) else {
            let _ = child.kill();
            panic!("llama-server.py did not start: {line:?}");
        };
        Some(LlamaServer { child, url })
    }

    /// The OpenAI-compatible base URL (`.../v1`).
    pub fn v1(&self) -> String {
        format!("{}/v1", self.url)
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn xllamacpp_importable() -> bool {
    Command::new("python3")
        .args(["-c", "import xllamacpp"])
        .env("PYTHONPATH", py_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
