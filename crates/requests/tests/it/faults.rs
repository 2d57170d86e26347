//! Every injected fault ends, after the scheduler's retries, as the right error class (or as a success once the
//! fault clears), on every wire.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use nmb_chat::{Message, OutputFormat, Role};
use nmb_fake_server::{Config, FakeServer, Fault};
use nmb_requests::{
    AimdConfig, BackendKind, ChatRequest, ErrorClass, Outcome, RetryPolicy, Scheduler,
    SchedulerConfig,
};

const RETRIES: u32 = 2;

fn scheduler(sleeper: Arc<RecordingSleeper>, timeout: Duration) -> Scheduler {
    Scheduler::new(SchedulerConfig {
        global_limit: 8,
        timeout,
        retry: RetryPolicy {
            max_retries: RETRIES,
            ..RetryPolicy::default()
        },
        aimd: AimdConfig { climb_after: 4 },
        ..SchedulerConfig::default()
    })
    .with_sleeper(sleeper)
}

fn simple_request() -> ChatRequest {
    let img = image(9);
    ChatRequest {
        messages: vec![Message {
            role: Role::User,
            as_parts: false,
            parts: vec![
                nmb_chat::Part::Text("Describe the lesion.".into()),
                nmb_chat::Part::Image(img),
            ],
        }],
        params: params(),
        n: 1,
        output: OutputFormat::Text,
        replay: Vec::new(),
        samples: Vec::new(),
    }
}

async fn run_with_faults(
    kind: BackendKind,
    faults: Vec<Option<Fault>>,
    timeout: Duration,
) -> (Outcome, Vec<Duration>, u64) {
    let server = server().await;
    server.push_faults(faults);
    let sleeper = Arc::new(RecordingSleeper::default());
    let s = scheduler(sleeper.clone(), timeout);
    let lane = s.lane(backend(kind, &server), 4);
    let out = s.run(&lane, &simple_request()).await;
    (out, sleeper.waits(), server.request_count())
}

fn f(spec: &str) -> Option<Fault> {
    Some(spec.parse().expect("fault spec"))
}

/// A fault on every attempt: the call must end as `class` after `attempts` attempts.
async fn assert_persistent(kind: BackendKind, spec: &str, class: ErrorClass, attempts: u32) {
    let faults = vec![f(spec); attempts as usize + 1];
    let (out, _, sent) = run_with_faults(kind, faults, Duration::from_secs(5)).await;
    let err = out.result.as_ref().expect_err(spec);
    assert_eq!(err.class, class, "{kind} {spec}: {err}");
    assert_eq!(out.attempts, attempts, "{kind} {spec}");
    assert_eq!(
        sent,
        u64::from(attempts),
        "{kind} {spec}: requests reaching the server"
    );
    assert_eq!(out.attempt_errors, vec![class; attempts as usize]);
}

#[tokio::test]
async fn persistent_faults_end_as_their_class() {
    let all = RETRIES + 1;
    for kind in API_KINDS {
        assert_persistent(kind, "429", ErrorClass::RateLimit, all).await;
        assert_persistent(kind, "500", ErrorClass::ServerError, all).await;
        assert_persistent(kind, "503", ErrorClass::ServerError, all).await;
        assert_persistent(kind, "529", ErrorClass::ServerError, all).await;
        assert_persistent(kind, "reset", ErrorClass::Network, all).await;
        assert_persistent(kind, "malformed", ErrorClass::MalformedResponse, all).await;
        assert_persistent(kind, "empty", ErrorClass::MalformedResponse, all).await;
        // not worth retrying: one attempt
        assert_persistent(kind, "refusal", ErrorClass::Refusal, 1).await;
        assert_persistent(kind, "context", ErrorClass::ContextLength, 1).await;
        assert_persistent(kind, "401", ErrorClass::Auth, 1).await;
        assert_persistent(kind, "404", ErrorClass::ClientError, 1).await;
    }
}

#[tokio::test]
async fn transient_faults_recover() {
    for kind in API_KINDS {
        for spec in ["500", "503", "reset", "malformed", "empty", "429"] {
            let (out, waits, sent) =
                run_with_faults(kind, vec![f(spec)], Duration::from_secs(5)).await;
            let c = out
                .result
                .as_ref()
                .unwrap_or_else(|e| panic!("{kind} {spec}: {e}"));
            assert!(!c.choices[0].text.is_empty());
            assert_eq!(out.attempts, 2, "{kind} {spec}");
            assert_eq!(sent, 2);
            assert_eq!(waits.len(), 1);
            assert!(
                waits[0] <= RetryPolicy::default().base_delay,
                "first backoff is under the base"
            );
        }
    }
}

#[tokio::test]
async fn retry_after_is_honoured() {
    for kind in API_KINDS {
        let (out, waits, _) = run_with_faults(kind, vec![f("429:7")], Duration::from_secs(5)).await;
        assert!(out.result.is_ok(), "{kind}");
        assert_eq!(waits, [Duration::from_secs(7)], "{kind}");
        let date = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(30));
        let (out, waits, _) = run_with_faults(
            kind,
            vec![Some(Fault::RateLimit {
                retry_after: Some(date),
                retry_after_ms: None,
            })],
            Duration::from_secs(5),
        )
        .await;
        assert!(out.result.is_ok(), "{kind}");
        assert!(
            waits[0] >= Duration::from_secs(28) && waits[0] <= Duration::from_secs(31),
            "{waits:?}"
        );
    }
    let (_, waits, _) = run_with_faults(
        BackendKind::OpenAi,
        vec![f("429ms:1500")],
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(waits, [Duration::from_millis(1500)]);
}

#[tokio::test]
async fn retry_after_beyond_the_cap_gives_up() {
    let (out, waits, _) = run_with_faults(
        BackendKind::OpenAi,
        vec![f("429:86400")],
        Duration::from_secs(5),
    )
    .await;
    let e = out.result.unwrap_err();
    assert_eq!(e.class, ErrorClass::RateLimit);
    assert_eq!(e.retry_after, Some(Duration::from_secs(86400)));
    assert!(waits.is_empty());
    assert_eq!(out.attempts, 1);
}

#[tokio::test]
async fn retry_after_waits_in_real_time() {
    let server = server().await;
    server.push_faults([f("429:1")]);
    let s = Scheduler::new(SchedulerConfig::default());
    let lane = s.lane(backend(BackendKind::Anthropic, &server), 4);
    let t0 = Instant::now();
    let out = s.run(&lane, &simple_request()).await;
    assert!(out.result.is_ok());
    assert!(t0.elapsed() >= Duration::from_secs(1), "{:?}", t0.elapsed());
    assert!(out.total_latency >= Duration::from_secs(1));
    assert!(
        out.response_latency() < Duration::from_secs(1),
        "the stored latency is the answering attempt's, not the wait: {:?}",
        out.response_latency()
    );
    assert_eq!(s.counters().retries, 1);
}

#[tokio::test]
async fn slow_response_times_out() {
    for kind in API_KINDS {
        let faults = vec![f("slow:3000"); RETRIES as usize + 1];
        let t0 = Instant::now();
        let (out, _, _) = run_with_faults(kind, faults, Duration::from_millis(200)).await;
        let e = out.result.unwrap_err();
        assert_eq!(e.class, ErrorClass::Timeout, "{kind}: {e}");
        assert_eq!(out.attempts, RETRIES + 1);
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "timed out early, not after the slow answer"
        );
        let (out, _, _) = run_with_faults(kind, vec![f("hang")], Duration::from_millis(200)).await;
        assert!(out.result.is_ok(), "a hang once, then an answer");
        assert_eq!(out.attempt_errors, [ErrorClass::Timeout]);
    }
}

#[tokio::test]
async fn faults_by_prompt_marker() {
    let server = server().await;
    let sleeper = Arc::new(RecordingSleeper::default());
    let s = scheduler(sleeper.clone(), Duration::from_secs(5));
    let lane = s.lane(backend(BackendKind::Gemini, &server), 4);
    let mut req = simple_request();
    req.messages[0].parts[0] = nmb_chat::Part::Text("FAULT:503*2 describe".into());
    let out = s.run(&lane, &req).await;
    assert!(out.result.is_ok());
    assert_eq!(out.attempt_errors, [ErrorClass::ServerError; 2]);
    req.messages[0].parts[0] = nmb_chat::Part::Text("FAULT:refusal describe".into());
    let out = s.run(&lane, &req).await;
    assert_eq!(out.result.unwrap_err().class, ErrorClass::Refusal);
    let snap = s.counters();
    assert_eq!(snap.ok, 1);
    assert_eq!(snap.failed, 1);
    assert_eq!(snap.errors_by_class.get("refusal"), Some(&1));
    assert_eq!(snap.attempt_errors_by_class.get("server_error"), Some(&2));
    assert_eq!(snap.retries, 2);
    assert_eq!(snap.in_flight, 0);
}

#[tokio::test]
async fn rate_limits_halve_the_lane_and_successes_climb_back() {
    let server = server().await;
    let sleeper = Arc::new(RecordingSleeper::default());
    let s = scheduler(sleeper, Duration::from_secs(5));
    let lane = s.lane(backend(BackendKind::OpenAi, &server), 8);
    assert_eq!(lane.current_limit(), 8);
    server.push_faults([f("429")]);
    let req = simple_request();
    assert!(s.run(&lane, &req).await.result.is_ok());
    // halved by the 429; the retry's success is the first of the climb_after = 4 needed for +1
    assert_eq!(lane.current_limit(), 4);
    let mut seen = vec![lane.current_limit()];
    for _ in 0..15 {
        assert!(s.run(&lane, &req).await.result.is_ok());
        seen.push(lane.current_limit());
    }
    assert_eq!(seen, [4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7, 8]);
    for _ in 0..8 {
        s.run(&lane, &req).await.result.unwrap();
    }
    assert_eq!(lane.current_limit(), 8, "never above the configured limit");
    // a burst of 429s cuts down to 1, never below
    server.push_faults(vec![f("429"); 10]);
    let out = s.run(&lane, &req).await;
    assert_eq!(out.result.unwrap_err().class, ErrorClass::RateLimit);
    assert_eq!(lane.current_limit(), 1);
    assert_eq!(s.counters().current_limit, 1);
}

#[tokio::test]
async fn concurrency_stays_within_lane_and_global_limits() {
    // 40 calls against a server that takes 30 ms each: the server must never see more than the limit at once.
    let config = Config {
        latency: Duration::from_millis(30),
        ..Config::default()
    };
    let server = FakeServer::start(config).await.unwrap();
    let s = Scheduler::new(SchedulerConfig {
        global_limit: 3,
        ..SchedulerConfig::default()
    });
    let lane = s.lane(backend(BackendKind::OpenAi, &server), 5);
    let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let watcher = {
        let (s, peak) = (s.clone(), peak.clone());
        tokio::spawn(async move {
            loop {
                peak.fetch_max(s.counters().in_flight, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    };
    let req = Arc::new(simple_request());
    let tasks: Vec<_> = (0..40)
        .map(|_| {
            let (s, lane, req) = (s.clone(), lane.clone(), req.clone());
            tokio::spawn(async move { s.run(&lane, &req).await })
        })
        .collect();
    for t in tasks {
        assert!(t.await.unwrap().result.is_ok());
    }
    watcher.abort();
    let p = peak.load(std::sync::atomic::Ordering::Relaxed);
    assert!(p <= 3, "in flight peaked at {p}, above the global limit 3");
    assert!(p >= 2, "calls did run concurrently (peak {p})");
    assert_eq!(server.request_count(), 40);
}
