//! Planning cost on the shape of the eval benchmark (`crates/cli/benches/eval.rs`): N tasks, each with the same
//! 3 PNG images of about 46 KB, one sample. Measures planning plus building each request's conversation and its
//! messages_hash. Prints one JSON object per scenario. Run: `cargo bench -p nmb-plan --bench plan [-- TASKS]`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use nmb_imaging::ImageSource;
use nmb_plan::{messages_hash, plan, PlanOptions};
use nmb_suite::{Case, Family, Image, Level, Suite, Task};

fn noise_png(seed: u32) -> Vec<u8> {
    nmb_test_support::images::noise_png(124, u64::from(seed))
}

fn suite(tasks: usize, images: &[ImageSource]) -> Suite {
    let cases = (0..tasks)
        .map(|i| Case {
            id: format!("case_{i}"),
            language: Some("en".into()),
            images: images
                .iter()
                .enumerate()
                .map(|(k, s)| Image::new(format!("img{k}"), s.clone()))
                .collect(),
            ehr: vec![("Age".into(), "70".into()), ("Sex".into(), "male".into())],
            notes: "Progressive gait disturbance and urinary incontinence over two years.".into(),
            metadata: BTreeMap::new(),
            tasks: vec![Task {
                id: format!("case_{i}/dx"),
                family: Family::Differential,
                level: Level::Direct,
                question: "What is the most likely diagnosis?".into(),
                options: Vec::new(),
                turns: Vec::new(),
                reference: None,
                metadata: BTreeMap::new(),
            }],
        })
        .collect();
    Suite {
        id: "bench".into(),
        version: "1".into(),
        description: String::new(),
        format: "bench".into(),
        defaults: BTreeMap::new(),
        cases,
        empty_cases: Vec::new(),
    }
}

fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn run(name: &str, suite: &Suite, image_bytes: usize) {
    let options = PlanOptions {
        samples: Some(1),
        ..PlanOptions::default()
    };
    let start = Instant::now();
    let mut requests = 0u64;
    let mut hash_bytes = 0usize;
    for item in plan(suite, &options) {
        let task = item.expect("plan");
        for turn in 0..task.turn_count() {
            let conv = task.conversation(turn, &[]).expect("conversation");
            hash_bytes += messages_hash(&conv).len();
            requests += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{{\"scenario\":\"{name}\",\"requests\":{requests},\"seconds\":{secs:.4},\"us_per_request\":{:.1},\
         \"requests_per_s\":{:.0},\"image_bytes\":{image_bytes},\"peak_rss_kb\":{},\"check\":{hash_bytes}}}",
        secs * 1e6 / requests as f64,
        requests as f64 / secs,
        peak_rss_kb().map_or("null".into(), |k| k.to_string()),
    );
}

fn main() {
    let tasks: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(1000);
    let pngs: Vec<Vec<u8>> = (1..=3).map(noise_png).collect();
    let image_bytes = pngs[0].len();

    let inline: Vec<ImageSource> = pngs
        .iter()
        .map(|b| ImageSource::Bytes(Arc::from(b.as_slice())))
        .collect();
    run("inline_images", &suite(tasks, &inline), image_bytes);

    let dir = std::env::temp_dir().join(format!("nmb-plan-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let files: Vec<ImageSource> = pngs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let p = dir.join(format!("img{i}.png"));
            std::fs::write(&p, b).expect("write png");
            ImageSource::File(p)
        })
        .collect();
    run("file_images", &suite(tasks, &files), image_bytes);
    let _ = std::fs::remove_dir_all(&dir);
}
