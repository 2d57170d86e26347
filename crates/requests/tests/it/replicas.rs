//! One model served by several servers (`BACKEND:MODEL@URL,URL`): the scheduler spreads calls over the replicas,
//! leaves a failing one out for its back-off period, retries elsewhere, and says which replica answered.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use nmb_chat::{Message, OutputFormat, Role};
use nmb_fake_server::{Config, FakeServer, Fault};
use nmb_requests::{
    connect, ApiKey, Backend, BackendKind, BackendOptions, ChatRequest, ErrorClass, ModelSpec,
    ReplicaPolicy, RetryPolicy, Scheduler, SchedulerConfig,
};

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::text(
            Role::User,
            "What is the most likely diagnosis?",
        )],
        params: params(),
        n: 1,
        output: OutputFormat::Text,
        replay: Vec::new(),
        samples: Vec::new(),
    }
}

fn base(kind: BackendKind, url: &str) -> String {
    match kind {
        BackendKind::OpenAi => format!("{url}/v1"),
        _ => url.to_string(),
    }
}

fn replicated(kind: BackendKind, urls: &[String]) -> Arc<dyn Backend> {
    let bases: Vec<String> = urls.iter().map(|u| base(kind, u)).collect();
    let spec = ModelSpec::parse(&format!("{kind}:test-model@{}", bases.join(","))).unwrap();
    let opts = BackendOptions {
        key: Some(ApiKey::new(KEY)),
        ..BackendOptions::default()
    };
    connect(&spec, &transport(), &opts).expect("connect")
}

fn scheduler(policy: ReplicaPolicy) -> Scheduler {
    Scheduler::new(SchedulerConfig {
        global_limit: 8,
        timeout: Duration::from_secs(10),
        retry: RetryPolicy {
            max_retries: 2,
            ..RetryPolicy::default()
        },
        replicas: policy,
        ..SchedulerConfig::default()
    })
    .with_sleeper(Arc::new(RecordingSleeper::default()))
}

async fn slow_server() -> FakeServer {
    FakeServer::start(Config {
        latency: Duration::from_millis(40),
        ..Config::default()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn calls_are_spread_over_the_replicas_and_name_the_one_that_answered() {
    for kind in API_KINDS {
        let (a, b) = (slow_server().await, slow_server().await);
        let backend = replicated(kind, &[a.url(), b.url()]);
        let names = [base(kind, &a.url()), base(kind, &b.url())];
        assert_eq!(backend.replicas(), names);
        let s = scheduler(ReplicaPolicy::default());
        let lane = s.lane(backend, 4);
        let req = Arc::new(request());
        let calls: Vec<_> = (0..24)
            .map(|_| {
                let (s, lane, req) = (s.clone(), lane.clone(), req.clone());
                tokio::spawn(async move { s.run(&lane, &req).await })
            })
            .collect();
        let mut answered: BTreeMap<String, u64> = BTreeMap::new();
        for c in calls {
            let out = c.await.unwrap();
            assert!(out.result.is_ok(), "{kind}: {:?}", out.result);
            *answered.entry(out.replica.expect("a replica")).or_default() += 1;
        }
        assert_eq!(answered.get(&names[0]), Some(&a.request_count()), "{kind}");
        assert_eq!(answered.get(&names[1]), Some(&b.request_count()), "{kind}");
        // 24 calls picked at once, 12 each; the per-replica limit (4 each) kept both busy
        assert_eq!((a.request_count(), b.request_count()), (12, 12), "{kind}");
        assert_eq!(lane.current_limit(), 8, "one limit per replica");
        assert_eq!(lane.in_flight_by_replica(), [0, 0]);
    }
}

#[tokio::test]
async fn a_failing_replica_is_left_out_and_the_retry_goes_elsewhere() {
    let failing = FakeServer::start(Config {
        fault_every: Some((1, Fault::Status(500))),
        ..Config::default()
    })
    .await
    .unwrap();
    let ok = server().await;
    // a replica that refuses connections is a failing one too
    let refusing = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let backend = replicated(
        BackendKind::OpenAi,
        &[failing.url(), refusing.clone(), ok.url()],
    );
    let s = scheduler(ReplicaPolicy::default());
    let lane = s.lane(backend, 4);
    let req = request();
    let first = s.run(&lane, &req).await;
    assert!(first.result.is_ok(), "{:?}", first.result);
    assert_eq!(
        first.replica.as_deref(),
        Some(format!("{}/v1", ok.url()).as_str())
    );
    assert_eq!(
        first.attempt_errors,
        [ErrorClass::ServerError, ErrorClass::Network],
        "each retry went to the next replica"
    );
    // both failing replicas are out for 30 s: everything goes to the one that answers
    for _ in 0..10 {
        let out = s.run(&lane, &req).await;
        assert_eq!(out.attempts, 1);
        assert_eq!(out.replica.as_deref(), first.replica.as_deref());
    }
    assert_eq!(failing.request_count(), 1);
    assert_eq!(ok.request_count(), 11);
}

#[tokio::test]
async fn a_replica_left_out_is_tried_again_after_its_back_off() {
    let flaky = server().await;
    let steady = server().await;
    flaky.push_faults([Some(Fault::Status(503)), Some(Fault::Status(503))]);
    let backend = replicated(BackendKind::Anthropic, &[flaky.url(), steady.url()]);
    let policy = ReplicaPolicy {
        first_backoff: Duration::from_millis(300),
        max_backoff: Duration::from_secs(5),
    };
    let s = scheduler(policy);
    let lane = s.lane(backend, 4);
    let req = request();
    let run = || async { s.run(&lane, &req).await.replica.unwrap() };
    let (flaky_name, steady_name) = (flaky.url(), steady.url());
    // 503 on the first replica: out for 300 ms, the retry answered by the other
    assert_eq!(run().await, steady_name);
    assert_eq!(run().await, steady_name);
    tokio::time::sleep(Duration::from_millis(350)).await;
    // back, it fails again: out for 600 ms
    assert_eq!(run().await, steady_name);
    assert_eq!(flaky.request_count(), 2);
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert_eq!(run().await, steady_name);
    assert_eq!(flaky.request_count(), 2, "still out: the period doubled");
    tokio::time::sleep(Duration::from_millis(400)).await;
    // recovered: it answers, and takes its share again (ties go to the first replica)
    assert_eq!(run().await, flaky_name);
    assert_eq!(run().await, flaky_name);
    assert_eq!(flaky.request_count(), 4);
}

#[tokio::test]
async fn with_every_replica_failing_calls_fail_as_on_one_server() {
    let servers = [
        FakeServer::start(Config {
            fault_every: Some((1, Fault::Status(500))),
            ..Config::default()
        })
        .await
        .unwrap(),
        FakeServer::start(Config {
            fault_every: Some((1, Fault::Status(502))),
            ..Config::default()
        })
        .await
        .unwrap(),
    ];
    let backend = replicated(BackendKind::Gemini, &[servers[0].url(), servers[1].url()]);
    let s = scheduler(ReplicaPolicy::default());
    let lane = s.lane(backend, 4);
    let out = s.run(&lane, &request()).await;
    assert_eq!(out.result.unwrap_err().class, ErrorClass::ServerError);
    assert_eq!(
        out.attempts, 3,
        "1 + max_retries 2: never refused for want of a replica"
    );
    assert_eq!(servers[0].request_count() + servers[1].request_count(), 3);
    assert!(out.replica.is_some());
}
