//! Writing the report of a 200-task × 5-sample run (target: under 2 s). Builds the run in a temporary
//! store through the store's API (200 prompts sharing 40 distinct 512×512 images, one 5-choice call per task,
//! answers of about 700 characters), scores it with nmb-score's engine (rules only: no judge, rubric or
//! BERTScore, which do not change what the report has to write), then times, separately:
//! reading the run back with thumbnails (`load_run`) and writing HTML, Markdown, CSV, JSON and the leaderboard
//! (`write_report`, 10,000 bootstrap resamples for cross-run numbers). Prints one JSON object.
//!
//! Run: `cargo bench -p nmb-report --bench report`

use std::time::Instant;

use nmb_report::{load_run, write_report, ReportOptions};
use nmb_store::{CallRecord, ChoiceRecord, ImageInput, Manifest, Store};
use nmb_suite::{Case, Family, Level, Reference, Suite, Task};
use sha2::{Digest, Sha256};

const TASKS: usize = 200;
const SAMPLES: u32 = 5;
const IMAGES: usize = 40;

fn png(seed: usize) -> Vec<u8> {
    nmb_test_support::images::gray_png(512, 512, seed as u8)
}

fn suite() -> Suite {
    let diseases = [
        "Multiple sclerosis",
        "Glioblastoma",
        "Ischemic stroke",
        "Autoimmune encephalitis",
        "CJD",
    ];
    let families = [
        Family::Differential,
        Family::Lesion,
        Family::Rationale,
        Family::Differential,
    ];
    let levels = [Level::Direct, Level::Complex, Level::MultiTurn];
    let cases = (0..TASKS / 2)
        .map(|c| Case {
            id: format!("case_{c:03}"),
            language: Some("en".into()),
            images: Vec::new(),
            ehr: Vec::new(),
            notes: String::new(),
            metadata: Default::default(),
            tasks: (0..2)
                .map(|k| {
                    let i = c * 2 + k;
                    Task {
                        id: format!("case_{c:03}/t{k}"),
                        family: families[i % families.len()],
                        level: levels[c % levels.len()],
                        question: "What is the most likely diagnosis?".into(),
                        options: Vec::new(),
                        turns: Vec::new(),
                        reference: Some(Reference {
                            diagnosis: Some(diseases[c % diseases.len()].into()),
                            lesion_type: Some("demyelinating plaque".into()),
                            lesion_location: Some("periventricular white matter".into()),
                            rationale: Some("Because the findings fit.".into()),
                            ..Reference::default()
                        }),
                        metadata: Default::default(),
                    }
                })
                .collect(),
        })
        .collect();
    Suite {
        id: "bench".into(),
        version: "1".into(),
        description: "report benchmark".into(),
        format: "native".into(),
        defaults: Default::default(),
        cases,
        empty_cases: Vec::new(),
    }
}

fn answer(task: usize, sample: u32) -> String {
    let dx = [
        "Multiple sclerosis",
        "Glioblastoma",
        "Ischemic stroke",
        "Autoimmune encephalitis",
        "CJD",
    ];
    let first = dx[(task / 2 + sample as usize) % dx.len()];
    serde_json::json!({
        "differential": [
            {"rank": 1, "diagnosis": first, "evidence": "T2/FLAIR hyperintense lesions in a periventricular distribution with a typical history."},
            {"rank": 2, "diagnosis": dx[(task + 1) % dx.len()], "evidence": "Possible given the age and the course; less typical imaging."},
            {"rank": 3, "diagnosis": dx[(task + 2) % dx.len()], "evidence": "Considered; no restricted diffusion or enhancement pattern to support it."},
        ],
        "lesion_type": "demyelinating plaque",
        "location": "periventricular white matter",
        "rationale": "The combination of clinical course, examination and the imaging pattern makes the first diagnosis most likely; the others are kept for completeness <and escaped>."
    })
    .to_string()
}

fn build_store(dir: &std::path::Path, suite: &Suite) -> (Store, String) {
    let store = Store::open_dir(dir).unwrap();
    let manifest = Manifest {
        nmb_version: env!("CARGO_PKG_VERSION").into(),
        suite_id: suite.id.clone(),
        suite_hash: "benchsuite".into(),
        template_id: "per-family".into(),
        template_hash: "benchtemplate".into(),
        model: "openai:bench-model@http://127.0.0.1:9".into(),
        params: serde_json::json!({"temperature": 0.7, "top_p": 0.95}),
        input_mode: nmb_store::InputMode::Full,
        samples: SAMPLES,
        dropped_inputs: Vec::new(),
        ..Manifest::default()
    };
    let run = store.create_run("bench", &manifest).unwrap();
    let tasks: Vec<(&str, u32)> = suite
        .tasks()
        .map(|(_, t)| (t.id.as_str(), SAMPLES))
        .collect();
    store.plan_samples(&run.run_id, &tasks).unwrap();
    let images: Vec<(String, Vec<u8>)> = (0..IMAGES)
        .map(|i| {
            let b = png(i);
            (hex::encode(Sha256::digest(&b)), b)
        })
        .collect();
    for (i, (_, t)) in suite.tasks().enumerate() {
        let (sha_a, bytes_a) = &images[i % IMAGES];
        let (sha_b, bytes_b) = &images[(i + 7) % IMAGES];
        let body = serde_json::json!({"messages": [{"role": "user", "parts": [
            {"text": format!("Case {i}. A patient with a history of symptoms. {}", t.question)},
            {"image": sha_a, "mime": "image/png"}, {"image": sha_b, "mime": "image/png"}]}]});
        let prompt_hash = format!("prompt{i}");
        let inputs = [
            ImageInput {
                sha256: sha_a,
                mime: "image/png",
                bytes: bytes_a,
            },
            ImageInput {
                sha256: sha_b,
                mime: "image/png",
                bytes: bytes_b,
            },
        ];
        store
            .put_prompt(&prompt_hash, &body.to_string(), &inputs)
            .unwrap();
        let texts: Vec<String> = (0..SAMPLES).map(|s| answer(i, s)).collect();
        let call = CallRecord {
            tokens: Default::default(),
            run_id: &run.run_id,
            task_id: &t.id,
            turn_index: 0,
            prompt_hash: &prompt_hash,
            model: &manifest.model,
            params_json: "{}",
            template_id: "t",
            template_hash: "h",
            error: None,
            attempts: 1,
            raw: None,
            tokens_in: Some(1500),
            tokens_out: Some(900),
            latency_ms: Some(800 + i as u64),
            started_ms: 0,
            finished_ms: 800,
            batch_id: None,
        };
        let choices: Vec<ChoiceRecord> = texts
            .iter()
            .enumerate()
            .map(|(s, text)| ChoiceRecord {
                thinking: None,
                finish_reason: None,
                sample_index: s as u32,
                choice_index: s as u32,
                text: Some(text),
                error: None,
                final_turn: true,
            })
            .collect();
        store.record_call(&call, &choices).unwrap();
    }
    (store, run.run_id)
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    let suite = suite();
    let (store, run_id) = build_store(&dir.path().join("runs"), &suite);
    let store = std::sync::Arc::new(store);
    let opts = nmb_score::ScoreOptions {
        rubric: None,
        taxonomy: false,
        bertscore: nmb_score::BertScoreSetting::Off,
        ..nmb_score::ScoreOptions::default()
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let scheduler = nmb_requests::Scheduler::new(nmb_requests::SchedulerConfig::default());
    let scores = rt
        .block_on(nmb_score::score_loaded(
            &store, &scheduler, &run_id, &suite, &opts,
        ))
        .unwrap();

    let mut figures = Vec::new();
    for rep in 0..3 {
        let t0 = Instant::now();
        let data = load_run(&store, &run_id, Some(scores.clone())).unwrap();
        let load_s = t0.elapsed().as_secs_f64();
        let mut opts = ReportOptions::new(dir.path().join(format!("out{rep}")));
        opts.leaderboard = true;
        let t1 = Instant::now();
        let written = write_report(&[data], &opts).unwrap();
        let write_s = t1.elapsed().as_secs_f64();
        let bytes: u64 = written
            .all()
            .iter()
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        let html = std::fs::metadata(written.html.as_ref().unwrap())
            .unwrap()
            .len();
        figures.push((load_s, write_s, bytes, html));
    }
    let best = figures
        .iter()
        .min_by(|a, b| (a.0 + a.1).total_cmp(&(b.0 + b.1)))
        .unwrap();
    let total: Vec<f64> = figures.iter().map(|f| f.0 + f.1).collect();
    println!(
        "{}",
        serde_json::json!({
            "bench": "report_200x5",
            "tasks": TASKS,
            "samples_per_task": SAMPLES,
            "distinct_images": IMAGES,
            "formats": ["html", "md", "csv", "json", "leaderboard"],
            "load_run_s": best.0,
            "write_report_s": best.1,
            "total_s": best.0 + best.1,
            "total_s_each_rep": total,
            "html_bytes": best.3,
            "all_files_bytes": best.2,
            "target_s": 2.0,
            "cpus": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        })
    );
}
