//! Shared helpers for the `nmb eval` tests: the built binary, a loopback fake server, the store it writes, and
//! small native suites written on the fly.
#![allow(dead_code)]

pub mod measured;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use nmb_fake_server::{Config, FakeServer, Wire};
use serde_json::Value;

pub const WIRES: [Wire; 3] = [Wire::OpenAi, Wire::Anthropic, Wire::Gemini];

/// A command running the built `nmb` with no API keys from the caller's environment, quiet progress.
pub fn nmb_command(runs_dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_nmb"));
    c.arg("--runs-dir").arg(runs_dir);
    for var in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "NMB_RUNS_DIR",
        "NMB_LOG",
    ] {
        c.env_remove(var);
    }
    c
}

pub fn nmb(runs_dir: &Path, args: &[&str]) -> Output {
    nmb_command(runs_dir)
        .args(args)
        .output()
        .expect("running nmb")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The JSON object `nmb ... --json` printed, after checking it exited 0.
pub fn json_of(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "nmb failed ({:?}): {}{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    let stdout = text(&out.stdout);
    // One line, or the whole output when it is pretty-printed.
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last)
        .or_else(|_| serde_json::from_str(&stdout))
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout}"))
}

/// A fake server on its own runtime, recording every request.
pub fn server(config: Config) -> FakeServer {
    FakeServer::start_in_background(config, 2).expect("fake server starts")
}

/// A loopback server that answers every request with `status` and `body`, as written.
pub fn always(status: u16, body: String) -> FakeServer {
    server(Config {
        responder: std::sync::Arc::new(move |_| nmb_fake_server::Reply::Raw {
            status,
            headers: Vec::new(),
            body: body.clone(),
        }),
        ..Config::default()
    })
}

/// `nmb eval --suite SUITE --model MODEL --samples 1` and then `extra`, as arguments.
pub fn eval_args(suite: &str, model: &str, extra: &[&str]) -> Vec<String> {
    let head = ["eval", "--suite", suite, "--model", model, "--samples", "1"];
    head.iter().chain(extra).map(|a| a.to_string()).collect()
}

/// A native suite of one case in `dir/suite`: `suite.toml` with id `id` (and `toml_extra` after it), the case
/// as the one line of `cases.jsonl`. Returns the suite's directory.
pub fn one_case_suite(dir: &Path, id: &str, toml_extra: &str, case: &Value) -> PathBuf {
    let root = dir.join("suite");
    std::fs::create_dir_all(&root).unwrap();
    let toml = format!("id = \"{id}\"\nversion = \"1\"\n{toml_extra}");
    std::fs::write(root.join("suite.toml"), toml).unwrap();
    std::fs::write(root.join("cases.jsonl"), format!("{case}\n")).unwrap();
    root
}

/// `BACKEND:test-model@URL` for a wire of `server`.
pub fn model_spec(wire: Wire, server: &FakeServer) -> String {
    match wire {
        Wire::OpenAi => format!("openai:test-model@{}/v1", server.url()),
        Wire::Anthropic => format!("anthropic:test-model@{}", server.url()),
        Wire::Gemini => format!("gemini:test-model@{}", server.url()),
    }
}

/// The API key variable of a wire.
pub fn key_var(wire: Wire) -> &'static str {
    match wire {
        Wire::OpenAi => "OPENAI_API_KEY",
        Wire::Anthropic => "ANTHROPIC_API_KEY",
        Wire::Gemini => "GEMINI_API_KEY",
    }
}

pub fn store(runs_dir: &Path) -> nmb_store::Store {
    nmb_store::Store::open_dir(runs_dir).expect("store opens")
}

/// One task of a native test suite: its id and question (which may carry a `FAULT:` marker).
pub struct TestTask<'a> {
    pub id: &'a str,
    pub question: &'a str,
}

/// Writes a native suite with one case per task (EHR, notes, one small PNG each) and returns its directory.
pub fn native_suite(dir: &Path, tasks: &[TestTask<'_>]) -> PathBuf {
    let root = dir.join("suite");
    std::fs::create_dir_all(root.join("images")).expect("suite dir");
    std::fs::write(
        root.join("suite.toml"),
        "id = \"faults\"\nversion = \"1\"\n[defaults]\nlevel = \"direct\"\n",
    )
    .expect("suite.toml");
    let mut lines = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let png = nmb_fake_server::support::noise_png(16, i as u64);
        let name = format!("images/case{i}.png");
        std::fs::write(root.join(&name), png).expect("png");
        let case = serde_json::json!({
            "case_id": format!("case{i}"),
            "images": [{"path": name, "modality": "MRI", "sequence": "FLAIR", "plane": "axial"}],
            "ehr": {"Age": 40 + i, "Sex": "female"},
            "notes": "Subacute headache and confusion.",
            "tasks": [{"id": t.id, "family": "differential", "question": t.question}],
        });
        lines.push(case.to_string());
    }
    std::fs::write(root.join("cases.jsonl"), lines.join("\n") + "\n").expect("cases.jsonl");
    root
}

/// The server's request count once it has stopped changing for 200 ms: after a SIGKILL, a request the dead
/// process had already written may still be in the server's socket buffer.
pub fn settled_request_count(server: &FakeServer) -> u64 {
    let mut last = server.request_count();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let now = server.request_count();
        if now == last {
            return now;
        }
        last = now;
    }
}

/// `n` kill points in 1..=`below`, sorted, drawn by xorshift64* from `seed`, so a failure can be replayed.
pub fn kill_points(mut seed: u64, n: usize, below: u64) -> Vec<u64> {
    let mut out: Vec<u64> = (0..n)
        .map(|_| {
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            1 + seed.wrapping_mul(0x2545_f491_4f6c_dd1d) % below
        })
        .collect();
    out.sort_unstable();
    out
}

/// The body of a plain HTTP/1.1 GET on loopback.
pub fn http_get(url: &str) -> String {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap();
    let mut stream = std::net::TcpStream::connect(host).unwrap();
    write!(
        stream,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    response
}
