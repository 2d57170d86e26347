//! `nmb eval --template-variants bundled`: a prompt sweep. Two loopback models answer three multiple-choice
//! questions under the built-in templates and the five bundled variants. Model A answers right exactly when the
//! system message gives it a role ("... expert"), so it is perfect under every template but `no-persona`, where
//! it is always wrong. Model B answers right on the first question, and on every question when the instruction
//! comes before the question (the `order` variant). So A leads B under the built-ins and the paraphrases, they tie
//! under `order`, and B leads under `no-persona`: one rank flip, and the report's scores, spreads and Kendall's W
//! must be what that design gives. Each variant is its own run named `NAME [variant]`, a second sweep asks
//! nothing, and a dry run sends nothing.

use std::path::Path;

use crate::common::*;
use nmb_fake_server::{Config, ReceivedPart, ReceivedRequest, Reply};
use serde_json::Value;

const MCQ: &str = r#"{"realidx": "q1", "question": "Which nerve?", "options": {"A": "Facial", "B": "Vagus"}, "answer_idx": "A"}
{"realidx": "q2", "question": "Which lobe?", "options": {"A": "Frontal", "B": "Occipital"}, "answer_idx": "B"}
{"realidx": "q3", "question": "Which artery?", "options": {"A": "MCA", "B": "PCA"}, "answer_idx": "A"}
"#;

/// Question text and the right letter.
const KEY: [(&str, &str); 3] = [
    ("Which nerve?", "A"),
    ("Which lobe?", "B"),
    ("Which artery?", "A"),
];

/// The bundled sweep, in the order it runs.
const VARIANTS: [&str; 6] = [
    "default",
    "paraphrase-1",
    "paraphrase-2",
    "paraphrase-3",
    "order",
    "no-persona",
];

fn text_of_role(req: &ReceivedRequest, role: &str) -> String {
    req.messages
        .iter()
        .filter(|m| m.role == role)
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            ReceivedPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn responder(req: &ReceivedRequest) -> Reply {
    let system = text_of_role(req, "system");
    let user = text_of_role(req, "user");
    let Some((question, right)) = KEY.iter().find(|(q, _)| user.contains(q)) else {
        return Reply::Texts(vec!["I do not know.".into(); req.samples() as usize]);
    };
    let correct = match req.model.as_str() {
        "model-a" => system.contains("expert"),
        _ => {
            let instruction_first = user
                .find("\"Answer: X\"")
                .is_some_and(|i| i < user.find(question).unwrap_or(0));
            instruction_first || *question == "Which nerve?"
        }
    };
    let letter = match (correct, *right) {
        (true, r) => r,
        (false, "A") => "B",
        (false, _) => "A",
    };
    Reply::Texts(vec![format!("Answer: {letter}"); req.samples() as usize])
}

/// What the fixture was made to do: each model's accuracy under each variant, in `VARIANTS` order.
fn designed(model: &str) -> [f64; 6] {
    match model {
        "A" => [1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
        _ => [1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 1.0, 1.0 / 3.0],
    }
}

/// max − min and the sample standard deviation of a model's designed scores.
fn spread(scores: &[f64]) -> (f64, f64) {
    let max = scores.iter().copied().fold(f64::MIN, f64::max);
    let min = scores.iter().copied().fold(f64::MAX, f64::min);
    let mean = scores.iter().sum::<f64>() / scores.len() as f64;
    let ss: f64 = scores.iter().map(|x| (x - mean).powi(2)).sum();
    (max - min, (ss / (scores.len() - 1) as f64).sqrt())
}

fn sweep(runs: &Path, url: &str, model: &str, name: &str, extra: &[&str]) -> Value {
    let spec = format!("openai:{model}@{url}/v1");
    let suite = format!("mcq:{}", runs.parent().unwrap().join("mcq.jsonl").display());
    let mut args = vec![
        "eval",
        "--suite",
        suite.as_str(),
        "--model",
        spec.as_str(),
        "--name",
        name,
        "--samples",
        "1",
        "--template-variants",
        "bundled",
        "--no-bertscore",
        "--json",
        "-q",
    ];
    args.extend_from_slice(extra);
    json_of(
        &nmb_command(runs)
            .env("OPENAI_API_KEY", "k")
            .args(&args)
            .output()
            .unwrap(),
    )
}

fn close(got: &Value, want: f64, what: &str) {
    let got = got
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: not a number: {got}"));
    assert!((got - want).abs() < 1e-12, "{what}: {got} vs {want}");
}

#[test]
fn a_bundled_sweep_reports_scores_spreads_flips_and_w() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    std::fs::write(tmp.path().join("mcq.jsonl"), MCQ).unwrap();
    let srv = server(Config {
        responder: std::sync::Arc::new(responder),
        ..Config::default()
    });

    let single = tmp.path().join("a-report");
    let a = sweep(
        &runs,
        &srv.url(),
        "model-a",
        "A",
        &["--report", single.to_str().unwrap()],
    );
    let b = sweep(&runs, &srv.url(), "model-b", "B", &[]);
    let mut ids = Vec::new();
    for (out, name) in [(&a, "A"), (&b, "B")] {
        let list = out["sweep"].as_array().unwrap();
        let variants: Vec<&str> = list
            .iter()
            .map(|v| v["variant"].as_str().unwrap())
            .collect();
        assert_eq!(variants, VARIANTS);
        for v in list {
            let id = v["run_id"].as_str().unwrap();
            let run = store(&runs).run(id).unwrap();
            let want = format!("{name} [{}]", v["variant"].as_str().unwrap());
            assert_eq!(run.manifest.display_name(), want);
            ids.push(id.to_string());
        }
    }
    assert_eq!(
        srv.request_count(),
        2 * 6 * 3,
        "every variant is a different prompt: nothing comes from the cache"
    );
    let html = std::fs::read_to_string(a["report"].as_str().unwrap()).unwrap();
    assert!(
        html.contains("id=\"prompt-sensitivity\""),
        "--report covers the model's variants"
    );

    let out = tmp.path().join("report");
    let mut args = vec!["report".to_string()];
    args.extend(ids.iter().cloned());
    args.extend(["--out".to_string(), out.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let reported = nmb(&runs, &args);
    assert!(reported.status.success(), "{}", text(&reported.stderr));
    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let groups = json["analysis"]["sweep"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "one suite, one score");
    let g = &groups[0];
    assert_eq!(g["metric"], "accuracy");
    let labels: Vec<&str> = g["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, VARIANTS);
    let models = g["models"].as_array().unwrap();
    assert_eq!(models.len(), 2);
    for m in models {
        let name = m["name"].as_str().unwrap();
        let want = designed(name);
        for (i, s) in m["scores"].as_array().unwrap().iter().enumerate() {
            close(
                &s["value"],
                want[i],
                &format!("{name} under {}", VARIANTS[i]),
            );
            assert!(s["ci_low"].as_f64().unwrap() <= s["value"].as_f64().unwrap());
        }
        let (range, sd) = spread(&want);
        close(&m["range"]["value"], range, &format!("{name}: max - min"));
        close(&m["sd"]["value"], sd, &format!("{name}: SD"));
        for e in [&m["range"], &m["sd"]] {
            let (lo, hi) = (
                e["ci_low"].as_f64().unwrap(),
                e["ci_high"].as_f64().unwrap(),
            );
            assert!(0.0 <= lo && lo <= hi, "{e}");
        }
    }
    assert_eq!(
        g["rank_flips"],
        serde_json::json!([{
            "a": "A",
            "b": "B",
            "a_ahead": ["default", "paraphrase-1", "paraphrase-2", "paraphrase-3"],
            "b_ahead": ["no-persona"],
        }]),
        "A leads except without the persona; the tie under order is neither"
    );
    // By hand from the design: variants rank (A, B) as (2, 1) four times, (1.5, 1.5) once and (1, 2) once, so
    // the rank sums are 10.5 and 7.5 around m (n + 1) / 2 = 9: S = 4.5; one tied pair gives T = 2^3 - 2 = 6;
    // W = 12 S / (m^2 (n^3 - n) - m T) = 54 / (36 * 6 - 6 * 6) = 0.3.
    let w = &g["kendall_w"];
    close(&w["value"], 0.3, "Kendall's W");
    let (lo, hi) = (
        w["ci_low"].as_f64().unwrap(),
        w["ci_high"].as_f64().unwrap(),
    );
    assert!(0.0 <= lo && lo <= hi && hi <= 1.0, "{w}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        md.contains("## Prompt sensitivity") && md.contains("A vs B"),
        "{md}"
    );
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert!(csv.lines().any(|l| l.contains(",kendall_w,")), "{csv}");
    let paired = json["analysis"]["paired"].as_array().unwrap();
    assert_eq!(paired.len(), 6, "A and B compared under each variant alone");

    // The same sweep again resumes every variant's run and asks nothing.
    let asked = srv.request_count();
    let again = sweep(&runs, &srv.url(), "model-a", "A", &[]);
    assert_eq!(again["sweep"].as_array().unwrap().len(), 6);
    assert_eq!(
        srv.request_count(),
        asked,
        "a second sweep asks nothing twice"
    );
}

#[test]
fn a_dry_sweep_sends_nothing_and_bad_variants_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let dry = nmb(
        &runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            "openai:m@http://127.0.0.1:9/v1",
            "--template-variants",
            "bundled",
            "--dry-run",
            "--limit",
            "2",
        ],
    );
    let shown = text(&dry.stdout);
    assert!(dry.status.success(), "{shown}{}", text(&dry.stderr));
    assert_eq!(
        shown.matches("dry run: nothing is sent").count(),
        6,
        "{shown}"
    );

    let bad = nmb(
        &runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            "openai:m@http://127.0.0.1:9/v1",
            "--template",
            "bundled:paraphrase-9",
            "--dry-run",
        ],
    );
    let said = text(&bad.stderr);
    assert!(!bad.status.success());
    assert!(
        said.contains("paraphrase-9") && said.contains("no-persona"),
        "{said}"
    );
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let none = nmb(
        &runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            "openai:m@http://127.0.0.1:9/v1",
            "--template-variants",
            empty.to_str().unwrap(),
            "--dry-run",
        ],
    );
    assert!(
        text(&none.stderr).contains("no *.jinja"),
        "{}",
        text(&none.stderr)
    );
    let both = nmb(
        &runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            "m",
            "--template",
            "x.jinja",
            "--template-variants",
            "bundled",
        ],
    );
    assert_eq!(both.status.code(), Some(2), "--template goes alone");
}
