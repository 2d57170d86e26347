//! Encoding time of one image by a vision projector (an `mmproj` GGUF), printed as one JSON object on the last
//! line: `{"encode_s": MEDIAN, "runs": N, "threads": T, "tokens": TOKENS}`.
//!
//! Run: `NMB_BENCH_MMPROJ=FILE cargo bench --profile dev -p nmb-local --bench image` (or `scripts/bench-local.sh`
//! with `NMB_BENCH_MMPROJ` set, which runs llama.cpp's `mtmd` on the same file beside it). Env: `NMB_THREADS`
//! (default: every core), `NMB_BENCH_RUNS` (default 3). The image is noise of the projector's own size, so no
//! resize is timed.

use std::path::PathBuf;
use std::time::Instant;

use nmb_local::{Projector, RgbImage};
use serde_json::json;

fn main() {
    let Some(path) = std::env::var_os("NMB_BENCH_MMPROJ").map(PathBuf::from) else {
        eprintln!("image bench: set NMB_BENCH_MMPROJ to a projector GGUF (scripts/tiny-gguf.py --projector)");
        return;
    };
    let runs: usize = std::env::var("NMB_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let threads = std::env::var("NMB_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool");
    let p = Projector::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let side = p.image_size();
    let mut s = 1u64;
    let pixels = (0..side * side * 3)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 56) as u8
        })
        .collect();
    let img = RgbImage::new(side, side, pixels).expect("an image");
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let e = pool.install(|| p.encode(&img));
        times.push(t.elapsed().as_secs_f64());
        assert_eq!(e.len(), p.tokens_per_image() * p.output_width());
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{}",
        json!({"encode_s": times[times.len() / 2], "runs": runs, "threads": threads, "tokens": p.tokens_per_image()})
    );
}
