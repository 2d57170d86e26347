//! Cost of the bootstrap routines at the sizes nmb uses, so the resample default can be judged against the
//! report's time budget. Prints one JSON object per line (wall and CPU milliseconds per call): `cargo bench -p nmb-stats --bench bootstrap`.

use std::hint::black_box;
use std::time::Instant;

use nmb_stats::{agreement, bootstrap_mean, paired_bootstrap, BootstrapConfig, Design, Measure};

fn time<F: FnMut()>(name: &str, repeats: u32, mut f: F) {
    f();
    let (start, cpu_start) = (Instant::now(), cpu_ns());
    for _ in 0..repeats {
        f();
    }
    let ms = start.elapsed().as_secs_f64() * 1e3 / f64::from(repeats);
    // The shared build machine is often oversubscribed, so wall time overstates the cost; CPU time does not.
    let cpu = match (cpu_start, cpu_ns()) {
        (Some(a), Some(b)) => format!("{:.3}", (b - a) as f64 / 1e6 / f64::from(repeats)),
        _ => "null".to_string(),
    };
    println!("{{\"bench\":\"{name}\",\"ms_per_call\":{ms:.3},\"cpu_ms_per_call\":{cpu},\"repeats\":{repeats}}}");
}

/// Nanoseconds this thread has run on a CPU (Linux `/proc/thread-self/schedstat`); `None` elsewhere.
fn cpu_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

fn main() {
    let cfg = BootstrapConfig::default();
    let flags = |n: usize, every: usize| {
        (0..n)
            .map(|i| f64::from(u8::from(i % every == 0)))
            .collect::<Vec<f64>>()
    };
    let (a, b) = (flags(200, 3), flags(200, 4));
    time("mean_200_items_10000_resamples", 20, || {
        black_box(bootstrap_mean(&a, &Design::units(200), &cfg).unwrap());
    });
    time("draws_only_200_items_10000_resamples", 20, || {
        black_box(
            nmb_stats::bootstrap(&Design::units(200), &cfg, |idx| Some(idx.len() as f64)).unwrap(),
        );
    });
    time("mean_1000_items_10000_resamples", 5, || {
        black_box(bootstrap_mean(&flags(1000, 3), &Design::units(1000), &cfg).unwrap());
    });
    let cases: Vec<usize> = (0..200).map(|t| t / 2).collect();
    let clusters = Design::clusters_by(&cases);
    time(
        "mean_200_tasks_100_cases_clustered_10000_resamples",
        20,
        || {
            black_box(bootstrap_mean(&a, &clusters, &cfg).unwrap());
        },
    );
    time("paired_200_items_10000_resamples", 20, || {
        black_box(paired_bootstrap(&a, &b, &Design::units(200), &cfg).unwrap());
    });
    let ratings: Vec<Vec<Option<f64>>> = (0..100)
        .map(|i| {
            vec![
                Some((i % 6) as f64),
                Some(((i + i / 7) % 6) as f64),
                Some(((i * 5) % 6) as f64),
            ]
        })
        .collect();
    let pair: Vec<Vec<Option<f64>>> = ratings.iter().map(|r| r[..2].to_vec()).collect();
    for measure in Measure::ALL {
        let items = if measure.is_pairwise() {
            &pair
        } else {
            &ratings
        };
        time(
            &format!("agreement_{measure:?}_100_items_10000_resamples"),
            // Enough calls that the scheduler's CPU-time ticks do not dominate a figure.
            15,
            || {
                black_box(agreement(measure, items, &cfg).unwrap());
            },
        );
    }
}
