//! The twenty-point kill test: one `nmb eval` of about 250 requests against a loopback server that fails every
//! ninth request with a 500, SIGKILLed at 20 moments drawn from a fixed seed and resumed after each. No answer is
//! lost, a request is asked again only when its answer was not stored at a kill (in flight then: never more of
//! them than the concurrency, and every request the server reports it was still answering among them) or when
//! the server failed it, and the scores equal an uninterrupted run's, byte for byte. The same for `nmb score` with a judge killed at 20 moments of its calls.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use nmb_fake_server::{Config, FakeServer, Fault, Wire};
use nmb_store::SampleStatus;

const SEED: u64 = 0x6e6d_622d_6b69_6c6c;
const KILLS: usize = 20;
const CONCURRENCY: usize = 4;
const FAULT_EVERY: u64 = 9;

/// The same run, with and without kills.
fn args(model: &str) -> Vec<String> {
    let args = [
        "eval",
        "--suite",
        "sample",
        "--model",
        model,
        "--samples",
        "8",
        "--no-n",
        "--no-score",
    ];
    let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    args.extend(["--concurrency".into(), CONCURRENCY.to_string()]);
    args
}

fn faulty_server(dir: &Path) -> FakeServer {
    server(Config {
        latency: Duration::from_millis(15),
        log_path: Some(dir.join("requests.jsonl")),
        fault_every: Some((FAULT_EVERY, Fault::Status(500))),
        ..Config::default()
    })
}

/// A request's answer as the store keys it: (conversation hash, sample index). Separate calls carry the sample
/// index as their seed (no `--seed` given).
type Key = (String, u32);

fn stored(runs: &Path) -> HashSet<Key> {
    let store = store(runs);
    let Some(run) = store.list_runs().unwrap().into_iter().next() else {
        return HashSet::new();
    };
    let samples = store.run_samples(&run.run_id).unwrap();
    (samples.iter())
        .flat_map(|s| {
            (s.turns.iter().filter(|t| t.ok)).map(|t| (t.call.prompt_hash.clone(), s.sample_index))
        })
        .collect()
}

/// `nmb score RUN --json` with the run id blanked, for comparing two runs' scores.
fn scores(runs: &Path) -> String {
    let run_id = store(runs).list_runs().unwrap()[0].run_id.clone();
    let out = nmb_command(runs)
        .args(["score", &run_id, "--no-bertscore", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).replace(&run_id, "RUN")
}

#[test]
fn twenty_kills_lose_nothing_and_score_as_one_run() {
    // The uninterrupted run: how many requests it takes, and its scores.
    let whole = tempfile::tempdir().unwrap();
    let server = faulty_server(whole.path());
    let out = nmb_command(whole.path())
        .args(args(&model_spec(Wire::OpenAi, &server)))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let total = server.request_count();
    let expected = scores(whole.path());
    // The same server again (the model spec, and so the configuration, must be the same).
    server.clear_requests();

    let dir = tempfile::tempdir().unwrap();
    let args = args(&model_spec(Wire::OpenAi, &server));
    let points: Vec<u64> = (kill_points(SEED, KILLS, total - 10).into_iter())
        .map(|p| total + p)
        .collect();
    let mut bounds = Vec::new();
    for (i, &point) in points.iter().enumerate() {
        let mut child = nmb_command(dir.path())
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while server.request_count() < point && child.try_wait().unwrap().is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "kill {i}: no progress"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = child.kill(); // SIGKILL; it may have finished already
        child.wait().unwrap();
        // What the server was still answering when the client died: never stored, whatever else is.
        let open = server.open_requests();
        let seen = settled_request_count(&server);
        bounds.push((seen, stored(dir.path()), open));
    }
    let out = nmb_command(dir.path()).args(&args).output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));

    let requests = server.requests();
    let by_seq: HashMap<u64, Key> = (requests.iter())
        .map(|r| {
            let key = (
                r.conversation_sha256.clone(),
                r.params.seed.unwrap_or(0) as u32,
            );
            (r.seq, key)
        })
        .collect();
    // Requests in flight at each kill: sent by the process killed there, their answer not stored.
    // The server's own account of each kill (requests it was still answering) must be among them: a request
    // the server had not answered cannot have been stored.
    let mut in_flight: HashSet<u64> = HashSet::new();
    let mut server_open = 0;
    let mut from = total;
    for (k, (seen, kept, answering)) in bounds.iter().enumerate() {
        let open: Vec<u64> = (from..*seen)
            .filter(|s| (s + 1) % FAULT_EVERY != 0)
            .filter(|s| by_seq.get(s).is_some_and(|key| !kept.contains(key)))
            .collect();
        assert!(
            open.len() <= CONCURRENCY,
            "kill {k}: {} requests unanswered in the store, more than the {CONCURRENCY} in flight: {open:?}",
            open.len()
        );
        let answering: Vec<u64> = (answering.iter().copied())
            .filter(|s| (s + 1) % FAULT_EVERY != 0)
            .collect();
        for seq in &answering {
            assert!(
                open.contains(seq),
                "kill {k}: the server was answering request {seq} at the kill, yet its answer is stored \
                 or it was not this process's ({from}..{seen})"
            );
        }
        server_open += answering.len();
        in_flight.extend(open);
        from = *seen;
    }
    // A request asked again was in flight at a kill or failed by the server.
    let mut seqs: HashMap<&Key, Vec<u64>> = HashMap::new();
    for (seq, key) in &by_seq {
        seqs.entry(key).or_default().push(*seq);
    }
    for (key, mut list) in seqs {
        list.sort_unstable();
        for earlier in &list[..list.len() - 1] {
            let faulted = (earlier + 1) % FAULT_EVERY == 0;
            assert!(
                faulted || in_flight.contains(earlier),
                "{key:?} was asked again after request {earlier}, which was neither failed nor in flight at a kill"
            );
        }
    }
    // Nothing lost: every sample stored once and answered.
    let store = store(dir.path());
    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1, "every invocation resumed the one run");
    let samples = store.run_samples(&runs[0].run_id).unwrap();
    let keys: HashSet<_> = samples
        .iter()
        .map(|s| (&s.task_id, s.sample_index))
        .collect();
    assert_eq!(keys.len(), samples.len());
    assert!(samples.iter().all(|s| s.status == SampleStatus::Ok));
    assert_eq!(store.integrity_check().unwrap(), vec!["ok".to_string()]);
    drop(store);
    eprintln!(
        "seed {SEED:#x}: {KILLS} kills at requests {:?}; {} requests against {total} uninterrupted, \
         {} in flight at a kill ({server_open} of them still being answered by the server)",
        points.iter().map(|p| p - total).collect::<Vec<_>>(),
        requests.len(),
        in_flight.len()
    );
    assert_eq!(
        scores(dir.path()),
        expected,
        "the scores of the killed run and the uninterrupted one"
    );
}

/// `nmb score` with a judge, SIGKILLed at 20 seeded moments of its judge calls and resumed after each, stores
/// the same report as scoring without a kill, and asks the judge again only for calls in flight at a kill.
#[test]
fn a_judge_killed_twenty_times_scores_as_once() {
    let models = server(Config::default());
    let judges = server(Config {
        latency: Duration::from_millis(10),
        ..Config::default()
    });
    let killed = tempfile::tempdir().unwrap();
    let spec = model_spec(Wire::OpenAi, &models);
    let out = nmb_command(killed.path())
        .args([
            "eval",
            "--suite",
            "sample",
            "--model",
            &spec,
            "--samples",
            "2",
            "--no-score",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let run_id = store(killed.path()).list_runs().unwrap()[0].run_id.clone();
    // The same stored run, scored without a kill.
    let whole = tempfile::tempdir().unwrap();
    std::fs::copy(
        killed.path().join("nmb.sqlite"),
        whole.path().join("nmb.sqlite"),
    )
    .unwrap();
    let judge = model_spec(Wire::OpenAi, &judges).replace("test-model", "judge-model");
    let score = [
        "score",
        &run_id,
        "--judge",
        &judge,
        "--no-bertscore",
        "--max-reasks",
        "1",
        "--json",
    ];
    let judged = |dir: &Path| {
        let out = nmb_command(dir).args(score).output().unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        blank_judge_runs(&text(&out.stdout), dir)
    };
    let expected = judged(whole.path());
    let total = judges.request_count();
    judges.clear_requests();

    let points: Vec<u64> = (kill_points(SEED ^ 1, KILLS, total - 5).into_iter())
        .map(|p| total + p)
        .collect();
    for &point in &points {
        let mut child = nmb_command(killed.path())
            .args(score)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while judges.request_count() < point && child.try_wait().unwrap().is_none() {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "no judge calls"
            );
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = child.kill();
        child.wait().unwrap();
        settled_request_count(&judges);
    }
    let got = judged(killed.path());
    let asked = judges.request_count() - total;
    eprintln!("judge: {total} calls uninterrupted, {asked} over {KILLS} kills and the last run");
    // Each kill may lose at most the calls in flight: the judges' concurrency (8 per judge).
    assert!(
        asked <= total + KILLS as u64 * 8,
        "{asked} judge calls against {total}"
    );
    let first_difference = (got.lines().zip(expected.lines()))
        .position(|(a, b)| a != b)
        .map(|i| (i, got.lines().nth(i), expected.lines().nth(i)));
    assert!(
        got == expected,
        "the report of the killed scoring differs from the uninterrupted one at {first_difference:?}"
    );
}

/// The report JSON with the judge runs' ids (made anew by each store) blanked, and their call and token
/// totals: those count the calls made, which depend on timing (two items with the same prompt asked at once are
/// two calls; after a resume the second finds the first's answer stored).
fn blank_judge_runs(report: &str, dir: &Path) -> String {
    let mut value: serde_json::Value = serde_json::from_str(report).unwrap();
    for judge in value["config"]["judges"].as_array_mut().unwrap() {
        for total in ["calls", "tokens_in", "tokens_out"] {
            judge[total] = serde_json::Value::Null;
        }
    }
    let mut out = serde_json::to_string_pretty(&value).unwrap();
    for run in store(dir).list_runs().unwrap() {
        if run.manifest.kind == nmb_store::RunKind::Judge {
            out = out.replace(&run.run_id, "JUDGE-RUN");
        }
    }
    out
}
