//! `LocalBackend`: SmolLM2 behind the `nmb_requests::Backend` trait (one batch for every request, native n,
//! images dropped).

use crate::common;

use std::sync::Arc;

use nmb_chat::{GenParams, ImagePart, Message, Part, Role};
use nmb_local::{LocalBackend, LocalModel};
use nmb_requests::{Backend, ChatRequest, ErrorClass, ModelSpec};

fn backend(context: Option<usize>) -> Option<LocalBackend> {
    let path = common::smollm2()?;
    let mut model = LocalModel::load(&path).expect("SmolLM2 loads");
    if let Some(c) = context {
        model = model.with_context_length(c);
    }
    let spec = ModelSpec::parse(&format!("local:{}", path.display())).expect("spec");
    Some(LocalBackend::new(spec, Arc::new(model)))
}

fn request(text: &str, with_image: bool) -> ChatRequest {
    let mut parts = vec![Part::Text(text.into())];
    if with_image {
        parts.push(Part::Image(ImagePart {
            sha256: "ab".repeat(32),
            mime: "image/png".into(),
            bytes: vec![0u8; 16].into(),
        }));
    }
    ChatRequest::new(
        vec![
            Message::text(Role::System, "You are a concise assistant."),
            Message {
                role: Role::User,
                as_parts: false,
                parts,
            },
        ],
        GenParams {
            temperature: 0.0,
            top_p: 1.0,
            max_tokens: 12,
            seed: Some(1),
            reasoning_effort: None,
            thinking_budget: None,
            unsent: Default::default(),
            extra_body: None,
        },
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn answers_through_the_backend_trait_and_drops_images() {
    let Some(b) = backend(None) else { return };
    assert!(!b.supports_images());
    assert!(b.supports_n());
    assert_eq!(b.max_in_flight(), Some(8));
    let rt = runtime();
    let req = request("Name one symptom of a stroke.", true);
    let c = rt.block_on(b.complete(&req)).expect("completion");
    assert_eq!(c.choices.len(), 1);
    assert!(!c.choices[0].text.trim().is_empty());
    assert!(c.usage.input_tokens > 10 && c.usage.output_tokens > 0);
    let raw: serde_json::Value = serde_json::from_str(&c.raw).expect("raw is JSON");
    assert_eq!(raw["images_dropped"], 1);
    assert_eq!(raw["object"], "nmb.local.completion");
    assert_eq!(raw["choices"][0]["text"], c.choices[0].text.as_str());
    // Greedy decoding with the same prompt gives the same text, also from two calls at once.
    let b = Arc::new(b);
    let (x, y) = rt.block_on(async {
        let (b1, b2) = (b.clone(), b.clone());
        let r1 = request("Name one symptom of a stroke.", false);
        let r2 = r1.clone();
        tokio::join!(async move { b1.complete(&r1).await }, async move {
            b2.complete(&r2).await
        })
    });
    assert_eq!(
        x.expect("first").choices[0].text,
        y.expect("second").choices[0].text
    );
}

#[test]
fn failures_have_the_right_class() {
    let Some(b) = backend(Some(32)) else { return };
    let rt = runtime();
    let long = "Describe the brain in detail. ".repeat(20);
    let e = rt.block_on(b.complete(&request(&long, false))).unwrap_err();
    assert_eq!(e.class, ErrorClass::ContextLength, "{e}");
    let mut none = request("Hi", false);
    none.n = 0;
    let e = rt.block_on(b.complete(&none)).unwrap_err();
    assert_eq!(e.class, ErrorClass::ClientError, "{e}");
    let mut bad = request("Hi", false);
    bad.params.top_p = 0.0;
    let e = rt.block_on(b.complete(&bad)).unwrap_err();
    assert_eq!(e.class, ErrorClass::ClientError, "{e}");
    assert!(e.message.contains("top_p"), "{e}");
}

/// n samples in one call: sample `i` is what a one-sample call with seed + `i` gives, so the shared prefill and
/// the batched decoding change no text.
#[test]
fn n_samples_decode_together_and_match_separate_calls() {
    let Some(b) = backend(None) else { return };
    let rt = runtime();
    let mut req = request("Name three symptoms of a stroke.", false);
    req.params.temperature = 0.9;
    req.params.max_tokens = 24;
    req.n = 3;
    let together = rt.block_on(b.complete(&req)).expect("three samples");
    assert_eq!(together.choices.len(), 3);
    let raw: serde_json::Value = serde_json::from_str(&together.raw).expect("raw is JSON");
    for (i, choice) in together.choices.iter().enumerate() {
        let mut one = req.clone();
        one.n = 1;
        one.params.seed = Some(1 + i as u64);
        let alone = rt.block_on(b.complete(&one)).expect("one sample");
        assert_eq!(choice.text, alone.choices[0].text, "sample {i}");
        assert_eq!(raw["choices"][i]["seed"], 1 + i as u64);
    }
    let texts: std::collections::BTreeSet<&str> =
        together.choices.iter().map(|c| c.text.as_str()).collect();
    assert!(texts.len() > 1, "three seeds gave one text: {texts:?}");
}

/// Requests sent at once join one batch: they finish with the texts they get alone, and the engine reports
/// that it ran them in the same steps.
#[test]
fn concurrent_requests_share_decoding_steps() {
    let Some(b) = backend(None) else { return };
    let b = Arc::new(b);
    let rt = runtime();
    let questions = [
        "Name one symptom of a stroke.",
        "What does MRI stand for?",
        "Name a cranial nerve.",
        "What is a seizure?",
    ];
    let alone: Vec<String> = questions
        .iter()
        .map(|q| {
            rt.block_on(b.complete(&request(q, false)))
                .expect("alone")
                .choices[0]
                .text
                .clone()
        })
        .collect();
    assert_eq!(b.stats().most_sequences, 1, "one at a time so far");
    let together = rt.block_on(async {
        let handles: Vec<_> = questions
            .iter()
            .map(|q| {
                let (b, req) = (b.clone(), request(q, false));
                tokio::spawn(async move { b.complete(&req).await })
            })
            .collect();
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.expect("task"));
        }
        out
    });
    for ((q, a), t) in questions.iter().zip(&alone).zip(together) {
        assert_eq!(&t.expect("together").choices[0].text, a, "{q}");
    }
    assert!(
        b.stats().most_sequences >= 2,
        "requests sent at once never shared a step: {:?}",
        b.stats()
    );
}

/// A consult's next turn reads only what the previous turn's prompt did not hold, the same prompt asked again
/// is not read at all, and the answers are the ones a backend without the prompt cache gives.
#[test]
fn later_turns_reuse_the_conversation_and_answer_as_without_the_cache() {
    let (Some(cached), Some(fresh)) = (backend(None), backend(None)) else {
        return;
    };
    let fresh = fresh.with_prompt_cache(0);
    let rt = runtime();
    let case = "A 58-year-old woman has sudden word-finding difficulty and right arm weakness. "
        .repeat(30);
    let mut first = request(&case, false);
    first.params.temperature = 0.8;
    first.params.max_tokens = 24;
    let a1 = rt.block_on(cached.complete(&first)).expect("turn 1");
    let again = rt.block_on(cached.complete(&first)).expect("turn 1 again");
    assert_eq!(again.choices[0].text, a1.choices[0].text);
    let mut second = first.clone();
    second
        .messages
        .push(Message::text(Role::Assistant, &a1.choices[0].text));
    second.messages.push(Message::text(
        Role::User,
        "Which artery is most likely occluded, and what is the next investigation?",
    ));
    let reused = |c: &nmb_requests::Completion| {
        let raw: serde_json::Value = serde_json::from_str(&c.raw).expect("raw is JSON");
        raw["input_tokens_reused"].as_u64().expect("a count")
    };
    assert_eq!(reused(&again), again.usage.input_tokens);
    let with = rt.block_on(cached.complete(&second)).expect("turn 2");
    let without = rt
        .block_on(fresh.complete(&second))
        .expect("turn 2, no cache");
    assert_eq!(with.choices[0].text, without.choices[0].text);
    assert_eq!(reused(&a1), 0);
    assert_eq!(reused(&without), 0);
    let n = reused(&with);
    assert!(
        n >= a1.usage.input_tokens / 2 && n < with.usage.input_tokens,
        "turn 2 reused {n} of {} tokens after a {}-token turn 1",
        with.usage.input_tokens,
        a1.usage.input_tokens
    );
    assert_eq!(
        cached.stats().prompt_tokens_reused,
        n + again.usage.input_tokens
    );
    assert_eq!(fresh.stats().prompt_tokens_reused, 0);
}
