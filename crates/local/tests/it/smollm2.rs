//! The local backend on a real model: SmolLM2-135M-Instruct (Q4_1 GGUF).

use crate::common;

use std::sync::{Arc, OnceLock};

use nmb_chat::{GenParams, ImagePart, Message, OutputFormat, Part, Role};
use nmb_local::{FinishReason, LocalError, LocalModel, TokenizerSource, IMAGE_OMITTED_MARKER};

/// Loaded once per test binary; every test shares it, as the backend will.
fn model() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| common::smollm2().map(|p| LocalModel::load(&p).expect("SmolLM2 loads")))
        .as_ref()
}

fn ask(question: &str) -> Vec<Message> {
    vec![
        Message::text(Role::System, "You are a concise assistant."),
        Message::text(Role::User, question),
    ]
}

fn params(temperature: f64, seed: u64, max_tokens: u32) -> GenParams {
    GenParams {
        temperature,
        top_p: 0.95,
        max_tokens,
        seed: Some(seed),
        reasoning_effort: None,
        thinking_budget: None,
        unsent: Default::default(),
        extra_body: None,
    }
}

fn generate(m: &LocalModel, msgs: &[Message], p: &GenParams) -> nmb_local::LocalCompletion {
    m.generate(msgs, p, &OutputFormat::Text)
        .expect("generation succeeds")
}

#[test]
fn loads_with_gguf_tokenizer_and_template() {
    let Some(m) = model() else { return };
    let info = m.info();
    assert_eq!(info.architecture, "llama");
    // The GGUF's own window.
    assert_eq!(m.context_length(), 8192);
    assert_eq!(info.weights, "Q4_1,Q8_0");
    assert_eq!(info.vocab_size, 49152);
    assert_eq!(
        m.tokenizer_source(),
        &TokenizerSource::Gguf {
            pre: "smollm".into()
        }
    );
    assert!(info.chat_template_from_gguf);
    let (name, hash) = m.model_id().split_once('@').expect("FILE@HASH");
    assert_eq!(name, "SmolLM2-135M-Instruct.Q4_1.gguf");
    assert_eq!(hash.len(), 16);
    assert!(hash.chars().all(|c| c.is_ascii_hexdigit()));
}

#[test]
fn model_id_is_stable_across_loads() {
    let Some(m) = model() else { return };
    let again = LocalModel::load(m.path()).expect("loads again");
    assert_eq!(again.model_id(), m.model_id());
}

#[test]
fn tokenizer_round_trips() {
    let Some(m) = model() else { return };
    let samples = [
        "Hello, world!",
        "Wait... what?! (yes) -- [ok]; {\"x\": 1, 'y': 2.5e-3} @#$%^&*_+=|\\/<>~`",
        "Café naïve résumé Ångström Straße señor",
        "神经内科医生诊断了患者的头痛。",
        "line one\nline two\n\n    indented\ttab\r\nend\n",
        "2024-03-15: 17 lesions, 3.5 mm",
        "  leading and trailing spaces  ",
        "emoji 🧠 and ZWJ 👩‍⚕️",
    ];
    for s in samples {
        let ids = m.encode(s).expect("encodes");
        assert!(!ids.is_empty(), "{s:?} encodes to no tokens");
        assert_eq!(
            m.decode(&ids, false).expect("decodes"),
            s,
            "round trip of {s:?} via {ids:?}"
        );
    }
}

#[test]
fn tokenizer_handles_special_tokens_and_digits_like_smollm() {
    let Some(m) = model() else { return };
    // Control tokens are matched whole: ids 1 and 2 in SmolLM2's vocabulary.
    let ids = m.encode("<|im_start|>user\nhi<|im_end|>").expect("encodes");
    assert_eq!(ids.first(), Some(&1));
    assert_eq!(ids.last(), Some(&2));
    assert_eq!(m.decode(&ids, true).expect("decodes"), "user\nhi");
    // The smollm pre-tokenizer splits numbers into single digits.
    let digits = m.encode("20245").expect("encodes");
    assert_eq!(digits.len(), 5);
}

const CHATML_4_TURNS: &str = "<|im_start|>system\nYou are a neurologist.<|im_end|>\n\
<|im_start|>user\nWhat causes ptosis?<|im_end|>\n\
<|im_start|>assistant\nSeveral things, e.g. myasthenia gravis.<|im_end|>\n\
<|im_start|>user\nAnd with a dilated pupil?<|im_end|>\n\
<|im_start|>assistant\n";

#[test]
fn chat_template_renders_chatml_exactly() {
    let Some(m) = model() else { return };
    let msgs = vec![
        Message::text(Role::System, "You are a neurologist."),
        Message::text(Role::User, "What causes ptosis?"),
        Message::text(Role::Assistant, "Several things, e.g. myasthenia gravis."),
        Message::text(Role::User, "And with a dilated pupil?"),
    ];
    let r = m.render_prompt(&msgs).expect("renders");
    assert_eq!(r.text, CHATML_4_TURNS);
    assert_eq!(r.images_dropped, 0);
}

#[test]
fn chat_template_adds_smollm_default_system_prompt() {
    let Some(m) = model() else { return };
    let r = m
        .render_prompt(&[Message::text(Role::User, "Hi")])
        .expect("renders");
    let expected = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    assert_eq!(r.text, expected);
}

#[test]
fn same_seed_gives_same_text() {
    let Some(m) = model() else { return };
    let msgs = ask("Name one symptom of a stroke.");
    let p = params(0.7, 42, 24);
    let a = generate(m, &msgs, &p);
    let b = generate(m, &msgs, &p);
    assert!(!a.text.trim().is_empty(), "empty answer: {a:?}");
    assert_eq!(a.text, b.text);
    assert_eq!(a.tokens_out, b.tokens_out);
    assert_eq!(a.seed, 42);
    assert!(a.tokens_in > 10);
    assert!(a.tokens_out >= 1 && a.tokens_out <= 24);
}

#[test]
fn different_seeds_change_sampled_text() {
    let Some(m) = model() else { return };
    let msgs = ask("Write a short sentence about the brain.");
    let base = generate(m, &msgs, &params(1.0, 7, 12)).text;
    // One other seed could coincide by chance; four all coinciding would mean the seed is ignored.
    let differs = (1..=4).any(|seed| generate(m, &msgs, &params(1.0, 7 + seed, 12)).text != base);
    assert!(differs, "four other seeds all reproduced {base:?}");
}

#[test]
fn greedy_ignores_the_seed_and_max_tokens_gives_length() {
    let Some(m) = model() else { return };
    // A request for a long answer, so that 5 tokens cannot hold all of it (greedy SmolLM2 answers "Count from
    // one to twenty" with just "120.", which ends by itself within 5 tokens).
    let msgs = ask("Write a long paragraph about the history of neurology.");
    let a = generate(m, &msgs, &params(0.0, 1, 5));
    let b = generate(m, &msgs, &params(0.0, 2, 5));
    assert_eq!(a.text, b.text);
    assert_eq!(a.finish_reason, FinishReason::Length);
    assert_eq!(a.finish_reason.as_str(), "length");
    assert_eq!(a.tokens_out, 5);
}

#[test]
fn short_answers_stop_on_end_of_turn() {
    let Some(m) = model() else { return };
    let msgs = ask("Reply with just the word yes.");
    let c = generate(m, &msgs, &params(0.0, 1, 48));
    assert_eq!(c.finish_reason, FinishReason::Stop, "{c:?}");
    assert!(!c.text.contains("<|im_end|>"));
}

fn image(tag: u8) -> Part {
    let bytes: Arc<[u8]> = Arc::from(vec![0x89, b'P', b'N', b'G', tag]);
    Part::Image(ImagePart {
        sha256: format!("{tag:064x}"),
        mime: "image/png".into(),
        bytes,
    })
}

#[test]
fn images_are_dropped_counted_and_marked() {
    let Some(m) = model() else { return };
    let msgs = vec![Message {
        role: Role::User,
        as_parts: false,
        parts: vec![
            Part::Text("Axial T2:".into()),
            image(1),
            Part::Text("Coronal FLAIR:".into()),
            image(2),
            Part::Text("What do you see?".into()),
        ],
    }];
    let r = m.render_prompt(&msgs).expect("renders");
    assert_eq!(r.images_dropped, 2);
    let expected = format!("Axial T2:\n\n{IMAGE_OMITTED_MARKER}\n\nCoronal FLAIR:\n\n{IMAGE_OMITTED_MARKER}\n\nWhat do you see?");
    assert!(r.text.contains(&expected), "{:?}", r.text);
    let c = generate(m, &msgs, &params(0.0, 1, 1));
    assert_eq!(c.images_dropped, 2);
}

#[test]
fn prompt_longer_than_context_is_a_typed_error() {
    let Some(m) = model() else { return };
    let long = "lesion ".repeat(9000);
    let err = m
        .generate(&ask(&long), &params(0.0, 1, 4), &OutputFormat::Text)
        .expect_err("does not fit");
    assert!(err.is_context_length(), "{err}");
    match err {
        LocalError::ContextTooLong {
            prompt_tokens,
            context_length,
        } => {
            assert_eq!(context_length, 8192);
            assert!(prompt_tokens >= 9000, "{prompt_tokens}");
        }
        other => panic!("wrong error {other}"),
    }
}

#[test]
fn answers_that_reach_the_context_end_finish_with_length() {
    let Some(path) = common::smollm2() else {
        return;
    };
    let m = LocalModel::load(&path)
        .expect("loads")
        .with_context_length(48);
    assert_eq!(m.context_length(), 48);
    let msgs = ask("Tell me a long story about a neurologist.");
    let tokens_in = m
        .prompt_tokens(&m.render_prompt(&msgs).expect("renders").text)
        .expect("tokens")
        .len();
    assert!(tokens_in < 40, "prompt is {tokens_in} tokens");
    let c = generate(&m, &msgs, &params(0.0, 1, 100));
    assert_eq!(c.tokens_in, tokens_in);
    assert_eq!(c.finish_reason, FinishReason::Length, "{c:?}");
    assert_eq!(c.tokens_in + c.tokens_out, 48);
    let err = m.generate(
        &ask(&"word ".repeat(60)),
        &params(0.0, 1, 4),
        &OutputFormat::Text,
    );
    assert!(
        matches!(
            err,
            Err(LocalError::ContextTooLong {
                context_length: 48,
                ..
            })
        ),
        "{err:?}"
    );
}

#[test]
fn invalid_parameters_are_refused() {
    let Some(m) = model() else { return };
    let msgs = ask("hi");
    let cases = [
        (
            GenParams {
                temperature: -0.1,
                ..params(0.0, 1, 4)
            },
            "temperature",
        ),
        (
            GenParams {
                temperature: f64::NAN,
                ..params(0.0, 1, 4)
            },
            "temperature",
        ),
        (
            GenParams {
                top_p: 0.0,
                ..params(0.5, 1, 4)
            },
            "top_p",
        ),
        (
            GenParams {
                top_p: 1.5,
                ..params(0.5, 1, 4)
            },
            "top_p",
        ),
        (params(0.5, 1, 0), "max_tokens"),
    ];
    for (p, field) in cases {
        match m.generate(&msgs, &p, &OutputFormat::Text) {
            Err(LocalError::InvalidParams { field: f, .. }) => assert_eq!(f, field),
            other => panic!("{p:?}: expected InvalidParams({field}), got {other:?}"),
        }
    }
}

/// Token ids llama.cpp itself produces for these strings (its `/tokenize`, `parse_special: true`, via the
/// xllamacpp PyPI wheel and this same GGUF) — an independent reference for the tokenizer built from metadata.
#[test]
fn tokenizer_matches_llama_cpp_ids() {
    let Some(m) = model() else { return };
    let fixture = include_str!("../fixtures/smollm2_llamacpp_tokens.json");
    let expected: std::collections::BTreeMap<String, Vec<u32>> =
        serde_json::from_str(fixture).expect("fixture parses");
    assert!(expected.len() >= 10);
    for (text, ids) in expected {
        assert_eq!(
            m.encode(&text).expect("encodes"),
            ids,
            "token ids for {text:?}"
        );
    }
}

/// Token ids from a caller (not the tokenizer) outside the vocabulary are a typed error naming the id, never a
/// panic.
#[test]
fn token_ids_outside_the_vocabulary_are_refused() {
    let Some(m) = model() else { return };
    let err = m
        .sample_tokens(&[1, 49_152], &params(0.0, 1, 4), 1)
        .expect_err("id 49152 is past the 49152-token vocabulary");
    assert!(
        matches!(
            err,
            LocalError::InvalidParams {
                field: "prompt",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("49152"), "{err}");
    assert!(m.prompt_logits(&[u32::MAX]).is_err());
}
