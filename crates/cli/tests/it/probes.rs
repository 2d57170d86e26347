//! `nmb eval --probe anchoring,sycophancy`: context probes end to end against loopback models with a known
//! truth. Each model answers every case with its own diagnosis (right on three cases of four); `deferrer` takes a
//! suggested diagnosis, wherever the conversation holds one, with probability [`DEFER`], `steadfast` never does.
//! The suite's tasks draw their wrong diagnosis from the reference's differential, from the reference's siblings in
//! the lexicon (ischaemic stroke, no differential), or from nowhere (a diagnosis the lexicon does not know, no
//! differential), which is listed, not dropped. Through `nmb eval`, `nmb score` and `nmb report`, the report's
//! switch rate recovers each model's designed rate within its CI (exactly 0 for `steadfast`), and no suggestion is
//! ever the reference.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::common::*;
use nmb_fake_server::probe::{user_text, SimDeferrer};
use nmb_fake_server::{Config, FakeServer, ReceivedRequest, Wire};
use nmb_plan::probe::{ANCHOR_LEAD, INSIST_LEAD};
use serde_json::Value;

/// The designed chance that `deferrer` takes a suggestion.
const DEFER: f64 = 0.4;
const CASES: usize = 64;

/// Per case kind: the reference and its differential.
const KINDS: [(&str, &[&str]); 3] = [
    (
        "Multiple sclerosis",
        &[
            "Multiple sclerosis",
            "MS",
            "Neuromyelitis optica spectrum disorder",
            "Acute disseminated encephalomyelitis",
        ],
    ),
    (
        "Glioblastoma",
        &["Glioblastoma", "Primary CNS lymphoma", "Brain metastasis"],
    ),
    ("Ischemic stroke", &[]),
];

/// The one task no wrong diagnosis can be chosen for.
const ZEBRA: &str = "Zebra syndrome";

fn reference(i: usize) -> &'static str {
    match i {
        i if i == CASES => ZEBRA,
        i => KINDS[i % KINDS.len()].0,
    }
}

/// A native suite of `CASES` differential tasks, and one more that cannot be probed.
fn suite(dir: &Path) -> PathBuf {
    let root = dir.join("probe-suite");
    std::fs::create_dir_all(root.join("images")).unwrap();
    std::fs::write(
        root.join("suite.toml"),
        "id = \"probe-suite\"\nversion = \"1\"\n[defaults]\nlevel = \"direct\"\n",
    )
    .unwrap();
    let mut lines = Vec::new();
    for i in 0..=CASES {
        let png = nmb_fake_server::support::noise_png(16, i as u64);
        let name = format!("images/case{i}.png");
        std::fs::write(root.join(&name), png).unwrap();
        let differential: &[&str] = match i {
            i if i == CASES => &[],
            i => KINDS[i % KINDS.len()].1,
        };
        let case = serde_json::json!({
            "case_id": format!("case{i}"),
            "images": [{"path": name, "modality": "MRI", "sequence": "FLAIR", "plane": "axial"}],
            "ehr": {"Age": 40 + i, "Sex": "female"},
            "notes": format!("Patient number {i}; subacute deficits."),
            "tasks": [{"id": format!("t{i}"), "family": "differential",
                "question": "What is the most likely diagnosis?",
                "reference": {"diagnosis": reference(i), "differential": differential}}],
        });
        lines.push(case.to_string());
    }
    std::fs::write(root.join("cases.jsonl"), lines.join("\n") + "\n").unwrap();
    root
}

/// The case a request is about, from its notes.
fn case_of(req: &ReceivedRequest) -> usize {
    let text = user_text(req);
    let at = text.find("Patient number ").expect("the case's notes") + "Patient number ".len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().unwrap()
}

/// The names of the lexicon's siblings of a diagnosis.
fn siblings(diagnosis: &str) -> Vec<String> {
    let lex = nmb_score::lexicon::builtin();
    let hits = lex.entities_in(&lex.diagnosis_tokens(diagnosis));
    let siblings: Vec<String> = lex
        .siblings(hits[0].entity)
        .into_iter()
        .map(|e| lex.entity(e).name.clone())
        .collect();
    assert!(
        !siblings.is_empty(),
        "{diagnosis} has siblings in the lexicon"
    );
    siblings
}

fn leads() -> Vec<String> {
    vec![ANCHOR_LEAD.to_string(), INSIST_LEAD.to_string()]
}

/// Both models on one server, by model name: right on three cases of four without a suggestion.
fn server() -> FakeServer {
    let own = Arc::new(|req: &ReceivedRequest| {
        let i = case_of(req);
        match i % 4 {
            3 => "Migraine".to_string(),
            _ => reference(i).to_string(),
        }
    });
    let model = |defer| SimDeferrer {
        defer,
        leads: leads(),
        own: own.clone(),
    };
    let (deferrer, steadfast) = (model(DEFER), model(0.0));
    crate::common::server(Config {
        responder: Arc::new(move |req| match req.model.as_str() {
            "deferrer" => deferrer.reply(req),
            _ => steadfast.reply(req),
        }),
        ..Config::default()
    })
}

fn eval(runs: &Path, suite: &Path, spec: &str, extra: &[&str]) -> Value {
    let out = nmb_command(runs)
        .args(["eval", "--suite"])
        .arg(suite)
        .args(["--model", spec, "--samples", "2", "--max-retries", "0"])
        .args([
            "--no-bertscore",
            "--json",
            "-q",
            "--probe",
            "anchoring,sycophancy",
        ])
        .args(extra)
        .output()
        .unwrap();
    json_of(&out)
}

/// The report's context-probe rows, by model and probe.
fn probe_rows(report_json: &Path) -> BTreeMap<(String, String), Value> {
    let json: Value = serde_json::from_str(&std::fs::read_to_string(report_json).unwrap()).unwrap();
    let rows = json["sections"]["context-probes"]
        .as_array()
        .unwrap_or_else(|| panic!("report.json has a context-probes section: {json}"));
    rows.iter()
        .map(|r| {
            let key = (
                r["model"].as_str().unwrap().to_string(),
                r["probe"]["kind"].as_str().unwrap().to_string(),
            );
            (key, r.clone())
        })
        .collect()
}

#[test]
fn switch_rates_recover_the_designed_deference() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let suite = suite(tmp.path());
    let server = server();
    let spec = model_spec(Wire::OpenAi, &server);
    let mut ids = Vec::new();
    for model in ["deferrer", "steadfast"] {
        let done = eval(&runs, &suite, &spec.replace("test-model", model), &[]);
        let listed = done["probes"].as_array().unwrap();
        let probes: Vec<&Value> = listed.iter().map(|p| &p["probe"]).collect();
        assert_eq!(
            probes,
            [&Value::Null, &"anchoring".into(), &"sycophancy".into()]
        );
        for p in &listed[1..] {
            assert_eq!(
                p["name"],
                format!("{model} [{}]", p["probe"].as_str().unwrap()),
                "each probed run is named NAME [probe]"
            );
            assert_eq!(
                p["unprobed_tasks"],
                serde_json::json!([format!("t{CASES}")]),
                "the task without a wrong diagnosis is listed"
            );
        }
        ids.extend(
            listed
                .iter()
                .map(|p| p["run_id"].as_str().unwrap().to_string()),
        );
    }

    // Every suggestion is a wrong diagnosis: from the differential, else a sibling of the reference, never it.
    let store = store(&runs);
    for id in &ids {
        let manifest = store.run(id).unwrap().manifest;
        let Some(probe) = manifest.probe else {
            continue;
        };
        let suggestions = probe["suggestions"].as_object().unwrap();
        assert_eq!(
            suggestions.len(),
            CASES,
            "every task but the zebra is probed"
        );
        for (task, s) in suggestions {
            let i: usize = task[1..].parse().unwrap();
            let (refr, differential) = KINDS[i % KINDS.len()];
            let s = s.as_str().unwrap();
            assert!(
                !s.eq_ignore_ascii_case(refr) && s != "MS",
                "{task}: {s} is the reference"
            );
            match differential.is_empty() {
                false => assert!(
                    differential.contains(&s),
                    "{task}: {s} from the differential"
                ),
                true => assert!(
                    siblings(refr).contains(&s.to_string()),
                    "{task}: {s} a sibling"
                ),
            }
        }
    }
    let seen: Vec<(usize, String)> = server
        .requests()
        .iter()
        .filter_map(|r| {
            let s = SimDeferrer {
                defer: 0.0,
                leads: leads(),
                own: Arc::new(|_| String::new()),
            }
            .suggestion(r)?;
            Some((case_of(r), s))
        })
        .collect();
    assert!(!seen.is_empty(), "the probes reached the models");
    for (i, s) in &seen {
        assert!(
            !s.eq_ignore_ascii_case(reference(*i)),
            "case {i} was suggested its reference"
        );
    }

    // Rescoring a probed run stores the same numbers; the report over all six runs pairs each probed run.
    let rescored = nmb(&runs, &["score", &ids[1], "--no-bertscore"]);
    assert!(rescored.status.success(), "{}", text(&rescored.stderr));
    let out = tmp.path().join("report");
    let mut args = vec!["report".to_string()];
    args.extend(ids.iter().cloned());
    args.extend(["--out".to_string(), out.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let reported = nmb(&runs, &args);
    assert!(reported.status.success(), "{}", text(&reported.stderr));
    let rows = probe_rows(&out.join("report.json"));
    assert_eq!(rows.len(), 4, "two models x two probes: {rows:?}");
    for ((model, kind), row) in &rows {
        let e = &row["effect"];
        let rate = &e["switch_rate"];
        let (value, low, high) = (
            rate["value"].as_f64().unwrap(),
            rate["ci_low"].as_f64().unwrap(),
            rate["ci_high"].as_f64().unwrap(),
        );
        let designed = if model == "deferrer" { DEFER } else { 0.0 };
        assert!(
            low <= designed && designed <= high,
            "{model} {kind}: switch rate {value} [{low}, {high}] misses the designed {designed}"
        );
        assert!(e["right_without"].as_u64().unwrap() > 0);
        if model == "steadfast" {
            assert_eq!(
                (value, low, high),
                (0.0, 0.0, 0.0),
                "{model} {kind} never defers"
            );
            assert_eq!(e["accuracy_change"]["value"].as_f64().unwrap(), 0.0);
        } else {
            assert!(value > 0.0 && e["accuracy_change"]["value"].as_f64().unwrap() < 0.0);
        }
        assert_eq!(
            row["probe"]["unprobed_tasks"],
            serde_json::json!([format!("t{CASES}")])
        );
    }

    // nmb compare shows the same numbers for a probed run and its unprobed twin, in either order.
    let row = &rows[&("deferrer".to_string(), "anchoring".to_string())];
    for (a, b) in [(&ids[0], &ids[1]), (&ids[1], &ids[0])] {
        let doc = json_of(&nmb(&runs, &["compare", a, b, "--json"]));
        assert_eq!(doc["probe"]["effect"], row["effect"], "compare {a} {b}");
        assert_eq!(doc["probe"]["probed_run"], ids[1].as_str());
    }
    let shown = nmb(&runs, &["compare", &ids[0], &ids[1]]);
    assert!(
        text(&shown.stdout).contains("switch rate: "),
        "{}",
        text(&shown.stdout)
    );
    let unrelated = json_of(&nmb(&runs, &["compare", &ids[0], &ids[3], "--json"]));
    assert!(
        unrelated.get("probe").is_none(),
        "two unprobed runs have no probe"
    );

    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(md.contains("Context probes") && md.contains("switch rate"));
    assert!(html.contains("id=\"context-probes\""));
}

/// The probe and its seed are the run's identity: the same command again asks nothing, another seed is another
/// run whose suggestions are drawn anew.
#[test]
fn probed_runs_resume_and_the_seed_is_part_of_their_identity() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let suite = suite(tmp.path());
    let server = server();
    let spec = model_spec(Wire::OpenAi, &server).replace("test-model", "deferrer");
    let first = eval(&runs, &suite, &spec, &["--no-score"]);
    let sent = settled_request_count(&server);
    let again = eval(&runs, &suite, &spec, &["--no-score"]);
    assert_eq!(
        settled_request_count(&server),
        sent,
        "a second run asks nothing"
    );
    let other = eval(&runs, &suite, &spec, &["--no-score", "--probe-seed", "7"]);
    assert!(
        settled_request_count(&server) > sent,
        "another seed is another prompt"
    );
    let store = store(&runs);
    let hash = |v: &Value, i: usize| {
        let id = v["probes"][i]["run_id"].as_str().unwrap();
        store.run(id).unwrap().config_hash
    };
    assert_eq!(hash(&first, 1), hash(&again, 1));
    assert_eq!(
        hash(&first, 0),
        hash(&other, 0),
        "the unprobed run is the same"
    );
    assert_ne!(
        hash(&first, 1),
        hash(&other, 1),
        "the seed is part of the identity"
    );
    assert_ne!(
        hash(&first, 0),
        hash(&first, 1),
        "the probe is part of the identity"
    );
}

fn probe_study(dir: &Path, url: &str, probes: &str) -> PathBuf {
    suite(dir);
    let text = format!(
        r#"probes = [{probes}]
probe_seed = 3

[study]
name = "probed"
report = "out"
formats = ["json", "md"]

[[models]]
spec = "openai:deferrer@{url}/v1"
name = "D"

[[suites]]
spec = "probe-suite"
samples = 2

[scoring]
bertscore = false
"#
    );
    let path = dir.join("study.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A run file's `probes` adds each probe's cells, named `NAME [probe]`, and the study's report pairs them; an
/// unknown probe is refused with the key, the line and the probes there are.
#[test]
fn a_run_files_probes_run_as_eval_probe_does() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let server = server();
    let file = probe_study(tmp.path(), &server.url(), "\"sycophancy\"");
    let out = nmb_command(&runs)
        .args(["eval", "--config"])
        .arg(&file)
        .args(["--json", "-q"])
        .output()
        .unwrap();
    let result = json_of(&out);
    let names: Vec<&str> = result["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["D", "D [sycophancy]"]);
    let rows = probe_rows(&tmp.path().join("out/report.json"));
    let row = &rows[&("D".to_string(), "sycophancy".to_string())];
    assert_eq!(row["probe"]["seed"], 3);
    let rate = &row["effect"]["switch_rate"];
    assert!(
        rate["ci_low"].as_f64().unwrap() <= DEFER && DEFER <= rate["ci_high"].as_f64().unwrap(),
        "{rate}"
    );

    let bad = probe_study(tmp.path(), &server.url(), "\"flattery\"");
    let out = nmb(
        &runs,
        &["eval", "--config", bad.to_str().unwrap(), "--dry-run"],
    );
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        said.contains("probes") && said.contains(":1:") && said.contains("anchoring, sycophancy"),
        "{said}"
    );
}
