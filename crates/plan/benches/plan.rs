//! Planning cost on the shape of the eval benchmark (`crates/cli/benches/eval.rs`): N tasks, each with the same
//! 3 PNG images of about 46 KB, one sample. Measures planning plus building each request's conversation and its
//! messages_hash. Prints one JSON object per scenario. Run: `cargo bench -p nmb-plan --bench plan [-- TASKS]`.
//! The `perturb` scenarios plan the bundled sample suite unperturbed and under five perturbations (each plan
//! with a fresh image cache, as a run has; best of ROUNDS), with each perturbed plan's time over the unperturbed
//! one's and the number of images each perturbation changed.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use nmb_imaging::ImageSource;
use nmb_plan::{messages_hash, plan, ImageCache, Plan, PlanOptions};
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

/// Seconds to plan `suite` once (best of `rounds`), and the images the perturbation changed in that plan.
fn plan_seconds(suite: &Suite, options: &PlanOptions, rounds: usize) -> (f64, u64) {
    let mut best = f64::INFINITY;
    let mut changed = 0;
    for _ in 0..rounds {
        let cache = Arc::new(ImageCache::default());
        let start = Instant::now();
        for item in Plan::new(suite, options, cache.clone()).expect("plan") {
            let task = item.expect("task");
            let answers = vec!["An answer.".to_string(); task.turn_count()];
            for turn in 0..task.turn_count() {
                let conv = task.conversation(turn, &answers[..turn]).expect("turn");
                std::hint::black_box(messages_hash(&conv));
            }
        }
        best = best.min(start.elapsed().as_secs_f64());
        changed = cache.perturbed_count();
    }
    (best, changed)
}

fn perturbations() {
    const ROUNDS: usize = 10;
    let suite = nmb_suite::sample::build();
    let images: std::collections::BTreeSet<String> = suite
        .cases
        .iter()
        .flat_map(|c| {
            c.images.iter().chain(
                c.tasks
                    .iter()
                    .flat_map(|t| t.turns.iter().flat_map(|u| &u.images)),
            )
        })
        .filter_map(|i| i.source.read().ok().map(|b| nmb_imaging::content_hash(&b)))
        .collect();
    let options = PlanOptions {
        samples: Some(1),
        ..PlanOptions::default()
    };
    let (base, _) = plan_seconds(&suite, &options, ROUNDS);
    println!(
        "{{\"scenario\":\"perturb_none\",\"seconds\":{base:.5},\"distinct_images\":{}}}",
        images.len()
    );
    let mut total = 0.0;
    for p in ["mismatch", "blank", "noise:0.2", "blur:1.5", "jpeg:50"] {
        let options = PlanOptions {
            perturbation: Some(p.parse().expect("perturbation")),
            ..options.clone()
        };
        let (secs, changed) = plan_seconds(&suite, &options, ROUNDS);
        total += secs;
        println!(
            "{{\"scenario\":\"perturb\",\"perturbation\":\"{p}\",\"seconds\":{secs:.5},\"ratio\":{:.2},\
             \"images_changed\":{changed}}}",
            secs / base
        );
    }
    println!(
        "{{\"scenario\":\"perturb_five\",\"seconds\":{total:.5},\"ratio_to_five_unperturbed\":{:.2},\
         \"set_ratio_to_one_unperturbed\":{:.2}}}",
        total / (5.0 * base),
        (base + total) / base
    );
}

fn main() {
    if std::env::args().any(|a| a == "perturb") {
        perturbations();
        return;
    }
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
