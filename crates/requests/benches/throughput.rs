//! Throughput benchmark (not a test): 1,000 requests per wire, each with 3 distinct ~46 KB PNG images, at
//! concurrency 64, against a zero-latency loopback fake server running in a child process (so its CPU is
//! measured apart from the client's). Prints one JSON object.
//!
//! `cargo bench -p nmb-requests --bench throughput [-- --requests N --concurrency N --wire openai|anthropic|gemini|all]`

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nmb_plan::chat::{GenParams, ImagePart, Message, Part, Role};
use nmb_requests::{
    connect, BackendKind, BackendOptions, ChatRequest, HttpOptions, ModelSpec, Scheduler,
    SchedulerConfig, Transport,
};
use sha2::{Digest, Sha256};

const CHILD_FLAG: &str = "--fake-server-child";
const IMAGE_SIDE: u32 = 124; // 124 * 124 * 3 bytes of noise: a ~46 KB PNG

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(CHILD_FLAG) {
        if let Err(e) = nmb_fake_server::run_cli(&args[1..]) {
            eprintln!("{e}");
            std::process::exit(2);
        }
        return;
    }
    let opts = Opts::parse(&args);
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("runtime");
    let (mut child, port) = spawn_server(threads);
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

fn spawn_server(threads: usize) -> (Child, u16) {
    let exe = std::env::current_exe().expect("current exe");
    let mut child = Command::new(exe)
        .args([CHILD_FLAG, "--threads", &threads.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn fake server");
    let stdout = child.stdout.take().expect("child stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("LISTENING line");
    let port = line
        .trim()
        .strip_prefix("LISTENING ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("unexpected server output {line:?}"));
    (child, port)
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

fn noise_png(side: u32, seed: u64) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, side, side);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().expect("png header");
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let data: Vec<u8> = (0..side * side * 3)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        w.write_image_data(&data).expect("png data");
    }
    out
}

/// The PNG with a tEXt chunk inserted after IHDR: a valid, distinct image per task without re-encoding.
fn with_text_chunk(png: &[u8], text: &str) -> Vec<u8> {
    const AFTER_IHDR: usize = 8 + 25;
    let mut data = b"Comment\0".to_vec();
    data.extend_from_slice(text.as_bytes());
    let mut chunk = Vec::with_capacity(data.len() + 12);
    chunk.extend_from_slice(&(data.len() as u32).to_be_bytes());
    chunk.extend_from_slice(b"tEXt");
    chunk.extend_from_slice(&data);
    let crc = crc32(&chunk[4..]);
    chunk.extend_from_slice(&crc.to_be_bytes());
    let mut out = Vec::with_capacity(png.len() + chunk.len());
    out.extend_from_slice(&png[..AFTER_IHDR]);
    out.extend_from_slice(&chunk);
    out.extend_from_slice(&png[AFTER_IHDR..]);
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn self_cpu() -> Duration {
    // SAFETY: getrusage writes into the zeroed struct we own.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    tv(u.ru_utime) + tv(u.ru_stime)
}

fn peak_rss_kb() -> u64 {
    // SAFETY: as above.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    u.ru_maxrss as u64
}

fn tv(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
}

/// utime + stime of another process, from /proc/PID/stat.
fn proc_cpu(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_comm = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    // after "pid (comm)": field 3 is index 0, so utime (14) and stime (15) are 11 and 12
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|v| v.parse::<u64>().ok()))
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_secs_f64(ticks as f64 / hz as f64)
}

fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
