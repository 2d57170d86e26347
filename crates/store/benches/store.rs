//! Store benchmark (not a test): the eval benchmark's workload (`crates/cli/benches/eval.rs`) seen from the store.
//!
//! Each sample: a response-cache lookup (miss), storing the rendered prompt with 3 shared ~46 KB PNG images, and
//! recording the call with a ~600 B raw body, each write committed on its own. Prints one JSON object: writes
//! per second and the bytes the database file grows per sample once the shared images are in.
//!
//! `cargo bench -p nmb-store --bench store [-- SAMPLES]` (default 1000).

use std::time::Instant;

use nmb_store::{cache_key, CallRecord, ChoiceRecord, ImageInput, Store};
use serde_json::json;
use sha2::{Digest, Sha256};

const MODEL: &str = "openai:bench-model@http://127.0.0.1:8080";
const PARAMS: &str = r#"{"max_tokens":1024,"temperature":0.7,"top_p":0.95}"#;
const TEMPLATE_HASH: &str = "5f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
const SAMPLES_PER_TASK: u32 = 5;

fn main() {
    let samples: u32 = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let dir = tempfile::tempdir().expect("temp dir");
    let shared = run_workload(&dir.path().join("shared"), samples, SAMPLES_PER_TASK);
    let distinct = run_workload(&dir.path().join("distinct"), samples, 1);
    let report = json!({
        "bench": "nmb-store",
        "samples": samples,
        "image_bytes_each": IMAGE_BYTES,
        "images_per_prompt": 3,
        "raw_body_bytes": raw_body(0, 0).len(),
        "prompt_body_bytes": prompt_body(0, &[]).len(),
        "five_samples_per_prompt": shared,
        "one_sample_per_prompt": distinct,
        "budget_bytes_per_sample": 3072,
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
}

const IMAGE_BYTES: usize = 46_000;

fn run_workload(dir: &std::path::Path, samples: u32, per_task: u32) -> serde_json::Value {
    let store = Store::open_dir(dir).expect("open store");
    let run = store
        .create_run(
            "bench",
            &nmb_store::Manifest {
                model: MODEL.into(),
                ..Default::default()
            },
        )
        .expect("create run");
    let images: Vec<Vec<u8>> = (0..3).map(|i| fake_png(i, IMAGE_BYTES)).collect();
    let hashes: Vec<String> = images
        .iter()
        .map(|b| hex::encode(Sha256::digest(b)))
        .collect();
    let inputs: Vec<ImageInput<'_>> = images
        .iter()
        .zip(&hashes)
        .map(|(b, h)| ImageInput {
            sha256: h,
            mime: "image/png",
            bytes: b,
        })
        .collect();
    // The images go in before the baseline: they are a one-off cost, not a per-sample one.
    for image in &inputs {
        store.put_image(image).expect("put image");
    }
    let tasks: Vec<(String, u32)> = (0..samples.div_ceil(per_task))
        .map(|t| (format!("case-{t:04}/ddx"), per_task))
        .collect();
    let plan: Vec<(&str, u32)> = tasks.iter().map(|(t, n)| (t.as_str(), *n)).collect();
    store.plan_samples(&run.run_id, &plan).expect("plan");
    let base = file_bytes(&store);

    let start = Instant::now();
    let cpu_start = cpu_secs();
    let (mut lookup_secs, mut prompt_secs, mut record_secs) = (0.0, 0.0, 0.0);
    let (mut lookup_cpu, mut prompt_cpu, mut record_cpu) = (0.0, 0.0, 0.0);
    for i in 0..samples {
        let task = &tasks[(i / per_task) as usize].0;
        let sample = i % per_task;
        let body = prompt_body(i / per_task, &hashes);
        let prompt_hash = hex::encode(Sha256::digest(body.as_bytes()));
        let key = cache_key(MODEL, PARAMS, &prompt_hash, sample);
        let (t, c) = (Instant::now(), cpu_secs());
        assert!(store.lookup_cache(&key).expect("lookup").is_none());
        lookup_secs += t.elapsed().as_secs_f64();
        lookup_cpu += cpu_secs() - c;
        let (t, c) = (Instant::now(), cpu_secs());
        store
            .put_prompt(&prompt_hash, &body, &inputs)
            .expect("put prompt");
        prompt_secs += t.elapsed().as_secs_f64();
        prompt_cpu += cpu_secs() - c;
        let raw = raw_body(i, sample);
        let text = answer(i);
        let call = CallRecord {
            tokens: Default::default(),
            run_id: &run.run_id,
            task_id: task,
            turn_index: 0,
            prompt_hash: &prompt_hash,
            model: MODEL,
            params_json: PARAMS,
            template_id: "depth-v1",
            template_hash: TEMPLATE_HASH,
            error: None,
            attempts: 1,
            raw: Some(&raw),
            tokens_in: Some(2400),
            tokens_out: Some(96),
            latency_ms: Some(3),
            started_ms: 1_700_000_000_000 + i as i64,
            finished_ms: 1_700_000_000_003 + i as i64,
            batch_id: None,
        };
        let choice = ChoiceRecord {
            thinking: None,
            finish_reason: None,
            sample_index: sample,
            choice_index: 0,
            text: Some(&text),
            error: None,
            final_turn: true,
        };
        let (t, c) = (Instant::now(), cpu_secs());
        store.record_call(&call, &[choice]).expect("record call");
        record_secs += t.elapsed().as_secs_f64();
        record_cpu += cpu_secs() - c;
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu = cpu_secs() - cpu_start;

    let t = Instant::now();
    let summary = store.summary(&run.run_id).expect("summary");
    let summary_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let states = store.sample_states(&run.run_id).expect("states");
    let states_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let rows = store.run_samples(&run.run_id).expect("samples");
    let samples_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(summary.samples_ok, u64::from(samples));
    assert_eq!(states.len(), samples as usize);
    assert_eq!(rows.len(), samples as usize);

    let after = file_bytes(&store);
    let tables = table_bytes(&store, samples);
    json!({
        "samples_per_prompt": per_task,
        "samples_per_s": f64::from(samples) / secs,
        "record_call_per_s": f64::from(samples) / record_secs,
        "wall_us_per_sample": secs * 1e6 / f64::from(samples),
        "cpu_us_per_sample": cpu * 1e6 / f64::from(samples),
        "wall_us_per_sample_lookup_cache": lookup_secs * 1e6 / f64::from(samples),
        "wall_us_per_sample_put_prompt": prompt_secs * 1e6 / f64::from(samples),
        "wall_us_per_sample_record_call": record_secs * 1e6 / f64::from(samples),
        "cpu_us_per_sample_lookup_cache": lookup_cpu * 1e6 / f64::from(samples),
        "cpu_us_per_sample_put_prompt": prompt_cpu * 1e6 / f64::from(samples),
        "cpu_us_per_sample_record_call": record_cpu * 1e6 / f64::from(samples),
        "db_bytes_with_images_only": base,
        "db_bytes_final": after,
        "db_bytes_per_sample": (after - base) as f64 / f64::from(samples),
        "images_rows": store.image_count().expect("count"),
        "prompt_rows": store.prompt_count().expect("count"),
        "summary_ms": summary_ms,
        "sample_states_ms": states_ms,
        "run_samples_ms": samples_ms,
        "bytes_per_sample_by_table": tables,
    })
}

/// Pages each table and index occupies (SQLite's dbstat), per sample; images excluded.
fn table_bytes(store: &Store, samples: u32) -> serde_json::Value {
    let rows: Vec<(String, i64)> = store
        .with_conn("dbstat", |c| {
            let mut stmt =
                c.prepare("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC")?;
            let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
            rows.collect()
        })
        .unwrap_or_default();
    let map: serde_json::Map<String, serde_json::Value> = rows
        .into_iter()
        .filter(|(name, _)| name != "images")
        .map(|(name, bytes)| (name, json!(bytes as f64 / f64::from(samples))))
        .collect();
    serde_json::Value::Object(map)
}

/// CPU seconds this thread has run (the kernel's schedstat, in nanoseconds); 0 where there is no /proc.
/// The workload is single-threaded: SQLite runs in the calling thread.
fn cpu_secs() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok())
        .map(|ns| ns / 1e9)
        .unwrap_or(0.0)
}

fn file_bytes(store: &Store) -> u64 {
    store.checkpoint().expect("checkpoint");
    std::fs::metadata(store.path())
        .map(|m| m.len())
        .unwrap_or(0)
}

/// A rendered depth prompt: role line, EHR block, notes, three image references and the question (~1.4 KB).
fn prompt_body(task: u32, hashes: &[String]) -> String {
    let images: Vec<String> = hashes
        .iter()
        .map(|h| {
            format!(
                r#"{{"image":{{"sha256":"{h}","mime":"image/png"}}}},{{"text":"Axial T2 FLAIR"}}"#
            )
        })
        .collect();
    format!(
        r#"[{{"role":"system","parts":[{{"text":"You are an experienced neurology expert."}}]}},{{"role":"user","parts":[{{"text":"EHR (case {task}):\nAge: 67\nSex: F\nChief complaint: progressive gait disturbance and memory decline over 18 months.\nHistory: hypertension, type 2 diabetes. No family history of dementia.\nExam: broad-based gait, mild bradykinesia, MoCA 21/30.\nLabs: B12 normal, TSH normal, RPR negative."}},{{"text":"Clinical notes: urinary urgency began 6 months ago; symptoms fluctuate little; no hallucinations; sleep normal. Neuropsychology shows executive dysfunction more than amnestic deficit."}},{}, {{"text":"Question: give a ranked differential diagnosis of up to 5 diagnoses with supporting evidence. Answer as JSON: {{\"differential\": [{{\"diagnosis\": str, \"evidence\": str}}], \"lesion\": str, \"rationale\": str}}."}}]}}]"#,
        images.join(",")
    )
}

fn answer(i: u32) -> String {
    format!(
        r#"{{"differential":[{{"diagnosis":"normal pressure hydrocephalus","evidence":"gait, urinary urgency, ventriculomegaly"}},{{"diagnosis":"subcortical ischemic vascular dementia","evidence":"vascular risk factors"}}],"lesion":"enlarged ventricles","rationale":"triad #{i}"}}"#
    )
}

/// An OpenAI chat-completions body of about 600 B around the answer.
fn raw_body(i: u32, sample: u32) -> String {
    let content = serde_json::to_string(&answer(i)).unwrap_or_default();
    format!(
        r#"{{"id":"chatcmpl-{i:08}-{sample}","object":"chat.completion","created":1700000000,"model":"bench-model","choices":[{{"index":0,"message":{{"role":"assistant","content":{content}}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":2400,"completion_tokens":96,"total_tokens":2496}}}}"#
    )
}

/// Incompressible bytes behind a PNG signature.
fn fake_png(seed: u64, len: usize) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}
