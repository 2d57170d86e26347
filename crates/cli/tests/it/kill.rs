//! The kill test: `nmb eval` is SIGKILLed part-way through a run against the loopback server, then run again.
//! Every sample ends stored exactly once, and no request whose answer was already stored reaches the server
//! again (the server's request log is compared with the store).

use crate::common;

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use nmb_fake_server::{Config, Wire};
use nmb_store::SampleStatus;

const SAMPLES: u64 = 3;

/// (prompt hash, sample index) of every ok turn stored for the run.
fn stored_turns(store: &nmb_store::Store, run_id: &str) -> HashSet<(String, u32)> {
    store
        .run_samples(run_id)
        .expect("samples")
        .iter()
        .flat_map(|s| {
            s.turns
                .iter()
                .filter(|t| t.ok)
                .map(|t| (t.call.prompt_hash.clone(), s.sample_index))
        })
        .collect()
}

fn kill_and_resume(wire: Wire) {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = server(Config {
        latency: Duration::from_millis(40),
        log_path: Some(dir.path().join("requests.jsonl")),
        ..Config::default()
    });
    let model = model_spec(wire, &server);
    let args = [
        "eval",
        "--suite",
        "sample",
        "--model",
        &model,
        "--samples",
        "3",
        "--concurrency",
        "3",
    ];
    let mut child = nmb_command(dir.path())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("nmb starts");
    let started = Instant::now();
    while server.request_count() < 20 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no requests arrived"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "nmb ended before the kill"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("SIGKILL"); // std's kill is SIGKILL on Unix
    child.wait().expect("reaped");
    // A request the dead process had already written may still be in the server's socket buffer; count it as
    // sent before the kill (it was in flight), not as one the resumed run asked again.
    let seen_before_kill = settled_request_count(&server) as usize;

    let db = store(dir.path());
    let runs = db.list_runs().expect("runs");
    assert_eq!(runs.len(), 1);
    let run_id = runs[0].run_id.clone();
    let stored = stored_turns(&db, &run_id);
    let done_before: usize = db
        .sample_states(&run_id)
        .unwrap()
        .iter()
        .filter(|s| s.status == SampleStatus::Ok)
        .count();
    assert!(!stored.is_empty(), "answers were stored before the kill");
    assert!(
        done_before < 75,
        "the kill came part-way ({done_before} of 75 done)"
    );
    drop(db);

    let out = nmb_command(dir.path())
        .args(args)
        .args(["--json", "-q"])
        .output()
        .expect("nmb runs again");
    let result = json_of(&out);
    assert_eq!(
        result["run_id"],
        run_id.as_str(),
        "the same command resumes the run"
    );
    assert_eq!(result["resumed"], true);
    let summary = &result["summary"];
    assert_eq!(summary["samples_total"], 75);
    assert_eq!(summary["samples_ok"], 75, "{result}");
    assert_eq!(summary["samples_pending"], 0);

    // Nothing stored before the kill was asked for again.
    let requests = server.requests();
    let mut asked_again: HashMap<String, u64> = HashMap::new();
    for r in &requests[seen_before_kill..] {
        let n = r.params.n.unwrap_or(1);
        if n == 1 {
            // separate calls carry seed = sample index (no --seed given)
            let sample = r.params.seed.map(|s| s as u32);
            if let Some(sample) = sample {
                assert!(
                    !stored.contains(&(r.conversation_sha256.clone(), sample)),
                    "{wire:?}: request {} re-sent sample {sample} of a stored answer",
                    r.seq
                );
            }
        }
        *asked_again
            .entry(r.conversation_sha256.clone())
            .or_default() += n;
    }
    for (hash, n) in &asked_again {
        let have = stored.iter().filter(|(h, _)| h == hash).count() as u64;
        assert!(
            have + n <= SAMPLES,
            "{wire:?}: {n} answers asked again for a prompt with {have} of {SAMPLES} stored"
        );
    }

    eprintln!(
        "{wire:?}: killed after {seen_before_kill} requests with {done_before} samples done and {} turns \
         stored; {} requests after the resume",
        stored.len(),
        requests.len() - seen_before_kill
    );
    // Every sample is stored exactly once, with every turn.
    let store = store(dir.path());
    let samples = store.run_samples(&run_id).expect("samples");
    assert_eq!(samples.len(), 75);
    let keys: HashSet<_> = samples
        .iter()
        .map(|s| (&s.task_id, s.sample_index))
        .collect();
    assert_eq!(keys.len(), 75);
    for s in &samples {
        assert_eq!(s.status, SampleStatus::Ok);
        assert_eq!(s.turns_done as usize, s.turns.len());
        assert!(s.turns.iter().all(|t| t.ok && t.text.is_some()));
    }
    assert_eq!(store.integrity_check().unwrap(), vec!["ok".to_string()]);
    // The request log on disk holds every request the server saw.
    let log = std::fs::read_to_string(dir.path().join("requests.jsonl")).unwrap();
    assert_eq!(log.lines().count(), requests.len());
}

#[test]
fn kill_and_resume_openai() {
    kill_and_resume(Wire::OpenAi);
}

#[test]
fn kill_and_resume_anthropic() {
    kill_and_resume(Wire::Anthropic);
}
