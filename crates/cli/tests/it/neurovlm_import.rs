//! `nmb import --format neurovlm-run`: the JSONL of NeuroVLM-Bench's `run_async.py` becomes one run per model,
//! built from the file's answers without asking anything, scored from the stored answers like any run, compared
//! and reported; importing again adds nothing; a bad line stores nothing and is named with its line and field.
//!
//! The rows and lines here are made up in the runner's output format (ChatMED/neurovlm-bench at 6e87ba4); none
//! of the authors' data or code is used.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::common::*;

/// The manifest's rows as the authors lay them out: (file_path, class, subclass, modality, sequence, plane).
const ROWS: [(&str, &str, &str, &str, &str, &str); 5] = [
    (
        "images-1/Stroke (ischemic) FLAIR/s 1.png",
        "stroke",
        "ischemic",
        "MRI",
        "FLAIR",
        "axial",
    ),
    (
        "images-1/Tumor, meningioma T1/t1.png",
        "tumor",
        "meningioma",
        "MRI",
        "T1",
        "coronal",
    ),
    ("images-2/normal/n1.png", "normal", "", "CT", "", "axial"),
    (
        "images-2/ms/m1.png",
        "multiple sclerosis",
        "",
        "MRI",
        "FLAIR",
        "sagittal",
    ),
    (
        "images-3/other/o1.png",
        "other abnormalities",
        "",
        "MRI",
        "T2",
        "axial",
    ),
];

const GPT: &str = "openai/gpt-4o";
const GEMINI: &str = "google/gemini-2.5-pro";

/// What one line of the fixture says: which model, which row (None: an image the suite lacks), and the output.
struct Planned {
    model: &'static str,
    row: Option<usize>,
    output: Output,
}

enum Output {
    /// An answer naming this class.
    Class(&'static str),
    /// The runner could not parse the model's text and kept it in `raw_response`.
    Unparsed(&'static str),
    /// The runner recorded an error instead of an answer.
    Error(&'static str),
}

/// Two models over every row: GPT right on even rows, wrong on odd ones; Gemini right except one error line and
/// one answer the runner could not parse; and a GPT line for an image not in the suite.
fn planned() -> Vec<Planned> {
    let mut out = Vec::new();
    for (i, row) in ROWS.iter().enumerate() {
        let gpt = if i % 2 == 0 { row.1 } else { "normal" };
        out.push(Planned {
            model: GPT,
            row: Some(i),
            output: Output::Class(gpt),
        });
        let gemini = match i {
            1 => Output::Error("Failed with status 429: rate limited"),
            3 => Output::Unparsed("I believe this is multiple sclerosis."),
            _ => Output::Class(row.1),
        };
        out.push(Planned {
            model: GEMINI,
            row: Some(i),
            output: gemini,
        });
    }
    out.push(Planned {
        model: GPT,
        row: None,
        output: Output::Class("tumor"),
    });
    out
}

fn answer(class: &str) -> Value {
    json!({
        "modality": "MRI", "specialized_sequence": "FLAIR", "plane": "axial", "diagnosis_name": class,
        "diagnosis_detailed": null, "icd10_code": null, "severity_score": 0.5,
        "diagnosis_confidence": 0.8, "severity_confidence": 0.5,
    })
}

/// One line as `run_async.py` writes it. Error lines carry the runner's default parameters (temperature 0.1),
/// whatever it ran with, as the runner does.
fn line(n: usize, p: &Planned) -> Value {
    let path = match p.row {
        Some(i) => ROWS[i].0,
        None => "images-9/elsewhere/x.png",
    };
    let (parsed, status, error) = match &p.output {
        Output::Class(c) => (answer(c), "success", Value::Null),
        Output::Unparsed(text) => (
            json!({"error": "JSON parsing failed: No valid JSON object found in response", "raw_response": text}),
            "success",
            Value::Null,
        ),
        Output::Error(e) => (Value::Null, "error", json!(e)),
    };
    let ok = status == "success";
    let api = ok.then(|| {
        let (input, output) = tokens(n);
        json!({"id": format!("gen-{n}"), "model": format!("{}-20250801", p.model),
               "prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output})
    });
    let parameters = match ok {
        true => json!({"temperature": 0, "seed": 42}),
        false => json!({"temperature": 0.1, "seed": 42}),
    };
    json!({
        "timestamp": "2025-09-01T12:00:00.000000",
        "experiment_id": format!("neurorad_{n:06}"),
        "api_response": api,
        "input": {
            "image_path": format!("../../ivan/dataset/{path}"),
            "model_requested": p.model,
            "system_prompt_type": "neurorad_prompt_trim",
            "metadata": {"dataset": path.split('/').next(), "class": p.row.map(|i| ROWS[i].1)},
        },
        "output": {"parsed_response": parsed, "status": status, "error": error},
        "processing": {"row_index": p.row.map_or(99, |i| i + 1), "parameters": parameters},
    })
}

/// Tokens of line `n`, different on every line.
fn tokens(n: usize) -> (u64, u64) {
    (1000 + 7 * n as u64, 40 + n as u64)
}

/// The dataset (tiny PNGs under `dataset/`), the authors' `image_mapping.csv`, a prompt file and the runner's
/// output; returns the folder.
fn fixture(dir: &Path) -> PathBuf {
    let root = dir.join("nv");
    let mut csv = String::from(
        "dataset,file_path,class,original_class,subclass,modality,modality_subtype,plane\n",
    );
    for (i, (path, class, subclass, modality, sequence, plane)) in ROWS.iter().enumerate() {
        let file = root.join("dataset").join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, nmb_fake_server::support::noise_png(16, i as u64)).unwrap();
        let dataset = path.split('/').next().unwrap();
        csv.push_str(&format!(
            "{dataset},\"{path}\",{class},\"{class}\",{subclass},{modality},{sequence},{plane}\n"
        ));
    }
    std::fs::write(root.join("image_mapping.csv"), csv).unwrap();
    std::fs::write(
        root.join("neurorad_prompt_trim.txt"),
        "You are a neuroradiologist.\nReturn only one JSON object like {\"diagnosis_name\": \"...\"}.\n",
    )
    .unwrap();
    let lines: Vec<String> = planned()
        .iter()
        .enumerate()
        .map(|(n, p)| line(n, p).to_string())
        .collect();
    std::fs::write(root.join("results.jsonl"), lines.join("\n") + "\n").unwrap();
    root
}

fn import(runs: &Path, root: &Path, file: &str) -> std::process::Output {
    let at = |name: &str| root.join(name).display().to_string();
    nmb_command(runs)
        .args(["import", &at(file), "--format", "neurovlm-run"])
        .args(["--suite", &format!("neurovlm:{}", at("image_mapping.csv"))])
        .args([
            "--images-root",
            &at("dataset"),
            "--template",
            &at("neurorad_prompt_trim.txt"),
        ])
        .args([
            "--protocol",
            "neurovlm-paper",
            "--no-bertscore",
            "--json",
            "-q",
        ])
        .output()
        .unwrap()
}

/// The fixture's lines of `model` that match a row, with their line numbers (from 1).
fn lines_of(model: &str) -> Vec<(usize, Planned)> {
    planned()
        .into_iter()
        .enumerate()
        .filter(|(_, p)| p.model == model && p.row.is_some())
        .map(|(n, p)| (n + 1, p))
        .collect()
}

/// Diagnosis accuracy counted from the fixture itself: answers naming the row's class over every answer
/// (errors left out; an answer the runner could not parse is wrong), as both readings count it.
fn expected_accuracy(model: &str) -> f64 {
    let answered: Vec<bool> = lines_of(model)
        .iter()
        .filter_map(|(_, p)| match p.output {
            Output::Class(c) => Some(c == ROWS[p.row.unwrap()].1),
            Output::Unparsed(_) => Some(false),
            Output::Error(_) => None,
        })
        .collect();
    answered.iter().filter(|r| **r).count() as f64 / answered.len() as f64
}

#[test]
fn a_runner_file_imports_as_one_run_per_model_without_asking() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path());
    let runs = tmp.path().join("runs");
    let out = import(&runs, &root, "results.jsonl");
    let result = json_of(&out);
    let stderr = text(&out.stderr);
    // The line of an image the suite lacks is named with its file and line, and skipped.
    let stray = planned().iter().position(|p| p.row.is_none()).unwrap() + 1;
    assert!(
        stderr.contains(&format!(
            "results.jsonl:{stray}: ../../ivan/dataset/images-9"
        )),
        "{stderr}"
    );

    let store = store(&runs);
    let prompt_sha = hex::encode(Sha256::digest(
        std::fs::read(root.join("neurorad_prompt_trim.txt")).unwrap(),
    ));
    let imported = result["runs"].as_array().unwrap();
    assert_eq!(imported.len(), 2, "{result}");
    let mut run_ids = Vec::new();
    for (model, r) in [GPT, GEMINI].iter().zip(imported) {
        assert_eq!(r["model"], format!("imported:{model}"), "{r}");
        let run_id = r["run_id"].as_str().unwrap().to_string();
        let lines = lines_of(model);
        let errors = lines
            .iter()
            .filter(|(_, p)| matches!(p.output, Output::Error(_)))
            .count();
        let summary = &r["summary"];
        assert_eq!(summary["samples_total"], ROWS.len(), "{r}");
        assert_eq!(summary["samples_errored"], errors, "{r}");
        assert_eq!(summary["samples_ok"], ROWS.len() - errors, "{r}");
        if errors > 0 {
            assert_eq!(summary["errors_by_class"]["other"], errors, "{r}");
        }
        // The tokens are the file's.
        let answered = || {
            lines
                .iter()
                .filter(|(_, p)| !matches!(p.output, Output::Error(_)))
        };
        let tokens_in: u64 = answered().map(|(n, _)| tokens(n - 1).0).sum();
        assert_eq!(summary["tokens_in"], tokens_in, "{r}");

        // The manifest records the model, the parameters of its answered lines and the prompt file's hash.
        let run = store.run(&run_id).unwrap();
        let m = &run.manifest;
        assert_eq!(m.model, format!("imported:{model}"));
        let identity = m.model_identity.clone().unwrap();
        assert_eq!(identity["prompt_sha256"], prompt_sha.as_str());
        assert_eq!(
            identity["system_prompt_type"],
            json!(["neurorad_prompt_trim"])
        );
        assert_eq!(
            identity["parameters"],
            json!({"temperature": 0, "seed": 42})
        );
        assert_eq!(
            identity["served_models"],
            json!([format!("{model}-20250801")])
        );
        let params = &m.params;
        assert_eq!(
            (params["temperature"].as_f64(), params["seed"].as_u64()),
            (Some(0.0), Some(42))
        );

        // Nothing was asked: every call is the replay of its line, whose number its raw body names.
        let calls = store.run_calls(&run_id).unwrap();
        assert_eq!(calls.len(), ROWS.len());
        let samples = store.run_samples(&run_id).unwrap();
        for (n, p) in &lines {
            let task = format!("row{}/neurovlm", p.row.unwrap() + 2);
            let call = calls.iter().find(|c| c.task_id == task).unwrap();
            let raw: Value =
                serde_json::from_str(&store.raw_response(call.call_id).unwrap().unwrap()).unwrap();
            assert!(
                raw["imported_from"]
                    .as_str()
                    .unwrap()
                    .ends_with(&format!("results.jsonl:{n}")),
                "{raw}"
            );
            let sample = samples.iter().find(|s| s.task_id == task).unwrap();
            // The stored answer is the parsed response, or the model's own text the runner could not parse.
            match &p.output {
                Output::Class(c) => {
                    let stored: Value =
                        serde_json::from_str(sample.final_text.as_deref().unwrap()).unwrap();
                    assert_eq!(stored, answer(c));
                }
                Output::Unparsed(t) => assert_eq!(sample.final_text.as_deref(), Some(*t)),
                Output::Error(e) => {
                    assert_eq!(sample.error_class.as_deref(), Some("other"));
                    assert!(
                        sample.error_message.as_deref().unwrap().contains(e),
                        "{sample:?}"
                    );
                }
            }
        }

        // Scored from the stored answers: nmb's reading and the paper's agree with the count from the fixture.
        let structured = &r["scores"]["structured"];
        let accuracy = structured["fields"]["diagnosis_name"]["accuracy"]["value"]
            .as_f64()
            .unwrap();
        assert!(
            (accuracy - expected_accuracy(model)).abs() < 1e-12,
            "{model}: {accuracy}"
        );
        let paper = structured["paper"]["field_accuracy_pct"]["diagnosis_name"]
            .as_f64()
            .unwrap();
        assert!(
            (paper - 100.0 * expected_accuracy(model)).abs() < 1e-9,
            "{model}: {paper}"
        );
        run_ids.push(run_id);
    }

    // `nmb runs show` says so too, for Gemini's run with its one error line.
    let shown = text(&nmb(&runs, &["runs", "show", &run_ids[1]]).stdout);
    let errors = lines_of(GEMINI)
        .iter()
        .filter(|(_, p)| matches!(p.output, Output::Error(_)))
        .count();
    let replayed = format!(
        "none sent: {} lines of the imported file replayed ({errors} recorded as errors",
        ROWS.len()
    );
    assert!(shown.contains(&replayed), "{shown}");

    // Imported runs compare and report like any run.
    let compared = json_of(&nmb(
        &runs,
        &["compare", &run_ids[0], &run_ids[1], "--json"],
    ));
    assert!(
        compared.to_string().contains("diagnosis_name"),
        "{compared}"
    );
    let report = tmp.path().join("report");
    let out = nmb(
        &runs,
        &[
            "report",
            &run_ids[0],
            &run_ids[1],
            "--out",
            report.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let html = std::fs::read_to_string(report.join("report.html")).unwrap();
    assert!(html.contains(GPT) && html.contains(GEMINI));

    // The reference's JSON-valid rate, on request: every answer valid, over the answered and the error lines.
    let bug = ["--protocol", "neurovlm-paper", "--paper-json-validity-bug"];
    let scored = json_of(&nmb(
        &runs,
        &[
            &["score", &run_ids[1], "--no-bertscore", "--json"][..],
            &bug[..],
        ]
        .concat(),
    ));
    let errors = lines_of(GEMINI)
        .iter()
        .filter(|(_, p)| matches!(p.output, Output::Error(_)))
        .count();
    let answered = lines_of(GEMINI).len() - errors;
    let valid = scored["structured"]["paper"]["json_valid_pct"]
        .as_f64()
        .unwrap();
    assert!(
        (valid - 100.0 * answered as f64 / (answered + errors) as f64).abs() < 1e-9,
        "{valid}"
    );

    // The viewer shows them: Gemini's error line as an errored sample, under the prompt file as sent.
    let (error_row, error) = lines_of(GEMINI)
        .iter()
        .find_map(|(_, p)| match p.output {
            Output::Error(e) => Some((p.row.unwrap(), e)),
            _ => None,
        })
        .unwrap();
    let (server, url) = crate::serve_browser::start_server(&runs);
    let page = http_get(&format!(
        "{url}runs/{}/samples/0?task=row{}%2Fneurovlm",
        run_ids[1],
        error_row + 2
    ));
    drop(server);
    assert!(page.contains("errored") && page.contains(error), "{page}");
    assert!(page.contains("You are a neuroradiologist."), "{page}");

    // Importing again leaves both runs as they are: the same runs, not one call more.
    let calls_before: usize = run_ids
        .iter()
        .map(|r| store.run_calls(r).unwrap().len())
        .sum();
    let again = json_of(&import(&runs, &root, "results.jsonl"));
    for (r, id) in again["runs"].as_array().unwrap().iter().zip(&run_ids) {
        assert_eq!(r["already_imported"], true, "{r}");
        assert_eq!(r["run_id"], id.as_str());
    }
    let calls_after: usize = run_ids
        .iter()
        .map(|r| store.run_calls(r).unwrap().len())
        .sum();
    assert_eq!(calls_after, calls_before);
    assert_eq!(store.list_runs().unwrap().len(), 2);

    // The model cannot be asked: an evaluation of it is refused.
    let out = nmb_command(&runs)
        .args([
            "eval",
            "--model",
            &format!("imported:{GPT}"),
            "--samples",
            "1",
        ])
        .args([
            "--suite",
            &format!("neurovlm:{}", root.join("image_mapping.csv").display()),
        ])
        .args(["--images-root", root.join("dataset").to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("cannot be asked"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_bad_line_is_named_with_its_field_and_nothing_is_imported() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fixture(tmp.path());
    let good: Vec<Value> = planned()
        .iter()
        .enumerate()
        .map(|(n, p)| line(n, p))
        .collect();
    let mut lines: Vec<String> = good.iter().map(Value::to_string).collect();
    lines[1] = "{\"timestamp\": \"2025-09-01\", \"input\": ".into();
    let mut no_model = good[2].clone();
    no_model["input"]
        .as_object_mut()
        .unwrap()
        .remove("model_requested");
    lines[2] = no_model.to_string();
    let mut bad_status = good[3].clone();
    bad_status["output"]["status"] = json!("done");
    lines[3] = bad_status.to_string();
    // Another answered line of GPT with another temperature: another experiment in the same file.
    let mut other_run = good[4].clone();
    other_run["processing"]["parameters"]["temperature"] = json!(1);
    lines[4] = other_run.to_string();
    // GPT's answer to the first image again: two answers to one case.
    lines.push(good[0].to_string());
    let twice = lines.len();
    std::fs::write(root.join("bad.jsonl"), lines.join("\n") + "\n").unwrap();

    let runs = tmp.path().join("runs");
    let out = import(&runs, &root, "bad.jsonl");
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    for (n, what) in [
        (2, "not JSON"),
        (3, "input.model_requested: missing"),
        (4, "output.status: \"done\""),
        (5, "processing.parameters"),
    ] {
        assert!(
            stderr.contains(&format!("bad.jsonl:{n}: {what}")),
            "line {n}: {what}\n{stderr}"
        );
    }
    let answered_twice = format!("bad.jsonl:{twice}: input.image_path: {GPT} answered");
    assert!(stderr.contains(&answered_twice), "{stderr}");
    assert!(stderr.contains("nothing was imported"), "{stderr}");
    assert!(store(&runs).list_runs().unwrap().is_empty());
}
