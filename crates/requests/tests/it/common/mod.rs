//! Shared helpers for the wire tests: real PNG images, conversations, and backends pointed at a fake server.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use nmb_chat::{GenParams, ImagePart, Message, Part, Role};
use nmb_fake_server::{Config, FakeServer};
use nmb_requests::scheduler::Sleeper;
use nmb_requests::{
    connect, ApiKey, Backend, BackendKind, BackendOptions, BoxFuture, HttpOptions, ModelSpec,
    Transport,
};
use sha2::{Digest, Sha256};

pub const KEY: &str = "sk-nmb-test-CANARY-7f3a9c1e5b";

pub use nmb_fake_server::support::noise_png;

pub fn image(seed: u64) -> ImagePart {
    let bytes = noise_png(24, seed);
    ImagePart {
        sha256: hex::encode(Sha256::digest(&bytes)),
        mime: "image/png".into(),
        bytes: bytes.into(),
    }
}

/// A multi-turn conversation: system, user (text + 2 images), assistant, user follow-up.
pub fn conversation(a: &ImagePart, b: &ImagePart) -> Vec<Message> {
    vec![
        Message::text(Role::System, "You are an experienced neurology expert"),
        Message {
            role: Role::User,
            as_parts: false,
            parts: vec![
                Part::Text("EHR: 34-year-old woman, optic neuritis.".into()),
                Part::Image(a.clone()),
                Part::Text("Axial FLAIR".into()),
                Part::Image(b.clone()),
                Part::Text("What is the most likely diagnosis?".into()),
            ],
        },
        Message::text(Role::Assistant, "Most likely multiple sclerosis."),
        Message::text(
            Role::User,
            "New evidence: oligoclonal bands negative. Revise.",
        ),
    ]
}

pub fn params() -> GenParams {
    GenParams {
        temperature: 0.3,
        top_p: 0.9,
        max_tokens: 321,
        seed: Some(42),
        reasoning_effort: None,
        thinking_budget: None,
        unsent: Default::default(),
        extra_body: None,
    }
}

pub fn transport() -> Transport {
    Transport::new(&HttpOptions::default()).expect("transport")
}

pub fn spec_for(kind: BackendKind, server: &FakeServer) -> ModelSpec {
    let base = match kind {
        BackendKind::OpenAi => format!("{}/v1", server.url()),
        _ => server.url(),
    };
    ModelSpec::parse(&format!("{kind}:test-model@{base}")).expect("spec")
}

pub fn backend(kind: BackendKind, server: &FakeServer) -> Arc<dyn Backend> {
    let opts = BackendOptions {
        key: Some(ApiKey::new(KEY)),
        ..BackendOptions::default()
    };
    connect(&spec_for(kind, server), &transport(), &opts).expect("connect")
}

pub async fn server() -> FakeServer {
    FakeServer::start(Config::default()).await.expect("server")
}

pub const API_KINDS: [BackendKind; 3] = [
    BackendKind::OpenAi,
    BackendKind::Anthropic,
    BackendKind::Gemini,
];

/// Records retry waits instead of sleeping.
#[derive(Default)]
pub struct RecordingSleeper {
    pub waits: Mutex<Vec<Duration>>,
}

impl RecordingSleeper {
    pub fn waits(&self) -> Vec<Duration> {
        self.waits.lock().unwrap().clone()
    }
}

impl Sleeper for RecordingSleeper {
    fn sleep(&self, d: Duration) -> BoxFuture<'static, ()> {
        self.waits.lock().unwrap().push(d);
        Box::pin(async {})
    }
}
