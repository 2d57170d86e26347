//! Every command example the guide marks runnable (a block fenced as ```` ```sh runnable ````, in README.md and
//! docs/*.md) runs and exits 0 against a loopback fake server, as ARCHITECTURE.md describes.
//!
//! Each page's runnable commands run in order, one `bash` each (a command may go on over `\`-ended lines and
//! hold a here-document), in one temporary folder (with the repository's `rubrics/` linked in) and one runs
//! directory (`NMB_RUNS_DIR`), so a later command reads what an earlier one stored. Before a command runs, every
//! `openai:`, `anthropic:` and `gemini:` model spec in it is pointed at the fake server (any base URL it had is
//! replaced), and these placeholders become what the store then holds: `RUN_ID` the newest model run, `RUN_A` and
//! `RUN_B` the two newest (older first), `rv-1a2b3c4d5e6f` the newest review set.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use nmb_fake_server::judge::SimJudge;
use nmb_fake_server::{Config, FakeServer, ReceivedRequest, Reply};
use nmb_store::RunKind;

use crate::common::{server, store, text};

const MARKER: &str = "```sh runnable";

/// One runnable block: where it starts and its text.
struct Block {
    line: usize,
    script: String,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The guide's pages: README.md and the Markdown files directly under docs/ (not docs/pending/).
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![repo().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (n, line) in markdown.lines().enumerate() {
        match &mut open {
            None if line.trim_end() == MARKER => {
                open = Some(Block {
                    line: n + 1,
                    script: String::new(),
                })
            }
            Some(_) if line.trim_end() == "```" => out.extend(open.take()),
            Some(block) => {
                block.script.push_str(line);
                block.script.push('\n');
            }
            None => {}
        }
    }
    assert!(open.is_none(), "a runnable block is never closed");
    out
}

/// Model answers as the fake server gives them, and a simulated judge's answers to nmb's judge prompts.
fn answers(req: &ReceivedRequest) -> Reply {
    let text = req.all_text();
    let judged = text.contains("Grade the MODEL ANSWER")
        || (text.contains("Candidate") && text.contains("\"equivalent\""))
        || text.contains("perceptual_failure");
    if judged {
        SimJudge::default().reply(req)
    } else {
        nmb_fake_server::default_reply(req)
    }
}

/// The commands of a block: lines ending in `\` go on to the next, and a here-document (`<<'END'`) runs to its
/// end marker.
fn commands(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut heredoc: Option<String> = None;
    for line in script.lines() {
        current.push_str(line);
        current.push('\n');
        if let Some(end) = &heredoc {
            if line.trim() == end {
                heredoc = None;
            } else {
                continue;
            }
        } else if let Some((_, rest)) = line.split_once("<<") {
            let end = rest
                .trim()
                .trim_matches(|c| c == '\'' || c == '"' || c == '-');
            heredoc = Some(
                end.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string(),
            );
            continue;
        }
        if !line.trim_end().ends_with('\\') && heredoc.is_none() {
            if !current.trim().is_empty() && !current.trim_start().starts_with('#') {
                out.push(std::mem::take(&mut current));
            }
            current.clear();
        }
    }
    assert!(
        heredoc.is_none(),
        "a here-document is never closed:\n{script}"
    );
    out
}

/// `script` with its model specs pointed at `url` and its placeholders filled from the store in `runs`.
fn substitute(script: &str, url: &str, runs: &Path) -> String {
    let mut out = String::new();
    for word in script.split_inclusive(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
        let (body, tail) = word.split_at(
            word.trim_end_matches(|c: char| c.is_whitespace() || c == '\'' || c == '"')
                .len(),
        );
        out.push_str(&point_at(body, url));
        out.push_str(tail);
    }
    let (mut runs_newest_first, mut set) = (Vec::new(), None);
    if runs.join("nmb.sqlite").exists() {
        let store = store(runs);
        runs_newest_first = store
            .list_runs()
            .expect("runs")
            .into_iter()
            .filter(|r| r.manifest.kind == RunKind::Model)
            .map(|r| r.run_id)
            .collect();
        set = store
            .list_review_sets()
            .expect("review sets")
            .first()
            .map(|s| s.set_id.clone());
    }
    let mut fill = |name: &str, value: Option<&String>| {
        if out.contains(name) {
            let value = value
                .unwrap_or_else(|| panic!("{name} is used before the store holds one:\n{script}"));
            out = out.replace(name, value);
        }
    };
    fill("RUN_ID", runs_newest_first.first());
    fill("RUN_A", runs_newest_first.get(1));
    fill("RUN_B", runs_newest_first.first());
    fill("rv-1a2b3c4d5e6f", set.as_ref());
    out
}

/// A model spec pointed at the fake server; any other word as it is.
fn point_at(word: &str, url: &str) -> String {
    let Some((backend, rest)) = word.split_once(':') else {
        return word.to_string();
    };
    let model = rest.split_once('@').map_or(rest, |(m, _)| m);
    match backend {
        "openai" => format!("openai:{model}@{url}/v1"),
        "anthropic" | "gemini" => format!("{backend}:{model}@{url}"),
        _ => word.to_string(),
    }
}

/// Runs `page`'s runnable blocks in order; the number run.
fn run_page(page: &Path, nmb_dir: &Path, fake: &FakeServer) -> usize {
    let markdown = std::fs::read_to_string(page).expect("page");
    let blocks = blocks(&markdown);
    if blocks.is_empty() {
        return 0;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    std::os::unix::fs::symlink(repo().join("rubrics"), dir.path().join("rubrics"))
        .expect("rubrics link");
    let runs = dir.path().join("nmb-runs");
    let path = format!(
        "{}:{}",
        nmb_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for block in &blocks {
        for command in commands(&block.script) {
            let script = substitute(&command, &fake.url(), &runs);
            let out = Command::new("bash")
                .args(["-euo", "pipefail", "-c", &script])
                .current_dir(dir.path())
                .env("PATH", &path)
                .env("NMB_RUNS_DIR", &runs)
                .env("OPENAI_API_KEY", "sk-runnable-example")
                .env("ANTHROPIC_API_KEY", "sk-ant-runnable-example")
                .env("GEMINI_API_KEY", "runnable-example")
                .env_remove("NMB_STORE_URL")
                .env_remove("NMB_LOG")
                .output()
                .expect("running bash");
            assert!(
                out.status.success(),
                "{}:{}: a runnable example failed ({:?}):\n{script}\n--- stdout\n{}\n--- stderr\n{}",
                page.display(),
                block.line,
                out.status,
                text(&out.stdout),
                text(&out.stderr)
            );
        }
    }
    blocks.len()
}

#[test]
fn runnable_examples_run() {
    let nmb = PathBuf::from(env!("CARGO_BIN_EXE_nmb"));
    let nmb_dir = nmb.parent().expect("the binary's folder");
    let fake = server(Config {
        responder: Arc::new(answers),
        ..Config::default()
    });
    let mut ran = 0;
    for page in pages() {
        ran += run_page(&page, nmb_dir, &fake);
    }
    assert!(ran >= 5, "only {ran} runnable examples found");
}

#[test]
fn specs_and_placeholders_are_filled() {
    let url = "http://127.0.0.1:9";
    let runs = Path::new("/nonexistent");
    let script = "nmb eval --model openai:gpt-4o --judge 'anthropic:claude-sonnet-4-5'\n\
                  nmb eval --model openai:Qwen/Qwen2-VL@http://gpu1:8000/v1,http://gpu2:8000/v1 --model local:x.gguf";
    let out = substitute(script, url, runs);
    assert_eq!(
        out,
        "nmb eval --model openai:gpt-4o@http://127.0.0.1:9/v1 --judge 'anthropic:claude-sonnet-4-5@http://127.0.0.1:9'\n\
         nmb eval --model openai:Qwen/Qwen2-VL@http://127.0.0.1:9/v1 --model local:x.gguf"
    );
    let script = "nmb a \\\n  --b\n# a comment\ncat > f <<'END'\nx\nEND\nnmb c\n";
    assert_eq!(
        commands(script),
        ["nmb a \\\n  --b\n", "cat > f <<'END'\nx\nEND\n", "nmb c\n"]
    );
    let md = "text\n```sh runnable\nnmb runs list\n```\n```sh\nnmb serve\n```\n";
    let found = blocks(md);
    assert_eq!(found.len(), 1);
    assert_eq!(
        (found[0].line, found[0].script.as_str()),
        (2, "nmb runs list\n")
    );
}
