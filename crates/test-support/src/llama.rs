//! llama.cpp's real OpenAI-compatible server (PyPI `xllamacpp`, started by `scripts/llama-server.py`) as a child
//! process, for end-to-end tests of the `openai` backend against a real model; and llama.cpp's logits after a
//! prompt (`scripts/llama-logits.py`), for comparing the local engine's numerics with llama.cpp's.

use std::io::{BufRead, BufReader, Write};
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
        LlamaServer::start_with(gguf, &[])
    }

    /// [`LlamaServer::start`] with a vision projector: image parts of chat requests go through llama.cpp's
    /// `mtmd` with `mmproj`.
    pub fn start_with_mmproj(gguf: &Path, mmproj: &Path) -> Option<LlamaServer> {
        LlamaServer::start_with(gguf, &["--mmproj".as_ref(), mmproj.as_os_str()])
    }

    fn start_with(gguf: &Path, args: &[&std::ffi::OsStr]) -> Option<LlamaServer> {
        let mut child = xllamacpp_script("llama-server.py", "llama.cpp's server", gguf)?
            .args(args)
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

/// llama.cpp's logits after each prompt (token ids), bit for bit as its CPU build computes them with two threads,
/// from `scripts/llama-logits.py` (llama.cpp's C API in xllamacpp's library). `None` (after [`need()`]) when
/// xllamacpp is not installed; panics when the script fails.
pub fn prompt_logits(gguf: &Path, prompts: &[Vec<u32>]) -> Option<Vec<Vec<f32>>> {
    let mut child = xllamacpp_script("llama-logits.py", "llama.cpp's library", gguf)?
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting python3 scripts/llama-logits.py");
    let input: String = prompts
        .iter()
        .map(|ids| {
            let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
            ids.join(",") + "\n"
        })
        .collect();
    let mut stdin = child.stdin.take().expect("the script's stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("running llama-logits.py");
    writer
        .join()
        .expect("the writer thread")
        .expect("writing the prompts to llama-logits.py");
    assert!(
        out.status.success(),
        "llama-logits.py failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("llama-logits.py prints hex");
    let logits: Vec<Vec<f32>> = text.lines().map(f32s_from_hex).collect();
    assert_eq!(logits.len(), prompts.len(), "one line of logits per prompt");
    Some(logits)
}

/// Little-endian f32 bytes, in hex, back to values.
fn f32s_from_hex(line: &str) -> Vec<f32> {
    let bytes: Vec<u8> = (0..line.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&line[i..i + 2], 16).expect("hex digits"))
        .collect();
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// `python3 scripts/SCRIPT GGUF` with xllamacpp's folder on `PYTHONPATH`, or `None` (after [`need()`], which
/// names `what`) when xllamacpp is not installed.
fn xllamacpp_script(script: &str, what: &str, gguf: &Path) -> Option<Command> {
    need(
        &format!("Python's xllamacpp ({what})"),
        "scripts/assets.sh installs it into .nmb-assets/py",
        xllamacpp_importable().then_some(()),
    )?;
    let mut cmd = Command::new("python3");
    cmd.arg(repo_root().join("scripts").join(script))
        .arg(gguf)
        .env("PYTHONPATH", py_dir());
    Some(cmd)
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

/// ggml's f16 GELU table (`ggml_table_gelu_f16`, 65536 values) as llama.cpp's CPU build fills it, from
/// `scripts/ggml-gelu-table.py`. `None` (after [`need()`]) when xllamacpp is not installed; panics when the
/// script fails.
pub fn ggml_gelu_table() -> Option<Vec<u16>> {
    need(
        "Python's xllamacpp (ggml's GELU table)",
        "scripts/assets.sh installs it into .nmb-assets/py",
        xllamacpp_importable().then_some(()),
    )?;
    let out = Command::new("python3")
        .arg(repo_root().join("scripts/ggml-gelu-table.py"))
        .env("PYTHONPATH", py_dir())
        .output()
        .expect("running python3 scripts/ggml-gelu-table.py");
    assert!(
        out.status.success(),
        "ggml-gelu-table.py failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("ggml-gelu-table.py prints hex");
    let bytes: Vec<u8> = (0..text.trim().len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digits"))
        .collect();
    Some(
        bytes
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .collect(),
    )
}

/// What llama.cpp's `mtmd` computes for one prompt holding images (`scripts/llama-mtmd.py`).
#[derive(Debug, Clone)]
pub struct MtmdAnswer {
    /// The prompt's chunks in order: text token ids, or an image's embeddings (rows of the text model's width).
    pub chunks: Vec<MtmdChunk>,
    /// The logits after the prompt's last position.
    pub logits: Vec<f32>,
}

/// An image for [`mtmd`]: width, height and RGB bytes (rows top to bottom).
pub type RgbImage = (usize, usize, Vec<u8>);

/// A prompt holding `<__media__>` markers, and its images in order.
pub type MtmdRequest = (String, Vec<RgbImage>);

/// One chunk of a prompt as `mtmd_tokenize` splits it.
#[derive(Debug, Clone, PartialEq)]
pub enum MtmdChunk {
    Text(Vec<u32>),
    Image(Vec<f32>),
}

/// llama.cpp's chunks, image embeddings and logits for each `(prompt, images)`, each image `(width, height,
/// RGB bytes)` and each prompt holding one `<__media__>` marker per image; on `model` with the projector
/// `mmproj`, with two threads. The images are written into a fresh folder inside `dir`. `None` (after [`need()`]) when xllamacpp is
/// not installed; panics when the script fails.
pub fn mtmd(
    model: &Path,
    mmproj: &Path,
    dir: &Path,
    requests: &[MtmdRequest],
) -> Option<Vec<MtmdAnswer>> {
    mtmd_with(model, mmproj, dir, requests, true)
}

/// [`mtmd`], without the logits when `with_logits` is false (their `logits` then empty): for a text model
/// whose vocabulary lacks the projector's special tokens, which llama.cpp can tokenise around but not run.
pub fn mtmd_with(
    model: &Path,
    mmproj: &Path,
    dir: &Path,
    requests: &[MtmdRequest],
    with_logits: bool,
) -> Option<Vec<MtmdAnswer>> {
    let mut cmd = xllamacpp_script("llama-mtmd.py", "llama.cpp's multimodal library", model)?;
    // A folder of its own, so that tests running at once never read each other's images.
    let scratch = tempfile::tempdir_in(dir).expect("a scratch folder for the images");
    let dir = scratch.path();
    let mut input = String::new();
    for (r, (prompt, images)) in requests.iter().enumerate() {
        let mut list = Vec::new();
        for (i, (w, h, rgb)) in images.iter().enumerate() {
            let file = dir.join(format!("mtmd-{r}-{i}.rgb"));
            std::fs::write(&file, rgb).expect("writes the image for llama-mtmd.py");
            list.push(serde_json::json!([w, h, file]));
        }
        input += &serde_json::json!({"prompt": prompt, "images": list, "logits": with_logits})
            .to_string();
        input.push('\n');
    }
    let mut child = cmd
        .arg(mmproj)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting python3 scripts/llama-mtmd.py");
    let mut stdin = child.stdin.take().expect("the script's stdin");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().expect("running llama-mtmd.py");
    writer
        .join()
        .expect("the writer thread")
        .expect("writing the requests to llama-mtmd.py");
    assert!(
        out.status.success(),
        "llama-mtmd.py failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("llama-mtmd.py prints JSON");
    let answers: Vec<MtmdAnswer> = text
        .lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
            let chunks = v["chunks"]
                .as_array()
                .expect("chunks")
                .iter()
                .map(|c| match c.get("text") {
                    Some(ids) => MtmdChunk::Text(
                        ids.as_array()
                            .expect("token ids")
                            .iter()
                            // -1 where the vocabulary lacks a special token the projector names.
                            .map(|t| t.as_i64().expect("a token id") as u32)
                            .collect(),
                    ),
                    None => MtmdChunk::Image(f32s_from_hex(c["embd"].as_str().expect("embd"))),
                })
                .collect();
            MtmdAnswer {
                chunks,
                logits: f32s_from_hex(v["logits"].as_str().expect("logits")),
            }
        })
        .collect();
    assert_eq!(answers.len(), requests.len(), "one answer per request");
    Some(answers)
}
