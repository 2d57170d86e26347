//! `local:` models that see images through a vision projector, behind the backend API: against llama.cpp's
//! real server given the same projector (PyPI xllamacpp, `scripts/llama-server.py --mmproj`), the same chat
//! request with one and with two images gets the same greedy answer, token for token; and what a projector
//! changes about the batch (prompt cache keys, context, bad images).

use std::path::PathBuf;
use std::sync::Arc;

use nmb_chat::{GenParams, ImagePart, Message, Part, Role};
use nmb_local::{LocalBackend, LocalModel, Projector};
use nmb_requests::{Backend, ChatRequest, Completion, ErrorClass, ModelSpec};
use nmb_test_support::llama::LlamaServer;
use sha2::{Digest, Sha256};

/// The tiny Gemma 3 text model and the tiny `gemma3` projector with its tower in `ty`.
fn files(ty: &str) -> Option<(PathBuf, PathBuf)> {
    let model = crate::common::tiny("Q8_0", "gemma3")?;
    let mmproj = crate::common::tiny_gguf(
        ty,
        &format!("mmproj-gemma3-{ty}"),
        &["--projector", "gemma3"],
    )?;
    Some((model, mmproj))
}

fn seeing(model: &std::path::Path, mmproj: &std::path::Path) -> LocalModel {
    LocalModel::load(model)
        .expect("loads the tiny model")
        .with_projector(Projector::load(mmproj).expect("loads the tiny projector"))
        .expect("the projector fits the model")
}

fn image(bytes: Vec<u8>) -> Part {
    Part::Image(ImagePart {
        sha256: hex::encode(Sha256::digest(&bytes)),
        mime: "image/png".into(),
        bytes: bytes.into(),
    })
}

fn user(parts: Vec<Part>) -> Message {
    Message {
        role: Role::User,
        parts,
        as_parts: true,
    }
}

fn text(t: &str) -> Part {
    Part::Text(t.into())
}

fn greedy(max_tokens: u32) -> GenParams {
    GenParams {
        temperature: 0.0,
        top_p: 1.0,
        max_tokens,
        seed: Some(1),
        ..GenParams::default()
    }
}

/// Conversations with one image, with two, and with an image before any text, from noise PNGs of other sizes
/// than the projector's (so llama.cpp's resize and padding are in play).
fn conversations() -> Vec<Vec<Message>> {
    let (a, b) = (
        nmb_test_support::images::noise_png(48, 1),
        nmb_test_support::images::noise_png(61, 2),
    );
    vec![
        vec![
            Message::text(Role::System, "You are a neurologist."),
            user(vec![text("Describe this scan."), image(a.clone())]),
        ],
        vec![user(vec![
            text("Compare"),
            image(a.clone()),
            text("with"),
            image(b.clone()),
            text("Which is abnormal?"),
            text("Answer briefly."),
        ])],
        vec![user(vec![image(b), text("What is this?")])],
    ]
}

fn ask(backend: &dyn Backend, messages: &[Message], params: &GenParams) -> Completion {
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let req = ChatRequest::new(messages.to_vec(), params.clone());
    rt.block_on(backend.complete(&req))
        .unwrap_or_else(|e| panic!("{}: {e}", backend.spec()))
}

fn local_backend(model: LocalModel) -> LocalBackend {
    let spec = ModelSpec::parse("local:tiny.gguf").expect("a spec");
    LocalBackend::new(spec, Arc::new(model))
}

/// The tiny SmolVLM-like text model, with SmolVLM's published chat template, and the tiny `idefics3` projector
/// with its tower in `ty` (images sliced at a longest edge of 224 into tiles of 112).
fn idefics3_files(ty: &str) -> Option<(PathBuf, PathBuf)> {
    let template = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/smolvlm_chat_template.jinja"
    );
    let model = crate::common::tiny_gguf(
        "Q8_0",
        "tiny-smolvlm-templated-Q8_0",
        &["--arch", "smolvlm", "--chat-template", template],
    )?;
    let mmproj = crate::common::tiny_gguf(
        ty,
        &format!("mmproj-idefics3-{ty}"),
        &["--projector", "idefics3"],
    )?;
    Some((model, mmproj))
}

/// Where nmb's answers differ from llama.cpp's server's on `files`, one line per conversation; `None` without
/// xllamacpp.
fn answer_differences(ty: &str, files: Option<(PathBuf, PathBuf)>) -> Option<Vec<String>> {
    let (model, mmproj) = files?;
    let server = LlamaServer::start_with_mmproj(&model, &mmproj)?;
    let transport =
        nmb_requests::Transport::new(&nmb_requests::HttpOptions::default()).expect("a transport");
    let spec = ModelSpec::parse(&format!("openai:tiny@{}", server.v1())).expect("a spec");
    let llama = nmb_requests::connect(&spec, &transport, &Default::default()).expect("connects");
    let ours = local_backend(seeing(&model, &mmproj));
    assert!(ours.supports_images());
    let params = greedy(24);
    let mut failures = Vec::new();
    let mut theirs_seen = Vec::new();
    for (i, conversation) in conversations().iter().enumerate() {
        let (a, b) = (
            ask(&ours, conversation, &params),
            ask(llama.as_ref(), conversation, &params),
        );
        let raw: serde_json::Value = serde_json::from_str(&a.raw).expect("a JSON record");
        assert_eq!(raw["images_dropped"], 0, "{}", a.raw);
        let (ta, tb) = (&a.choices[0].text, &b.choices[0].text);
        let counts = |c: &Completion| (c.usage.input_tokens, c.usage.output_tokens);
        if ta != tb || counts(&a) != counts(&b) {
            failures.push(format!(
                "{ty} conversation {i}: nmb {ta:?} {:?}, llama.cpp {tb:?} {:?}",
                counts(&a),
                counts(&b)
            ));
        }
        theirs_seen.push(tb.clone());
    }
    // The images matter: llama.cpp answers the conversations differently, so an image dropped or misplaced
    // by nmb would show.
    theirs_seen.dedup();
    assert!(theirs_seen.len() > 1, "{theirs_seen:?}");
    Some(failures)
}

#[test]
fn greedy_answers_with_images_equal_llama_cpp_server() {
    let mut failures = Vec::new();
    for ty in ["F16", "Q8_0"] {
        let Some(f) = answer_differences(ty, files(ty)) else {
            return;
        };
        failures.extend(f);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same for SmolVLM's layout: every image here is sliced into 2 × 2 tiles and a global image, each laid out
/// with its row and column tokens, under SmolVLM's own chat template.
#[test]
fn idefics3_greedy_answers_with_images_equal_llama_cpp_server() {
    let mut failures = Vec::new();
    for ty in ["F16", "Q8_0"] {
        let Some(f) = answer_differences(&format!("idefics3 {ty}"), idefics3_files(ty)) else {
            return;
        };
        failures.extend(f);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Two prompts that differ only in their image share the text before it and nothing from the image on; the
/// answer after a cached start is the answer of a fresh read; the same prompt again is taken whole.
#[test]
fn the_prompt_cache_tells_images_apart() {
    let Some((model, mmproj)) = files("F16") else {
        return;
    };
    let params = greedy(8);
    let with = |seed: u64| {
        vec![user(vec![
            text("A long history of headaches, now worse, with nausea in the mornings. What is this?"),
            image(match seed {
                1 => nmb_test_support::images::noise_png(40, 1),
                _ => nmb_test_support::images::png(90, seed),
            }),
        ])]
    };
    let cached = local_backend(seeing(&model, &mmproj));
    let first = ask(&cached, &with(1), &params);
    let before = cached.stats().prompt_tokens_reused;
    assert_eq!(before, 0);
    let second = ask(&cached, &with(2), &params);
    let reused = cached.stats().prompt_tokens_reused;
    // The image's run starts after the text before it and `<start_of_image>`; it ends before
    // `<end_of_image>` and the template's end of turn.
    let m = seeing(&model, &mmproj);
    let after = m
        .encode("<end_of_image><|im_end|>\n<|im_start|>assistant\n")
        .expect("tokens")
        .len() as u64;
    let image_len = m.projector().expect("a projector").tokens_per_image() as u64;
    let image_at = second.usage.input_tokens - image_len - after;
    assert_eq!(
        reused, image_at,
        "the text before the image is taken from the cache, nothing from the image on"
    );
    let fresh = local_backend(seeing(&model, &mmproj)).with_prompt_cache(0);
    assert_eq!(
        second.choices[0].text,
        ask(&fresh, &with(2), &params).choices[0].text
    );
    assert_ne!(
        first.choices[0].text, second.choices[0].text,
        "the images matter"
    );
    ask(&cached, &with(2), &params);
    let again = cached.stats().prompt_tokens_reused - reused;
    assert_eq!(
        again, second.usage.input_tokens,
        "the same prompt is taken whole"
    );
}

/// Images count against the context: a prompt that fits as text but not with its image's tokens is refused as
/// a text prompt too long is; bytes that are no image fail that request with a clear error, never a panic.
#[test]
fn images_count_against_the_context_and_bad_bytes_fail_the_request() {
    let Some((model, mmproj)) = files("F16") else {
        return;
    };
    let msgs = vec![user(vec![
        text("What is this?"),
        image(nmb_test_support::images::noise_png(30, 3)),
    ])];
    let m = seeing(&model, &mmproj);
    let text_len = m
        .prompt_tokens(&m.render_prompt(&msgs).expect("renders").text)
        .expect("tokens")
        .len();
    let tight = local_backend(seeing(&model, &mmproj).with_context_length(text_len + 2));
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let req = ChatRequest::new(msgs, greedy(1));
    let err = rt.block_on(tight.complete(&req)).expect_err("too long");
    assert_eq!(err.class, ErrorClass::ContextLength, "{err}");

    let bad = ChatRequest::new(
        vec![user(vec![
            text("What is this?"),
            image(b"\x89PNG\r\n\x1a\nnot really a png".to_vec()),
        ])],
        greedy(1),
    );
    let ours = local_backend(seeing(&model, &mmproj));
    let err = rt.block_on(ours.complete(&bad)).expect_err("refused");
    assert_eq!(err.class, ErrorClass::ClientError, "{err}");
    assert!(err.to_string().contains("image 1"), "{err}");
    // The backend still answers after a bad request.
    let good = ChatRequest::new(vec![user(vec![text("Hello")])], greedy(1));
    rt.block_on(ours.complete(&good)).expect("answers");
}

/// An `idefics3` projector with a text model that lacks the tokens its layout needs fails the request, naming
/// the token, and the backend goes on.
#[test]
fn an_idefics3_image_without_its_tokens_fails_the_request() {
    let Some(model) = crate::common::tiny("Q8_0", "llama") else {
        return;
    };
    let Some(mmproj) =
        crate::common::tiny_gguf("F16", "mmproj-idefics3-F16", &["--projector", "idefics3"])
    else {
        return;
    };
    let ours = local_backend(seeing(&model, &mmproj));
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let req = ChatRequest::new(
        vec![user(vec![
            text("What is this?"),
            image(nmb_test_support::images::noise_png(30, 3)),
        ])],
        greedy(1),
    );
    let err = rt.block_on(ours.complete(&req)).expect_err("refused");
    assert!(
        err.to_string().contains("<fake_token_around_image>"),
        "{err}"
    );
    let good = ChatRequest::new(vec![user(vec![text("Hello")])], greedy(1));
    rt.block_on(ours.complete(&good)).expect("answers");
}

/// A projector whose output width is not the model's embedding width is refused at load, naming both.
#[test]
fn a_projector_of_another_width_is_refused_naming_both() {
    let Some(smollm2) = crate::common::smollm2() else {
        return;
    };
    let Some((_, mmproj)) = files("F16") else {
        return;
    };
    let err = LocalModel::load(&smollm2)
        .expect("loads")
        .with_projector(Projector::load(&mmproj).expect("loads"))
        .expect_err("refused");
    let text = err.to_string();
    for word in ["256", "576", "mmproj-gemma3-F16.gguf", "SmolLM2"] {
        assert!(text.contains(word), "`{word}` missing from: {text}");
    }
}
