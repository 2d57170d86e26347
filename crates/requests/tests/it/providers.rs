//! The providers as they behave, against the fake server's emulation of each documented rule: Claude's one
//! sampler, Gemini's thinking levels and budgets, thinking that uses up the answer's tokens, waits a server asks
//! for in the body or beyond any honest wait, quota refusals, and the SDKs' retry rules.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use nmb_chat::{Message, ReasoningEffort, Role};
use nmb_fake_server::{Config, FakeServer, Fault, Reply};
use nmb_requests::{
    connect, Adjustment, ApiKey, Backend, BackendKind, BackendOptions, ChatRequest, ErrorClass,
    ModelSpec, Outcome, RetryPolicy, Scheduler, SchedulerConfig,
};

fn ask(params: nmb_chat::GenParams) -> ChatRequest {
    ChatRequest::new(
        vec![Message::text(
            Role::User,
            "What is the most likely diagnosis?",
        )],
        params,
    )
}

fn model(kind: BackendKind, name: &str, server: &FakeServer) -> Arc<dyn Backend> {
    let base = match kind {
        BackendKind::OpenAi => format!("{}/v1", server.url()),
        _ => server.url(),
    };
    let spec = ModelSpec::parse(&format!("{kind}:{name}@{base}")).unwrap();
    let opts = BackendOptions {
        key: Some(ApiKey::new(KEY)),
        ..BackendOptions::default()
    };
    connect(&spec, &transport(), &opts).unwrap()
}

/// Runs `req` through a scheduler whose waits are recorded, not slept.
async fn run(backend: Arc<dyn Backend>, req: &ChatRequest) -> (Outcome, Vec<Duration>) {
    let sleeper = Arc::new(RecordingSleeper::default());
    let s = Scheduler::new(SchedulerConfig {
        retry: RetryPolicy {
            max_retries: 2,
            ..RetryPolicy::default()
        },
        ..SchedulerConfig::default()
    })
    .with_sleeper(sleeper.clone());
    let lane = s.lane(backend, 4);
    let out = s.run(&lane, req).await;
    (out, sleeper.waits())
}

fn f(spec: &str) -> Option<Fault> {
    Some(spec.parse().expect("fault spec"))
}

#[tokio::test]
async fn claude_45_gets_temperature_alone_and_the_manifest_says_why() {
    let server = server().await;
    for name in [
        "claude-sonnet-4-5",
        "claude-haiku-4-5-20251001",
        "claude-opus-4-1",
    ] {
        let b = model(BackendKind::Anthropic, name, &server);
        let (out, _) = run(b.clone(), &ask(params())).await;
        assert!(out.result.is_ok(), "{name}: {:?}", out.result);
        assert_eq!(out.attempts, 1, "{name}: nothing refused");
        let adjusted = b.adjustments();
        let why = &adjusted[&Adjustment::NoTopP];
        assert!(why.contains("Migrating to Claude 4.5"), "{why}");
    }
    let sent: Vec<_> = server
        .requests()
        .iter()
        .map(|r| (r.params.temperature, r.params.top_p))
        .collect();
    assert!(sent.iter().all(|s| *s == (Some(0.3), None)), "{sent:?}");

    // Opus 4.7 takes neither.
    let b = model(BackendKind::Anthropic, "claude-opus-4-7", &server);
    let (out, _) = run(b.clone(), &ask(params())).await;
    assert!(out.result.is_ok(), "{:?}", out.result);
    let last = server.requests().pop().unwrap();
    assert_eq!((last.params.temperature, last.params.top_p), (None, None));
    let names: Vec<_> = b.adjustments().into_keys().collect();
    assert_eq!(names, [Adjustment::NoTemperature, Adjustment::NoTopP]);

    // An older Claude keeps both.
    let b = model(
        BackendKind::Anthropic,
        "claude-3-7-sonnet-20250219",
        &server,
    );
    assert!(run(b.clone(), &ask(params())).await.0.result.is_ok());
    let last = server.requests().pop().unwrap();
    assert_eq!(
        (last.params.temperature, last.params.top_p),
        (Some(0.3), Some(0.9))
    );
    assert!(b.adjustments().is_empty());
}

/// A Claude model nmb does not know refuses the pair in Anthropic's words: the call goes again without top_p,
/// and so does every later one.
#[tokio::test]
async fn a_refused_sampler_pair_is_left_out_on_the_anthropic_wire() {
    let server = FakeServer::start(Config {
        responder: Arc::new(|req| {
            if req.params.temperature.is_some() && req.params.top_p.is_some() {
                let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"`temperature` and `top_p` cannot both be specified for this model. Please use only one."}}"#;
                return Reply::Raw {
                    status: 400,
                    headers: Vec::new(),
                    body: body.into(),
                };
            }
            nmb_fake_server::default_reply(req)
        }),
        ..Config::default()
    })
    .await
    .unwrap();
    let b = model(BackendKind::Anthropic, "claude-future-9", &server);
    let (out, _) = run(b.clone(), &ask(params())).await;
    assert!(out.result.is_ok(), "{:?}", out.result);
    assert_eq!(
        server.request_count(),
        2,
        "refused once, then sent without top_p"
    );
    assert!(b.adjustments()[&Adjustment::NoTopP].contains("the server refused it"));
    assert!(run(b, &ask(params())).await.0.result.is_ok());
    assert_eq!(
        server.request_count(),
        3,
        "later calls leave it out from the start"
    );
}

async fn gemini_thinking(
    name: &str,
    effort: ReasoningEffort,
) -> (serde_json::Value, Arc<dyn Backend>) {
    let server = server().await;
    let b = model(BackendKind::Gemini, name, &server);
    let p = nmb_chat::GenParams {
        reasoning_effort: Some(effort),
        ..params()
    };
    let (out, _) = run(b.clone(), &ask(p)).await;
    assert!(out.result.is_ok(), "{name} {effort}: {:?}", out.result);
    let sent = server.requests().pop().unwrap().params.reasoning.unwrap();
    (sent, b)
}

#[tokio::test]
async fn gemini_gets_the_thinking_levels_and_budgets_each_model_takes() {
    for (effort, level) in [
        (ReasoningEffort::Medium, "high"),
        (ReasoningEffort::Minimal, "low"),
        (ReasoningEffort::None, "low"),
    ] {
        let (sent, b) = gemini_thinking("gemini-3-pro-preview", effort).await;
        assert_eq!(sent["thinkingLevel"], level, "{effort}");
        let why = &b.adjustments()[&Adjustment::ThinkingLevel];
        assert!(why.contains("Gemini 3 developer guide"), "{why}");
    }
    let (sent, b) = gemini_thinking("gemini-3-pro-preview", ReasoningEffort::High).await;
    assert_eq!(sent["thinkingLevel"], "high");
    assert!(b.adjustments().is_empty());
    let (sent, b) = gemini_thinking("gemini-2.5-pro", ReasoningEffort::None).await;
    assert_eq!(sent["thinkingBudget"], 128, "2.5 Pro cannot stop thinking");
    assert!(b.adjustments()[&Adjustment::ThinkingBudget].contains("128 to 32768"));
    let (sent, _) = gemini_thinking("gemini-2.5-flash", ReasoningEffort::None).await;
    assert_eq!(sent["thinkingBudget"], 0);
}

#[tokio::test]
async fn a_thinking_budget_outside_the_models_range_is_refused_before_sending() {
    let server = server().await;
    let b = model(BackendKind::Gemini, "gemini-2.5-pro", &server);
    let with = |budget| nmb_chat::GenParams {
        thinking_budget: Some(budget),
        ..params()
    };
    let err = b.thinking_budget(&with(0)).unwrap_err();
    assert!(
        err.contains("128 to 32768") && err.contains("not 0"),
        "{err}"
    );
    assert!(b.thinking_budget(&with(40_000)).is_err());
    assert!(b.thinking_budget(&with(2048)).is_ok());
    let lite = model(BackendKind::Gemini, "gemini-2.5-flash-lite", &server);
    assert!(lite.thinking_budget(&with(0)).is_ok());
    assert!(lite.thinking_budget(&with(100)).is_err());
}

/// A Gemini model nmb knows no levels for refuses one in Gemini's words: it is sent the nearest level it takes.
#[tokio::test]
async fn a_refused_thinking_level_is_replaced_on_the_gemini_wire() {
    let server = FakeServer::start(Config {
        responder: Arc::new(|req| {
            let level = req.params.reasoning.as_ref().and_then(|r| r["thinkingLevel"].as_str());
            if level == Some("medium") {
                let body = r#"{"error":{"code":400,"message":"Thinking level MEDIUM is not supported for this model. Please retry with other thinking level.","status":"INVALID_ARGUMENT"}}"#;
                return Reply::Raw {
                    status: 400,
                    headers: Vec::new(),
                    body: body.into(),
                };
            }
            nmb_fake_server::default_reply(req)
        }),
        ..Config::default()
    })
    .await
    .unwrap();
    let b = model(BackendKind::Gemini, "gemini-4-pro", &server);
    let p = nmb_chat::GenParams {
        reasoning_effort: Some(ReasoningEffort::Medium),
        ..params()
    };
    let (out, _) = run(b.clone(), &ask(p)).await;
    assert!(out.result.is_ok(), "{:?}", out.result);
    let levels: Vec<_> = server
        .requests()
        .iter()
        .map(|r| r.params.reasoning.as_ref().unwrap()["thinkingLevel"].clone())
        .collect();
    assert_eq!(levels, ["medium", "high"]);
    assert!(b.adjustments()[&Adjustment::ThinkingLevel].contains("Thinking level MEDIUM"));
}

/// A model out of tokens while thinking answers no text: an empty answer cut off at the limit, on every wire,
/// paid for once.
#[tokio::test]
async fn thinking_that_uses_up_the_tokens_is_an_empty_answer_never_retried() {
    for (kind, reason) in [
        (BackendKind::OpenAi, "length"),
        (BackendKind::Anthropic, "max_tokens"),
        (BackendKind::Gemini, "MAX_TOKENS"),
    ] {
        let server = server().await;
        server.push_faults([f("exhausted")]);
        let (out, waits) = run(backend(kind, &server), &ask(params())).await;
        let c = out.result.unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(out.attempts, 1, "{kind}");
        assert!(waits.is_empty());
        assert_eq!(c.choices.len(), 1);
        assert_eq!(c.choices[0].text, "", "{kind}");
        assert_eq!(c.choices[0].finish_reason, reason, "{kind}");
        assert!(c.choices[0].cut_off(), "{kind}");
        assert!(!c.choices[0].refused);
        assert!(c.usage.output_tokens > 0, "{kind}: the thinking is billed");
    }
}

#[tokio::test]
async fn geminis_retry_info_is_waited_as_retry_after() {
    let server = server().await;
    server.push_faults([f("retryinfo:7")]);
    let (out, waits) = run(backend(BackendKind::Gemini, &server), &ask(params())).await;
    assert!(out.result.is_ok(), "{:?}", out.result);
    assert_eq!(waits, [Duration::from_secs(7)]);
}

/// A wait no call can honour ends the call as a rate limit that says so, whatever the number: never a panic,
/// never a sleep.
#[tokio::test]
async fn retry_hints_beyond_any_wait_end_the_call_as_a_rate_limit() {
    for (kind, spec) in [
        (BackendKind::OpenAi, "429:1e20"),
        (BackendKind::Anthropic, "429:-5"),
        (BackendKind::OpenAi, "429:NaN"),
        (BackendKind::Gemini, "retryinfo:99999999999999999999"),
        (BackendKind::Anthropic, "429:86400"),
    ] {
        let server = server().await;
        server.push_faults([f(spec)]);
        let (out, waits) = run(backend(kind, &server), &ask(params())).await;
        let e = out.result.unwrap_err();
        assert_eq!(e.class, ErrorClass::RateLimit, "{spec}");
        assert!(
            e.message.contains("the server asked to wait"),
            "{spec}: {e}"
        );
        assert!(waits.is_empty(), "{spec}");
        assert_eq!(out.attempts, 1, "{spec}");
    }
}

/// Quota used up: the call ends at once, and the lane's later calls end with it unsent.
#[tokio::test]
async fn a_used_up_quota_ends_the_lanes_calls_without_sending_them() {
    for kind in API_KINDS {
        let server = server().await;
        server.push_faults([f("quota"), f("quota"), f("quota")]);
        let s = Scheduler::new(SchedulerConfig::default());
        let lane = s.lane(backend(kind, &server), 1);
        let first = s.run(&lane, &ask(params())).await;
        let e = first.result.unwrap_err();
        assert_eq!(e.class, ErrorClass::QuotaExhausted, "{kind}: {e}");
        assert_eq!(first.attempts, 1, "{kind}");
        let second = s.run(&lane, &ask(params())).await;
        let e = second.result.unwrap_err();
        assert_eq!(e.class, ErrorClass::QuotaExhausted, "{kind}");
        assert!(e.message.starts_with("not sent"), "{e}");
        assert_eq!(second.attempts, 0);
        assert_eq!(
            server.request_count(),
            1,
            "{kind}: one request reached the server"
        );
    }
}

/// As openai-python's and anthropic-sdk's `_should_retry`: `x-should-retry` is obeyed over the status, and 409
/// is retried.
#[tokio::test]
async fn the_sdks_retry_rules_are_followed() {
    for kind in API_KINDS {
        let server = server().await;
        server.push_faults([f("noretry:500")]);
        let (out, _) = run(backend(kind, &server), &ask(params())).await;
        assert_eq!(out.attempts, 1, "{kind}: x-should-retry false");
        assert_eq!(out.result.unwrap_err().class, ErrorClass::ServerError);

        let server = server_with_409().await;
        let (out, _) = run(backend(kind, &server), &ask(params())).await;
        assert!(out.result.is_ok(), "{kind}: {:?}", out.result);
        assert_eq!(out.attempts, 2, "{kind}: 409 retried");
    }
}

async fn server_with_409() -> FakeServer {
    let server = server().await;
    server.push_faults([f("409")]);
    server
}
