//! `cargo bench -p nmb-serve --bench pages`: page times of the viewer over a synthetic store of one run of
//! 100,000 samples (20,000 tasks × 5 samples) and a small run of the same suite to compare it with, against the
//! issue's targets (p95 page time ≤ 100 ms, server RSS
//! ≤ 150 MB). The store is built once through `nmb_store::Store`'s public API and kept under
//! `target/bench-serve-store/STORE_VERSION/` for later runs. The server runs in this process on a loopback port,
//! driven by a reqwest client in the same process, so the RSS figures are of server and client together.
//! Prints one JSON object.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nmb_store::{
    CallRecord, ChoiceRecord, ErrorInfo, ImageInput, SampleScoreRow, ScoreReportRecord, Store,
};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Bump when the synthetic store's content changes, so a stale cached store is not reused.
const STORE_VERSION: &str = "v3";
const TASKS: usize = 20_000;
const SAMPLES: u32 = 5;
const PROMPTS: usize = 6;
const MODEL: &str = "openai:bench-model@http://127.0.0.1:9";
/// Requests per page type.
const N: usize = 200;
/// The word that only a few answers hold (what the text search looks for).
const NEEDLE: &str = "xanthogranuloma";
/// A word that many answers hold.
const COMMON_WORD: &str = "glioma";
const TARGET_P95_MS: f64 = 100.0;
const TARGET_RSS_MB: f64 = 150.0;

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn task_id(i: usize) -> String {
    format!("{}/dx", case_id(i))
}

fn case_id(i: usize) -> String {
    format!("case-{i:05}")
}

/// A small PNG-looking image (signature and pseudo-random bytes), a few kilobytes.
fn png(seed: u64) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while out.len() < 4096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out
}

/// Disease groups, by task.
const GROUPS: &[&str] = &["neoplasm", "vascular", "demyelinating", "infectious"];
/// Error categories of wrong answers.
const CATEGORIES: &[&str] = &["reasoning_failure", "perceptual_failure", "knowledge_gap"];

const DIAGNOSES: &[&str] = &[
    "glioblastoma",
    "meningioma",
    "brain abscess",
    "metastasis",
    "primary CNS lymphoma",
    "demyelinating lesion",
    "low-grade glioma",
    "cavernous malformation",
];

/// An answer of a few hundred bytes, a ranked differential with reasons.
fn answer(task: usize, sample: u32) -> String {
    let d = |k: usize| DIAGNOSES[(task * 7 + sample as usize * 3 + k) % DIAGNOSES.len()];
    let mut text = format!(
        "1. {} — ring-enhancing mass with central necrosis and surrounding vasogenic oedema in the right \
         frontal lobe, crossing the corpus callosum.\n2. {} — the enhancement pattern and the restricted \
         diffusion could also fit.\n3. {} — less likely given the age and the single lesion.\n\
         Findings: T2 hyperintense signal, mass effect with 4 mm midline shift; no haemorrhage on SWI. \
         Case {task} sample {sample}.",
        d(0),
        d(1),
        d(2)
    );
    if task % 2_000 == 17 && sample == 2 {
        text.push_str(&format!(" Also consider {NEEDLE}."));
    }
    text
}

/// The per-sample entry of the score report, shaped like nmb-score's `SampleScore` (about 1 KB each).
fn report_sample(task: &str, sample: u32, errored: bool) -> Value {
    json!({
        "task_id": task, "sample_index": sample, "case_id": task.split('/').next(),
        "family": "differential", "level": "direct", "disease_group": "neoplasm", "modality": "MRI",
        "case_metadata": {"source": "synthetic", "organ": "brain", "synthetic": "true"},
        "status": if errored { "errored" } else { "ok" },
        "error_class": if errored { Some("timeout") } else { None },
        "parsed": if errored { Value::Null } else { json!({
            "format": "numbered_list",
            "differential": [
                {"rank": 1, "diagnosis": "glioblastoma", "evidence": "ring enhancement, necrosis"},
                {"rank": 2, "diagnosis": "metastasis", "evidence": "enhancement pattern"},
                {"rank": 3, "diagnosis": "brain abscess", "evidence": null}],
            "final_diagnosis": null, "lesion_type": null, "lesion_location": null,
            "findings": "T2 hyperintense signal, mass effect with 4 mm midline shift", "rationale": null}) },
        "parse_error": null, "correct": if errored { None } else { Some(sample.is_multiple_of(2)) }, "unresolved": false,
        "diagnosis": if errored { Value::Null } else { json!({
            "reference": "glioblastoma", "matched_rank": 1, "method": "normalisation", "top_1": true, "top_5": true,
            "candidates": [{"rank": 1, "diagnosis": "glioblastoma", "normalised": "glioblastoma",
                            "outcome": "match", "method": "normalisation", "matched": "glioblastoma",
                            "rule_note": null, "judge": null}]}) },
        "lesion": null, "rubric": null, "bertscore": null, "taxonomy": null, "breadth": null
    })
}

fn estimate(v: f64) -> Value {
    json!({"value": v, "ci_low": v - 0.05, "ci_high": v + 0.05, "level": 0.95,
           "method": "cluster_percentile_bootstrap", "seed": 7, "resamples": 1000, "n": 99_000})
}

fn group(by: &str, level: Option<&str>, family: Option<&str>) -> Value {
    json!({
        "by": by, "level": level, "family": family,
        "tasks": 20_000, "cases": 20_000, "samples": 100_000, "n": 99_000, "correct": 50_000, "errored": 1_000,
        "pending": 0, "no_reference": 0, "parse_failed": 0, "unresolved": 0, "accuracy": estimate(0.5),
        "pass_at_1": {"k": 1, "unbiased_estimator": estimate(0.42), "unbiased_tasks": 20_000,
                      "top_k_in_answer": estimate(0.51), "top_k_samples": 99_000},
        "pass_at_5": {"k": 5, "unbiased_estimator": estimate(0.81), "unbiased_tasks": 20_000,
                      "top_k_in_answer": null, "top_k_samples": 0}
    })
}

/// The case the case and compare pages show.
const COMPARED: usize = 12_345;

/// Another run of the same suite, with the five samples of task [`COMPARED`] only.
fn second_run(store: &Store, manifest: &nmb_store::Manifest, prompt: &str) {
    let mut manifest = manifest.clone();
    manifest.display_name = Some("Second Model".into());
    let run_id = store
        .create_run("bench-cfg-2", &manifest)
        .expect("create the second run")
        .run_id;
    let task = task_id(COMPARED);
    store
        .plan_samples(&run_id, &[(task.as_str(), SAMPLES)])
        .expect("plan the second run");
    let texts: Vec<String> = (0..SAMPLES).map(|s| answer(COMPARED + 1, s)).collect();
    let choices: Vec<ChoiceRecord<'_>> = (0..SAMPLES)
        .map(|s| ChoiceRecord {
            thinking: None,
            finish_reason: None,
            sample_index: s,
            choice_index: s,
            text: Some(texts[s as usize].as_str()),
            error: None,
            final_turn: true,
        })
        .collect();
    let call = CallRecord {
        tokens: Default::default(),
        run_id: &run_id,
        task_id: &task,
        turn_index: 0,
        prompt_hash: prompt,
        model: MODEL,
        params_json: r#"{"temperature":0.7,"n":5}"#,
        template_id: "depth-v1",
        template_hash: "def",
        error: None,
        attempts: 1,
        raw: None,
        tokens_in: Some(1_200),
        tokens_out: Some(400),
        latency_ms: Some(900),
        started_ms: 1_000,
        finished_ms: 2_000,
        batch_id: None,
    };
    store
        .record_call(&call, &choices)
        .expect("record the second run");
    store
        .set_status(&run_id, nmb_store::RunStatus::Finished)
        .expect("finish the second run");
}

struct Synthetic {
    run_id: String,
    second: String,
    images: Vec<String>,
}

/// Builds the store in `dir` (which must not hold one yet).
fn build(dir: &Path) -> Synthetic {
    let store = Store::open_dir(dir).expect("open the bench store");
    let manifest: nmb_store::Manifest = serde_json::from_value(json!({
        "nmb_version": "0.1.0", "suite_id": "bench", "suite_hash": "abc",
        "template_id": "depth-v1", "template_hash": "def", "model": MODEL, "display_name": "Bench Model",
        "params": {"temperature": 0.7}, "input_mode": "full", "samples": SAMPLES, "dropped_inputs": []
    }))
    .expect("a manifest");
    let run_id = store
        .create_run("bench-cfg", &manifest)
        .expect("create run")
        .run_id;
    let tasks: Vec<String> = (0..TASKS).map(task_id).collect();
    let plan: Vec<(&str, u32)> = tasks.iter().map(|t| (t.as_str(), SAMPLES)).collect();
    store.plan_samples(&run_id, &plan).expect("plan samples");

    let pngs: Vec<Vec<u8>> = (0..4u64).map(png).collect();
    let images: Vec<String> = pngs.iter().map(|b| sha(b)).collect();
    let mut prompts = Vec::new();
    for p in 0..PROMPTS {
        let shown: Vec<usize> = (0..2 + p % 2).map(|k| (p + k) % pngs.len()).collect();
        let mut parts: Vec<Value> = shown
            .iter()
            .map(|&k| json!({"image": images[k], "mime": "image/png"}))
            .collect();
        parts.push(json!({"text": format!(
            "You are a neuroradiologist. Study the {} images of this MRI examination and give a ranked \
             differential diagnosis (prompt variant {p}).", shown.len())}));
        let body = json!({"messages": [{"parts": parts, "role": "user"}]}).to_string();
        let hash = sha(body.as_bytes());
        let inputs: Vec<ImageInput<'_>> = shown
            .iter()
            .map(|&k| ImageInput {
                sha256: &images[k],
                mime: "image/png",
                bytes: &pngs[k],
            })
            .collect();
        store.put_prompt(&hash, &body, &inputs).expect("put prompt");
        prompts.push(hash);
    }

    let mut rows = Vec::with_capacity(TASKS * SAMPLES as usize);
    let mut report_samples = Vec::with_capacity(TASKS * SAMPLES as usize);
    const CLASSES: &[(&str, &str)] = &[
        ("timeout", "no answer in 60 s"),
        ("rate_limit", "429 Too Many Requests after 5 attempts"),
        ("server_error", "502 Bad Gateway"),
    ];
    for (i, t) in tasks.iter().enumerate() {
        // One task in 100 fails as a whole call (all five samples errored), with one of three classes.
        let failed = i % 100 == 42;
        let class = CLASSES[(i / 100) % CLASSES.len()];
        let texts: Vec<String> = (0..SAMPLES).map(|s| answer(i, s)).collect();
        let choices: Vec<ChoiceRecord<'_>> = (0..SAMPLES)
            .map(|s| ChoiceRecord {
                thinking: None,
                finish_reason: None,
                sample_index: s,
                choice_index: s,
                text: (!failed).then_some(texts[s as usize].as_str()),
                error: None,
                final_turn: true,
            })
            .collect();
        let call = CallRecord {
            tokens: Default::default(),
            run_id: &run_id,
            task_id: t,
            turn_index: 0,
            prompt_hash: &prompts[i % PROMPTS],
            model: MODEL,
            params_json: r#"{"temperature":0.7,"n":5}"#,
            template_id: "depth-v1",
            template_hash: "def",
            error: failed.then_some(ErrorInfo {
                class: class.0,
                message: class.1,
            }),
            attempts: if failed { 5 } else { 1 },
            raw: Some(
                r#"{"id":"x","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":400}}"#,
            ),
            tokens_in: Some(1_200),
            tokens_out: Some(400),
            latency_ms: Some(800 + (i as u64 * 37) % 4_000),
            started_ms: 1_000,
            finished_ms: 2_000,
            batch_id: None,
        };
        store.record_call(&call, &choices).expect("record call");
        for s in 0..SAMPLES {
            let wrong = !failed && !s.is_multiple_of(2);
            rows.push(SampleScoreRow {
                task_id: t.clone(),
                sample_index: s,
                case_id: t.split('/').next().unwrap_or("").to_string(),
                family: "differential".into(),
                level: "direct".into(),
                status: if failed { "errored" } else { "ok" }.into(),
                correct: (!failed).then_some(s.is_multiple_of(2)),
                matched_rank: (!failed && s.is_multiple_of(2)).then_some(1),
                match_method: Some("normalisation".into()),
                error_category: wrong
                    .then(|| CATEGORIES[(i + s as usize) % CATEGORIES.len()].into()),
                disease_group: Some(GROUPS[i % GROUPS.len()].into()),
                ..Default::default()
            });
            report_samples.push(report_sample(t, s, failed));
        }
    }
    let report = json!({
        "schema_version": 1, "run_id": run_id, "config": {"nmb_version": "0.1.0", "config_hash": "score-cfg"},
        "samples": report_samples, "tasks": [],
        "overall": group("overall", None, None),
        "by_level_family": [group("level_family", Some("direct"), Some("differential"))],
        "by_family": [], "by_level": [], "by_disease_group": [], "by_modality": [], "jury_agreement": [],
        "notes": []
    })
    .to_string();
    drop(report_samples);
    store
        .save_score_report(&ScoreReportRecord {
            run_id: &run_id,
            config_hash: "score-cfg",
            schema_version: 1,
            report_json: &report,
            samples: &rows,
        })
        .expect("save score report");
    store
        .set_status(&run_id, nmb_store::RunStatus::Finished)
        .expect("finish run");
    second_run(&store, &manifest, &prompts[COMPARED % PROMPTS]);
    store.checkpoint().expect("checkpoint");
    let second = store
        .list_runs()
        .expect("list runs")
        .into_iter()
        .find(|r| r.run_id != run_id)
        .expect("the second run")
        .run_id;
    Synthetic {
        run_id,
        second,
        images,
    }
}

/// The bench store: reused when a complete one of this version is there, else (re)built.
fn store_dir() -> (PathBuf, Synthetic, Option<f64>) {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target.join("bench-serve-store").join(STORE_VERSION);
    let done = dir.join("done.json");
    if let Ok(text) = std::fs::read_to_string(&done) {
        if let Ok(v) = serde_json::from_str::<Value>(&text) {
            let run_id = v["run_id"].as_str().unwrap_or_default().to_string();
            let second = v["second"].as_str().unwrap_or_default().to_string();
            let images = v["images"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            return (
                dir,
                Synthetic {
                    run_id,
                    second,
                    images,
                },
                None,
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let started = Instant::now();
    let s = build(&dir);
    let secs = started.elapsed().as_secs_f64();
    std::fs::write(
        &done,
        json!({"run_id": s.run_id, "second": s.second, "images": s.images}).to_string(),
    )
    .expect("write the bench store's marker");
    (dir, s, Some(secs))
}

/// A line of `/proc/self/status` in megabytes (`VmHWM`, `VmRSS`).
fn status_mb(key: &str) -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Resets `VmHWM` to the current RSS (Linux: `5` into `clear_refs`).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = ((p / 100.0 * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn round(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

async fn time_page(client: &reqwest::Client, url: &str, n: usize, expect: &str) -> Value {
    let mut ms = Vec::with_capacity(n);
    let mut bytes = 0usize;
    for _ in 0..n {
        let started = Instant::now();
        let r = client.get(url).send().await.expect("request");
        let status = r.status();
        let body = r.bytes().await.expect("body");
        ms.push(started.elapsed().as_secs_f64() * 1_000.0);
        assert!(status.is_success(), "{url}: {status}");
        assert!(
            body.windows(expect.len()).any(|w| w == expect.as_bytes()),
            "{url}: no {expect:?} in the page"
        );
        bytes = body.len();
    }
    ms.sort_by(f64::total_cmp);
    let p95 = percentile(&ms, 95.0);
    json!({
        "url": url, "n": n, "bytes": bytes,
        "p50_ms": round(percentile(&ms, 50.0)), "p95_ms": round(p95), "max_ms": round(ms[ms.len() - 1]),
        "p95_target_met": p95 <= TARGET_P95_MS,
    })
}

fn main() {
    // `cargo bench` passes `--bench`; a filter or `--list` from `cargo test --benches` is ignored.
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let hwm_start = status_mb("VmHWM");
    let (dir, synthetic, built_s) = store_dir();
    if let Some(secs) = built_s {
        // Building left this process's heap large (the report's JSON); serve from a fresh process instead, so
        // that the RSS figures are the server's.
        let status =
            std::process::Command::new(std::env::current_exe().expect("this bench's path"))
                .args(std::env::args_os().skip(1))
                .env("NMB_BENCH_BUILT_S", format!("{secs:.2}"))
                .status()
                .expect("rerun the bench");
        std::process::exit(status.code().unwrap_or(1));
    }
    let built_s: Option<f64> = std::env::var("NMB_BENCH_BUILT_S")
        .ok()
        .and_then(|v| v.parse().ok());
    let hwm_after_build = status_mb("VmHWM");
    let peak_reset = reset_peak();
    let rss_before_serving = status_mb("VmRSS");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let result = runtime.block_on(async {
        let store = Arc::new(Store::open_dir(&dir).expect("open the bench store"));
        let bound = nmb_serve::bind(&nmb_serve::ServeOptions {
            port: 0,
            ..nmb_serve::ServeOptions::default()
        })
        .await
        .expect("bind");
        let base = bound.url().trim_end_matches('/').to_string();
        tokio::spawn(bound.run(store));
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()
            .expect("a client");
        let run = format!("{base}/runs/{}", synthetic.run_id);
        let total_pages = (TASKS * SAMPLES as usize).div_ceil(50);
        // A warm-up request per page type is not counted separately: the first request is in the samples.
        let pages: Vec<(&str, String, &str)> = vec![
            ("runs_list", format!("{base}/"), "Bench Model"),
            ("run_first_page", run.clone(), "sample-link"),
            ("run_page_1000", format!("{run}?page=1000"), "sample-link"),
            (
                "run_last_page",
                format!("{run}?page={total_pages}"),
                "sample-link",
            ),
            (
                "run_errored",
                format!("{run}?status=errored"),
                "sample-link",
            ),
            (
                "run_text_search",
                format!("{run}?q={NEEDLE}"),
                "sample-link",
            ),
            // A common word: "low-grade glioma" is in three answers of eight.
            (
                "run_text_search_common",
                format!("{run}?q={COMMON_WORD}"),
                "sample-link",
            ),
            (
                "run_score_wrong",
                format!("{run}?score=wrong"),
                "sample-link",
            ),
            (
                "run_score_wrong_page_500",
                format!("{run}?score=wrong&page=500"),
                "sample-link",
            ),
            (
                "run_disease_group_category",
                format!("{run}?group=vascular&category=knowledge_gap"),
                "sample-link",
            ),
            (
                "case",
                format!("{run}/cases/{}", case_id(COMPARED)),
                "case-tasks",
            ),
            (
                "compare",
                format!(
                    "{base}/compare?a={}&b={}&case={}",
                    synthetic.run_id,
                    synthetic.second,
                    case_id(COMPARED)
                ),
                "data-side",
            ),
            (
                "sample",
                format!(
                    "{run}/samples/3?task={}",
                    task_id(12_345).replace('/', "%2F")
                ),
                "prompt as sent",
            ),
            (
                "image",
                format!("{base}/images/{}", synthetic.images[0]),
                "PNG",
            ),
        ];
        let mut out = serde_json::Map::new();
        for (name, url, expect) in &pages {
            out.insert(name.to_string(), time_page(&client, url, N, expect).await);
        }
        out
    });
    let hwm_serving = status_mb("VmHWM");
    let worst_p95 = result
        .values()
        .filter_map(|v| v["p95_ms"].as_f64())
        .fold(0.0, f64::max);
    let rss_ok = hwm_serving.is_some_and(|m| m <= TARGET_RSS_MB);
    let report = json!({
        "store": {
            "path": dir.display().to_string(), "version": STORE_VERSION, "tasks": TASKS,
            "samples": TASKS * SAMPLES as usize, "built_s": built_s.map(round),
            "db_mb": std::fs::metadata(dir.join(nmb_store::DB_FILE_NAME)).map(|m| round(m.len() as f64 / 1_048_576.0)).ok(),
        },
        "requests_per_page": N,
        "pages": result,
        "rss_mb": {
            "note": "server and client share this process; when the store was built, serving ran in a fresh process",
            "peak_at_start": hwm_start.map(round),
            "peak_after_build": hwm_after_build.map(round),
            "peak_reset": peak_reset,
            "rss_before_serving": rss_before_serving.map(round),
            "peak_while_serving": hwm_serving.map(round),
        },
        "targets": {
            "p95_ms": TARGET_P95_MS, "worst_p95_ms": round(worst_p95), "p95_met": worst_p95 <= TARGET_P95_MS,
            "rss_mb": TARGET_RSS_MB, "rss_met": rss_ok,
        }
    });
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
}
