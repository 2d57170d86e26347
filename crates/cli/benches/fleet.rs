//! Fleet benchmark (not a test): what sharing a run through PostgreSQL costs, next to one `nmb eval` on SQLite.
//! The workload is `eval`'s: 1,000 single-sample tasks that share 3 PNG images of ~46 KB each, asked of a
//! zero-latency loopback fake server in a separate process, not scored (`--no-score`). Prints one JSON object.
//!
//! Configurations, on the same suite and the same fake server:
//! - `sqlite`: one `nmb --runs-dir DIR eval --no-score --concurrency 64 --json -q`, timed from spawn to exit;
//! - `postgres_wN` for each N of `--workers` (default 1, 2, 4): a fresh database on this process's private
//!   PostgreSQL server (`nmb_test_support::postgres::cluster()`), `nmb --store URL eval ... --plan-only` (timed
//!   and reported apart, under `plan`), then N `nmb --store URL worker --run RUN --concurrency ceil(64/N)
//!   --fleet-limit 64 -q` started at once; wall time from the first spawn to the last exit. Afterwards
//!   `nmb runs show RUN --json` must say samples_ok == tasks and requests_sent == tasks (nothing asked twice);
//!   both are recorded, and the benchmark fails when they do not hold.
//!
//! Measured per configuration: requests per second, wall time, nmb CPU per request (user + system of every nmb
//! process of the phase, from wait4 rusage), peak RSS of the largest nmb process, the fake server's CPU per
//! request (/proc/PID/stat), and PostgreSQL's CPU per request: utime + stime of the postmaster (the first line
//! of `<cluster dir>/data/postmaster.pid`) and of every live process whose parent it is, that runs as the
//! cluster's user and whose command line starts with `postgres`, before and after the phase; plus the
//! postmaster's cutime + cstime, so that backends which exit during the phase (the workers' connections) still
//! count. Before each snapshot the benchmark waits until the previous phase's backends have gone.
//! `where_the_overhead_goes` then splits the extra CPU per request of each PostgreSQL configuration over the
//! SQLite baseline into nmb's side and PostgreSQL's side.
//!
//! PostgreSQL's server binaries must be installed (`scripts/postgres.sh`); without them the benchmark prints
//! `{"error": ...}` and exits with status 1.
//!
//! `cargo bench -p nmb --bench fleet [-- --tasks N --workers 1,2,4]`

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nmb_fake_server::support::{
    proc_cpu, proc_status_kb, spawn_child_server, wait_with_usage, ChildUsage,
};
use serde_json::{json, Map, Value};

mod common;

use common::{load_average, round, write_suite};

/// Requests in flight across the fleet, as the SQLite baseline's `--concurrency`.
const CONCURRENCY: usize = 64;

/// The store round trips a PostgreSQL worker makes that a lone SQLite eval does not (or makes locally).
const ROUND_TRIPS: &str = "per task: one claim transaction (pg_try_advisory_xact_lock on the task, then UPDATE ... \
     FOR UPDATE SKIP LOCKED ... RETURNING); per worker, lease renewals every lease/3 (10 s at the default 30 s \
     lease); per request: a fleet-slot take and give-back (per-server fleet-wide concurrency) and a pause \
     check; then the usual prompt, call and turn writes, each a round trip to the server instead of a local \
     SQLite write";

struct Opts {
    tasks: usize,
    workers: Vec<usize>,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    nmb_fake_server::support::serve_if_child(&args);
    let opts = parse(&args);
    let Some(cluster) = nmb_test_support::postgres::cluster() else {
        let error = json!({
            "benchmark": "fleet",
            "error": "PostgreSQL is not available: no initdb and postgres (scripts/postgres.sh installs them, \
                      NMB_PG_BIN names their folder)",
        });
        println!("{}", serde_json::to_string_pretty(&error).expect("json"));
        std::process::exit(1);
    };
    // NMB_BENCH_DIR keeps the suite, the SQLite store and the processes' stdout for a look afterwards.
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
    let model = format!("openai:bench-model@http://127.0.0.1:{port}/v1");
    let bench = Bench {
        dir: dir.path().to_path_buf(),
        model,
        tasks: opts.tasks,
        server: server.id(),
        pg_dir: cluster.dir().to_path_buf(),
    };

    let baseline = bench.sqlite();
    let mut configs = Map::new();
    configs.insert("sqlite".into(), baseline.to_json());
    let mut pg = Vec::new();
    for &w in &opts.workers {
        let url = cluster.fresh_database();
        let m = bench.postgres(&url, w);
        configs.insert(format!("postgres_w{w}"), m.to_json());
        pg.push(m);
    }
    let server_peak_mb = proc_status_kb(server.id(), "VmHWM").unwrap_or(0) as f64 / 1024.0;
    let _ = server.kill();
    let _ = server.wait();

    let base = baseline.nmb_cpu_ms_per_request();
    let mut overhead = Map::new();
    for m in &pg {
        let nmb = m.nmb_cpu_ms_per_request();
        let postgres = m.postgres_cpu_ms_per_request();
        let extra = nmb + postgres - base;
        overhead.insert(
            format!("postgres_w{}", m.processes),
            json!({
                "cpu_ms_per_request": round(nmb + postgres, 3),
                "extra_cpu_ms_per_request": round(extra, 3),
                "nmb_side_ms_per_request": round(nmb - base, 3),
                "postgres_side_ms_per_request": round(postgres, 3),
                "postgres_share_of_extra": if extra > 0.0 { round(postgres / extra, 3) } else { 0.0 },
                "times_baseline_cpu": if base > 0.0 { round((nmb + postgres) / base, 2) } else { 0.0 },
            }),
        );
    }
    let report = json!({
        "benchmark": "fleet",
        "workload": {
            "tasks": opts.tasks,
            "samples_per_task": 1,
            "images_per_request": 3,
            "image_bytes": image_bytes,
            "images_shared_by_all_tasks": true,
            "wire": "openai",
            "concurrency": CONCURRENCY,
            "fleet_limit": CONCURRENCY,
            "workers": opts.workers,
            "server_latency_ms": 0,
            "server_threads": threads,
            "cpus": threads,
            "load_average": load_average(),
        },
        "configurations": configs,
        "where_the_overhead_goes": {
            "baseline_nmb_cpu_ms_per_request": round(base, 3),
            "by_configuration": overhead,
            "store_round_trips": ROUND_TRIPS,
            "how": "cpu_ms_per_request = nmb's (summed over the worker processes) + PostgreSQL's; extra = that \
                    minus the SQLite baseline's nmb CPU per request; nmb_side = the workers' nmb CPU minus the \
                    baseline's; postgres_side = PostgreSQL's CPU (backends, postmaster, background processes)",
        },
        "server_peak_rss_mb": round(server_peak_mb, 1),
    });
    println!("{}", serde_json::to_string_pretty(&report).expect("json"));
}

fn parse(args: &[String]) -> Opts {
    let mut o = Opts {
        tasks: 1000,
        workers: vec![1, 2, 4],
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--tasks" => o.tasks = it.next().and_then(|v| v.parse().ok()).unwrap_or(o.tasks),
            "--workers" => {
                let list: Vec<usize> = it
                    .next()
                    .map(|v| {
                        v.split(',')
                            .filter_map(|w| w.trim().parse().ok())
                            .filter(|&w| w > 0)
                            .collect()
                    })
                    .unwrap_or_default();
                if !list.is_empty() {
                    o.workers = list;
                }
            }
            _ => {} // cargo passes --bench
        }
    }
    o
}

struct Bench {
    dir: PathBuf,
    model: String,
    tasks: usize,
    /// The fake server's pid.
    server: u32,
    /// The PostgreSQL cluster's directory (`data/postmaster.pid` inside).
    pg_dir: PathBuf,
}

/// One configuration's measurements.
struct Measured {
    store: &'static str,
    tasks: usize,
    processes: usize,
    concurrency_per_process: usize,
    requests_sent: u64,
    samples_ok: u64,
    samples_errored: u64,
    wall_s: f64,
    usages: Vec<ChildUsage>,
    server_cpu: Duration,
    /// `None` on SQLite.
    postgres_cpu: Option<Duration>,
    /// PostgreSQL only: the `--plan-only` step.
    plan: Option<Value>,
}

impl Measured {
    fn per_request(&self) -> f64 {
        self.requests_sent.max(1) as f64
    }

    fn nmb_cpu(&self) -> Duration {
        self.usages.iter().map(|u| u.cpu).sum()
    }

    fn nmb_cpu_ms_per_request(&self) -> f64 {
        self.nmb_cpu().as_secs_f64() * 1000.0 / self.per_request()
    }

    fn postgres_cpu_ms_per_request(&self) -> f64 {
        self.postgres_cpu.unwrap_or_default().as_secs_f64() * 1000.0 / self.per_request()
    }

    fn to_json(&self) -> Value {
        let n = self.per_request();
        let user: Duration = self.usages.iter().map(|u| u.user).sum();
        let system: Duration = self.usages.iter().map(|u| u.system).sum();
        let peak = self.usages.iter().map(|u| u.max_rss_kb).max().unwrap_or(0);
        let per_process: Vec<Value> = self
            .usages
            .iter()
            .map(|u| {
                json!({
                    "cpu_s": round(u.cpu.as_secs_f64(), 3),
                    "peak_rss_mb": round(u.max_rss_kb as f64 / 1024.0, 1),
                })
            })
            .collect();
        let mut v = json!({
            "store": self.store,
            "processes": self.processes,
            "concurrency_per_process": self.concurrency_per_process,
            "requests_sent": self.requests_sent,
            "samples_ok": self.samples_ok,
            "samples_errored": self.samples_errored,
            "samples_ok_equals_tasks": self.samples_ok == self.tasks as u64,
            "requests_sent_equals_tasks": self.requests_sent == self.tasks as u64,
            "wall_s": round(self.wall_s, 3),
            "requests_per_s": round(self.requests_sent as f64 / self.wall_s, 1),
            "nmb_cpu_ms_per_request": round(self.nmb_cpu_ms_per_request(), 3),
            "nmb_cpu_user_s": round(user.as_secs_f64(), 3),
            "nmb_cpu_system_s": round(system.as_secs_f64(), 3),
            "peak_rss_mb_largest_process": round(peak as f64 / 1024.0, 1),
            "server_cpu_ms_per_request": round(self.server_cpu.as_secs_f64() * 1000.0 / n, 3),
            "postgres_cpu_ms_per_request": self.postgres_cpu.map(|_| round(self.postgres_cpu_ms_per_request(), 3)),
            "nmb_and_postgres_cpu_ms_per_request":
                round(self.nmb_cpu_ms_per_request() + self.postgres_cpu_ms_per_request(), 3),
            "per_process": per_process,
        });
        if let Some(plan) = &self.plan {
            v["fleet_limit"] = json!(CONCURRENCY);
            v["plan"] = plan.clone();
        }
        v
    }
}

impl Bench {
    /// `nmb` with the store option(s) in `store`, and none of the environment that could send it elsewhere.
    fn nmb(&self, store: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_nmb"));
        cmd.args(store);
        for var in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "GEMINI_API_KEY",
            "NMB_LOG",
            "NMB_STORE_URL",
        ] {
            cmd.env_remove(var);
        }
        cmd.stdin(Stdio::null()).stderr(Stdio::inherit());
        cmd
    }

    /// `eval`'s arguments that define the run (the same for both stores).
    fn eval_args(&self) -> Vec<String> {
        let suite = format!("native:{}", self.dir.join("suite").display());
        [
            "eval",
            "--suite",
            &suite,
            "--model",
            &self.model,
            "--samples",
            "1",
            "--no-score",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    /// Runs `cmd` to the end with its stdout in `name` under the bench dir; its usage and stdout.
    fn run(&self, mut cmd: Command, name: &str) -> (ChildUsage, f64, String) {
        let out_path = self.dir.join(name);
        cmd.stdout(std::fs::File::create(&out_path).expect("stdout file"));
        let started = Instant::now();
        let mut child = cmd.spawn().expect("nmb starts");
        let usage = wait_with_usage(&mut child).expect("wait4");
        let wall_s = started.elapsed().as_secs_f64();
        assert!(
            usage.status.success(),
            "nmb {name} failed: {:?}",
            usage.status
        );
        let text = std::fs::read_to_string(&out_path).expect("stdout");
        (usage, wall_s, text)
    }

    /// The baseline: one `nmb eval` on a SQLite store.
    fn sqlite(&self) -> Measured {
        let runs = self.dir.join("runs");
        let runs_arg = runs.display().to_string();
        {
            // Created (and checkpointed) beforehand, as in the `eval` bench.
            let store = nmb_store::Store::open_dir(&runs).expect("store");
            store.checkpoint().expect("checkpoint");
        }
        let mut cmd = self.nmb(&["--runs-dir", &runs_arg]);
        cmd.args(self.eval_args());
        cmd.args(["--concurrency", &CONCURRENCY.to_string(), "--json", "-q"]);
        let srv0 = proc_cpu(self.server);
        let (usage, wall_s, text) = self.run(cmd, "sqlite-eval.json");
        let server_cpu = proc_cpu(self.server) - srv0;
        let json: Value = serde_json::from_str(text.trim()).expect("nmb eval printed JSON");
        let summary = &json["summary"];
        let m = Measured {
            store: "sqlite",
            tasks: self.tasks,
            processes: 1,
            concurrency_per_process: CONCURRENCY,
            requests_sent: summary["requests_sent"].as_u64().unwrap_or(0),
            samples_ok: summary["samples_ok"].as_u64().unwrap_or(0),
            samples_errored: summary["samples_errored"].as_u64().unwrap_or(0),
            wall_s,
            usages: vec![usage],
            server_cpu,
            postgres_cpu: None,
            plan: None,
        };
        assert_eq!(
            m.samples_ok, self.tasks as u64,
            "sqlite: every sample should be ok"
        );
        m
    }

    /// A plan on a fresh PostgreSQL database, then `workers` workers at once.
    fn postgres(&self, url: &str, workers: usize) -> Measured {
        let db = url.rsplit('/').next().unwrap_or_default().to_string();
        let store = ["--store", url];

        // The plan: not part of the worker phase. `createdb` (connected to `postgres`) has gone first.
        settle(&self.pg_dir, "postgres");
        let pg0 = postgres_cpu(&self.pg_dir);
        let mut cmd = self.nmb(&store);
        cmd.args(self.eval_args());
        cmd.args(["--plan-only", "--json", "-q"]);
        let (plan_usage, plan_wall_s, text) = self.run(cmd, &format!("{db}-plan.json"));
        let planned: Value = serde_json::from_str(text.trim()).expect("--plan-only printed JSON");
        let run_id = planned["run_id"]
            .as_str()
            .expect("a planned run id")
            .to_string();
        settle(&self.pg_dir, &db);
        let pg1 = postgres_cpu(&self.pg_dir);
        let plan = json!({
            "wall_s": round(plan_wall_s, 3),
            "nmb_cpu_s": round(plan_usage.cpu.as_secs_f64(), 3),
            "peak_rss_mb": round(plan_usage.max_rss_kb as f64 / 1024.0, 1),
            "postgres_cpu_s": round(pg1.saturating_sub(pg0).as_secs_f64(), 3),
            "samples_pending": planned["summary"]["samples_pending"],
        });

        // The workers.
        let per_worker = CONCURRENCY.div_ceil(workers).max(1);
        let srv0 = proc_cpu(self.server);
        let started = Instant::now();
        let mut children: Vec<Child> = (0..workers)
            .map(|i| {
                let mut cmd = self.nmb(&store);
                cmd.args(["worker", "--run", &run_id]);
                cmd.args(["--concurrency", &per_worker.to_string()]);
                cmd.args(["--fleet-limit", &CONCURRENCY.to_string(), "-q"]);
                let out = self.dir.join(format!("{db}-worker{i}.out"));
                cmd.stdout(std::fs::File::create(out).expect("stdout file"));
                cmd.spawn().expect("nmb worker starts")
            })
            .collect();
        // Waited for in order: the last wait returns once the last of them has exited.
        let usages: Vec<ChildUsage> = children
            .iter_mut()
            .map(|c| wait_with_usage(c).expect("wait4"))
            .collect();
        let wall_s = started.elapsed().as_secs_f64();
        let server_cpu = proc_cpu(self.server) - srv0;
        for (i, u) in usages.iter().enumerate() {
            assert!(
                u.status.success(),
                "worker {i} of {workers} failed: {:?}",
                u.status
            );
        }
        settle(&self.pg_dir, &db);
        let pg2 = postgres_cpu(&self.pg_dir);

        let mut cmd = self.nmb(&store);
        cmd.args(["runs", "show", &run_id, "--json"]);
        let (_, _, text) = self.run(cmd, &format!("{db}-show.json"));
        let shown: Value = serde_json::from_str(text.trim()).expect("runs show printed JSON");
        let m = Measured {
            store: "postgres",
            tasks: self.tasks,
            processes: workers,
            concurrency_per_process: per_worker,
            requests_sent: shown["requests_sent"].as_u64().unwrap_or(0),
            samples_ok: shown["samples_ok"].as_u64().unwrap_or(0),
            samples_errored: shown["samples_errored"].as_u64().unwrap_or(0),
            wall_s,
            usages,
            server_cpu,
            postgres_cpu: Some(pg2.saturating_sub(pg1)),
            plan: Some(plan),
        };
        assert_eq!(
            m.samples_ok, self.tasks as u64,
            "{workers} workers: every sample should be ok"
        );
        assert_eq!(
            m.requests_sent, self.tasks as u64,
            "{workers} workers: one request per task, none asked twice"
        );
        m
    }
}

/// Fields of /proc/PID/stat after `pid (comm)` (index 0 is field 3, the state, read as 0).
fn stat_fields(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_comm = stat.rsplit_once(')')?.1;
    Some(
        after_comm
            .split_whitespace()
            .map(|v| v.parse().unwrap_or(0))
            .collect(),
    )
}

/// Whether `pid` is a zombie: exited, not yet reaped (its CPU is in neither its parent's cutime nor a live
/// process's times that [`postgres_cpu`] reads).
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, r)| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Pids of the live or unreaped children of `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            stat_fields(pid).and_then(|f| f.get(PPID).copied()) == Some(u64::from(parent))
        })
        .collect()
}

const PPID: usize = 1; // field 4
const UTIME: usize = 11; // field 14
const STIME: usize = 12; // field 15
const CUTIME: usize = 13; // field 16
const CSTIME: usize = 14; // field 17

fn real_uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    line.split_whitespace().next()?.parse().ok()
}

fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
        .unwrap_or_default()
}

fn postmaster_pid(pg_dir: &Path) -> u32 {
    std::fs::read_to_string(pg_dir.join("data/postmaster.pid"))
        .ok()
        .and_then(|s| s.lines().next().and_then(|l| l.trim().parse().ok()))
        .expect("the postmaster's pid in data/postmaster.pid")
}

/// The postmaster's live children that run as its user and whose command line starts with `postgres`.
fn postgres_children(postmaster: u32) -> Vec<(u32, Vec<u64>)> {
    let uid = real_uid(postmaster);
    children_of(postmaster)
        .into_iter()
        .filter(|&pid| real_uid(pid) == uid && cmdline(pid).starts_with("postgres"))
        .filter_map(|pid| Some((pid, stat_fields(pid)?)))
        .collect()
}

/// CPU that PostgreSQL has used so far: the postmaster's own and that of its children, live (utime + stime)
/// and exited (the postmaster's cutime + cstime).
fn postgres_cpu(pg_dir: &Path) -> Duration {
    let postmaster = postmaster_pid(pg_dir);
    let own = stat_fields(postmaster).expect("the postmaster is running");
    let mut ticks: u64 = [UTIME, STIME, CUTIME, CSTIME]
        .iter()
        .map(|&i| own.get(i).copied().unwrap_or(0))
        .sum();
    for (_, f) in postgres_children(postmaster) {
        ticks += f.get(UTIME).copied().unwrap_or(0) + f.get(STIME).copied().unwrap_or(0);
    }
    // SAFETY: sysconf has no preconditions.
    let hz = match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        n if n > 0 => n as u64,
        _ => 100,
    };
    Duration::from_secs_f64(ticks as f64 / hz as f64)
}

/// Waits (up to 10 s) until no backend is connected to `db` and the postmaster has reaped every child that
/// exited: the connections of processes that have exited close asynchronously, and a backend's CPU counts (in
/// the postmaster's cutime) only once it is reaped.
fn settle(pg_dir: &Path, db: &str) {
    let postmaster = postmaster_pid(pg_dir);
    let needle = format!(" {db} ");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        let busy = children_of(postmaster)
            .into_iter()
            .any(|pid| is_zombie(pid) || cmdline(pid).contains(&needle));
        if !busy {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("fleet bench: backends of {db} still connected after 10 s");
}
