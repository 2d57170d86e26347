//! OpenAI's reasoning models: what they refuse, and what nmb sends instead.

use crate::common;

use common::*;
use nmb_chat::{Message, OutputFormat, Role};
use nmb_fake_server::{Config, FakeServer, ReceivedRequest, Reply};
use nmb_requests::{connect, Adjustment, BackendOptions, ChatRequest, ErrorClass, ModelSpec};

fn ask() -> ChatRequest {
    ChatRequest {
        messages: vec![Message::text(Role::User, "What is the diagnosis?")],
        params: params(),
        n: 1,
        output: OutputFormat::Text,
        replay: Vec::new(),
        samples: Vec::new(),
    }
}

/// (max tokens field, temperature, top_p) as a request carried them.
fn sent(r: &ReceivedRequest) -> (Option<&str>, Option<f64>, Option<f64>) {
    let p = &r.params;
    (p.max_tokens_field.as_deref(), p.temperature, p.top_p)
}

fn spec(model: &str, server: &FakeServer) -> ModelSpec {
    ModelSpec::parse(&format!("openai:{model}@{}/v1", server.url())).expect("spec")
}

#[tokio::test]
async fn a_refused_parameter_is_left_out_and_the_call_sent_again() {
    let server = server().await;
    let b = connect(
        &spec("o3", &server),
        &transport(),
        &BackendOptions::default(),
    )
    .unwrap();
    assert!(
        b.adjustments().is_empty(),
        "a custom base URL waits for refusals"
    );
    let c = b
        .complete(&ask())
        .await
        .expect("answered after the refusals");
    assert!(!c.choices[0].text.is_empty());
    let reqs = server.requests();
    let seen: Vec<_> = reqs.iter().map(sent).collect();
    assert_eq!(
        seen,
        [
            (Some("max_tokens"), Some(0.3), Some(0.9)),
            (Some("max_completion_tokens"), Some(0.3), Some(0.9)),
            (Some("max_completion_tokens"), None, Some(0.9)),
            (Some("max_completion_tokens"), None, None),
        ]
    );
    assert_eq!(reqs[1].params.max_tokens, Some(321));
    let adjusted = b.adjustments();
    assert_eq!(
        adjusted.keys().copied().collect::<Vec<_>>(),
        [
            Adjustment::MaxCompletionTokens,
            Adjustment::NoTemperature,
            Adjustment::NoTopP
        ]
    );
    assert!(
        adjusted[&Adjustment::MaxCompletionTokens].contains("Use 'max_completion_tokens' instead"),
        "{adjusted:?}"
    );
    assert!(adjusted[&Adjustment::NoTemperature].contains("does not support 0.3"));
    // from then on, every request is built adjusted: one request, no refusal
    b.complete(&ask()).await.expect("second call");
    let last = server.requests().pop().unwrap();
    assert_eq!(server.requests().len(), 5);
    assert_eq!(sent(&last), (Some("max_completion_tokens"), None, None));
}

#[tokio::test]
async fn temperature_one_is_still_sent_and_other_models_are_untouched() {
    let server = server().await;
    let options = BackendOptions {
        openai: nmb_requests::OpenAiOptions {
            reasoning: Some("--reasoning-model".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let b = connect(&spec("o4-mini", &server), &transport(), &options).unwrap();
    let adjusted = b.adjustments();
    assert_eq!(adjusted.len(), 3);
    assert!(adjusted.values().all(|why| why == "--reasoning-model"));
    let mut req = ask();
    req.params.temperature = 1.0;
    b.complete(&req).await.expect("no refusal");
    assert_eq!(server.requests().len(), 1, "asked right the first time");
    assert_eq!(
        sent(&server.requests()[0]),
        (Some("max_completion_tokens"), Some(1.0), None)
    );
    // a model the server does not treat as a reasoning model gets what it always got
    let plain = connect(
        &spec("gpt-4o", &server),
        &transport(),
        &BackendOptions::default(),
    )
    .unwrap();
    plain.complete(&ask()).await.expect("answer");
    assert_eq!(
        sent(&server.requests()[1]),
        (Some("max_tokens"), Some(0.3), Some(0.9))
    );
    assert!(plain.adjustments().is_empty());
}

#[tokio::test]
async fn a_refusal_nothing_can_answer_stays_a_client_error() {
    let body = r#"{"error":{"message":"Unsupported parameter: 'logprobs' is not supported with this model.","type":"invalid_request_error","param":"logprobs","code":"unsupported_parameter"}}"#;
    let responder = std::sync::Arc::new(move |_: &ReceivedRequest| Reply::Raw {
        status: 400,
        headers: Vec::new(),
        body: body.to_string(),
    });
    let config = Config {
        responder,
        ..Config::default()
    };
    let server = FakeServer::start(config).await.unwrap();
    let b = connect(
        &spec("gpt-4o", &server),
        &transport(),
        &BackendOptions::default(),
    )
    .unwrap();
    let e = b.complete(&ask()).await.expect_err("refused");
    assert_eq!(e.class, ErrorClass::ClientError);
    assert_eq!(server.requests().len(), 1, "sent once");
    assert!(b.adjustments().is_empty());
}

#[tokio::test]
async fn on_openais_own_api_a_reasoning_model_is_asked_right_from_the_start() {
    // No request is sent here (api.openai.com is not reachable from tests): the backend says what it will send.
    let key = Some(nmb_requests::ApiKey::new(KEY));
    let options = BackendOptions {
        key,
        ..Default::default()
    };
    for (model, adjusted) in [("o3", 3), ("gpt-5-mini", 3), ("gpt-4o", 0)] {
        let spec = ModelSpec::parse(&format!("openai:{model}")).unwrap();
        let b = connect(&spec, &transport(), &options).unwrap();
        let a = b.adjustments();
        assert_eq!(a.len(), adjusted, "{model}");
        if adjusted > 0 {
            assert_eq!(
                a[&Adjustment::NoTopP],
                format!("{model} is an OpenAI reasoning model")
            );
        }
    }
}

/// The reasoning effort each wire received for `model` (its spec's model name) asked at `effort`.
async fn effort_sent(
    kind: nmb_requests::BackendKind,
    model: &str,
    effort: Option<nmb_chat::ReasoningEffort>,
) -> Option<serde_json::Value> {
    let server = server().await;
    let base = match kind {
        nmb_requests::BackendKind::OpenAi => format!("{}/v1", server.url()),
        _ => server.url(),
    };
    let spec = ModelSpec::parse(&format!("{kind}:{model}@{base}")).unwrap();
    let b = connect(&spec, &transport(), &BackendOptions::default()).unwrap();
    let mut req = ask();
    req.params.reasoning_effort = effort;
    b.complete(&req).await.expect("answer");
    server.requests()[0].params.reasoning.clone()
}

#[tokio::test]
async fn reasoning_effort_goes_out_as_each_api_takes_it() {
    use nmb_chat::ReasoningEffort as E;
    use nmb_requests::BackendKind::{Gemini, OpenAi};
    use serde_json::json;
    let cases = [
        (OpenAi, "gpt-4o", None, None),
        (OpenAi, "gpt-4o", Some(E::High), Some(json!("high"))),
        (OpenAi, "gpt-4o", Some(E::Minimal), Some(json!("minimal"))),
        (OpenAi, "gpt-4o", Some(E::None), Some(json!("none"))),
        (
            Gemini,
            "gemini-2.5-flash",
            None,
            Some(json!({"includeThoughts": true})),
        ),
        (Gemini, "gemini-2.0-flash", None, None),
        (
            Gemini,
            "gemini-2.5-flash",
            Some(E::None),
            Some(json!({"thinkingBudget": 0})),
        ),
        (
            Gemini,
            "gemini-2.5-pro",
            Some(E::Low),
            Some(json!({"thinkingBudget": 1024, "includeThoughts": true})),
        ),
        (
            Gemini,
            "gemini-2.5-pro",
            Some(E::High),
            Some(json!({"thinkingBudget": 24576, "includeThoughts": true})),
        ),
        (
            Gemini,
            "gemini-3-pro-preview",
            Some(E::Low),
            Some(json!({"thinkingLevel": "low", "includeThoughts": true})),
        ),
        (
            Gemini,
            "gemini-3-flash",
            Some(E::None),
            Some(json!({"thinkingLevel": "minimal", "includeThoughts": true})),
        ),
        (
            Gemini,
            "models/gemini-3.1-pro",
            Some(E::High),
            Some(json!({"thinkingLevel": "high", "includeThoughts": true})),
        ),
    ];
    for (kind, model, effort, want) in cases {
        assert_eq!(
            effort_sent(kind, model, effort).await,
            want,
            "{kind} {model} {effort:?}"
        );
    }
    // Anthropic's Messages API takes a thinking budget, not an effort: the backend says it cannot.
    let server = server().await;
    let spec = ModelSpec::parse(&format!("anthropic:claude@{}", server.url())).unwrap();
    let b = connect(&spec, &transport(), &BackendOptions::default()).unwrap();
    assert_eq!(b.reasoning_parameters(), None);
}

#[test]
fn parameters_without_an_effort_serialize_as_before() {
    let p = params();
    let v = serde_json::to_value(&p).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"temperature": 0.3, "top_p": 0.9, "max_tokens": 321, "seed": 42})
    );
    let mut with = p.clone();
    with.reasoning_effort = Some(nmb_chat::ReasoningEffort::Medium);
    let v = serde_json::to_value(&with).unwrap();
    assert_eq!(v["reasoning_effort"], "medium");
    let back: nmb_chat::GenParams = serde_json::from_value(v).unwrap();
    assert_eq!(back, with);
    assert!("HIGH".parse::<nmb_chat::ReasoningEffort>().is_ok());
    let e = "max".parse::<nmb_chat::ReasoningEffort>().unwrap_err();
    assert!(e
        .to_string()
        .contains("expected none, minimal, low, medium or high"));
}

/// The first choice of `kind`'s backend when the server answers every request with `body`.
async fn choice_of(
    kind: nmb_requests::BackendKind,
    body: serde_json::Value,
) -> nmb_requests::Choice {
    let c = completion_of(kind, body).await;
    c.choices.into_iter().next().unwrap()
}

/// What `kind`'s backend makes of `body` as the answer to a request.
async fn completion_of(
    kind: nmb_requests::BackendKind,
    body: serde_json::Value,
) -> nmb_requests::Completion {
    let body = body.to_string();
    let responder = std::sync::Arc::new(move |_: &ReceivedRequest| Reply::Raw {
        status: 200,
        headers: vec![("content-type".into(), "application/json".into())],
        body: body.clone(),
    });
    let server = FakeServer::start(Config {
        responder,
        ..Config::default()
    })
    .await
    .unwrap();
    let base = match kind {
        nmb_requests::BackendKind::OpenAi => format!("{}/v1", server.url()),
        _ => server.url(),
    };
    let spec = ModelSpec::parse(&format!("{kind}:thinker@{base}")).unwrap();
    let b = connect(&spec, &transport(), &BackendOptions::default()).unwrap();
    b.complete(&ask()).await.expect("answer")
}

fn openai_body(message: serde_json::Value, finish: &str) -> serde_json::Value {
    serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "thinker",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}
    })
}

#[tokio::test]
async fn thinking_is_kept_apart_from_the_answer_on_every_wire() {
    use nmb_requests::BackendKind::{Anthropic, Gemini, OpenAi};
    use serde_json::json;
    let draft = r#"Draft: {"differential": [{"rank": 1, "diagnosis": "Multiple sclerosis"}]}"#;
    let answer = r#"{"differential": [{"rank": 1, "diagnosis": "Glioblastoma"}]}"#;
    // A reasoning model behind a server without a reasoning parser: <think> in the content.
    let inline = format!("<think>\n{draft}\n</think>\n\n{answer}");
    let c = choice_of(
        OpenAi,
        openai_body(json!({"role": "assistant", "content": inline}), "stop"),
    )
    .await;
    assert_eq!(
        (c.text.as_str(), c.thinking.as_deref()),
        (answer, Some(draft))
    );
    // Cut off while thinking: no answer at all, and the finish reason says why.
    let open = format!("<think>\n{draft}");
    let c = choice_of(
        OpenAi,
        openai_body(json!({"role": "assistant", "content": open}), "length"),
    )
    .await;
    assert_eq!((c.text.as_str(), c.thinking.as_deref()), ("", Some(draft)));
    assert_eq!(c.finish_reason, "length");
    // vLLM's and llama.cpp's reasoning parsers, and newer vLLM's `reasoning`.
    for field in ["reasoning_content", "reasoning"] {
        let m = json!({"role": "assistant", "content": answer, field: draft});
        let c = choice_of(OpenAi, openai_body(m, "stop")).await;
        assert_eq!(
            (c.text.as_str(), c.thinking.as_deref()),
            (answer, Some(draft)),
            "{field}"
        );
    }
    // ... with nothing but thinking before the token limit
    let m = json!({"role": "assistant", "content": null, "reasoning_content": draft});
    let c = choice_of(OpenAi, openai_body(m, "length")).await;
    assert_eq!((c.text.as_str(), c.thinking.as_deref()), ("", Some(draft)));
    // Anthropic extended thinking: thinking and redacted-thinking blocks before the text.
    let body = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "thinker",
        "content": [
            {"type": "thinking", "thinking": draft, "signature": "EqQBCgIYAhIM"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3"},
            {"type": "text", "text": answer}
        ],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 10, "output_tokens": 20}
    });
    let c = choice_of(Anthropic, body).await;
    assert_eq!(c.text, answer);
    assert_eq!(
        c.thinking.as_deref(),
        Some(format!("{draft}\n\n[redacted thinking]").as_str())
    );
    // Gemini thought parts.
    let body = json!({
        "candidates": [{"content": {"role": "model", "parts": [
            {"text": draft, "thought": true},
            {"text": answer}
        ]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 20}
    });
    let c = choice_of(Gemini, body).await;
    assert_eq!(
        (c.text.as_str(), c.thinking.as_deref()),
        (answer, Some(draft))
    );
    // An answer without thinking has none.
    let c = choice_of(
        OpenAi,
        openai_body(json!({"role": "assistant", "content": answer}), "stop"),
    )
    .await;
    assert_eq!((c.text.as_str(), c.thinking), (answer, None));
}

#[tokio::test]
async fn usage_counts_reasoning_and_cached_tokens_on_every_wire() {
    use nmb_requests::BackendKind::{Anthropic, Gemini, OpenAi};
    use nmb_requests::Usage;
    use serde_json::json;
    let message = json!({"role": "assistant", "content": "MS"});
    let mut body = openai_body(message, "stop");
    body["usage"] = json!({
        "prompt_tokens": 1200, "completion_tokens": 900, "total_tokens": 2100,
        "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 832, "audio_tokens": 0}
    });
    let want = Usage {
        input_tokens: 1200,
        output_tokens: 900,
        reasoning_tokens: 832,
        cached_input_tokens: 1024,
        cache_write_tokens: 0,
    };
    assert_eq!(completion_of(OpenAi, body).await.usage, want);
    // Anthropic's input_tokens leave out what the cache served or took: input is the sum.
    let body = json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "thinker",
        "content": [{"type": "text", "text": "MS"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 50, "output_tokens": 700,
                  "cache_read_input_tokens": 3000, "cache_creation_input_tokens": 200}
    });
    let want = Usage {
        input_tokens: 3250,
        output_tokens: 700,
        reasoning_tokens: 0,
        cached_input_tokens: 3000,
        cache_write_tokens: 200,
    };
    assert_eq!(completion_of(Anthropic, body).await.usage, want);
    // Gemini's candidatesTokenCount leaves out the thoughts, which are billed as output.
    let body = json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "MS"}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 900, "candidatesTokenCount": 40, "thoughtsTokenCount": 600,
                          "cachedContentTokenCount": 512, "totalTokenCount": 1540}
    });
    let want = Usage {
        input_tokens: 900,
        output_tokens: 640,
        reasoning_tokens: 600,
        cached_input_tokens: 512,
        cache_write_tokens: 0,
    };
    assert_eq!(completion_of(Gemini, body).await.usage, want);
}
