//! With the key set to a recognisable value, no error nmb produces (message, Display, Debug, raw body) holds it,
//! even when the server echoes it back.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use nmb_chat::{Message, Role};
use nmb_fake_server::{Config, FakeServer, Reply};
use nmb_requests::{
    connect, ApiKey, BackendOptions, CallError, ChatRequest, HttpOptions, ModelSpec, RetryPolicy,
    Scheduler, SchedulerConfig, Transport,
};

fn assert_clean(e: &CallError, what: &str) {
    let all = format!("{e} {e:?} {}", e.raw.clone().unwrap_or_default());
    assert!(!all.contains(KEY), "{what}: key leaked into {all}");
}

fn req() -> ChatRequest {
    ChatRequest::new(vec![Message::text(Role::User, "hello")], params())
}

#[tokio::test]
async fn key_never_appears_in_errors() {
    // The server echoes the received auth header in its error body, like some APIs do with bad keys.
    let echo: nmb_fake_server::Responder = Arc::new(|r: &nmb_fake_server::ReceivedRequest| {
        let got = r.auth.as_ref().map(|a| a.value.clone()).unwrap_or_default();
        Reply::Raw {
            status: 401,
            headers: vec![],
            body: format!("{{\"error\": {{\"message\": \"Incorrect API key provided: {got}\"}}}}"),
        }
    });
    let server = FakeServer::start(Config {
        responder: echo,
        ..Config::default()
    })
    .await
    .unwrap();
    for kind in API_KINDS {
        let e = backend(kind, &server).complete(&req()).await.unwrap_err();
        assert_eq!(e.class, nmb_requests::ErrorClass::Auth);
        assert!(
            e.raw.as_deref().unwrap_or("").contains("[REDACTED]"),
            "{e:?}"
        );
        assert_clean(&e, &format!("{kind} 401 echo"));
    }
    let plain = common::server().await;
    for kind in API_KINDS {
        for fault in [
            "reset",
            "malformed",
            "empty",
            "refusal",
            "500",
            "429:0",
            "context",
        ] {
            plain.push_faults([Some(fault.parse().unwrap())]);
            let e = backend(kind, &plain).complete(&req()).await.unwrap_err();
            assert_clean(&e, &format!("{kind} {fault}"));
        }
    }
}

#[tokio::test]
async fn connection_errors_carry_no_key_or_url_credentials() {
    // Nothing listens on this port once the listener is dropped.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t = Transport::new(&HttpOptions {
        connect_timeout: Duration::from_secs(2),
        ..HttpOptions::default()
    })
    .unwrap();
    let s = Scheduler::new(SchedulerConfig {
        retry: RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        },
        ..SchedulerConfig::default()
    });
    for kind in API_KINDS {
        let spec = ModelSpec::parse(&format!("{kind}:m@http://127.0.0.1:{port}")).unwrap();
        let opts = BackendOptions {
            key: Some(ApiKey::new(KEY)),
            ..BackendOptions::default()
        };
        let lane = s.lane(connect(&spec, &t, &opts).unwrap(), 1);
        let out = s.run(&lane, &req()).await;
        let e = out.result.unwrap_err();
        assert_eq!(e.class, nmb_requests::ErrorClass::Network, "{kind}: {e}");
        assert_clean(&e, &format!("{kind} refused"));
        assert!(!e.message.contains("http://"), "URL stripped: {e}");
    }
    let dbg = format!("{:?}", ApiKey::new(KEY));
    assert!(!dbg.contains(KEY));
}
