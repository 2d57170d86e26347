//! Every response is read against its caps, on every wire: a body past the byte cap (announced or not), a
//! compression bomb, a wrong encoding, deep nesting, numbers at the limits, a lying length and a dripping body
//! each end as one classified error, quickly and without reading what the server would go on sending; a batch's
//! output is read line by line, each line under one answer's cap.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use nmb_chat::{Message, OutputFormat, Role};
use nmb_fake_server::batch::BatchConfig;
use nmb_fake_server::{Config, FakeServer, Fault, HostileBatch};
use nmb_requests::{
    connect, response_cap, ApiKey, Backend, BackendKind, BackendOptions, CallError, ChatRequest,
    ErrorClass, HttpOptions, Polled, RetryPolicy, Scheduler, SchedulerConfig, Transport,
};

fn request() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::text(Role::User, "Where is the lesion?")],
        params: params(),
        n: 1,
        output: OutputFormat::Text,
        replay: Vec::new(),
        samples: Vec::new(),
    }
}

fn backend_with(kind: BackendKind, server: &FakeServer, http: &HttpOptions) -> Arc<dyn Backend> {
    let opts = BackendOptions {
        key: Some(ApiKey::new(KEY)),
        ..BackendOptions::default()
    };
    let transport = Transport::new(http).expect("transport");
    connect(&spec_for(kind, server), &transport, &opts).expect("connect")
}

/// A server that answers every request with `fault`.
async fn hostile(fault: &str) -> FakeServer {
    let fault: Fault = fault.parse().expect("a hostile mode");
    FakeServer::start(Config {
        fault_every: Some((1, fault)),
        ..Config::default()
    })
    .await
    .expect("server")
}

/// One call through a scheduler that retries what its policy retries (twice at most), on `kind`.
async fn call(
    kind: BackendKind,
    server: &FakeServer,
    http: &HttpOptions,
) -> (Result<nmb_requests::Completion, CallError>, u32, Duration) {
    let scheduler = Scheduler::new(SchedulerConfig {
        timeout: Duration::from_secs(20),
        retry: RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(1),
            ..RetryPolicy::default()
        },
        ..SchedulerConfig::default()
    });
    let lane = scheduler.lane(backend_with(kind, server, http), 1);
    let started = Instant::now();
    let out = scheduler.run(&lane, &request()).await;
    (out.result, out.attempts, started.elapsed())
}

#[tokio::test]
async fn a_body_past_its_cap_is_refused_once_without_reading_the_rest() {
    let cap = response_cap(&params(), 1);
    // 3 GB, announced in content-length or not: neither is read past the cap, and neither is asked again.
    for mode in ["huge:3000000000", "huge-close:3000000000"] {
        let server = hostile(mode).await;
        for kind in API_KINDS {
            let (result, attempts, took) = call(kind, &server, &HttpOptions::default()).await;
            let e = result.expect_err(mode);
            assert_eq!(e.class, ErrorClass::ResponseTooLarge, "{kind} {mode}: {e}");
            assert!(e.message.contains(&cap.to_string()), "{kind} {mode}: {e}");
            assert!(e.message.contains("--max-response-mib"), "{e}");
            assert_eq!(attempts, 1, "{kind} {mode}: never retried");
            assert!(took < Duration::from_secs(5), "{kind} {mode}: {took:?}");
        }
    }
    let announced = hostile("huge:3000000000").await;
    let (result, ..) = call(BackendKind::OpenAi, &announced, &HttpOptions::default()).await;
    let e = result.unwrap_err();
    assert!(e.message.contains("announces a body of"), "{e}");
}

#[tokio::test]
async fn an_answer_under_its_cap_is_read_and_a_larger_cap_reads_a_larger_one() {
    // 2 MB of text: past the default cap of a 321-token answer, under a cap of 4 MiB.
    let server = hostile("huge:2000000").await;
    for kind in API_KINDS {
        let (result, ..) = call(kind, &server, &HttpOptions::default()).await;
        assert_eq!(result.unwrap_err().class, ErrorClass::ResponseTooLarge);
        let raised = HttpOptions {
            max_response_bytes: Some(4 << 20),
            ..HttpOptions::default()
        };
        let (result, ..) = call(kind, &server, &raised).await;
        let c = result.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(c.choices[0].text.len(), 2_000_000, "{kind}");
    }
}

#[tokio::test]
async fn compressed_bodies_are_decoded_and_bombs_stop_at_the_cap() {
    for encoding in ["gzip", "deflate"] {
        // An honest compressed answer of 10 kB is decoded and read.
        let server = hostile(&format!("{encoding}-bomb:10000")).await;
        for kind in API_KINDS {
            let (result, ..) = call(kind, &server, &HttpOptions::default()).await;
            let c = result.unwrap_or_else(|e| panic!("{kind} {encoding}: {e}"));
            assert_eq!(c.choices[0].text.len(), 10_000, "{kind} {encoding}");
        }
        // 3 GB compressed about 1,000 to 1: stopped at the inflation cap, once.
        let server = hostile(&format!("{encoding}-bomb:3000000000")).await;
        for kind in API_KINDS {
            let (result, attempts, took) = call(kind, &server, &HttpOptions::default()).await;
            let e = result.unwrap_err();
            assert_eq!(
                e.class,
                ErrorClass::ResponseTooLarge,
                "{kind} {encoding}: {e}"
            );
            assert!(e.message.contains(encoding), "{e}");
            assert_eq!(attempts, 1);
            assert!(took < Duration::from_secs(5), "{kind} {encoding}: {took:?}");
        }
    }
}

#[tokio::test]
async fn wrong_encodings_deep_nesting_and_lying_lengths_are_classified() {
    let cases = [
        ("encoding:gzip", ErrorClass::MalformedResponse),
        ("encoding:deflate", ErrorClass::MalformedResponse),
        ("encoding:br", ErrorClass::MalformedResponse),
        // A length under the body's: the JSON is cut; over it: the connection closes early.
        ("lie:20", ErrorClass::MalformedResponse),
        ("lie:100000", ErrorClass::Network),
    ];
    for (mode, class) in cases {
        let server = hostile(mode).await;
        for kind in API_KINDS {
            let (result, ..) = call(kind, &server, &HttpOptions::default()).await;
            let e = result.expect_err(mode);
            assert_eq!(e.class, class, "{kind} {mode}: {e}");
        }
    }
}

#[tokio::test]
async fn deep_nesting_is_refused_or_skipped_never_followed() {
    // 100,000 nested arrays in a field the wire does not read: serde skips it without recursing, and the
    // answer is read; anything that parses it into a value stops at serde_json's depth limit.
    let server = hostile("deep:100000").await;
    for kind in API_KINDS {
        let (result, ..) = call(kind, &server, &HttpOptions::default()).await;
        match result {
            Ok(c) => assert!(c.choices[0].text.contains("diagnosis"), "{kind}"),
            Err(e) => assert_eq!(e.class, ErrorClass::MalformedResponse, "{kind}: {e}"),
        }
    }
}

#[tokio::test]
async fn numbers_at_the_limits_never_panic() {
    for n in ["2^63", "max", "negative", "float", "huge-float"] {
        let server = hostile(&format!("numbers:{n}")).await;
        for kind in API_KINDS {
            let (result, ..) = call(kind, &server, &HttpOptions::default()).await;
            match result {
                Ok(c) => assert!(!c.choices.is_empty(), "{kind} {n}"),
                Err(e) => assert_eq!(e.class, ErrorClass::MalformedResponse, "{kind} {n}: {e}"),
            }
        }
    }
}

#[tokio::test]
async fn a_dripping_body_ends_at_the_deadline_as_a_timeout() {
    let server = hostile("drip:300").await;
    // The transport's deadline alone (the scheduler's is 20 s): headers come at once, the body never ends.
    let http = HttpOptions {
        request_timeout: Some(Duration::from_secs(1)),
        ..HttpOptions::default()
    };
    for kind in API_KINDS {
        let backend = backend_with(kind, &server, &http);
        let started = Instant::now();
        let e = backend.complete(&request()).await.unwrap_err();
        let took = started.elapsed();
        assert_eq!(e.class, ErrorClass::Timeout, "{kind}: {e}");
        assert!(e.message.contains("did not end within 1s"), "{kind}: {e}");
        assert!(
            took >= Duration::from_millis(900) && took < Duration::from_secs(3),
            "{kind}: {took:?}"
        );
    }
}

/// Submits one batch of three requests to `server` and polls it once it ended.
async fn batch_outcome(kind: BackendKind, server: &FakeServer) -> Result<Polled, CallError> {
    let backend = backend(kind, server);
    let api = backend.batch().expect("a batch API");
    let mut ids = Vec::new();
    let mut entries = Vec::new();
    for i in 0..3 {
        let mut req = request();
        req.messages = vec![Message::text(Role::User, format!("Question {i}"))];
        let id = format!("nmb-req-{i}");
        entries.push(api.entry(&id, api.body(&req).unwrap()));
        ids.push(id);
    }
    let batch = api.submit("nmb-batch-caps", &entries).await.unwrap();
    // OpenAI's batches pass through `finalizing` for one poll before they are `completed`.
    for _ in 0..4 {
        match api.poll(&batch, &ids, api.response_cap(&request())).await {
            Ok(Polled::Running) => continue,
            outcome => return outcome,
        }
    }
    panic!("{kind}: the batch never ended");
}

fn batch_server_with(hostile: HostileBatch) -> Config {
    Config {
        batch: BatchConfig {
            hostile: Some(hostile),
            ..BatchConfig::default()
        },
        ..Config::default()
    }
}

#[tokio::test]
async fn a_batch_line_past_its_cap_fails_that_request_alone() {
    // 2 MB: past one answer's cap (about 1 MB), within what the three requests' output may take (about 4 MB).
    let server = FakeServer::start(batch_server_with(HostileBatch::HugeAnswer(2_000_000)))
        .await
        .unwrap();
    for kind in API_KINDS {
        let polled = batch_outcome(kind, &server).await;
        match (kind, polled) {
            // Gemini's answers come inside one JSON document: one too large fails the reading of all.
            (BackendKind::Gemini, Err(e)) => {
                assert_eq!(e.class, ErrorClass::ResponseTooLarge, "{e}");
                assert!(e.message.contains("inlined response 0"), "{e}");
            }
            (_, Ok(Polled::Ended(items))) => {
                assert_eq!(items.len(), 3, "{kind}");
                let errors: Vec<_> = items
                    .iter()
                    .filter_map(|i| i.result.as_ref().err())
                    .collect();
                assert_eq!(errors.len(), 1, "{kind}: {items:?}");
                assert_eq!(errors[0].class, ErrorClass::ResponseTooLarge, "{kind}");
            }
            (_, other) => panic!("{kind}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_batch_output_past_what_its_requests_can_take_is_refused() {
    let server = FakeServer::start(batch_server_with(HostileBatch::HugeAnswer(3_000_000_000)))
        .await
        .unwrap();
    for kind in API_KINDS {
        let started = Instant::now();
        let e = batch_outcome(kind, &server).await.unwrap_err();
        assert_eq!(e.class, ErrorClass::ResponseTooLarge, "{kind}: {e}");
        assert!(e.message.contains("batch"), "{kind}: {e}");
        assert!(started.elapsed() < Duration::from_secs(10), "{kind}");
    }
}

#[tokio::test]
async fn malformed_batch_lines_cost_only_the_request_they_name() {
    let server = FakeServer::start(batch_server_with(HostileBatch::MalformedLines))
        .await
        .unwrap();
    for kind in [BackendKind::OpenAi, BackendKind::Anthropic] {
        let Ok(Polled::Ended(items)) = batch_outcome(kind, &server).await else {
            panic!("{kind}: the batch is read");
        };
        let ids: Vec<&str> = items.iter().map(|i| i.custom_id.as_str()).collect();
        assert_eq!(ids.len(), 3, "{kind}: one line per request: {ids:?}");
        let errors: Vec<_> = items
            .iter()
            .filter_map(|i| i.result.as_ref().err())
            .collect();
        assert_eq!(errors.len(), 1, "{kind}");
        assert_eq!(errors[0].class, ErrorClass::MalformedResponse, "{kind}");
    }
}

#[tokio::test]
async fn a_dripping_batch_output_ends_at_the_transport_deadline() {
    let server = FakeServer::start(batch_server_with(HostileBatch::Drip(
        Duration::from_millis(300),
    )))
    .await
    .unwrap();
    let http = HttpOptions {
        request_timeout: Some(Duration::from_secs(1)),
        ..HttpOptions::default()
    };
    for kind in API_KINDS {
        let backend = backend_with(kind, &server, &http);
        let api = backend.batch().unwrap();
        let entries = [api.entry("nmb-req-0", api.body(&request()).unwrap())];
        let batch = api.submit("nmb-batch-drip", &entries).await.unwrap();
        let ids = ["nmb-req-0".to_string()];
        let cap = api.response_cap(&request());
        // OpenAI's batches pass through `finalizing` for one poll before they are `completed`.
        let mut started = Instant::now();
        let mut polled = api.poll(&batch, &ids, cap).await;
        if let Ok(Polled::Running) = polled {
            started = Instant::now();
            polled = api.poll(&batch, &ids, cap).await;
        }
        let e = polled.unwrap_err();
        assert_eq!(e.class, ErrorClass::Timeout, "{kind}: {e}");
        assert!(started.elapsed() < Duration::from_secs(4), "{kind}");
    }
}

#[tokio::test]
async fn a_batch_done_without_output_is_a_malformed_answer_not_an_empty_one() {
    let server = FakeServer::start(batch_server_with(HostileBatch::NoOutput))
        .await
        .unwrap();
    for kind in API_KINDS {
        let e = batch_outcome(kind, &server).await.unwrap_err();
        assert_eq!(e.class, ErrorClass::MalformedResponse, "{kind}: {e}");
    }
}
