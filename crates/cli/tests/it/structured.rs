//! NeuroVLM-Bench's `structured` family over real wire formats: the JSON schema is sent as constrained output,
//! answers are read strictly (invalid JSON is a parse failure, an abstention on the class is a wrong answer) and
//! the class must equal the reference class.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use nmb_fake_server::{Config, Reply, Wire};

/// One case per (reference class, what the model answers).
const CASES: [(&str, &str); 3] = [
    ("stroke", "ANSWER_RIGHT"),
    ("multiple sclerosis", "ANSWER_BROKEN"),
    ("tumor", "ANSWER_ABSTAIN"),
];

fn structured_suite(dir: &Path) -> PathBuf {
    let root = dir.join("suite");
    std::fs::create_dir_all(root.join("images")).unwrap();
    std::fs::write(
        root.join("suite.toml"),
        "id = \"structured\"\nversion = \"1\"\n",
    )
    .unwrap();
    let mut lines = Vec::new();
    for (i, (class, marker)) in CASES.iter().enumerate() {
        let png = nmb_fake_server::support::noise_png(32, i as u64);
        std::fs::write(root.join(format!("images/{i}.png")), png).unwrap();
        let case = serde_json::json!({
            "case_id": format!("img{i}"),
            "images": [{"path": format!("images/{i}.png"), "modality": "MRI", "plane": "axial"}],
            "notes": marker,
            "tasks": [{"id": format!("img{i}/neurovlm"), "family": "structured", "level": "direct",
                       "question": "Read this brain image.",
                       "reference": {"diagnosis": class, "modality": "MRI", "plane": "axial",
                                     "diagnosis_detailed": if *class == "stroke" { "ischemic" } else { "" }}}],
        });
        lines.push(case.to_string());
    }
    std::fs::write(root.join("cases.jsonl"), lines.join("\n") + "\n").unwrap();
    root
}

/// Answers by the marker in the case notes: the right class, broken JSON, or an abstention.
fn responder() -> nmb_fake_server::Responder {
    Arc::new(|req| {
        let text = req.all_text();
        let answer = |class: serde_json::Value| {
            serde_json::json!({
                "modality": "MRI", "specialized_sequence": "FLAIR", "plane": "axial",
                "diagnosis_name": class, "diagnosis_detailed": "ischemic", "icd10_code": "I63.9",
                "severity_score": 0.5, "diagnosis_confidence": 0.8, "severity_confidence": 0.6
            })
            .to_string()
        };
        let one = if text.contains("ANSWER_RIGHT") {
            answer(serde_json::json!("stroke"))
        } else if text.contains("ANSWER_BROKEN") {
            "{\"modality\": \"MRI\", \"diagnosis_name\": \"multiple sclerosis\"".to_string()
        } else {
            answer(serde_json::Value::Null)
        };
        Reply::Texts(vec![one; req.samples() as usize])
    })
}

fn run(wire: Wire) {
    let tmp = tempfile::tempdir().unwrap();
    let root = structured_suite(tmp.path());
    let server = server(Config {
        responder: responder(),
        ..Config::default()
    });
    let out = nmb_command(&tmp.path().join("runs"))
        .env(key_var(wire), "k")
        .args(["eval", "--suite"])
        .arg(&root)
        .args([
            "--model",
            &model_spec(wire, &server),
            "--json",
            "-q",
            "--no-bertscore",
            "--samples",
            "1",
        ])
        .output()
        .unwrap();
    let result = json_of(&out);
    let run_id = result["run_id"].as_str().unwrap();
    let manifest = store(&tmp.path().join("runs"))
        .run(run_id)
        .unwrap()
        .manifest;
    let how = match wire {
        Wire::OpenAi => "response_format json_schema",
        Wire::Gemini => "responseJsonSchema",
        Wire::Anthropic => "forced tool call",
    };
    assert_eq!(
        manifest.constrained_output.as_deref(),
        Some(how),
        "the manifest says how"
    );
    for r in server.requests() {
        let schema = r
            .params
            .json_schema
            .as_ref()
            .expect("a JSON schema was sent");
        let classes = &schema["properties"]["diagnosis_name"]["enum"];
        assert!(
            classes
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c == "multiple sclerosis"),
            "{wire:?}: {schema}"
        );
        assert_eq!(schema["required"].as_array().unwrap().len(), 9, "{wire:?}");
        assert!(
            r.all_text().contains("\"diagnosis_confidence\""),
            "the template names every key"
        );
    }
    let overall = &result["scores"]["overall"];
    assert_eq!(overall["samples"], 3, "{result}");
    assert_eq!(
        overall["correct"], 1,
        "only the right class counts: {overall}"
    );
    assert_eq!(
        overall["parse_failed"], 1,
        "broken JSON is a parse failure, not repaired: {overall}"
    );
}

#[test]
fn structured_answers_over_the_openai_wire() {
    run(Wire::OpenAi);
}

#[test]
fn structured_answers_over_the_gemini_wire() {
    run(Wire::Gemini);
}

/// Anthropic has no JSON mode: the schema goes out as the input schema of one tool that `tool_choice` forces, and
/// the answer comes back as that tool's input.
#[test]
fn structured_answers_over_the_anthropic_wire_as_a_forced_tool_call() {
    run(Wire::Anthropic);
}

/// The bundled `sample-structured` suite runs as it is, and `nmb score` finds it again from the run's manifest.
#[test]
fn the_bundled_structured_suite_runs_and_rescores() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let server = server(Config::default());
    let out = nmb_command(&runs)
        .env("OPENAI_API_KEY", "k")
        .args([
            "eval",
            "--suite",
            "sample-structured",
            "--samples",
            "1",
            "--no-score",
            "--json",
            "-q",
        ])
        .args(["--model", &model_spec(Wire::OpenAi, &server)])
        .output()
        .unwrap();
    let result = json_of(&out);
    assert_eq!(result["summary"]["samples_ok"], 25, "{result}");
    assert!(
        server.requests().iter().all(|r| r.image_count() == 1),
        "one image per answer"
    );
    let run_id = result["run_id"].as_str().unwrap();
    let scored = json_of(&nmb(&runs, &["score", run_id, "--no-bertscore", "--json"]));
    let s = &scored["structured"];
    assert_eq!(s["answers"], 25, "{s}");
    // The loopback server answers a JSON differential: valid JSON, but not the nine keys.
    assert_eq!(s["valid_json_rate"]["value"], 1.0);
    assert_eq!(s["schema_valid_rate"]["value"], 0.0);
    assert_eq!(s["fields"]["diagnosis_name"]["n"], 25);
    assert_eq!(s["safety_flags"]["missing_field"]["value"], 1.0);
}
