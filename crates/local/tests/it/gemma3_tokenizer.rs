//! Gemma 3's SentencePiece tokenizer, built from its GGUF, against llama.cpp's own on the same file: the ids of
//! its server's `/tokenize` and the text of its `/detokenize`, over a few hundred varied strings (scripts,
//! emoji, whitespace runs, special tokens, digits, and the sample suite's clinical text).

use std::sync::OnceLock;

use nmb_local::{Tokenizer, TokenizerSource};
use nmb_test_support::llama::LlamaServer;
use serde_json::{json, Value};

use crate::common;
use crate::greedy::post_json;

/// Strings chosen for the rules they exercise; the corpus adds their pairs and the sample suite's text.
const HAND: &[&str] = &[
    "",
    " ",
    "Hello world",
    " Hello world",
    "Hello  world",
    "Hello world ",
    "  leading and trailing  ",
    "A 77-year-old female presented with progressive memory loss over 2 years.",
    "T2/FLAIR hyperintensity in the left mesial temporal lobe; DWI restriction (ADC 0.45 x 10^-3 mm²/s).",
    "MoCA 18/30, MMSE 21/30, CSF Aβ42 ↓, p-tau181 ↑",
    "根据患者的症状和图片,对疾病进行诊断",
    "结合病历和影像资料，分析并诊断最可能的疾病。",
    "神経内科医は頭痛を診断した。",
    "신경과 의사가 두통을 진단했다.",
    "طبيب الأعصاب شخص الصداع",
    "न्यूरोलॉजिस्ट ने सिरदर्द का निदान किया",
    "Ελληνικά και русский текст",
    "🧠",
    "🧠🩺💊 brain scan 🤔",
    "👩‍⚕️ doctor, 🇫🇷 flag, 👍🏽 thumbs",
    "e\u{301} vs é, A\u{30a} vs Å",
    "zero\u{200b}width and no\u{a0}break",
    "tab\there\tand\t\ttwo",
    "line one\nline two\n\nline four",
    "windows\r\nline\r\nends",
    "\n",
    "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
    "                                                  fifty spaces before",
    "x                                x",
    "3.14159 2.71828 1,000,000 2026-11-26 0x1F 1e-9",
    "0123456789",
    "12345678901234567890",
    "<start_of_turn>user\nWhat is the diagnosis?<end_of_turn>\n<start_of_turn>model\n",
    "<bos><start_of_turn>user\nHi<end_of_turn>",
    "text<end_of_turn>text",
    "<start_of_turn",
    "<<bos>>",
    "<bos> <eos> <pad> <unk> <mask>",
    "[multimodal] <start_of_image> <end_of_image>",
    "<unused0><unused99>",
    "▁already▁escaped▁",
    "don't, can't, it's, we're, I'll, they've",
    "NAME=\"value\"; {\"json\": [1, 2, 3]} <tag attr='x'>",
    "C:\\path\\to\\file.dcm and /usr/share/fsl",
    "ALL CAPS HEADER: RIGHT MCA INFARCT",
    "\u{0}nul and \u{7f} del",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 ∑∫√∞ ≠ ≤ ≥",
    "Ĳ ǆ ﬁ ﬂ ligatures",
    // Runs of one character: the same pair scores the same at several places, so these take llama.cpp's rule for
    // equal scores (leftmost first); the other rule tokenizes them differently.
    "aaaaa",
    "eeeeeee",
    "hhhhhhhhhh",
    "ddddddddddd",
    "Zzzzzzzzzzz",
    "hahahahaha",
    "!!!!!!!",
    "0000000000",
    "..........",
    "----------",
];

/// Short atoms whose pairs meet at every kind of boundary (space/no space, special/text, script changes).
const ATOMS: &[&str] = &[
    "Hello",
    " world",
    "  ",
    "\n",
    "\n\n",
    "\t",
    "神经",
    "🧠",
    "123",
    "<start_of_turn>",
    "<end_of_turn>",
    "é",
    "'s",
    " \n ",
    "<bos>",
    "x",
    "MRI",
    "—",
];

fn corpus() -> Vec<String> {
    let mut texts: Vec<String> = HAND.iter().map(|s| s.to_string()).collect();
    for a in ATOMS {
        for b in ATOMS {
            texts.push(format!("{a}{b}"));
        }
    }
    texts.extend(suite_texts());
    texts
}

/// Every distinct piece of clinical text in the bundled sample suite.
fn suite_texts() -> Vec<String> {
    let suite = nmb_suite::sample::build();
    let mut texts = Vec::new();
    for case in &suite.cases {
        texts.push(case.notes.clone());
        texts.extend(case.ehr.iter().map(|(k, v)| format!("{k}: {v}")));
        for task in &case.tasks {
            texts.push(task.question.clone());
            for turn in &task.turns {
                texts.push(turn.text.clone());
                texts.push(turn.question.clone());
            }
            if let Some(dx) = task.reference.as_ref().and_then(|r| r.diagnosis.clone()) {
                texts.push(dx);
            }
        }
    }
    texts.sort();
    texts.dedup();
    texts
}

/// The tokenizer and llama.cpp's server on Gemma 3's GGUF, started once per test binary.
fn gemma3() -> Option<&'static (Tokenizer, LlamaServer)> {
    static BOTH: OnceLock<Option<(Tokenizer, LlamaServer)>> = OnceLock::new();
    BOTH.get_or_init(|| {
        let path = common::gemma3()?;
        let tok = Tokenizer::open(&path).expect("Gemma 3's tokenizer builds from its GGUF");
        Some((tok, LlamaServer::start(&path)?))
    })
    .as_ref()
}

fn ids(answer: &Value) -> Vec<u32> {
    answer["tokens"]
        .as_array()
        .unwrap_or_else(|| panic!("/tokenize answered {answer}"))
        .iter()
        .map(|t| t.as_u64().expect("a token id") as u32)
        .collect()
}

fn llama_tokens(server: &LlamaServer, text: &str, add_special: bool) -> Vec<u32> {
    ids(&post_json(
        &server.url,
        "/tokenize",
        &json!({"content": text, "add_special": add_special, "parse_special": true}),
    ))
}

fn llama_text(server: &LlamaServer, tokens: &[u32]) -> String {
    let answer = post_json(&server.url, "/detokenize", &json!({ "tokens": tokens }));
    answer["content"]
        .as_str()
        .unwrap_or_else(|| panic!("/detokenize answered {answer}"))
        .to_string()
}

/// Fails listing the first differences, so one run shows the pattern.
fn assert_none(what: &str, checked: usize, diffs: &[String]) {
    let shown: Vec<&str> = diffs.iter().take(15).map(String::as_str).collect();
    assert!(
        diffs.is_empty(),
        "{} of {checked} {what} differ from llama.cpp:\n{}",
        diffs.len(),
        shown.join("\n")
    );
}

#[test]
fn gemma3_tokens_and_text_equal_llama_cpps() {
    let Some((tok, server)) = gemma3() else {
        return;
    };
    assert_eq!(tok.source(), &TokenizerSource::SentencePiece);
    assert_eq!(tok.vocab_size(), 262_144);
    let texts = corpus();
    assert!(texts.len() >= 300, "only {} strings", texts.len());
    let mut diffs = Vec::new();
    for text in &texts {
        let ours = tok.encode(text).expect("encodes");
        let theirs = llama_tokens(server, text, false);
        if ours != theirs {
            diffs.push(format!("{text:?}: ours {ours:?}, llama.cpp {theirs:?}"));
            continue;
        }
        let (ours, theirs) = (
            tok.decode(&ours, false).expect("decodes"),
            llama_text(server, &theirs),
        );
        if ours != theirs {
            diffs.push(format!(
                "{text:?} back to text: ours {ours:?}, llama.cpp {theirs:?}"
            ));
        }
    }
    assert_none("strings", texts.len(), &diffs);
}

/// With BOS, as a prompt is tokenized: llama.cpp's `add_special` puts Gemma's `<bos>` in front.
#[test]
fn gemma3_prompts_start_with_bos_as_in_llama_cpp() {
    let Some((tok, server)) = gemma3() else {
        return;
    };
    let texts = [
        "Hello",
        "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n",
        " leading space",
        "",
    ];
    for text in texts {
        let ours = tok.encode_prompt(text).expect("encodes");
        assert_eq!(ours.first(), tok.token_to_id("<bos>").as_ref(), "{text:?}");
        assert_eq!(ours, llama_tokens(server, text, true), "{text:?}");
    }
    // A template that writes `<bos>` itself gets no second one (llama.cpp's chat path strips it likewise).
    let written = tok.encode_prompt("<bos>Hi").expect("encodes");
    assert_eq!(written, llama_tokens(server, "Hi", true));
}

/// Token ids spread over the whole vocabulary (control, unused and user-defined tokens included) render as
/// llama.cpp renders them; byte tokens are left out, since a lone byte is not text.
#[test]
fn gemma3_vocabulary_renders_as_llama_cpps() {
    let Some((tok, server)) = gemma3() else {
        return;
    };
    let sample: Vec<u32> = (0..tok.vocab_size() as u32)
        .step_by(251)
        .chain(0..200)
        .filter(|&id| {
            !tok.id_to_token(id)
                .expect("an id inside the vocabulary")
                .starts_with("<0x")
        })
        .collect();
    let mut diffs = Vec::new();
    for chunk in sample.chunks(8) {
        let (ours, theirs) = (
            tok.decode(chunk, false).expect("decodes"),
            llama_text(server, chunk),
        );
        if ours != theirs {
            diffs.push(format!("{chunk:?}: ours {ours:?}, llama.cpp {theirs:?}"));
        }
    }
    assert_none("token groups", sample.len().div_ceil(8), &diffs);
}
