//! Qwen's tokenizer and template rules on a tiny random-weight GGUF that `scripts/tiny-gguf.py` writes with
//! SmolLM2's vocabulary, Qwen2's pre-tokenizer name (`tokenizer.ggml.pre = qwen2`) and a Qwen3-style chat
//! template (`tests/fixtures/qwen3_chat_template.jinja`, which reads `enable_thinking`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use nmb_chat::{GenParams, Message, OutputFormat, Role};
use nmb_local::{LocalError, LocalModel, TemplateKwargs, TemplateSource, TokenizerSource};
use nmb_test_support::assets::repo_root;
use nmb_test_support::llama::LlamaServer;
use serde_json::{json, Value};

use crate::common;
use crate::greedy::post_json;

/// The tiny Qwen-style GGUF, written once per test binary.
fn gguf() -> Option<PathBuf> {
    static PATH: OnceLock<Option<PathBuf>> = OnceLock::new();
    PATH.get_or_init(|| {
        let template = repo_root().join("crates/local/tests/fixtures/qwen3_chat_template.jinja");
        let template = template.to_str().expect("a UTF-8 path");
        common::tiny_gguf(
            "Q8_0",
            "tiny-qwen-style",
            &["--pre", "qwen2", "--chat-template", template],
        )
    })
    .clone()
}

fn model() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| gguf().map(|p| LocalModel::load(&p).expect("the tiny GGUF loads")))
        .as_ref()
}

/// Strings where Qwen2's split differs from SmolLM2's and Llama 3's: digits one by one, contractions in either
/// case, punctuation runs with newlines, whitespace runs, other scripts.
const TEXTS: &[&str] = &[
    "1234567890",
    "In 2026, 3 of 12 patients (25%) had 1.5T MRI.",
    "don't DON'T We'Re they'VE I'M she'LL he'D it'S",
    "end.\n\n\nNext:\r\n  - item",
    "a   b\t\tc \n d",
    "神经内科 123 ñandú Ελληνικά 🧠🧠",
    "x+=1;;; // ok!!!\n",
    "  leading",
    "trailing  ",
    "<|im_start|>user\nHi<|im_end|>",
];

#[test]
fn qwen2_pre_tokenizer_matches_llama_cpp() {
    let Some(path) = gguf() else { return };
    let tok = nmb_local::Tokenizer::open(&path).expect("builds");
    assert_eq!(
        tok.source(),
        &TokenizerSource::Gguf {
            pre: "qwen2".into()
        }
    );
    let Some(server) = LlamaServer::start(&path) else {
        return;
    };
    for text in TEXTS {
        let answer = post_json(
            &server.url,
            "/tokenize",
            &json!({"content": text, "add_special": false, "parse_special": true}),
        );
        let theirs: Vec<u32> = answer["tokens"]
            .as_array()
            .unwrap_or_else(|| panic!("/tokenize answered {answer}"))
            .iter()
            .map(|t| t.as_u64().expect("an id") as u32)
            .collect();
        assert_eq!(tok.encode(text).expect("encodes"), theirs, "{text:?}");
    }
}

fn params(extra_body: Option<Value>) -> GenParams {
    GenParams {
        temperature: 0.0,
        top_p: 1.0,
        max_tokens: 2,
        seed: Some(1),
        reasoning_effort: None,
        thinking_budget: None,
        unsent: Default::default(),
        extra_body: extra_body
            .map(|v| serde_json::from_value::<BTreeMap<String, Value>>(v).expect("an object")),
    }
}

/// `--extra-body '{"chat_template_kwargs": {"enable_thinking": false}}'` reaches the template: the prompt the
/// model reads ends with Qwen3's closed, empty think block, and without it it does not.
#[test]
fn chat_template_kwargs_switch_thinking_off() {
    let Some(m) = model() else { return };
    assert_eq!(m.template_source(), TemplateSource::Gguf);
    let msgs = [Message::text(Role::User, "Headache with fever?")];
    let off: TemplateKwargs = json!({"enable_thinking": false})
        .as_object()
        .cloned()
        .expect("an object");
    let closed = m.render_prompt_with(&msgs, &off).expect("renders").text;
    assert!(
        closed.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"),
        "{closed:?}"
    );
    let open = m.render_prompt(&msgs).expect("renders").text;
    assert!(open.ends_with("<|im_start|>assistant\n"), "{open:?}");

    let asked = |extra: Option<Value>| {
        m.generate(&msgs, &params(extra), &OutputFormat::Text)
            .expect("generates")
            .tokens_in
    };
    let tokens = |text: &str| m.prompt_tokens(text).expect("encodes").len();
    assert_eq!(
        asked(Some(
            json!({"chat_template_kwargs": {"enable_thinking": false}})
        )),
        tokens(&closed)
    );
    assert_eq!(asked(None), tokens(&open));
    assert_ne!(tokens(&closed), tokens(&open));
}

/// Other extra-body fields have nowhere to go in-process: refused, naming the field.
#[test]
fn other_extra_body_fields_are_refused() {
    let Some(m) = model() else { return };
    let msgs = [Message::text(Role::User, "Hi")];
    for (extra, needle) in [
        (json!({"top_k": 20}), "`top_k`"),
        (
            json!({"chat_template_kwargs": {"enable_thinking": false}, "min_p": 0}),
            "`min_p`",
        ),
        (json!({"chat_template_kwargs": true}), "must be an object"),
    ] {
        match m.generate(&msgs, &params(Some(extra.clone())), &OutputFormat::Text) {
            Err(
                e @ LocalError::InvalidParams {
                    field: "extra_body",
                    ..
                },
            ) => assert!(e.to_string().contains(needle), "{extra}: {e}"),
            other => panic!("{extra}: expected InvalidParams(extra_body), got {other:?}"),
        }
    }
}
