//! A whole study from one run file: three loopback models (one served by two replicas), the sample
//! suite, VQA-RAD's HEAD slice, SLAKE as text, MedQA and PubMedQA from ../shared/data, under two prompt
//! variants. The single command is killed part-way and run again: nothing stored is asked twice, the replicas
//! share their model's load, and one report holds the two-axis view and the breadth, sweep and revision tables.

use std::collections::HashSet;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::*;
use nmb_fake_server::{Config, FakeServer};

fn slow_server() -> FakeServer {
    server(Config {
        latency: Duration::from_millis(15),
        ..Config::default()
    })
}

fn run_file(
    dir: &Path,
    shared: &Path,
    a: [&FakeServer; 2],
    b: &FakeServer,
    c: &FakeServer,
) -> std::path::PathBuf {
    let data = shared.join("data");
    let text = format!(
        r#"templates = ["bundled:paraphrase-1", "bundled:no-persona"]

[study]
name = "whole"
report = "report"

[[models]]
spec = "openai:model-a@{a1}/v1,{a2}/v1"
name = "A"
concurrency = 4

[[models]]
spec = "openai:model-b@{b}/v1"
name = "B"

[[models]]
spec = "openai:model-c@{c}/v1"
name = "C"

[[suites]]
spec = "sample"
samples = 1

[[suites]]
spec = "vqa-rad:{data}/vqa-rad/testset.json"
filters = ["image_organ=HEAD"]
samples = 1
limit = 8

[[suites]]
spec = "slake:{data}/slake/test.json"
inputs = "text"
filters = ["language=en"]
samples = 1
limit = 8

[[suites]]
spec = "mcq:{data}/medqa/medagentsbench/test.jsonl"
samples = 1
limit = 8

[[suites]]
spec = "pubmedqa:{data}/pubmedqa/ori_pqal.json"
samples = 1
limit = 8

[scoring]
bertscore = false
"#,
        a1 = a[0].url(),
        a2 = a[1].url(),
        b = b.url(),
        c = c.url(),
        data = data.display(),
    );
    let path = dir.join("study.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// (model name, prompt hash, sample index) of every stored answer of every run: models B and C see the same
/// prompts, so the model is part of what an answer is.
fn stored(runs: &Path) -> HashSet<(String, String, u32)> {
    let db = store(runs);
    db.list_runs()
        .unwrap()
        .iter()
        .flat_map(|r| db.run_samples(&r.run_id).unwrap())
        .flat_map(|s| {
            let i = s.sample_index;
            s.turns.into_iter().filter(|t| t.ok).map(move |t| {
                let name = t.call.model.split(':').nth(1).unwrap_or("");
                let name = name.split('@').next().unwrap_or("").to_string();
                (name, t.call.prompt_hash, i)
            })
        })
        .collect()
}

#[test]
fn one_run_file_runs_the_whole_study_through_a_kill() {
    let Some(shared) = nmb_test_support::assets::shared_dir() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let (a1, a2, b, c) = (slow_server(), slow_server(), slow_server(), slow_server());
    let file = run_file(tmp.path(), &shared, [&a1, &a2], &b, &c);
    let servers = [&a1, &a2, &b, &c];
    let total = || servers.iter().map(|s| s.request_count()).sum::<u64>();
    let command = || {
        let mut cmd = nmb_command(&runs);
        cmd.env("OPENAI_API_KEY", "k")
            .args(["eval", "--config"])
            .arg(&file);
        cmd
    };

    let mut child = command()
        .args(["-q"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while total() < 60 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "no requests arrived"
        );
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            panic!("the study ended before the kill: {}", text(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let before: Vec<usize> = servers.iter().map(|s| s.requests().len()).collect();
    let kept = stored(&runs);
    assert!(!kept.is_empty(), "answers were stored before the kill");

    let result = json_of(&command().args(["--json", "-q"]).output().unwrap());
    let cells = result["cells"].as_array().unwrap();
    assert_eq!(
        cells.len(),
        5 * 3 * 2,
        "every suite x model x variant: {result}"
    );
    for (server, seen) in servers.iter().zip(&before) {
        for r in &server.requests()[*seen..] {
            let sample = r.params.seed.unwrap_or(0) as u32;
            assert!(
                !kept.contains(&(r.model.clone(), r.conversation_sha256.clone(), sample)),
                "request {} asked again for an answer stored before the kill",
                r.seq
            );
        }
    }
    let (n1, n2) = (a1.request_count() as f64, a2.request_count() as f64);
    assert!(
        n1.min(n2) >= 0.25 * (n1 + n2),
        "replicas share model A's load: {n1} and {n2}"
    );

    let html = std::fs::read_to_string(result["report"].as_str().unwrap()).unwrap();
    for (id, what) in [
        ("two-axis", "the two-axis scatter"),
        ("breadth", "the breadth table"),
        ("revision", "the revision table"),
        ("prompt-sensitivity", "the sweep table"),
        ("label-set", "PubMedQA's macro-F1"),
    ] {
        assert!(
            html.contains(&format!("id=\"{id}\"")),
            "{what} is in the study report"
        );
    }
    let asked = total();
    let again = json_of(&command().args(["--json", "-q"]).output().unwrap());
    assert_eq!(again["cells"].as_array().unwrap().len(), 30);
    assert_eq!(total(), asked, "a finished study asks nothing again");
}
