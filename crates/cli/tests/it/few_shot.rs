//! `nmb eval --few-shot FILE.csv`: NeuroVLM-Bench's few-shot mode. The messages nmb sends are those the authors'
//! runner builds on the same rows (checked against `tests/fixtures/neurovlm_fewshot_runner.py`, a re-implementation
//! of their message builder), the run's answers written as the runner writes them import back with the same
//! scores, the examples are part of the run's identity and of the dry run's counts, and a bad examples file is
//! refused with its file, line and column.
//!
//! The rows, images and prompt are made up in the authors' layouts (ChatMED/neurovlm-bench at 6e87ba4); none of
//! their data is used.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use nmb_fake_server::{Config, ReceivedPart, Reply};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::*;

/// The subset's rows: (file_path, class, subclass, modality, sequence, plane).
const ROWS: [(&str, &str, &str, &str, &str, &str); 4] = [
    ("stroke/CT/1.jpg", "stroke", "ischemic", "CT", "", "axial"),
    (
        "figshare/2/7.jpg",
        "tumor",
        "glioma",
        "MRI",
        "T1C+",
        "axial",
    ),
    (
        "ms/Axial/A1 (3).jpeg",
        "multiple sclerosis",
        "",
        "MRI",
        "FLAIR",
        "axial",
    ),
    ("normal/n.jpg", "normal", "", "MRI", "T2", "sagittal"),
];

/// The examples: (file_path, class, as the authors' file writes them).
const EXAMPLES: [(&str, &str); 3] = [
    ("ms/Axial/A1 (414).jpg", "multiple sclerosis"),
    (
        "images-17/Outros (Abscessos, Cistos) T2/outros (1).jpeg",
        "other abnormalities",
    ),
    ("stroke/Bleeding/16066.jpg", "stroke"),
];

const MODEL: &str = "openai/gpt-4o";

/// A prompt file with what a template would change: blank lines, trailing spaces and a JSON example with braces.
const PROMPT: &str = "You are a neuroradiology expert.  \n\n\n\nReturn ONLY this JSON: {\"diagnosis_name\": \"...\", \
\"modality\": \"...\"}  {{ not a variable }}\n\n";

struct Fixture {
    root: PathBuf,
    dataset: PathBuf,
}

impl Fixture {
    fn at(&self, name: &str) -> String {
        self.root.join(name).display().to_string()
    }
}

fn fixture(dir: &Path) -> Fixture {
    let root = dir.join("nv");
    let dataset = root.join("dataset");
    let mut subset = String::from(
        "dataset,file_path,class,original_class,subclass,modality,modality_subtype,plane\n",
    );
    for (i, (path, class, subclass, modality, sequence, plane)) in ROWS.iter().enumerate() {
        write_image(&dataset, path, i as u64);
        let set = path.split('/').next().unwrap();
        subset.push_str(&format!(
            "{set},\"{path}\",{class},\"{class}\",{subclass},{modality},{sequence},{plane}\n"
        ));
    }
    std::fs::write(root.join("subset.csv"), subset).unwrap();
    let mut examples = String::from(
        "class,dataset,subclass,modality,modality_subtype,plane,file_path,original_class\n",
    );
    for (i, (path, class)) in EXAMPLES.iter().enumerate() {
        write_image(&dataset, path, 100 + i as u64);
        examples.push_str(&format!("{class},d,,MRI,T2,axial,\"{path}\",\"{class}\"\n"));
    }
    std::fs::write(root.join("few_shot_examples.csv"), examples).unwrap();
    std::fs::write(root.join("prompt.txt"), PROMPT).unwrap();
    Fixture { root, dataset }
}

/// A JPEG of noise (the runner labels every image JPEG; nmb labels each with its real type, so the two agree on
/// JPEG files).
fn write_image(dataset: &Path, path: &str, seed: u64) {
    let file = dataset.join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let side = 16 + seed as u32 % 5;
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let pixels = image::RgbImage::from_fn(side, side, |_, _| {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
        let b = (state >> 33).to_le_bytes();
        image::Rgb([b[0], b[1], b[2]])
    });
    let mut jpeg = Vec::new();
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut jpeg, 90)
        .encode_image(&pixels)
        .unwrap();
    std::fs::write(&file, jpeg).unwrap();
}

fn sha_of(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

/// The answer to a query image: its row's class on even rows, "normal" on odd ones.
fn answer(class: &str) -> Value {
    json!({
        "modality": "MRI", "specialized_sequence": "FLAIR", "plane": "axial", "diagnosis_name": class,
        "diagnosis_detailed": null, "icd10_code": null, "severity_score": 0.5,
        "diagnosis_confidence": 0.7, "severity_confidence": 0.5,
    })
}

fn answers(fx: &Fixture) -> BTreeMap<String, Value> {
    ROWS.iter()
        .enumerate()
        .map(|(i, row)| {
            let class = if i % 2 == 0 { row.1 } else { "normal" };
            (sha_of(&fx.dataset.join(row.0)), answer(class))
        })
        .collect()
}

/// A server that answers each request by its last image (the query), keeping every body; asked without
/// examples (one image), it answers "normal".
fn runner_server(fx: &Fixture) -> nmb_fake_server::FakeServer {
    let answers = answers(fx);
    server(Config {
        keep_bodies: true,
        responder: Arc::new(move |req| {
            let images: Vec<String> = req
                .messages
                .iter()
                .flat_map(|m| &m.parts)
                .filter_map(|p| match p {
                    ReceivedPart::Image { sha256, .. } => Some(sha256.clone()),
                    _ => None,
                })
                .collect();
            let query = images.last().cloned().unwrap_or_default();
            let text = match images.len() {
                1 => answer("normal").to_string(),
                _ => answers
                    .get(&query)
                    .map_or_else(|| "no such image".to_string(), |a| a.to_string()),
            };
            Reply::Texts(vec![text; req.samples() as usize])
        }),
        ..Config::default()
    })
}

fn few_shot_eval(
    fx: &Fixture,
    runs: &Path,
    url: &str,
    examples: &str,
    extra: &[&str],
) -> std::process::Output {
    nmb_command(runs)
        .args([
            "eval",
            "--suite",
            &format!("neurovlm:{}", fx.at("subset.csv")),
        ])
        .args(["--images-root", &fx.dataset.display().to_string()])
        .args([
            "--few-shot",
            &fx.at(examples),
            "--template",
            &fx.at("prompt.txt"),
        ])
        .args(["--model", &format!("openai:{MODEL}@{url}/v1")])
        .args([
            "--samples",
            "1",
            "--temperature",
            "0",
            "--seed",
            "42",
            "--top-p",
            "none",
        ])
        .args(["--no-bertscore", "--json", "-q"])
        .args(extra)
        .output()
        .unwrap()
}

/// The runner's request bodies on the fixture's rows, from the Python re-implementation of its builder, by the
/// query image's path; `None` (skipped locally) without python3.
fn runner_bodies(fx: &Fixture) -> Option<BTreeMap<String, Value>> {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/neurovlm_fewshot_runner.py");
    let out = nmb_test_support::need::need(
        "python3",
        "install Python 3",
        Command::new("python3")
            .arg(&script)
            .args([
                fx.at("subset.csv"),
                fx.at("few_shot_examples.csv"),
                fx.dataset.display().to_string(),
                fx.at("prompt.txt"),
                MODEL.to_string(),
                "0".into(),
                "42".into(),
            ])
            .output()
            .ok(),
    )?;
    assert!(out.status.success(), "{}", text(&out.stderr));
    Some(
        text(&out.stdout)
            .lines()
            .map(|l| {
                let v: Value = serde_json::from_str(l).unwrap();
                (
                    v["file_path"].as_str().unwrap().to_string(),
                    v["body"].clone(),
                )
            })
            .collect(),
    )
}

/// The SHA-256 of the query image a body asks about (the last image of its last message).
fn query_sha(body: &Value) -> String {
    use base64::Engine;
    let last = body["messages"].as_array().unwrap().last().unwrap();
    let url = last["content"][1]["image_url"]["url"].as_str().unwrap();
    let b64 = url.split_once("base64,").unwrap().1;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .unwrap();
    hex::encode(Sha256::digest(bytes))
}

#[test]
fn requests_are_the_runners_and_its_file_imports_with_the_same_scores() {
    let tmp = tempfile::tempdir().unwrap();
    let fx = fixture(tmp.path());
    let runs = tmp.path().join("runs");
    let srv = runner_server(&fx);
    let result = json_of(&few_shot_eval(
        &fx,
        &runs,
        &srv.url(),
        "few_shot_examples.csv",
        &[],
    ));
    let run_id = result["run_id"].as_str().unwrap().to_string();
    let requests = srv.requests();
    assert_eq!(requests.len(), ROWS.len(), "{result}");

    // The messages, model, temperature and seed are the runner's on the same rows, in canonical JSON.
    let sent: BTreeMap<String, Value> = requests
        .iter()
        .map(|r| {
            let body: Value = serde_json::from_str(r.body.as_deref().unwrap()).unwrap();
            (query_sha(&body), body)
        })
        .collect();
    if let Some(runner) = runner_bodies(&fx) {
        assert_eq!(runner.len(), ROWS.len());
        for (path, theirs) in &runner {
            let sha = sha_of(&fx.dataset.join(path));
            let ours = &sent[&sha];
            assert_eq!(
                nmb_store::canonical_json(&ours["messages"]),
                nmb_store::canonical_json(&theirs["messages"]),
                "{path}: the messages differ from the runner's"
            );
            assert_eq!(ours["model"], theirs["model"]);
            assert_eq!(ours["temperature"].as_f64(), theirs["temperature"].as_f64());
            assert_eq!(ours["seed"], theirs["seed"]);
            // What nmb sends besides: its token limit and the answer's schema as constrained output.
            let mut extra: Vec<&str> = ours
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| !theirs.as_object().unwrap().contains_key(*k))
                .map(String::as_str)
                .collect();
            extra.sort();
            assert_eq!(extra, ["max_tokens", "response_format"], "{ours:#}");
        }
    }

    // The answers, written as the runner writes them, import back as a run that scores the same.
    let answers = answers(&fx);
    let lines: Vec<String> = ROWS
        .iter()
        .enumerate()
        .map(|(i, row)| {
            json!({
                "timestamp": "2025-09-09T13:46:13.000000",
                "experiment_id": format!("neurorad_{i:06}"),
                "api_response": {"id": format!("gen-{i}"), "model": MODEL, "prompt_tokens": 1000,
                                 "completion_tokens": 50, "total_tokens": 1050},
                "input": {"image_path": format!("../../ivan/dataset/{}", row.0), "model_requested": MODEL,
                          "system_prompt_type": "neurorad_prompt_trim",
                          "metadata": {"dataset": "d", "class": row.1}},
                "output": {"parsed_response": answers[&sha_of(&fx.dataset.join(row.0))],
                           "status": "success", "error": null},
                "processing": {"row_index": i + 1, "parameters": {"temperature": 0, "seed": 42}},
            })
            .to_string()
        })
        .collect();
    std::fs::write(fx.root.join("results.jsonl"), lines.join("\n") + "\n").unwrap();
    let imported = json_of(
        &nmb_command(&runs)
            .args([
                "import",
                &fx.at("results.jsonl"),
                "--format",
                "neurovlm-run",
            ])
            .args(["--suite", &format!("neurovlm:{}", fx.at("subset.csv"))])
            .args(["--images-root", &fx.dataset.display().to_string()])
            .args([
                "--template",
                &fx.at("prompt.txt"),
                "--no-bertscore",
                "--json",
                "-q",
            ])
            .output()
            .unwrap(),
    );
    let imported_id = imported["runs"][0]["run_id"].as_str().unwrap().to_string();
    let score = |id: &str| {
        json_of(&nmb(&runs, &["score", id, "--no-bertscore", "--json"]))["structured"].clone()
    };
    let (ours, theirs) = (score(&run_id), score(&imported_id));
    for key in [
        "fields",
        "valid_json_rate",
        "confusion",
        "calibration",
        "safety_flags",
        "abstentions",
    ] {
        assert!(!ours[key].is_null(), "{key}: {ours}");
        assert_eq!(
            ours[key], theirs[key],
            "{key} differs between the run and its import"
        );
    }
    let accuracy = ours["fields"]["diagnosis_name"]["accuracy"]["value"]
        .as_f64()
        .unwrap();
    let right = (0..ROWS.len())
        .filter(|i| i % 2 == 0 || ROWS[*i].1 == "normal")
        .count();
    assert!(
        (accuracy - right as f64 / ROWS.len() as f64).abs() < 1e-12,
        "{accuracy}"
    );

    // The run records the examples file; changed examples make another run, which asks again.
    let manifest = store(&runs).run(&run_id).unwrap().manifest;
    let config = manifest.eval_config.clone().unwrap();
    assert!(
        config["few_shot"]
            .as_str()
            .unwrap()
            .ends_with("few_shot_examples.csv"),
        "{config}"
    );
    let changed = std::fs::read_to_string(fx.root.join("few_shot_examples.csv"))
        .unwrap()
        .replace("stroke,d", "tumor,d");
    std::fs::write(fx.root.join("changed.csv"), changed).unwrap();
    let again = json_of(&few_shot_eval(&fx, &runs, &srv.url(), "changed.csv", &[]));
    assert_ne!(
        again["run_id"], result["run_id"],
        "other examples, another run"
    );
    assert_eq!(
        srv.requests().len(),
        2 * ROWS.len(),
        "asked again, not taken from the cache"
    );
    let same = json_of(&few_shot_eval(
        &fx,
        &runs,
        &srv.url(),
        "few_shot_examples.csv",
        &[],
    ));
    assert_eq!(
        srv.requests().len(),
        2 * ROWS.len(),
        "the same examples: answered from the store"
    );
    let hash = |v: &Value| v["summary"]["config_hash"].as_str().unwrap().to_string();
    assert_ne!(
        hash(&again),
        hash(&result),
        "the examples are part of the run's identity"
    );
    assert_eq!(hash(&same), hash(&result));
}

/// Writes the report of the two runs into `report` and returns its few-shot gain rows (report.json).
fn few_shot_gain_rows(runs: &Path, report: &Path, zero: &str, few: &str) -> Vec<Value> {
    let out = nmb(
        runs,
        &["report", zero, few, "--out", report.to_str().unwrap()],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap())
            .unwrap();
    doc["sections"]["few-shot-gain"].as_array().unwrap().clone()
}

#[test]
fn compare_reads_the_few_shot_gain_against_zero_shot() {
    let tmp = tempfile::tempdir().unwrap();
    let fx = fixture(tmp.path());
    let runs = tmp.path().join("runs");
    let srv = runner_server(&fx);
    let few = json_of(&few_shot_eval(
        &fx,
        &runs,
        &srv.url(),
        "few_shot_examples.csv",
        &[],
    ));
    let zero = json_of(
        &nmb_command(&runs)
            .args([
                "eval",
                "--suite",
                &format!("neurovlm:{}", fx.at("subset.csv")),
            ])
            .args(["--images-root", &fx.dataset.display().to_string()])
            .args(["--template", &fx.at("prompt.txt")])
            .args(["--model", &format!("openai:{MODEL}@{}/v1", srv.url())])
            .args([
                "--samples",
                "1",
                "--temperature",
                "0",
                "--seed",
                "42",
                "--top-p",
                "none",
            ])
            .args(["--no-bertscore", "--json", "-q"])
            .output()
            .unwrap(),
    );
    let id = |v: &Value| v["run_id"].as_str().unwrap().to_string();
    let (few, zero) = (id(&few), id(&zero));
    let accuracy = |run: &str| {
        json_of(&nmb(&runs, &["score", run, "--no-bertscore", "--json"]))["overall"]["accuracy"]
            ["value"]
            .as_f64()
            .unwrap()
    };
    let expected = accuracy(&few) - accuracy(&zero);
    assert!(expected.abs() > 0.1, "the fixture makes a gain: {expected}");
    for (a, b) in [(&few, &zero), (&zero, &few)] {
        let cmp = json_of(&nmb(&runs, &["compare", a, b, "--json"]));
        let gain = &cmp["few_shot_gain"];
        assert_eq!(gain["few_shot_run"], few.as_str(), "{cmp}");
        assert_eq!(gain["zero_shot_run"], zero.as_str());
        let (value, low, high) = (
            gain["gain"]["value"].as_f64().unwrap(),
            gain["gain"]["ci_low"].as_f64().unwrap(),
            gain["gain"]["ci_high"].as_f64().unwrap(),
        );
        assert!((value - expected).abs() < 1e-12, "{value} != {expected}");
        assert!(low <= value && value <= high, "{gain}");
        let text = text(&nmb(&runs, &["compare", a, b]).stdout);
        assert!(text.contains("few-shot gain ("), "{text}");
    }
    // The report shows the pair's gain, in every rendering.
    let report = tmp.path().join("report");
    let rows = few_shot_gain_rows(&runs, &report, &zero, &few);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["few_shot_run"], few.as_str());
    let value = rows[0]["gain"]["value"].as_f64().unwrap();
    assert!((value - expected).abs() < 1e-12, "{value} != {expected}");
    for file in ["report.html", "report.md"] {
        let page = std::fs::read_to_string(report.join(file)).unwrap();
        assert!(page.contains("Few-shot gain"), "{file}");
    }

    // Two zero-shot runs have no few-shot gain.
    let cmp = json_of(&nmb(&runs, &["compare", &zero, &zero, "--json"]));
    assert!(cmp.get("few_shot_gain").is_none(), "{cmp}");
}

#[test]
fn the_dry_run_counts_the_examples() {
    let tmp = tempfile::tempdir().unwrap();
    let fx = fixture(tmp.path());
    let runs = tmp.path().join("runs");
    let url = "http://127.0.0.1:9";
    let with = json_of(&few_shot_eval(
        &fx,
        &runs,
        url,
        "few_shot_examples.csv",
        &["--dry-run"],
    ));
    let without = json_of(
        &nmb_command(&runs)
            .args([
                "eval",
                "--suite",
                &format!("neurovlm:{}", fx.at("subset.csv")),
            ])
            .args(["--images-root", &fx.dataset.display().to_string()])
            .args(["--template", &fx.at("prompt.txt")])
            .args([
                "--model",
                &format!("openai:{MODEL}@{url}/v1"),
                "--samples",
                "1",
                "--dry-run",
                "--json",
            ])
            .output()
            .unwrap(),
    );
    let n = ROWS.len() as u64;
    assert_eq!(
        with["images_sent"].as_u64().unwrap(),
        without["images_sent"].as_u64().unwrap() + n * EXAMPLES.len() as u64,
        "{with}\n{without}"
    );
    let (a, b) = (
        with["est_input_tokens"].as_u64().unwrap(),
        without["est_input_tokens"].as_u64().unwrap(),
    );
    assert!(a > b, "{a} <= {b}");
}

#[test]
fn a_bad_examples_file_is_refused_with_file_line_and_column() {
    let tmp = tempfile::tempdir().unwrap();
    let fx = fixture(tmp.path());
    let runs = tmp.path().join("runs");
    let url = "http://127.0.0.1:9";
    let refused = |name: &str, csv: &str, words: &[&str]| {
        std::fs::write(fx.root.join(name), csv).unwrap();
        let out = few_shot_eval(&fx, &runs, url, name, &[]);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{name}: {err}");
        for w in words {
            assert!(err.contains(w), "{name}: expected {w:?} in {err}");
        }
    };
    refused(
        "no_class.csv",
        "label,file_path\ntumor,normal/n.jpg\n",
        &["no_class.csv", "no column class", "file_path, label"],
    );
    refused(
        "absent.csv",
        "class,file_path\ntumor,normal/n.jpg\nstroke,gone/x.png\n",
        &["absent.csv:3", "field file_path", "not found"],
    );
    refused(
        "empty_class.csv",
        "class,file_path\n,normal/n.jpg\n",
        &["empty_class.csv:2", "field class", "empty"],
    );
    // Without the prompt file there is no system message to send as the runner does.
    let out = nmb_command(&runs)
        .args([
            "eval",
            "--suite",
            &format!("neurovlm:{}", fx.at("subset.csv")),
        ])
        .args(["--few-shot", &fx.at("few_shot_examples.csv")])
        .args(["--model", &format!("openai:{MODEL}@{url}/v1"), "--dry-run"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--template"),
        "{}",
        text(&out.stderr)
    );
}

// ---- `--few-shot K --few-shot-from SUITE[:FILTER]`: examples drawn from a suite's own tasks ----

/// `nmb eval` on a bundled suite with K examples from `from`, one sample, seeded; `extra` adds to it.
fn k_eval(runs: &Path, suite: &str, url: &str, k: u32, from: &str, extra: &[&str]) -> Value {
    let out = nmb_command(runs)
        .args(["eval", "--suite", suite])
        .args(["--model", &format!("openai:m@{url}/v1"), "--samples", "1"])
        .args(["--few-shot", &k.to_string(), "--few-shot-from", from])
        .args(["--no-bertscore", "--json", "-q"])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    json_of(&out)
}

/// The manifest's record of a run's examples: task id -> the example task ids, in the order shown.
fn recorded_examples(runs: &Path, run_id: &str) -> BTreeMap<String, Vec<String>> {
    let manifest = store(runs).run(run_id).unwrap().manifest;
    let record = &manifest.extra["few_shot"];
    record["examples"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(task, shown)| {
            let ids = shown.as_array().unwrap().iter();
            let ids = ids.map(|e| e["task"].as_str().unwrap().to_string());
            (task.clone(), ids.collect())
        })
        .collect()
}

/// Each task of a loaded bundled suite, by id: (case id, task).
fn tasks_of(spec: &str) -> BTreeMap<String, (String, nmb_suite::Task)> {
    let suite = nmb_suite::Source::new(spec).load(false).unwrap().suite;
    suite
        .tasks()
        .map(|(c, t)| (t.id.clone(), (c.id.clone(), t.clone())))
        .collect()
}

#[test]
fn k_examples_come_before_the_question_with_their_reference_answers() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let srv = server(Config::default());
    let k = 2;
    let run = k_eval(&runs, "sample", &srv.url(), k, "sample", &["--seed", "7"]);
    let run_id = run["run_id"].as_str().unwrap();
    let tasks = tasks_of("sample");
    let chosen = recorded_examples(&runs, run_id);
    assert_eq!(chosen.len(), tasks.len(), "every task has its examples");

    let requests = srv.requests();
    let by_hash: BTreeMap<&str, _> = requests
        .iter()
        .map(|r| (r.conversation_sha256.as_str(), r))
        .collect();
    let calls = store(&runs).run_calls(run_id).unwrap();
    assert_eq!(calls.len(), requests.len());
    // The question message of each task (its last message at turn 0), to compare the examples' prompts with.
    let question = |task: &str| {
        let call = calls
            .iter()
            .find(|c| c.task_id == task && c.turn_index == 0)
            .unwrap();
        by_hash[call.prompt_hash.as_str()]
            .messages
            .last()
            .unwrap()
            .clone()
    };
    for call in &calls {
        let (case_id, task) = &tasks[&call.task_id];
        let examples = &chosen[&call.task_id];
        assert_eq!(examples.len(), k as usize, "{}", call.task_id);
        let messages = &by_hash[call.prompt_hash.as_str()].messages;
        assert_eq!(messages[0].role, "system");
        for (j, example_id) in examples.iter().enumerate() {
            let (example_case, example) = &tasks[example_id];
            assert_ne!(
                example_case, case_id,
                "{example_id} shares {}'s case",
                task.id
            );
            assert_eq!(example.family, task.family);
            assert!(example.turns.is_empty(), "{example_id} is single-turn");
            let (user, assistant) = (&messages[1 + 2 * j], &messages[2 + 2 * j]);
            assert_eq!(user.role, "user");
            assert_eq!(assistant.role, "assistant");
            // The example's prompt, images included, is the one its own task is asked with.
            let own = question(example_id);
            assert_eq!(user.text(), own.text(), "{example_id}");
            assert_eq!(user.parts.len(), own.parts.len(), "{example_id}");
            assert!(
                user.parts
                    .iter()
                    .any(|p| matches!(p, ReceivedPart::Image { .. })),
                "{example_id} shows its images"
            );
            let reference = example.reference.as_ref().unwrap();
            let answer = assistant.text();
            match task.family {
                nmb_suite::Family::Differential => {
                    let v: Value = serde_json::from_str(&answer).unwrap();
                    assert_eq!(
                        v["final_diagnosis"],
                        reference.diagnosis.as_deref().unwrap()
                    );
                    assert_eq!(v["differential"][0]["diagnosis"], v["final_diagnosis"]);
                }
                nmb_suite::Family::Lesion => {
                    let v: Value = serde_json::from_str(&answer).unwrap();
                    assert_eq!(v["lesion_type"], reference.lesion_type.as_deref().unwrap());
                }
                nmb_suite::Family::Rationale => {
                    let rationale = reference.rationale.as_deref().unwrap();
                    assert!(answer.contains(rationale.trim()), "{answer}");
                }
                other => panic!("the sample suite has no {other} task"),
            }
        }
        // Then the question itself, after the examples.
        assert_eq!(messages[1 + 2 * k as usize].role, "user");
        if call.turn_index == 0 {
            assert_eq!(messages.len(), 2 + 2 * k as usize);
        }
    }
}

#[test]
fn the_seed_chooses_the_examples_spread_over_classes_and_the_run_records_them() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let url = "http://127.0.0.1:9";
    let suite = "sample-structured";
    let tasks = tasks_of(suite);
    let planned = |seed: &str| {
        let run = k_eval(
            &runs,
            suite,
            url,
            5,
            suite,
            &["--plan-only", "--seed", seed],
        );
        let id = run["run_id"].as_str().unwrap().to_string();
        (recorded_examples(&runs, &id), id)
    };
    let (one, one_id) = planned("1");
    let (again, again_id) = planned("1");
    let (two, two_id) = planned("2");
    assert_eq!(one, again, "one seed, one choice");
    assert_eq!(one_id, again_id, "the same examples are the same run");
    assert_ne!(one, two, "another seed, other examples");
    assert_ne!(one_id, two_id);
    for chosen in [&one, &two] {
        for (task_id, examples) in chosen {
            let (case_id, _) = &tasks[task_id];
            let classes: std::collections::BTreeSet<String> = examples
                .iter()
                .map(|e| {
                    let (example_case, example) = &tasks[e];
                    assert_ne!(example_case, case_id, "{task_id}: {e}");
                    example
                        .reference
                        .as_ref()
                        .unwrap()
                        .diagnosis
                        .clone()
                        .unwrap()
                })
                .collect();
            assert_eq!(
                classes.len(),
                5,
                "{task_id}: {examples:?} spread over the five classes"
            );
        }
    }
    // The record holds what the examples are: K, the seed, the pool suite's hash and each example's hash.
    let manifest = store(&runs).run(&one_id).unwrap().manifest;
    let record = &manifest.extra["few_shot"];
    assert_eq!(record["k"], 5);
    assert_eq!(record["seed"], 1);
    assert_eq!(record["suite_hash"].as_str().unwrap(), manifest.suite_hash);
    let first = record["examples"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    assert_eq!(first[0]["hash"].as_str().unwrap().len(), 64, "{first}");
    // The recorded configuration says few-shot, as `nmb compare` and the report read it.
    let config = manifest.eval_config.unwrap();
    assert_eq!(config["few_shot"]["k"], 5, "{config}");
}

#[test]
fn the_dry_run_counts_k_examples() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let url = "http://127.0.0.1:9";
    let zero = json_of(&nmb(
        &runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            &format!("openai:m@{url}/v1"),
            "--samples",
            "1",
            "--dry-run",
            "--json",
        ],
    ));
    let counts: Vec<(u64, u64)> = std::iter::once(&zero)
        .chain(&[1, 2, 3].map(|k| k_eval(&runs, "sample", url, k, "sample", &["--dry-run"])))
        .map(|v| {
            (
                v["est_input_tokens"].as_u64().unwrap(),
                v["images_sent"].as_u64().unwrap(),
            )
        })
        .collect();
    for pair in counts.windows(2) {
        assert!(pair[1].0 > pair[0].0, "tokens grow with K: {counts:?}");
        assert!(pair[1].1 > pair[0].1, "images grow with K: {counts:?}");
    }
}

#[test]
fn a_k_run_resumes_without_asking_again_and_pairs_with_zero_shot() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let srv = server(Config::default());
    let url = srv.url();
    let args = ["--seed", "3", "--max-requests", "5"];
    let first = k_eval(&runs, "sample", &url, 2, "sample", &args);
    let few = first["run_id"].as_str().unwrap().to_string();
    assert_eq!(srv.request_count(), 5);
    let rest = k_eval(&runs, "sample", &url, 2, "sample", &["--seed", "3"]);
    assert_eq!(
        rest["run_id"],
        few.as_str(),
        "the same command resumes the run"
    );
    let calls = store(&runs).run_calls(&few).unwrap();
    assert_eq!(
        srv.request_count(),
        calls.len() as u64,
        "nothing asked twice"
    );

    let out = nmb_command(&runs)
        .args([
            "eval",
            "--suite",
            "sample",
            "--model",
            &format!("openai:m@{url}/v1"),
        ])
        .args([
            "--samples",
            "1",
            "--seed",
            "3",
            "--no-bertscore",
            "--json",
            "-q",
        ])
        .output()
        .unwrap();
    let zero = json_of(&out)["run_id"].as_str().unwrap().to_string();
    let cmp = json_of(&nmb(&runs, &["compare", &zero, &few, "--json"]));
    let gain = &cmp["few_shot_gain"];
    assert_eq!(gain["few_shot_run"], few.as_str(), "{cmp}");
    assert_eq!(gain["zero_shot_run"], zero.as_str());
    let report = tmp.path().join("report");
    let rows = few_shot_gain_rows(&runs, &report, &zero, &few);
    assert_eq!(rows[0]["few_shot_run"], few.as_str(), "{rows:?}");
}

#[test]
fn k_without_its_suite_or_too_few_examples_is_refused_before_anything_is_sent() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let srv = server(Config::default());
    let model = format!("openai:m@{}/v1", srv.url());
    let refused = |args: &[&str], words: &[&str]| {
        let out = nmb_command(&runs)
            .args([
                "eval",
                "--suite",
                "sample",
                "--model",
                &model,
                "--samples",
                "1",
            ])
            .args(args)
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{args:?}: {err}");
        for w in words {
            assert!(err.contains(w), "{args:?}: expected {w:?} in {err}");
        }
    };
    refused(
        &["--few-shot", "2"],
        &["--few-shot 2 needs --few-shot-from"],
    );
    refused(&["--few-shot-from", "sample"], &["needs --few-shot K"]);
    refused(
        &["--few-shot", "0", "--few-shot-from", "sample"],
        &["at least 1"],
    );
    // Five direct-level differential tasks: each has four others to learn from.
    refused(
        &["--few-shot", "5", "--few-shot-from", "sample:level=direct"],
        &["task ", "--few-shot 5", "4 candidate(s)", "differential"],
    );
    refused(
        &["--few-shot", "1", "--few-shot-from", "sample:level"],
        &["--few-shot-from"],
    );
    assert_eq!(srv.request_count(), 0);
}
