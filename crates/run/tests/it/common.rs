//! What the tests share: a fake server on loopback, a store in a temporary directory, and the evaluation run to
//! its end on a runtime of its own.

use std::sync::Arc;
use std::time::Duration;

use nmb_fake_server::{Config, FakeServer};
use nmb_requests::ModelSpec;
use nmb_run::{evaluate, EvalConfig, EvalError, Evaluated, Invocation, Progress};
use nmb_store::{RunSummary, Store};

/// An OpenAI-wire server answering after `latency`.
pub fn server(latency: Duration) -> FakeServer {
    let config = Config {
        latency,
        ..Config::default()
    };
    FakeServer::start_in_background(config, 2).expect("fake server starts")
}

pub fn store(dir: &std::path::Path) -> Arc<Store> {
    Arc::new(Store::open_dir(dir).expect("store opens"))
}

/// `nmb eval --suite sample --model openai:fake@SERVER/v1 --samples SAMPLES --concurrency 3`, no retries.
pub fn config(server: &FakeServer, samples: u32) -> EvalConfig {
    let spec = format!("openai:fake-model@{}/v1", server.url());
    model_config(&spec, samples)
}

/// The sample suite asked of `spec`.
pub fn model_config(spec: &str, samples: u32) -> EvalConfig {
    let spec = ModelSpec::parse(spec).expect(spec);
    let mut config = EvalConfig::new(nmb_suite::Source::new("sample"), spec);
    config.samples = Some(samples);
    config.limits.concurrency = 3;
    config.limits.max_retries = 0;
    config
}

/// Runs the evaluation to its end, as `nmb eval` does.
pub fn run(
    config: &EvalConfig,
    invocation: &Invocation,
    store: &Arc<Store>,
) -> Result<Evaluated, EvalError> {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let scheduler = config.scheduler(store, None);
    let progress = Arc::new(Progress::default());
    runtime.block_on(evaluate(
        config,
        invocation,
        store.clone(),
        &scheduler,
        progress,
    ))
}

/// The server's request count once no request has arrived for a moment (a request a dropped client had
/// written may still be in the socket).
pub fn settled_request_count(server: &FakeServer) -> u64 {
    let mut last = server.request_count();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = server.request_count();
        if now == last {
            return now;
        }
        last = now;
    }
}

pub fn every_sample_ok(summary: &RunSummary) {
    assert!(summary.samples_total > 0);
    assert_eq!(summary.samples_ok, summary.samples_total, "{summary:?}");
    assert_eq!(summary.samples_pending, 0);
}
