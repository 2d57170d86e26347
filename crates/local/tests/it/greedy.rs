//! At temperature 0 the greedy tokens equal llama.cpp's on the same GGUF, for a fixed set of prompts.
//!
//! The reference is llama.cpp's real server (PyPI `xllamacpp`, started by `nmb_test_support::llama` with 2
//! threads) on the SmolLM2 Q4_1 GGUF. Both engines get the same prompt token ids (`LocalModel::prompt_tokens`;
//! llama.cpp takes a token array as is) and decode 48 tokens greedily. llama.cpp is asked through
//! `POST /completion` with `prompt` as ids, `temperature: 0`, `n_predict: 48`, `cache_prompt: false`,
//! `return_tokens: true` (the generated ids come back in `tokens`, the end-of-generation token included when
//! `stop_type` is `eos`) and `n_probs: 2` (its two most likely tokens at each step, to say on a failure how close
//! the step where the two engines part was). The logits after each prompt are also compared bit for bit with
//! llama.cpp's (`scripts/llama-logits.py`, llama.cpp's C API in xllamacpp's library). Without xllamacpp or the
//! GGUF the tests skip with a message locally and fail under `CI=true`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::OnceLock;
use std::time::Duration;

use nmb_chat::GenParams;
use nmb_local::{FinishReason, LocalModel};
use nmb_test_support::llama::LlamaServer;
use serde_json::{json, Value};

use crate::common;

const MAX_TOKENS: u32 = 48;

/// The long case of the throughput benchmark, already in ChatML (about 460 tokens).
const LONG_CASE: &str = include_str!("../../benches/prompt.txt");

fn chatml(system: Option<&str>, user: &str) -> String {
    let system = system
        .map(|s| format!("<|im_start|>system\n{s}<|im_end|>\n"))
        .unwrap_or_default();
    format!("{system}<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
}

/// `(name, prompt text)`: short and long neurology questions in SmolLM2's ChatML, answers that stop early on
/// `<|im_end|>` and ones that run to the token limit, and a plain-text continuation.
fn prompts() -> Vec<(&'static str, String)> {
    let neurologist = Some("You are a neurologist.");
    vec![
        (
            "short question",
            chatml(
                neurologist,
                "What is the most common cause of subarachnoid haemorrhage?",
            ),
        ),
        (
            "one-line answer (stops early)",
            chatml(
                neurologist,
                "Reply with only the name of the nerve: which cranial nerve moves the lateral rectus?",
            ),
        ),
        (
            "one sentence (stops early)",
            chatml(neurologist, "In one sentence, what is a lacunar stroke?"),
        ),
        (
            "no system prompt",
            chatml(None, "List three causes of bilateral facial palsy."),
        ),
        (
            "case",
            chatml(
                Some(
                    "You are an experienced neurology expert. Answer with the diagnosis first, then a short \
                     rationale.",
                ),
                "A 29-year-old woman has had blurred vision in her right eye for five days, with pain on moving \
                 the eye. Colour vision is reduced and there is a right relative afferent pupillary defect. Two \
                 years ago she had numbness of both legs that resolved over six weeks. MRI shows periventricular \
                 and juxtacortical T2 lesions, one of them enhancing. What is the most likely diagnosis?",
            ),
        ),
        (
            "JSON answer",
            chatml(
                Some("You are a neurologist. Reply with JSON only."),
                "A 71-year-old man has a resting tremor of the left hand, slowness and a shuffling gait for two \
                 years. Give {\"diagnosis\": ..., \"differential\": [three items]}.",
            ),
        ),
        ("long case", LONG_CASE.to_string()),
        (
            "plain-text continuation",
            "Multiple sclerosis is a chronic disease of the central nervous system in which".to_string(),
        ),
    ]
}

/// Loaded once per test binary.
fn model() -> Option<&'static LocalModel> {
    static MODEL: OnceLock<Option<LocalModel>> = OnceLock::new();
    MODEL
        .get_or_init(|| common::smollm2().map(|p| LocalModel::load(&p).expect("SmolLM2 loads")))
        .as_ref()
}

/// llama.cpp's server on the same GGUF, started once per test binary (it exits when the binary does: it serves
/// until its stdin closes).
fn llama() -> Option<&'static LlamaServer> {
    static SERVER: OnceLock<Option<LlamaServer>> = OnceLock::new();
    SERVER
        .get_or_init(|| common::smollm2().and_then(|p| LlamaServer::start(&p)))
        .as_ref()
}

fn greedy() -> GenParams {
    GenParams {
        temperature: 0.0,
        top_p: 1.0,
        max_tokens: MAX_TOKENS,
        seed: Some(1),
        reasoning_effort: None,
        thinking_budget: None,
        unsent: Default::default(),
        extra_body: None,
    }
}

/// `POST path` with a JSON body to `base` (`http://HOST:PORT`); the JSON answer. A plain HTTP/1.1 exchange on a
/// `TcpStream`: one request per connection.
pub(crate) fn post_json(base: &str, path: &str, body: &Value) -> Value {
    let addr = base
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("not an http:// URL: {base}"));
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(600)))
        .expect("read timeout");
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .unwrap_or_else(|e| panic!("send {path}: {e}"));
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .unwrap_or_else(|e| panic!("read the answer to {path}: {e}"));
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| {
            panic!(
                "{path}: no HTTP header in {:?}",
                String::from_utf8_lossy(&raw)
            )
        });
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let mut payload = raw[split + 4..].to_vec();
    let status = head.split_whitespace().nth(1).unwrap_or("");
    assert_eq!(
        status,
        "200",
        "{path} answered {head:?}: {}",
        String::from_utf8_lossy(&payload)
    );
    if head.contains("transfer-encoding: chunked") {
        payload = dechunk(&payload);
    }
    serde_json::from_slice(&payload).unwrap_or_else(|e| {
        panic!(
            "{path}: not JSON ({e}): {}",
            String::from_utf8_lossy(&payload)
        )
    })
}

/// The body of a `Transfer-Encoding: chunked` answer.
fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let eol = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("chunk size line");
        let size_field = String::from_utf8_lossy(&data[..eol]);
        let size_hex = size_field.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_hex, 16).expect("hex chunk size");
        if size == 0 {
            return out;
        }
        let start = eol + 2;
        out.extend_from_slice(&data[start..start + size]);
        data = &data[start + size + 2..];
    }
}

/// What llama.cpp decoded greedily from a prompt.
struct Reference {
    /// Generated ids, without the end-of-generation token it stopped on.
    tokens: Vec<u32>,
    /// Whether it stopped on an end-of-generation token (`stop_type` `eos`) rather than at the token limit.
    stopped: bool,
    /// Per step, its two most likely tokens as `(id, logprob)`.
    top2: Vec<Vec<(u32, f64)>>,
}

fn llama_greedy(server: &LlamaServer, prompt: &[u32]) -> Reference {
    let answer = post_json(
        &server.url,
        "/completion",
        &json!({
            "prompt": prompt,
            "n_predict": MAX_TOKENS,
            "temperature": 0.0,
            "cache_prompt": false,
            "return_tokens": true,
            "n_probs": 2,
        }),
    );
    let evaluated = answer["tokens_evaluated"].as_u64();
    assert_eq!(
        evaluated,
        Some(prompt.len() as u64),
        "llama.cpp evaluated another prompt than the {} ids sent: {answer}",
        prompt.len()
    );
    let mut tokens: Vec<u32> = answer["tokens"]
        .as_array()
        .unwrap_or_else(|| panic!("no `tokens` in llama.cpp's answer: {answer}"))
        .iter()
        .map(|t| t.as_u64().expect("a token id") as u32)
        .collect();
    let stop_type = answer["stop_type"].as_str().unwrap_or("");
    let stopped = match stop_type {
        "eos" => true,
        "limit" => false,
        other => panic!("llama.cpp stopped for {other:?}, not eos or limit: {answer}"),
    };
    if stopped {
        // llama.cpp returns the end-of-generation token it stopped on; nmb's runs leave it out.
        tokens.pop();
    } else {
        assert_eq!(tokens.len(), MAX_TOKENS as usize, "{answer}");
    }
    let top2 = answer["completion_probabilities"]
        .as_array()
        .map(|steps| {
            steps
                .iter()
                .map(|step| {
                    step["top_logprobs"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|t| Some((t["id"].as_u64()? as u32, t["logprob"].as_f64()?)))
                        .collect()
                })
                .collect()
        })
        .unwrap_or_default();
    Reference {
        tokens,
        stopped,
        top2,
    }
}

fn text(m: &LocalModel, ids: &[u32]) -> String {
    m.decode(ids, false)
        .unwrap_or_else(|e| format!("<cannot decode {ids:?}: {e}>"))
}

fn ended(stopped: bool) -> &'static str {
    if stopped {
        "stopped"
    } else {
        "hit the limit"
    }
}

fn is_control(m: &LocalModel, id: u32) -> bool {
    m.decode(&[id], true).is_ok_and(|s| s.is_empty())
}

/// Why nmb's greedy run and llama.cpp's differ, or `None` when they agree: the same tokens and the same
/// stopping. A difference in length is accepted only where the shorter run stopped on an end-of-generation token
/// and the longer one has a control token in its place (an end-of-generation token that one engine stops on and
/// the other does not).
fn disagreement(
    m: &LocalModel,
    ours: &[u32],
    ours_stopped: bool,
    theirs: &Reference,
) -> Option<String> {
    let common = ours.len().min(theirs.tokens.len());
    let first_diff = (0..common).find(|&i| ours[i] != theirs.tokens[i]);
    let problem = if let Some(i) = first_diff {
        let top2 = theirs
            .top2
            .get(i)
            .map(|t| {
                t.iter()
                    .map(|&(id, lp)| format!("{id} {:?} logprob {lp:.4}", text(m, &[id])))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        format!(
            "they part at step {i}: nmb {} {:?}, llama.cpp {} {:?} (llama.cpp's top two there: {top2})",
            ours[i],
            text(m, &[ours[i]]),
            theirs.tokens[i],
            text(m, &[theirs.tokens[i]]),
        )
    } else if ours.len() == theirs.tokens.len() {
        if ours_stopped == theirs.stopped {
            return None;
        }
        format!(
            "same {common} tokens, but nmb {} and llama.cpp {}",
            ended(ours_stopped),
            ended(theirs.stopped),
        )
    } else {
        let ours_shorter = ours.len() < theirs.tokens.len();
        let (short_stopped, longer, who): (bool, &[u32], &str) = if ours_shorter {
            (ours_stopped, &theirs.tokens, "llama.cpp")
        } else {
            (theirs.stopped, ours, "nmb")
        };
        let next = longer[common];
        if short_stopped && is_control(m, next) {
            return None;
        }
        format!(
            "the first {common} tokens agree, then {who} goes on with {next} {:?} where the other {}",
            text(m, &[next]),
            ended(short_stopped),
        )
    };
    Some(format!(
        "{problem}\n  nmb       ({} tokens, {}): {:?}\n  llama.cpp ({} tokens, {}): {:?}\n  nmb ids:       {ours:?}\n  llama.cpp ids: {:?}",
        ours.len(),
        if ours_stopped { "stop" } else { "length" },
        text(m, ours),
        theirs.tokens.len(),
        if theirs.stopped { "eos" } else { "limit" },
        text(m, &theirs.tokens),
        theirs.tokens,
    ))
}

/// Every logit after every prompt is llama.cpp's to the bit: a stricter check than the tokens below, which a
/// numeric difference changes only where it tips a near-tie. The prompts take each of llama.cpp's paths for
/// reading a prompt (one-pass attention under 64 tokens, tiled from 64).
#[test]
fn prompt_logits_equal_llama_cpp_bit_for_bit() {
    let Some(m) = model() else { return };
    let prompts = prompts();
    let ids: Vec<Vec<u32>> = prompts
        .iter()
        .map(|(_, p)| m.prompt_tokens(p).expect("tokenizes"))
        .collect();
    let Some(theirs) = nmb_test_support::llama::prompt_logits(m.path(), &ids) else {
        return;
    };
    let mut failures = Vec::new();
    for (((name, _), ids), theirs) in prompts.iter().zip(&ids).zip(&theirs) {
        let ours = m.prompt_logits(ids).expect("prompt logits");
        assert_eq!(ours.len(), theirs.len(), "{name}: vocabulary sizes");
        let differ: Vec<usize> = (0..ours.len())
            .filter(|&i| ours[i].to_bits() != theirs[i].to_bits())
            .collect();
        if let Some(&i) = differ.first() {
            failures.push(format!(
                "{name} ({} prompt tokens): {} of {} logits differ; token {i}: nmb {:e}, llama.cpp {:e}",
                ids.len(),
                differ.len(),
                ours.len(),
                ours[i],
                theirs[i]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Token-for-token equality on every prompt: the engine computes every tensor as llama.cpp's CPU build does, bit
/// for bit, so even near-ties (two tokens within hundredths of a nat) fall the same way.
#[test]
fn greedy_tokens_equal_llama_cpp() {
    let Some(m) = model() else { return };
    let Some(server) = llama() else { return };
    let mut failures = Vec::new();
    for (name, prompt) in prompts() {
        let ids = m.prompt_tokens(&prompt).expect("tokenizes");
        let theirs = llama_greedy(server, &ids);
        let runs = m
            .sample_tokens(&ids, &greedy(), 1)
            .unwrap_or_else(|e| panic!("{name}: sample_tokens fails: {e}"));
        assert_eq!(runs.len(), 1, "{name}: one run asked for");
        let ours = &runs[0];
        if ours.finish == FinishReason::Length {
            assert_eq!(
                ours.tokens.len(),
                MAX_TOKENS as usize,
                "{name}: finished with length before {MAX_TOKENS} tokens: {:?}",
                text(m, &ours.tokens)
            );
        }
        let stopped = ours.finish == FinishReason::Stop;
        if let Some(why) = disagreement(m, &ours.tokens, stopped, &theirs) {
            failures.push(format!("{name} ({} prompt tokens): {why}", ids.len()));
        }
    }
    assert!(
        failures.is_empty(),
        "greedy tokens differ from llama.cpp's on {} of {} prompts:\n{}",
        failures.len(),
        prompts().len(),
        failures.join("\n")
    );
}

#[test]
fn three_greedy_samples_are_three_copies_of_one() {
    let Some(m) = model() else { return };
    for (name, prompt) in prompts() {
        let ids = m.prompt_tokens(&prompt).expect("tokenizes");
        let one = m
            .sample_tokens(&ids, &greedy(), 1)
            .unwrap_or_else(|e| panic!("{name}: sample_tokens(n = 1) fails: {e}"));
        let three = m
            .sample_tokens(&ids, &greedy(), 3)
            .unwrap_or_else(|e| panic!("{name}: sample_tokens(n = 3) fails: {e}"));
        assert_eq!(one.len(), 1, "{name}");
        assert_eq!(three.len(), 3, "{name}");
        for (k, run) in three.iter().enumerate() {
            assert!(
                run.tokens == one[0].tokens && run.finish == one[0].finish,
                "{name}: sample {k} of 3 at temperature 0 differs from the single run\n  n = 3, #{k} ({:?}): {:?}\n  \
                 n = 1      ({:?}): {:?}\n  ids n = 3: {:?}\n  ids n = 1: {:?}",
                run.finish,
                text(m, &run.tokens),
                one[0].finish,
                text(m, &one[0].tokens),
                run.tokens,
                one[0].tokens,
            );
        }
    }
}

/// Both engines see the same ids for the same text: the precondition of comparing their speeds on one prompt
/// file, and of feeding nmb's ids to llama.cpp above.
#[test]
fn prompt_tokens_equal_llama_cpp_tokenize() {
    let Some(m) = model() else { return };
    let Some(server) = llama() else { return };
    for (name, prompt) in prompts() {
        let ours = m.prompt_tokens(&prompt).expect("tokenizes");
        let answer = post_json(
            &server.url,
            "/tokenize",
            &json!({"content": prompt, "add_special": true, "parse_special": true}),
        );
        let theirs: Vec<u32> = answer["tokens"]
            .as_array()
            .unwrap_or_else(|| panic!("no `tokens` in /tokenize's answer: {answer}"))
            .iter()
            .map(|t| t.as_u64().expect("a token id") as u32)
            .collect();
        if ours != theirs {
            let i = ours
                .iter()
                .zip(&theirs)
                .position(|(a, b)| a != b)
                .unwrap_or(ours.len().min(theirs.len()));
            panic!(
                "{name}: nmb and llama.cpp tokenize differently from token {i}\n  nmb:       {:?}\n  llama.cpp: {:?}",
                &ours[i..(i + 8).min(ours.len())],
                &theirs[i..(i + 8).min(theirs.len())],
            );
        }
    }
}
