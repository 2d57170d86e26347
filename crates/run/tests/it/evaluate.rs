//! The evaluation loop against the fake server: a run stored, resumed without sending again, a run killed
//! part-way and resumed losing nothing, and the configuration hash a run is found by.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nmb_run::{EvalError, Invocation, Progress, Resume, RunError};
use nmb_store::{SampleStatus, Store};

use crate::common::{config, every_sample_ok, run, server, settled_request_count, store};

#[test]
fn a_run_stopped_by_its_budget_resumes_without_sending_again() {
    // The same evaluation uninterrupted, on a store of its own: how many requests it takes.
    let reference_dir = tempfile::tempdir().unwrap();
    let reference_server = server(Duration::ZERO);
    let whole = run(
        &config(&reference_server, 2),
        &Invocation::default(),
        &store(reference_dir.path()),
    )
    .expect("the reference run");
    every_sample_ok(&whole.outcome.summary);
    let needed = reference_server.request_count();

    let dir = tempfile::tempdir().unwrap();
    let (server, store) = (server(Duration::ZERO), store(dir.path()));
    let config = config(&server, 2);
    let budget = Invocation {
        max_requests: Some(needed / 3),
        ..Invocation::default()
    };
    let first = run(&config, &budget, &store)
        .expect("the first part")
        .outcome;
    assert!(first.stopped_early);
    assert!(!first.resumed);
    assert!(first.summary.samples_pending > 0, "{:?}", first.summary);
    assert!(first.summary.samples_ok > 0, "{:?}", first.summary);
    let sent_first = server.request_count();

    let rest = run(&config, &Invocation::default(), &store)
        .expect("the rest")
        .outcome;
    assert_eq!(
        rest.run_id, first.run_id,
        "the same configuration resumes the run"
    );
    assert!(rest.resumed);
    every_sample_ok(&rest.summary);
    assert_eq!(
        rest.summary.samples_total,
        whole.outcome.summary.samples_total
    );
    // Nothing the first part stored was asked again: the two parts sent what one run sends.
    assert!(server.request_count() > sent_first);
    assert_eq!(server.request_count(), needed);

    // A new run of the same configuration is answered from the stored responses alone.
    let fresh = Invocation {
        resume: Resume::Fresh,
        ..Invocation::default()
    };
    let again = run(&config, &fresh, &store).expect("a fresh run").outcome;
    assert_ne!(again.run_id, first.run_id);
    every_sample_ok(&again.summary);
    assert_eq!(again.summary.requests_sent, 0);
    assert_eq!(server.request_count(), needed);
}

/// (prompt hash, sample index) of every ok turn stored for the run.
fn stored_turns(store: &Store, run_id: &str) -> HashSet<(String, u32)> {
    let samples = store.run_samples(run_id).expect("samples");
    samples
        .iter()
        .flat_map(|s| {
            (s.turns.iter())
                .filter(|t| t.ok)
                .map(|t| (t.call.prompt_hash.clone(), s.sample_index))
        })
        .collect()
}

#[test]
fn a_run_killed_part_way_and_resumed_loses_nothing_and_pays_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (server, store) = (server(Duration::from_millis(40)), store(dir.path()));
    let mut config = config(&server, 3);
    // One request per sample, each carrying its sample index as the seed, so a request names its sample.
    config.no_n = true;

    // The process dies: its runtime is dropped with calls in flight, at whatever await point each task is.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let scheduler = config.scheduler(&store, None);
    let invocation = Invocation::default();
    let evaluation = nmb_run::evaluate(
        &config,
        &invocation,
        store.clone(),
        &scheduler,
        Arc::new(Progress::default()),
    );
    let started = Instant::now();
    runtime.block_on(async {
        tokio::select! {
            done = evaluation => panic!("the run ended before the kill: {:?}", done.err()),
            () = async {
                while server.request_count() < 20 {
                    assert!(started.elapsed() < Duration::from_secs(60), "no requests arrived");
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            } => {}
        }
    });
    runtime.shutdown_background();
    let seen_before_kill = settled_request_count(&server) as usize;

    let runs = store.list_runs().unwrap();
    assert_eq!(runs.len(), 1);
    let run_id = runs[0].run_id.clone();
    let stored = stored_turns(&store, &run_id);
    let states = store.sample_states(&run_id).unwrap();
    let done_before = states
        .iter()
        .filter(|s| s.status == SampleStatus::Ok)
        .count();
    assert!(!stored.is_empty(), "answers were stored before the kill");
    assert!(done_before < states.len(), "the kill came part-way");

    let resumed = run(&config, &Invocation::default(), &store)
        .expect("the resumed run")
        .outcome;
    assert_eq!(resumed.run_id, run_id);
    assert!(resumed.resumed);
    every_sample_ok(&resumed.summary);

    // No request after the kill asked for a sample's turn the store already held.
    let requests = server.requests();
    assert!(
        requests.len() > seen_before_kill,
        "the resumed run sent the rest"
    );
    for r in &requests[seen_before_kill..] {
        let sample = r
            .params
            .seed
            .expect("a separate call carries its sample index") as u32;
        assert!(
            !stored.contains(&(r.conversation_sha256.clone(), sample)),
            "request {} asked again for sample {sample} of a stored answer",
            r.seq
        );
    }
    // Every turn stored before the kill is still there, and every sample is stored once, whole.
    assert!(stored.is_subset(&stored_turns(&store, &run_id)));
    let samples = store.run_samples(&run_id).unwrap();
    let keys: HashSet<_> = samples
        .iter()
        .map(|s| (&s.task_id, s.sample_index))
        .collect();
    assert_eq!(keys.len(), samples.len());
    assert_eq!(samples.len() as u64, resumed.summary.samples_total);
    for s in &samples {
        assert_eq!(s.status, SampleStatus::Ok);
        assert_eq!(s.turns_done as usize, s.turns.len());
    }
}

#[test]
fn the_configuration_hash_follows_what_can_change_an_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (server, store) = (server(Duration::ZERO), store(dir.path()));
    // Planning only: a run is opened and its samples created, nothing is sent.
    let plan_only = |resume: Resume| Invocation {
        resume,
        plan_only: true,
        ..Invocation::default()
    };
    let config = config(&server, 2);
    let first = run(&config, &plan_only(Resume::Auto), &store)
        .unwrap()
        .outcome;
    let hash = first.summary.config_hash.clone();

    // The configuration as the manifest records it, read back as a worker reads it, with another name and
    // other limits (neither changes an answer): the same run.
    let recorded = store
        .get_run(&first.run_id)
        .unwrap()
        .unwrap()
        .manifest
        .eval_config;
    let mut worker = nmb_run::EvalConfig::from_recorded(&recorded.expect("recorded")).unwrap();
    assert_eq!(worker, config.recorded());
    worker.name = Some("another name".into());
    worker.limits.concurrency = 1;
    let same = run(&worker, &plan_only(Resume::Auto), &store)
        .unwrap()
        .outcome;
    assert_eq!(same.run_id, first.run_id);
    assert!(same.resumed);
    assert_eq!(same.summary.config_hash, hash);

    // Another temperature can change an answer: another run, and the old one refuses it.
    let mut warmer = config.clone();
    warmer.params.temperature = config.params.temperature + 0.5;
    let other = run(&warmer, &plan_only(Resume::Auto), &store)
        .unwrap()
        .outcome;
    assert_ne!(other.run_id, first.run_id);
    assert_ne!(other.summary.config_hash, hash);
    let refused = run(
        &warmer,
        &plan_only(Resume::Run(first.run_id.clone())),
        &store,
    );
    match refused {
        Err(EvalError::Run(RunError::ConfigMismatch { run_id, differs })) => {
            assert_eq!(run_id, first.run_id);
            assert_eq!(differs, "params");
        }
        other => panic!("expected a configuration mismatch, got {:?}", other.err()),
    }
    assert_eq!(server.request_count(), 0, "planning sends nothing");
}
