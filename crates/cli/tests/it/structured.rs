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
    assert!(s.get("paper").is_none(), "nmb's reading only, by default");

    // The paper's reading, beside nmb's: recorded in the configuration and its hash.
    let paper = json_of(&nmb(
        &runs,
        &[
            "score",
            run_id,
            "--no-bertscore",
            "--json",
            "--protocol",
            "neurovlm-paper",
        ],
    ));
    let p = &paper["structured"]["paper"];
    assert_eq!(p["answers"], 25, "{p}");
    assert_eq!(p["json_valid_pct"], 100.0, "{p}");
    assert_eq!(paper["structured"]["valid_json_rate"], s["valid_json_rate"]);
    assert_eq!(paper["config"]["paper"]["json_validity_bug"], false);
    assert_ne!(
        paper["config"]["config_hash"],
        scored["config"]["config_hash"]
    );
    // The report sets the two readings side by side.
    let out_dir = tmp.path().join("report");
    let report = nmb(
        &runs,
        &[
            "report",
            run_id,
            "--format",
            "md",
            "--out",
            out_dir.to_str().unwrap(),
        ],
    );
    assert!(report.status.success(), "{report:?}");
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("nmb's reading and the paper's"), "{md}");
    assert!(
        md.contains("Validity and calibration in both readings"),
        "{md}"
    );
    let bad = nmb(
        &runs,
        &[
            "score",
            run_id,
            "--no-bertscore",
            "--paper-json-validity-bug",
        ],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--protocol neurovlm-paper"));
}

/// A row-per-image manifest (`neurovlm:PATH`) with its own column names, read through `--map`; every bad row is
/// named by file, line and column, and `nmb score` reloads the manifest with the same map.
#[test]
fn a_neurovlm_manifest_loads_with_mapped_columns_and_names_bad_rows() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nv");
    std::fs::create_dir_all(dir.join("img")).unwrap();
    for i in 0..3 {
        std::fs::write(
            dir.join(format!("img/{i}.png")),
            nmb_fake_server::support::noise_png(24, i),
        )
        .unwrap();
    }
    let header = "path,label,mod,seq,view,subtype,code,sev\n";
    let good = "img/0.png,Stroke,MRI,FLAIR,axial,ischaemic,I63.9,0.7\n\
                img/1.png,MS,MRI,T2,sagittal,,G35,0.3\n\
                img/2.png,normal,CT,,axial,,,0\n";
    std::fs::write(dir.join("good.csv"), format!("{header}{good}")).unwrap();
    let bad = "img/0.png,migraine,MRI,FLAIR,axial,,,0.5\n\
               img/9.png,stroke,MRI,FLAIR,axial,,,0.5\n\
               img/1.png,tumor,PET,FLAIR,axial,,,0.5\n\
               img/2.png,tumor,MRI,FLAIR,axial,,,1.5\n";
    std::fs::write(dir.join("bad.csv"), format!("{header}{bad}")).unwrap();
    let map = [
        "--map",
        "image=path",
        "--map",
        "diagnosis_name=label",
        "--map",
        "modality=mod",
        "--map",
        "specialized_sequence=seq",
        "--map",
        "plane=view",
        "--map",
        "diagnosis_detailed=subtype",
        "--map",
        "icd10_code=code",
        "--map",
        "severity=sev",
    ];
    let runs = tmp.path().join("runs");
    let spec = |name: &str| format!("neurovlm:{}", dir.join(name).display());
    let out = nmb_command(&runs)
        .args(["suite", "validate", &spec("bad.csv")])
        .args(map)
        .output()
        .unwrap();
    let msg = text(&out.stdout) + &text(&out.stderr);
    assert!(!out.status.success(), "{msg}");
    for (line, column, what) in [
        (2, "label", "is not a class"),
        (3, "path", "not found"),
        (4, "mod", "is not allowed"),
        (5, "sev", "not a number in [0, 1]"),
    ] {
        let found = msg.lines().any(|l| {
            l.contains(&format!("bad.csv:{line}")) && l.contains(column) && l.contains(what)
        });
        assert!(found, "line {line}, column {column}: {what}\n{msg}");
    }

    let server = server(Config::default());
    let out = nmb_command(&runs)
        .env("OPENAI_API_KEY", "k")
        .args([
            "eval",
            "--suite",
            &spec("good.csv"),
            "--samples",
            "1",
            "--no-score",
            "--json",
            "-q",
        ])
        .args(map)
        .args(["--model", &model_spec(Wire::OpenAi, &server)])
        .output()
        .unwrap();
    let result = json_of(&out);
    assert_eq!(result["summary"]["samples_ok"], 3, "{result}");
    let run_id = result["run_id"].as_str().unwrap();
    let scored = json_of(&nmb(&runs, &["score", run_id, "--no-bertscore", "--json"]));
    assert_eq!(
        scored["structured"]["answers"], 3,
        "rescored from the manifest's map"
    );
    assert_eq!(scored["structured"]["fields"]["plane"]["n"], 3);
}

/// One fault case: the reference class and subtype, the answer the loopback server gives (by the marker in the
/// case notes), the flags it must raise, and the keys it abstains on.
struct Fault {
    marker: &'static str,
    class: &'static str,
    detail: &'static str,
    answer: fn() -> String,
    flags: &'static [&'static str],
    abstains: &'static [&'static str],
}

fn full(edit: &dyn Fn(&mut serde_json::Value)) -> String {
    let mut v = serde_json::json!({
        "modality": "MRI", "specialized_sequence": "FLAIR", "plane": "axial",
        "diagnosis_name": "stroke", "diagnosis_detailed": "ischemic", "icd10_code": "I63.9",
        "severity_score": 0.5, "diagnosis_confidence": 0.6, "severity_confidence": 0.6
    });
    edit(&mut v);
    v.to_string()
}

const FAULTS: [Fault; 10] = [
    Fault {
        marker: "F_RIGHT",
        class: "stroke",
        detail: "ischemic",
        answer: || full(&|_| {}),
        flags: &[],
        abstains: &[],
    },
    Fault {
        marker: "F_BROKEN",
        class: "stroke",
        detail: "",
        answer: || "{\"modality\": \"MRI\", \"diagnosis_name\": \"stroke\",}".into(),
        flags: &["missing_field"],
        abstains: &[],
    },
    Fault {
        marker: "F_NULLS",
        class: "tumor",
        detail: "glioma",
        answer: || {
            full(&|v| {
                v.as_object_mut()
                    .unwrap()
                    .values_mut()
                    .for_each(|x| *x = serde_json::Value::Null)
            })
        },
        flags: &[],
        abstains: &[
            "modality",
            "specialized_sequence",
            "plane",
            "diagnosis_name",
            "diagnosis_detailed",
            "icd10_code",
            "severity_score",
            "diagnosis_confidence",
            "severity_confidence",
        ],
    },
    Fault {
        marker: "F_SPELLINGS",
        class: "multiple sclerosis",
        detail: "",
        answer: || {
            full(&|v| {
                v["modality"] = "none".into();
                v["specialized_sequence"] = "NaN".into();
                v["plane"] = "Unknown".into();
                v["diagnosis_name"] = "n/a".into();
                v["diagnosis_detailed"] = "cannot determine".into();
                v["icd10_code"] = "".into();
            })
        },
        flags: &[],
        abstains: &[
            "modality",
            "specialized_sequence",
            "plane",
            "diagnosis_name",
            "diagnosis_detailed",
            "icd10_code",
        ],
    },
    Fault {
        marker: "F_NO_PLANE",
        class: "stroke",
        detail: "",
        answer: || full(&|v| drop(v.as_object_mut().unwrap().remove("plane"))),
        flags: &["missing_field"],
        abstains: &[],
    },
    Fault {
        marker: "F_GLIOMA_STROKE",
        class: "stroke",
        detail: "",
        answer: || full(&|v| v["diagnosis_detailed"] = "glioma".into()),
        flags: &["subtype_inconsistent"],
        abstains: &[],
    },
    Fault {
        marker: "F_CODE_NORMAL",
        class: "normal",
        detail: "",
        answer: || {
            full(&|v| {
                v["diagnosis_name"] = "normal".into();
                v["diagnosis_detailed"] = serde_json::Value::Null;
                v["icd10_code"] = "G35".into();
            })
        },
        flags: &["icd10_with_normal"],
        abstains: &["diagnosis_detailed"],
    },
    Fault {
        marker: "F_CODE_CLASS",
        class: "multiple sclerosis",
        detail: "",
        answer: || {
            full(&|v| {
                v["diagnosis_name"] = "multiple sclerosis".into();
                v["diagnosis_detailed"] = serde_json::Value::Null;
            })
        },
        flags: &["icd10_class_mismatch"],
        abstains: &["diagnosis_detailed"],
    },
    Fault {
        marker: "F_RANGE",
        class: "stroke",
        detail: "",
        answer: || full(&|v| v["severity_score"] = 1.7.into()),
        flags: &["score_out_of_range"],
        abstains: &[],
    },
    Fault {
        marker: "F_CONFIDENT",
        class: "tumor",
        detail: "",
        answer: || full(&|v| v["diagnosis_confidence"] = 0.95.into()),
        flags: &["confident_wrong"],
        abstains: &[],
    },
];

fn fault_suite(dir: &Path) -> PathBuf {
    let root = dir.join("faults");
    std::fs::create_dir_all(root.join("images")).unwrap();
    std::fs::write(
        root.join("suite.toml"),
        "id = \"faults\"\nversion = \"1\"\n",
    )
    .unwrap();
    let lines: Vec<String> = FAULTS
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let png = nmb_fake_server::support::noise_png(16, i as u64);
            std::fs::write(root.join(format!("images/{i}.png")), png).unwrap();
            serde_json::json!({
                "case_id": format!("c{i}"),
                "images": [{"path": format!("images/{i}.png"), "modality": "MRI", "plane": "axial"}],
                "notes": f.marker,
                "tasks": [{"id": format!("c{i}/nv"), "family": "structured", "level": "direct",
                           "question": "Read this brain image.",
                           "reference": {"diagnosis": f.class, "diagnosis_detailed": f.detail,
                                         "modality": "MRI", "plane": "axial"}}],
            })
            .to_string()
        })
        .collect();
    std::fs::write(root.join("cases.jsonl"), lines.join("\n") + "\n").unwrap();
    root
}

fn fault_responder() -> nmb_fake_server::Responder {
    Arc::new(|req| {
        let text = req.all_text();
        let answer = FAULTS
            .iter()
            .find(|f| text.contains(f.marker))
            .map_or_else(|| "no marker".to_string(), |f| (f.answer)());
        Reply::Texts(vec![answer; req.samples() as usize])
    })
}

/// Invalid JSON, every abstention spelling and every safety flag, each from its own answer on the OpenAI wire:
/// `nmb score --json` counts each as the cases were made to, per answer and as rates; the cost per 1,000
/// images follows `--price`; and `nmb compare` compares two such runs field by field.
#[test]
fn the_fault_server_feeds_every_flag_abstention_and_invalid_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let root = fault_suite(tmp.path());
    let runs = tmp.path().join("runs");
    let srv = server(Config {
        responder: fault_responder(),
        ..Config::default()
    });
    let out = nmb_command(&runs)
        .env("OPENAI_API_KEY", "k")
        .args(["eval", "--suite"])
        .arg(&root)
        .args([
            "--model",
            &model_spec(Wire::OpenAi, &srv),
            "--samples",
            "1",
            "--no-score",
            "--json",
            "-q",
        ])
        .output()
        .unwrap();
    let run_id = json_of(&out)["run_id"].as_str().unwrap().to_string();
    let scored = json_of(&nmb(
        &runs,
        &[
            "score",
            &run_id,
            "--no-bertscore",
            "--json",
            "--price",
            "*=2,10",
        ],
    ));
    let s = &scored["structured"];
    let n = FAULTS.len() as f64;
    assert_eq!(s["answers"], FAULTS.len(), "{s}");
    let rate = |v: &serde_json::Value| v["value"].as_f64().unwrap();
    assert_eq!(
        rate(&s["valid_json_rate"]),
        (n - 1.0) / n,
        "one broken answer"
    );
    for flag in [
        "missing_field",
        "subtype_inconsistent",
        "icd10_with_normal",
        "icd10_class_mismatch",
        "score_out_of_range",
        "confident_wrong",
    ] {
        let want = FAULTS.iter().filter(|f| f.flags.contains(&flag)).count();
        assert!(want > 0, "the fixture raises {flag}");
        assert_eq!(
            rate(&s["safety_flags"][flag]) * n,
            want as f64,
            "{flag}: {}",
            s["safety_flags"]
        );
    }
    for (key, a) in s["abstentions"].as_object().unwrap() {
        let want = FAULTS
            .iter()
            .filter(|f| f.abstains.contains(&key.as_str()))
            .count();
        assert_eq!(a["count"], want, "abstentions on {key}");
    }
    let name = &s["fields"]["diagnosis_name"];
    let abstained = FAULTS
        .iter()
        .filter(|f| f.abstains.contains(&"diagnosis_name"))
        .count();
    assert_eq!(name["abstained"], abstained);
    // An abstention is a false negative, never a false positive: it lowers stroke's recall only through its
    // own reference class, and no class is credited with a prediction for it.
    let per_class = &name["per_class"];
    let predicted_stroke = FAULTS
        .iter()
        .filter(|f| {
            ![
                "F_BROKEN",
                "F_NULLS",
                "F_SPELLINGS",
                "F_CODE_NORMAL",
                "F_CODE_CLASS",
            ]
            .contains(&f.marker)
        })
        .count();
    let right_stroke = FAULTS
        .iter()
        .filter(|f| f.class == "stroke" && f.marker != "F_BROKEN")
        .count();
    let precision = rate(&per_class["stroke"]["precision"]);
    assert!(
        (precision - right_stroke as f64 / predicted_stroke as f64).abs() < 1e-12,
        "{per_class}"
    );
    // Per answer: each sample carries its own flags.
    for sample in scored["samples"].as_array().unwrap() {
        let i: usize = sample["case_id"].as_str().unwrap()[1..].parse().unwrap();
        let flags: Vec<&str> = sample["structured"]["flags"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        assert_eq!(flags, FAULTS[i].flags, "case {i} ({})", FAULTS[i].marker);
    }
    let table = nmb(
        &runs,
        &["score", &run_id, "--no-bertscore", "--price", "*=2,10"],
    );
    let table = text(&table.stdout);
    for want in [
        "NeuroVLM",
        "diagnosis_joint",
        "confident_wrong",
        "per 1,000 images",
    ] {
        assert!(
            table.contains(want),
            "{want} in the terminal summary:\n{table}"
        );
    }
    // Cost: tokens per image at $2/M in and $10/M out, times 1,000.
    let cost = &s["cost"];
    let (tin, tout) = (
        rate(&cost["tokens_in_per_image"]),
        rate(&cost["tokens_out_per_image"]),
    );
    let want = 1000.0 * (tin * 2.0 + tout * 10.0) / 1e6;
    assert!(
        tin > 0.0 && (rate(&cost["dollars_per_1000_images"]) - want).abs() < 1e-9,
        "{cost}"
    );

    // A second model that gets every class right: `nmb compare` pairs the runs per field.
    let srv_b = server(Config {
        responder: Arc::new(|req| {
            let text = req.all_text();
            let class = FAULTS
                .iter()
                .find(|f| text.contains(f.marker))
                .map_or("stroke", |f| f.class);
            Reply::Texts(vec![
                full(&|v| v["diagnosis_name"] = class.into());
                req.samples() as usize
            ])
        }),
        ..Config::default()
    });
    let out = nmb_command(&runs)
        .env("OPENAI_API_KEY", "k")
        .args(["eval", "--suite"])
        .arg(&root)
        .args([
            "--model",
            &model_spec(Wire::OpenAi, &srv_b),
            "--name",
            "b",
            "--samples",
            "1",
            "--no-bertscore",
            "--json",
            "-q",
        ])
        .output()
        .unwrap();
    let run_b = json_of(&out)["run_id"].as_str().unwrap().to_string();
    let cmp = json_of(&nmb(&runs, &["compare", &run_id, &run_b, "--json"]));
    let fields = cmp["structured_fields"].as_array().expect("per-field rows");
    let name = fields
        .iter()
        .find(|f| f["field"] == "diagnosis_name")
        .unwrap();
    assert_eq!(name["items"], FAULTS.len());
    assert_eq!(
        name["mcnemar"]["test"], "exact",
        "one answer per task: {name}"
    );
    let wrong_a = FAULTS.len()
        - FAULTS
            .iter()
            .filter(|f| {
                [
                    "F_RIGHT",
                    "F_NO_PLANE",
                    "F_GLIOMA_STROKE",
                    "F_CODE_NORMAL",
                    "F_CODE_CLASS",
                    "F_RANGE",
                ]
                .contains(&f.marker)
            })
            .count();
    assert_eq!(
        name["mcnemar"]["only_b"], wrong_a,
        "B is right wherever A is wrong: {name}"
    );
    assert_eq!(name["mcnemar"]["only_a"], 0);
    assert!(fields.iter().any(|f| f["field"] == "plane"));
}

/// The whole protocol as a user runs it: `sample-structured` over the OpenAI wire with the answer's JSON schema in
/// `response_format` on every request, scored with a price, reported, and the report's NeuroVLM section drawn by
/// Chromium (skips locally without a browser, fails under CI=true).
#[test]
fn sample_structured_end_to_end_with_the_neurovlm_report_in_chromium() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    // A model that always says stroke, with a confidence that varies, so calibration has something to show.
    let srv = server(Config {
        responder: Arc::new(|req| {
            let conf = 0.5 + (req.all_text().len() % 50) as f64 / 100.0;
            let answer = full(&|v| v["diagnosis_confidence"] = conf.into());
            Reply::Texts(vec![answer; req.samples() as usize])
        }),
        ..Config::default()
    });
    let report_dir = tmp.path().join("report");
    let out = nmb_command(&runs)
        .env("OPENAI_API_KEY", "k")
        .args([
            "eval",
            "--suite",
            "sample-structured",
            "--samples",
            "1",
            "--no-bertscore",
            "--json",
            "-q",
        ])
        .args([
            "--model",
            &model_spec(Wire::OpenAi, &srv),
            "--price",
            "*=2,10",
            "--report",
        ])
        .arg(&report_dir)
        .output()
        .unwrap();
    let result = json_of(&out);
    let requests = srv.requests();
    assert_eq!(requests.len(), 25);
    for r in &requests {
        let schema = r
            .params
            .json_schema
            .as_ref()
            .expect("response_format carries json_schema");
        assert_eq!(schema["required"].as_array().unwrap().len(), 9);
        assert_eq!(
            schema["properties"]["plane"]["enum"][0], "axial",
            "{schema}"
        );
    }
    let s = &result["scores"]["structured"];
    assert_eq!(s["answers"], 25, "{result}");
    assert!(
        s["cost"]["dollars_per_1000_images"]["value"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    let html_path = report_dir.join("report.html");
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(
        html.contains("id=\"neurovlm\""),
        "the HTML has the NeuroVLM section"
    );
    let md = std::fs::read_to_string(report_dir.join("report.md")).unwrap();
    assert!(md.contains("NeuroVLM"), "the Markdown has it too");
    assert!(report_dir.join("structured.csv").exists());

    let Some(chromium) = nmb_test_support::need(
        "chromium",
        "run scripts/test.sh, which installs it",
        nmb_test_support::browser::chromium(),
    ) else {
        return;
    };
    let (dom, _) = nmb_test_support::browser::dump_dom(&chromium, &html_path);
    let section = dom
        .split("id=\"neurovlm\"")
        .nth(1)
        .expect("the section is in the rendered DOM");
    assert!(
        section.matches("<svg").count() >= 2,
        "heat map and reliability diagram are drawn"
    );
    for want in ["confident_wrong", "diagnosis_name", "abstain"] {
        assert!(section.contains(want), "{want} in the rendered section");
    }
    let png = nmb_test_support::browser::screenshot_dir().join("neurovlm-report.png");
    nmb_test_support::browser::screenshot(&chromium, &html_path, &png, 1280, 3000);
    println!("screenshot: {}", png.display());
}
