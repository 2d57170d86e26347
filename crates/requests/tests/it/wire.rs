//! What each backend puts on the wire, checked by a loopback server that parses the real formats.

use crate::common;

use common::*;
use nmb_chat::OutputFormat;
use nmb_fake_server::{ReceivedRequest, Wire};
use nmb_requests::{BackendKind, ChatRequest, ErrorClass};

fn roles(r: &ReceivedRequest) -> Vec<&str> {
    r.messages.iter().map(|m| m.role.as_str()).collect()
}

fn request(n: u32, output: OutputFormat) -> (ChatRequest, [String; 2]) {
    let (a, b) = (image(1), image(2));
    let hashes = [a.sha256.clone(), b.sha256.clone()];
    let req = ChatRequest {
        messages: conversation(&a, &b),
        params: params(),
        n,
        output,
        replay: Vec::new(),
        samples: Vec::new(),
    };
    (req, hashes)
}

/// Checks what every wire shares: roles, history in order, texts, image bytes, sampling parameters.
fn check_common(r: &ReceivedRequest, hashes: &[String; 2]) {
    assert_eq!(r.model, "test-model");
    assert_eq!(roles(r), ["system", "user", "assistant", "user"]);
    assert_eq!(
        r.messages[0].text(),
        "You are an experienced neurology expert"
    );
    assert_eq!(
        r.messages[1].text(),
        "EHR: 34-year-old woman, optic neuritis.\n\nAxial FLAIR\n\nWhat is the most likely diagnosis?"
    );
    assert_eq!(
        r.messages[1].image_hashes(),
        [hashes[0].as_str(), hashes[1].as_str()]
    );
    assert_eq!(r.messages[2].text(), "Most likely multiple sclerosis.");
    assert_eq!(
        r.messages[3].text(),
        "New evidence: oligoclonal bands negative. Revise."
    );
    assert_eq!(r.params.temperature, Some(0.3));
    assert_eq!(r.params.top_p, Some(0.9));
    assert_eq!(r.params.max_tokens, Some(321));
}

#[tokio::test]
async fn openai_wire() {
    let server = server().await;
    let backend = backend(BackendKind::OpenAi, &server);
    let (req, hashes) = request(3, OutputFormat::Json { schema: None });
    let c = backend.complete(&req).await.expect("completion");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let r = &reqs[0];
    assert_eq!(r.wire, Wire::OpenAi);
    assert_eq!(r.path, "/v1/chat/completions");
    check_common(r, &hashes);
    // images sit between the texts, in the case's order
    let kinds: Vec<&str> = r.messages[1]
        .parts
        .iter()
        .map(|p| match p {
            nmb_fake_server::ReceivedPart::Text { .. } => "text",
            _ => "image",
        })
        .collect();
    assert_eq!(kinds, ["text", "image", "text", "image", "text"]);
    assert_eq!(r.params.max_tokens_field.as_deref(), Some("max_tokens"));
    assert_eq!(r.params.seed, Some(42));
    assert_eq!(r.params.n, Some(3));
    assert!(r.params.json);
    let auth = r.auth.as_ref().expect("auth header");
    assert_eq!(auth.header, "authorization");
    assert_eq!(auth.value, format!("Bearer {KEY}"));
    assert_eq!(r.header("authorization"), Some("[REDACTED]"));
    assert_eq!(c.choices.len(), 3);
    for ch in &c.choices {
        let v: serde_json::Value = serde_json::from_str(&ch.text).expect("JSON answer");
        assert!(v["differential"].is_array());
        assert_eq!(ch.finish_reason, "stop");
        assert!(!ch.refused);
    }
    assert!(c.usage.input_tokens > 0 && c.usage.output_tokens > 0);
    assert!(c.raw.contains("chat.completion"));
    assert_eq!(server.bad_requests(), 0);
}

#[tokio::test]
async fn openai_json_schema_and_max_completion_tokens() {
    let server = server().await;
    let opts = nmb_requests::BackendOptions {
        key: None,
        openai: nmb_requests::OpenAiOptions {
            max_tokens_field: nmb_requests::MaxTokensField::MaxCompletionTokens,
            ..Default::default()
        },
        ..Default::default()
    };
    let b = nmb_requests::connect(&spec_for(BackendKind::OpenAi, &server), &transport(), &opts)
        .expect("a local base URL needs no key");
    let schema =
        serde_json::json!({"type": "object", "properties": {"differential": {"type": "array"}}});
    let (req, _) = request(
        1,
        OutputFormat::Json {
            schema: Some(schema.clone()),
        },
    );
    b.complete(&req).await.expect("completion");
    let r = &server.requests()[0];
    assert_eq!(
        r.params.max_tokens_field.as_deref(),
        Some("max_completion_tokens")
    );
    assert_eq!(r.params.max_tokens, Some(321));
    assert_eq!(r.params.json_schema.as_ref(), Some(&schema));
    assert_eq!(r.params.n, None, "n = 1 is the default and not sent");
    assert!(r.auth.is_none(), "no key configured, none sent");
}

#[tokio::test]
async fn anthropic_wire() {
    let server = server().await;
    let backend = backend(BackendKind::Anthropic, &server);
    let (req, hashes) = request(1, OutputFormat::Text);
    let c = backend.complete(&req).await.expect("completion");
    let r = &server.requests()[0];
    assert_eq!(r.wire, Wire::Anthropic);
    assert_eq!(r.path, "/v1/messages");
    check_common(r, &hashes);
    assert_eq!(r.params.seed, None, "Anthropic has no seed");
    let auth = r.auth.as_ref().expect("auth header");
    assert_eq!(auth.header, "x-api-key");
    assert_eq!(auth.value, KEY);
    assert!(r.header("anthropic-version").is_some());
    assert_eq!(c.choices.len(), 1);
    assert!(c.choices[0].text.starts_with("Sample 0"));
    assert_eq!(c.choices[0].finish_reason, "end_turn");
    assert!(c.usage.input_tokens > 0);
}

#[tokio::test]
async fn anthropic_refuses_n_without_sending() {
    let server = server().await;
    let backend = backend(BackendKind::Anthropic, &server);
    assert!(!backend.supports_n());
    let (req, _) = request(2, OutputFormat::Text);
    let e = backend.complete(&req).await.unwrap_err();
    assert_eq!(e.class, ErrorClass::ClientError);
    assert!(e.message.contains("separate requests"), "{e}");
    assert_eq!(server.request_count(), 0);
}

#[tokio::test]
async fn gemini_wire() {
    let server = server().await;
    let backend = backend(BackendKind::Gemini, &server);
    let (req, hashes) = request(2, OutputFormat::Json { schema: None });
    let c = backend.complete(&req).await.expect("completion");
    let r = &server.requests()[0];
    assert_eq!(r.wire, Wire::Gemini);
    assert_eq!(r.path, "/v1beta/models/test-model:generateContent");
    check_common(r, &hashes);
    assert_eq!(r.params.seed, Some(42));
    assert_eq!(r.params.n, Some(2));
    assert!(r.params.json);
    let auth = r.auth.as_ref().expect("auth header");
    assert_eq!(auth.header, "x-goog-api-key");
    assert_eq!(auth.value, KEY);
    assert!(!r.key_in_query, "the key must not travel in the URL");
    assert_eq!(c.choices.len(), 2);
    assert_eq!(c.choices[0].finish_reason, "STOP");
}

#[tokio::test]
async fn same_conversation_hash_on_every_wire() {
    // The server computes nmb_chat's messages_hash from what it received: equal to the sender's means no part
    // was lost, reordered or altered on any wire.
    let server = server().await;
    let (req, _) = request(1, OutputFormat::Text);
    let expected = nmb_chat::messages_hash(&req.messages);
    for kind in API_KINDS {
        backend(kind, &server)
            .complete(&req)
            .await
            .expect("completion");
    }
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for r in reqs {
        assert_eq!(r.conversation_sha256, expected, "{:?}", r.wire);
    }
}

#[tokio::test]
async fn image_encoded_once_per_content_hash() {
    let server = server().await;
    let t = transport();
    let opts = nmb_requests::BackendOptions {
        key: Some(nmb_requests::ApiKey::new(KEY)),
        ..Default::default()
    };
    let b = nmb_requests::connect(&spec_for(BackendKind::Anthropic, &server), &t, &opts).unwrap();
    let (req, _) = request(1, OutputFormat::Text);
    for _ in 0..5 {
        b.complete(&req).await.expect("completion");
    }
    let (hits, misses) = t.image_cache().stats();
    assert_eq!(misses, 2, "two distinct images");
    assert_eq!(hits, 8);
    let first = server.requests()[0].conversation_sha256.clone();
    assert!(server
        .requests()
        .iter()
        .all(|r| r.conversation_sha256 == first));
}

#[test]
fn connect_without_key_needs_custom_base_url() {
    let t = transport();
    for kind in API_KINDS {
        let var = kind.key_env().unwrap();
        if std::env::var_os(var).is_some() {
            println!("skipping the missing-key check for {kind}: {var} is set in this environment");
            continue;
        }
        let spec = nmb_requests::ModelSpec::parse(&format!("{kind}:m")).unwrap();
        let err = match nmb_requests::connect(&spec, &t, &Default::default()) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{kind} without a key must fail"),
        };
        assert!(err.contains(var), "{err}");
    }
    let local = nmb_requests::ModelSpec::parse("local:/x.gguf").unwrap();
    assert!(nmb_requests::connect(&local, &t, &Default::default()).is_err());
}
