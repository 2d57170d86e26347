//! Throughput benchmark (not a test): 1,000 requests per wire, each with 3 distinct ~46 KB PNG images, at
//! concurrency 64, against a zero-latency loopback fake server running in a child process (so its CPU is
//! measured apart from the client's). Prints one JSON object.
//!
//! `cargo bench -p nmb-requests --bench throughput [-- --requests N --concurrency N --wire openai|anthropic|gemini|all]`

use std::sync::Arc;
use std::time::Instant;

use nmb_chat::{GenParams, ImagePart, Message, Part, Role};
use nmb_fake_server::support::{
    noise_png, peak_rss_kb, proc_cpu, proc_status_kb, self_cpu, spawn_child_server, with_text_chunk,
};
use nmb_requests::{
    connect, BackendKind, BackendOptions, ChatRequest, HttpOptions, ModelSpec, Scheduler,
    SchedulerConfig, Transport,
};
use sha2::{Digest, Sha256};

const IMAGE_SIDE: u32 = 124; // 124 * 124 * 3 bytes of noise: a ~46 KB PNG

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    nmb_fake_server::support::serve_if_child(&args);
    let opts = Opts::parse(&args);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime");
    let (mut child, port) =
        spawn_child_server(&["--threads", &threads.to_string()]).expect("spawn fake server");
    let results: Vec<_> = rt.block_on(async {
        let mut out = Vec::new();
        for kind in &opts.wires {
            out.push(run_wire(*kind, port, child.id(), &opts).await);
        }
        out
    });
    let server_peak = proc_status_kb(child.id(), "VmHWM").unwrap_or(0) as f64 / 1024.0;
    let _ = child.kill();
    let _ = child.wait();
    let report = serde_json::json!({
        "benchmark": "requests_throughput",
        "workload": {
            "requests_per_wire": opts.requests,
            "images_per_request": 3,
            "image_bytes": base_images()[0].len(),
            "distinct_images_per_task": true,
            "concurrency": opts.concurrency,
            "server_latency_ms": 0,
            "client_threads": threads,
        },
        "results": results,
        "peak_rss_mb": round2(peak_rss_kb() as f64 / 1024.0),
        "server_peak_rss_mb": round2(server_peak),
    });
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
}

struct Opts {
    requests: usize,
    concurrency: usize,
    wires: Vec<BackendKind>,
}

impl Opts {
    fn parse(args: &[String]) -> Opts {
        let mut o = Opts {
            requests: 1000,
            concurrency: 64,
            wires: vec![
                BackendKind::OpenAi,
                BackendKind::Anthropic,
                BackendKind::Gemini,
            ],
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--requests" => {
                    o.requests = it.next().and_then(|v| v.parse().ok()).unwrap_or(o.requests)
                }
                "--concurrency" => {
                    o.concurrency = it
                        .next()
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(o.concurrency)
                }
                "--wire" => {
                    o.wires = match it.next().map(String::as_str) {
                        Some("openai") => vec![BackendKind::OpenAi],
                        Some("anthropic") => vec![BackendKind::Anthropic],
                        Some("gemini") => vec![BackendKind::Gemini],
                        _ => o.wires,
                    }
                }
                _ => {} // cargo passes --bench
            }
        }
        o
    }
}

async fn run_wire(kind: BackendKind, port: u16, server_pid: u32, opts: &Opts) -> serde_json::Value {
    let base = match kind {
        BackendKind::OpenAi => format!("http://127.0.0.1:{port}/v1"),
        _ => format!("http://127.0.0.1:{port}"),
    };
    let spec = ModelSpec::parse(&format!("{kind}:bench-model@{base}")).expect("spec");
    let transport = Transport::new(&HttpOptions::default()).expect("transport");
    let backend = connect(&spec, &transport, &BackendOptions::default()).expect("backend");
    let scheduler = Scheduler::new(SchedulerConfig {
        global_limit: opts.concurrency,
        ..SchedulerConfig::default()
    });
    let lane = scheduler.lane(backend, opts.concurrency);
    let bases = Arc::new(base_images());
    // Warm-up (connections, allocator), not measured.
    run_batch(
        &scheduler,
        &lane,
        &bases,
        1_000_000,
        opts.concurrency,
        opts.concurrency,
    )
    .await;
    let (cpu0, srv0, t0) = (self_cpu(), proc_cpu(server_pid), Instant::now());
    let (ok, failed) = run_batch(
        &scheduler,
        &lane,
        &bases,
        0,
        opts.requests,
        opts.concurrency,
    )
    .await;
    let wall = t0.elapsed();
    let cpu = self_cpu() - cpu0;
    let srv = proc_cpu(server_pid) - srv0;
    let n = opts.requests as f64;
    serde_json::json!({
        "wire": kind.as_str(),
        "requests": opts.requests,
        "ok": ok,
        "errors": failed,
        "wall_s": round2(wall.as_secs_f64()),
        "requests_per_s": round2(n / wall.as_secs_f64()),
        "cpu_ms_per_request": round3(cpu.as_secs_f64() * 1000.0 / n),
        "server_cpu_ms_per_request": round3(srv.as_secs_f64() * 1000.0 / n),
    })
}

/// Sends `count` requests for tasks `first..first+count`, at most `concurrency` tasks alive at once (so images
/// are built only for tasks about to be sent, as a real run reads them).
async fn run_batch(
    s: &Scheduler,
    lane: &nmb_requests::Lane,
    bases: &Arc<Vec<Vec<u8>>>,
    first: usize,
    count: usize,
    concurrency: usize,
) -> (usize, usize) {
    let gate = Arc::new(tokio::sync::Semaphore::new(concurrency));
    let mut handles = Vec::with_capacity(count);
    for task in first..first + count {
        let permit = gate.clone().acquire_owned().await.expect("gate");
        let (s, lane, bases) = (s.clone(), lane.clone(), bases.clone());
        handles.push(tokio::spawn(async move {
            let req = task_request(task, &bases);
            let ok = s.run(&lane, &req).await.result.is_ok();
            drop(permit);
            ok
        }));
    }
    let mut ok = 0;
    for h in handles {
        if h.await.unwrap_or(false) {
            ok += 1;
        }
    }
    (ok, count - ok)
}

fn task_request(task: usize, bases: &[Vec<u8>]) -> ChatRequest {
    let mut parts = vec![Part::Text(format!(
        "EHR for case {task}: 52-year-old man, subacute cognitive decline, myoclonus. Notes: ..."
    ))];
    for (j, base) in bases.iter().enumerate() {
        let bytes = with_text_chunk(base, &format!("task-{task}-image-{j}"));
        parts.push(Part::Image(ImagePart {
            sha256: hex::encode(Sha256::digest(&bytes)),
            mime: "image/png".into(),
            bytes: bytes.into(),
        }));
        parts.push(Part::Text(format!("Image {j}: axial DWI")));
    }
    parts.push(Part::Text(
        "Give a ranked differential diagnosis as JSON.".into(),
    ));
    ChatRequest::new(
        vec![
            Message::text(Role::System, "You are an experienced neurology expert"),
            Message {
                role: Role::User,
                as_parts: false,
                parts,
            },
        ],
        GenParams::default(),
    )
}

/// Three noise PNGs of about 46 KB (noise does not compress).
fn base_images() -> Vec<Vec<u8>> {
    (0..3u64).map(|seed| noise_png(IMAGE_SIDE, seed)).collect()
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
