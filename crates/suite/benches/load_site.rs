//! Benchmark (not a test): load time and peak memory for a generated Neural-MedBench site file of about 10 MB.
//!
//! Run in release: `cargo bench -p nmb-suite --bench load_site` (size: `NMB_BENCH_SITE_MB`, default 10).
//! The file mimics the real one: 80 slots, cases 1 to 15 with text and base64 PNG montages labelled
//! `image/jpeg`, cases 16 to 80 empty placeholders. Prints one JSON line:
//! `{file_bytes, load_ms, peak_rss_kb, rss_before_kb, peak_rss_reset, cases, empty_cases, images}`.
//! `peak_rss_kb` is VmHWM from /proc/self/status, reset after generating the file (via /proc/self/clear_refs)
//! so it covers loading only; `peak_rss_reset` says whether that reset worked.

use std::path::Path;
use std::time::Instant;

use base64::Engine;
use serde_json::{json, Value};

const SLOTS: usize = 80;
const CASES_WITH_CONTENT: usize = 15;
const SLICES: u32 = 4;
const SLICE: (u32, u32) = (160, 192);

fn main() {
    let mb: f64 = std::env::var("NMB_BENCH_SITE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10.0);
    let dir = tempfile::tempdir().expect("creating a temp dir");
    let path = dir.path().join("direct-diagnosis.json");
    generate(&path, (mb * 1_000_000.0) as usize);
    let file_bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);

    let peak_rss_reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let rss_before_kb = status_kb("VmRSS");
    let start = Instant::now();
    let loaded = nmb_suite::load(&format!("site:{}", path.display()), &Default::default());
    let load_ms = start.elapsed().as_secs_f64() * 1000.0;
    let peak_rss_kb = status_kb("VmHWM");

    let loaded = loaded.expect("the generated file loads");
    let images: usize = loaded.suite.cases.iter().map(|c| c.images.len()).sum();
    let line = json!({
        "bench": "load_site",
        "file_bytes": file_bytes,
        "load_ms": (load_ms * 100.0).round() / 100.0,
        "peak_rss_kb": peak_rss_kb,
        "rss_before_kb": rss_before_kb,
        "peak_rss_reset": peak_rss_reset,
        "cases": loaded.suite.cases.len(),
        "empty_cases": loaded.suite.empty_cases.len(),
        "images": images,
        "problems": loaded.problems.len(),
    });
    println!("{line}");
}

/// Writes the site file, adding montages round-robin to the content cases until it reaches `target` bytes.
fn generate(path: &Path, target: usize) {
    let mut images: Vec<Vec<String>> = vec![Vec::new(); CASES_WITH_CONTENT];
    let mut total = 0;
    let mut seed = 1u64;
    while total < target {
        let url = format!(
            "data:image/jpeg;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(montage(seed))
        );
        total += url.len();
        images[(seed as usize - 1) % CASES_WITH_CONTENT].push(url);
        seed += 1;
    }
    let cases: Vec<Value> = (0..SLOTS)
        .map(|i| slot(i, images.get_mut(i).map(std::mem::take)))
        .collect();
    let bytes = serde_json::to_vec(&cases).expect("serialising the site file");
    std::fs::write(path, bytes).expect("writing the site file");
}

fn slot(i: usize, images: Option<Vec<String>>) -> Value {
    let id = format!("case_{}", i + 1);
    let images = images.unwrap_or_default();
    let text = if images.is_empty() {
        String::new()
    } else {
        format!(
            "A {}-year-old patient with subacute neurological deficits. Synthetic case {id}.",
            30 + i
        )
    };
    json!({"case_id": id, "text": text, "images": images,
           "questions": [{"question_number": i + 1, "question_text": "根据患者的症状和图片,对疾病进行诊断"}]})
}

/// An RGBA strip of MRI-like slices: an elliptical "brain" with noisy texture and a bright lesion.
fn montage(seed: u64) -> Vec<u8> {
    let (w, h) = SLICE;
    let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let img = image::RgbaImage::from_fn(w * SLICES, h, |x, y| {
        let (sx, sy) = ((x % w) as f64 - w as f64 / 2.0, y as f64 - h as f64 / 2.0);
        let r = (sx / (w as f64 * 0.42)).powi(2) + (sy / (h as f64 * 0.45)).powi(2);
        let lesion = ((sx - 20.0).powi(2) + (sy + 15.0).powi(2)) < 150.0 + (x / w) as f64 * 40.0;
        let base = if r > 1.0 {
            0.0
        } else if lesion {
            220.0
        } else {
            110.0 + 40.0 * (1.0 - r)
        };
        let v = (base + noise(&mut rng) * 24.0).clamp(0.0, 255.0) as u8;
        image::Rgba([v, v, v, 255])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, image::ImageFormat::Png)
        .expect("encoding a PNG");
    out.into_inner()
}

/// xorshift64 in [-0.5, 0.5): deterministic texture without a rand dependency.
fn noise(state: &mut u64) -> f64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    (*state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
}

fn status_kb(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
