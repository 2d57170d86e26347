//! End-to-end evaluation benchmark (not a test): the real `nmb eval` binary, as a user runs it, on 1,000
//! single-sample tasks that share 3 PNG images of ~46 KB each, against a zero-latency loopback fake server in a
//! separate process. Prints one JSON object.
//!
//! The run is not scored (`--no-score`): this measures asking and storing; scoring adds its own store rows
//! (the score report) and CPU, and is measured apart.
//!
//! Measured: requests per second (whole process, from spawn to exit: suite loading, planning, sending and
//! storing), CPU time per request and peak memory of the nmb process alone (wait4 rusage; the server is
//! another process whose CPU is reported apart), bytes the store grows per sample (after a WAL checkpoint),
//! and a resume of the finished run (requests sent must be 0).
//!
//! `cargo bench -p nmb --bench eval [-- --tasks N --concurrency N --wire openai|anthropic|gemini]`

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use nmb_fake_server::support::{proc_cpu, proc_status_kb, spawn_child_server, wait_with_usage};
use serde_json::{json, Value};

mod common;

use common::{load_average, round, write_suite};

struct Opts {
    tasks: usize,
    concurrency: usize,
    wire: String,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    nmb_fake_server::support::serve_if_child(&args);
    let opts = parse(&args);
    // NMB_BENCH_DIR keeps the suite and the store for a look afterwards.
    let dir = match std::env::var_os("NMB_BENCH_DIR") {
        Some(d) => tempfile::Builder::new()
            .disable_cleanup(true)
            .tempdir_in(d)
            .expect("bench dir"),
        None => tempfile::tempdir().expect("temp dir"),
    };
    let image_bytes = write_suite(dir.path(), opts.tasks);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let (mut server, port) =
        spawn_child_server(&["--threads", &threads.to_string(), "--no-image-hash"])
            .expect("spawn fake server");
    let model = match opts.wire.as_str() {
        "anthropic" => format!("anthropic:bench-model@http://127.0.0.1:{port}"),
        "gemini" => format!("gemini:bench-model@http://127.0.0.1:{port}"),
        _ => format!("openai:bench-model@http://127.0.0.1:{port}/v1"),
    };
    let runs = dir.path().join("runs");
    init_store(&runs);
    let base_bytes = store_bytes(&runs);

    let srv0 = proc_cpu(server.id());
    let run = eval(&runs, dir.path(), &model, &opts, None);
    let server_cpu = proc_cpu(server.id()) - srv0;
    let result = &run.json;
    let run_id = result["run_id"].as_str().expect("run id").to_string();
    let summary = &result["summary"];
    let requests = summary["requests_sent"].as_u64().unwrap_or(0);
    let after_bytes = store_bytes(&runs);
    let images = image_count(&runs);

    let resume = eval(&runs, dir.path(), &model, &opts, Some(&run_id));
    let server_peak_mb = proc_status_kb(server.id(), "VmHWM").unwrap_or(0) as f64 / 1024.0;
    let _ = server.kill();
    let _ = server.wait();

    let n = opts.tasks as f64;
    let grown = after_bytes.saturating_sub(base_bytes) as f64;
    let report = json!({
        "benchmark": "eval_end_to_end",
        "workload": {
            "tasks": opts.tasks,
            "samples_per_task": 1,
            "images_per_request": 3,
            "image_bytes": image_bytes,
            "images_shared_by_all_tasks": true,
            "wire": opts.wire,
            "concurrency": opts.concurrency,
            "server_latency_ms": 0,
            "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
            "load_average": load_average(),
        },
        "run": {
            "requests_sent": requests,
            "samples_ok": summary["samples_ok"],
            "samples_errored": summary["samples_errored"],
            "wall_s": round(run.wall_s, 3),
            "requests_per_s": round(requests as f64 / run.wall_s, 1),
            "eval_loop_s": round(result["invocation"]["elapsed_s"].as_f64().unwrap_or(0.0), 3),
            "cpu_ms_per_request": round(run.cpu_s * 1000.0 / n, 3),
            "cpu_user_s": round(run.user_s, 3),
            "cpu_system_s": round(run.system_s, 3),
            "peak_rss_mb": round(run.max_rss_kb as f64 / 1024.0, 1),
            "server_cpu_ms_per_request": round(server_cpu.as_secs_f64() * 1000.0 / n, 3),
        },
        "store": {
            "bytes_before": base_bytes,
            "bytes_after": after_bytes,
            "bytes_per_sample": round(grown / n, 1),
            "bytes_per_sample_without_images": round((grown - 3.0 * image_bytes as f64) / n, 1),
            "images_stored": images,
        },
        "resume": {
            "requests_sent": resume.json["invocation"]["requests"],
            "wall_s": round(resume.wall_s, 3),
            "cpu_s": round(resume.cpu_s, 3),
            "peak_rss_mb": round(resume.max_rss_kb as f64 / 1024.0, 1),
        },
        "server_peak_rss_mb": round(server_peak_mb, 1),
        "targets": {
            "requests_per_s": ">= 700",
            "cpu_ms_per_request": "<= 1.5",
            "peak_rss_mb": "<= 90",
            "store_bytes_per_sample": "<= 3072",
            "resume_s": "< 1 with 0 requests",
        },
    });
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
}

fn parse(args: &[String]) -> Opts {
    let mut o = Opts {
        tasks: 1000,
        concurrency: 64,
        wire: "openai".into(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--tasks" => o.tasks = it.next().and_then(|v| v.parse().ok()).unwrap_or(o.tasks),
            "--concurrency" => {
                o.concurrency = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(o.concurrency)
            }
            "--wire" => o.wire = it.next().cloned().unwrap_or(o.wire),
            _ => {} // cargo passes --bench
        }
    }
    o
}

struct Measured {
    json: Value,
    wall_s: f64,
    cpu_s: f64,
    user_s: f64,
    system_s: f64,
    max_rss_kb: u64,
}

fn eval(runs: &Path, dir: &Path, model: &str, opts: &Opts, resume: Option<&str>) -> Measured {
    let suite = format!("native:{}", dir.join("suite").display());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nmb"));
    cmd.arg("--runs-dir").arg(runs);
    cmd.args([
        "eval",
        "--suite",
        &suite,
        "--model",
        model,
        "--samples",
        "1",
        "--no-score",
    ]);
    cmd.args([
        "--concurrency",
        &opts.concurrency.to_string(),
        "--json",
        "-q",
    ]);
    if let Some(id) = resume {
        cmd.args(["--resume", id]);
    }
    let out_path = dir.join("eval-stdout.json");
    let out = std::fs::File::create(&out_path).expect("stdout file");
    cmd.stdout(out).stderr(Stdio::inherit());
    for var in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "NMB_LOG",
    ] {
        cmd.env_remove(var);
    }
    let started = Instant::now();
    let mut child = cmd.spawn().expect("nmb starts");
    let usage = wait_with_usage(&mut child).expect("wait4");
    let wall_s = started.elapsed().as_secs_f64();
    assert!(
        usage.status.success(),
        "nmb eval failed: {:?}",
        usage.status
    );
    let text = std::fs::read_to_string(&out_path).expect("stdout");
    let json: Value = serde_json::from_str(text.trim()).expect("nmb printed JSON");
    Measured {
        json,
        wall_s,
        cpu_s: usage.cpu.as_secs_f64(),
        user_s: usage.user.as_secs_f64(),
        system_s: usage.system.as_secs_f64(),
        max_rss_kb: usage.max_rss_kb,
    }
}

fn init_store(runs: &Path) {
    let store = nmb_store::Store::open_dir(runs).expect("store");
    store.checkpoint().expect("checkpoint");
}

/// The database file's size after copying the WAL into it.
fn store_bytes(runs: &Path) -> u64 {
    let store = nmb_store::Store::open_dir(runs).expect("store");
    store.checkpoint().expect("checkpoint");
    let db: PathBuf = store.path().to_path_buf();
    drop(store);
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    size(&db) + size(&PathBuf::from(format!("{}-wal", db.display())))
}

fn image_count(runs: &Path) -> u64 {
    nmb_store::Store::open_dir(runs)
        .and_then(|s| s.image_count())
        .unwrap_or(0)
}
