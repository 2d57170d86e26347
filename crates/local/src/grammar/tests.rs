//! The grammar sampler over real vocabularies (SmolLM2's byte-level BPE, Gemma 3's SentencePiece) with random
//! logits: at any temperature, every answer that ends before the token limit is valid against its schema.

use std::sync::Arc;

use serde_json::{json, Value};

use super::{Grammar, State, Vocab};
use crate::sample::{Sampler, Sampling};
use crate::tokenizer::Tokenizer;

/// SplitMix64, for the test's own random choices.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// A random schema of the subset the converter reads.
fn random_schema(rng: &mut Rng, depth: u32) -> Value {
    let words = ["MRI", "CT", "stroke", "a b", "say \"hi\"", "é", ""];
    let kinds = if depth > 0 { 12 } else { 8 };
    match rng.below(kinds) {
        0 => {
            let min = rng.below(3);
            json!({"type": "string", "minLength": min, "maxLength": min + rng.below(4)})
        }
        1 => json!({"type": "string"}),
        2 => json!({"type": "number"}),
        3 => {
            let lo = [-120i64, -3, 0, 1, 7, 10, 99, 250][rng.below(8)];
            let hi = lo + [0i64, 1, 9, 50, 1000][rng.below(5)];
            match rng.below(3) {
                0 => json!({"type": "integer", "minimum": lo, "maximum": hi}),
                1 => json!({"type": "integer", "minimum": lo}),
                _ => json!({"type": "integer", "maximum": hi}),
            }
        }
        4 => json!({"type": ["boolean", "null"]}),
        5 => {
            let mut v: Vec<Value> = (0..1 + rng.below(3))
                .map(|_| json!(words[rng.below(words.len())]))
                .collect();
            v.push(Value::Null);
            json!({"type": ["string", "null"], "enum": v})
        }
        6 => json!({"const": words[rng.below(words.len())]}),
        7 => json!({"type": ["number", "null"], "minimum": 0, "maximum": 1}),
        8 | 9 => {
            let names = ["a", "id", "name", "x_1", "score", "kind", "tags"];
            let mut props = serde_json::Map::new();
            let mut required = Vec::new();
            for _ in 0..1 + rng.below(4) {
                let n = names[rng.below(names.len())];
                props.insert(n.into(), random_schema(rng, depth - 1));
                if rng.below(3) > 0 {
                    required.push(json!(n));
                }
            }
            json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
        }
        10 => {
            let min = rng.below(2);
            json!({"type": "array", "items": random_schema(rng, depth - 1), "minItems": min, "maxItems": min + rng.below(3)})
        }
        _ => json!({"anyOf": [random_schema(rng, depth - 1), random_schema(rng, depth - 1)]}),
    }
}

/// Whether `v` is valid against `schema` (the subset above).
fn valid(v: &Value, s: &Value) -> bool {
    if let Some(c) = s.get("const") {
        return v == c;
    }
    if let Some(Value::Array(alts)) = s.get("anyOf") {
        return alts.iter().any(|a| valid(v, a));
    }
    if let Some(Value::Array(e)) = s.get("enum") {
        if !e.contains(v) {
            return false;
        }
    }
    let types: Vec<&str> = match s.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => return true,
    };
    types.iter().any(|t| match *t {
        "null" => v.is_null(),
        "boolean" => v.is_boolean(),
        "number" => v.is_number(),
        "integer" => {
            let Some(i) = v.as_i64() else { return false };
            s.get("minimum")
                .and_then(Value::as_i64)
                .is_none_or(|m| i >= m)
                && s.get("maximum")
                    .and_then(Value::as_i64)
                    .is_none_or(|m| i <= m)
        }
        "string" => {
            let Some(text) = v.as_str() else { return false };
            let n = text.chars().count() as u64;
            s.get("minLength")
                .and_then(Value::as_u64)
                .is_none_or(|m| n >= m)
                && s.get("maxLength")
                    .and_then(Value::as_u64)
                    .is_none_or(|m| n <= m)
        }
        "array" => {
            let Some(items) = v.as_array() else {
                return false;
            };
            let n = items.len() as u64;
            s.get("minItems")
                .and_then(Value::as_u64)
                .is_none_or(|m| n >= m)
                && s.get("maxItems")
                    .and_then(Value::as_u64)
                    .is_none_or(|m| n <= m)
                && items.iter().all(|i| valid(i, &s["items"]))
        }
        "object" => {
            let Some(o) = v.as_object() else { return false };
            let props = s["properties"].as_object().cloned().unwrap_or_default();
            let required = s["required"].as_array().cloned().unwrap_or_default();
            required
                .iter()
                .filter_map(Value::as_str)
                .all(|r| o.contains_key(r))
                && o.iter()
                    .all(|(k, x)| props.get(k).is_some_and(|p| valid(x, p)))
        }
        _ => false,
    })
}

/// Logits that make short answers likely: noise over every token, and a push towards a few random tokens, the
/// tokens that close strings, objects and arrays, and the end of generation.
fn logits(rng: &mut Rng, n: usize, closers: &[u32], eog: u32) -> Vec<f32> {
    let mut l: Vec<f32> = (0..n).map(|_| rng.unit() * 4.0).collect();
    for _ in 0..8 {
        l[rng.below(n)] += 6.0;
    }
    for &c in closers {
        l[c as usize] += 5.0 * rng.unit();
    }
    l[eog as usize] += 8.0;
    l
}

fn check_vocabulary(tokenizer: &Tokenizer, eog: u32, runs: usize, seed: u64) {
    let pieces = tokenizer.pieces();
    let n = pieces.len();
    let closers: Vec<u32> = ["\"", "}", "]", ",", "0", "1", "null", "true", "\"}", "\"]"]
        .iter()
        .filter_map(|t| {
            tokenizer
                .encode(t)
                .ok()
                .filter(|ids| ids.len() == 1)
                .map(|ids| ids[0])
        })
        .collect();
    let vocab = Arc::new(Vocab::new(pieces.clone(), vec![eog]));
    let mut rng = Rng(seed);
    let (mut ended, mut cut) = (0, 0);
    for run in 0..runs {
        let schema = random_schema(&mut rng, 2);
        let grammar = Arc::new(Grammar::from_schema(&schema).expect("the subset converts"));
        let mut state = State::new(grammar, vocab.clone());
        let rule = match run % 3 {
            0 => Sampling::Greedy,
            1 => Sampling::Nucleus {
                temperature: 0.7,
                top_p: 0.95,
            },
            _ => Sampling::Nucleus {
                temperature: 1.8,
                top_p: 1.0,
            },
        };
        let mut sampler = Sampler::new(rule, seed + run as u64);
        let mut text = Vec::new();
        let mut stopped = false;
        for _ in 0..160 {
            let l = logits(&mut rng, n, &closers, eog);
            let Some(t) = crate::batch::constrained(&mut sampler, &state, &l) else {
                panic!(
                    "the grammar of {schema} allowed no token after {:?}",
                    String::from_utf8_lossy(&text)
                );
            };
            if t == eog {
                stopped = true;
                break;
            }
            state.accept(t);
            text.extend_from_slice(&pieces[t as usize]);
        }
        if !stopped {
            cut += 1;
            continue;
        }
        ended += 1;
        let text = String::from_utf8(text).expect("an ended answer is whole UTF-8");
        let v: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            // JSON allows numbers past f64's range (the grammar's exponents have up to 16 digits); serde_json
            // refuses them.
            Err(e) if e.to_string().contains("number out of range") => continue,
            Err(e) => panic!("not JSON ({e}) under {schema}: {text}"),
        };
        assert!(valid(&v, &schema), "not valid against {schema}: {text}");
    }
    assert!(
        ended * 2 > runs,
        "only {ended} of {runs} answers ended ({cut} cut at the limit)"
    );
}

#[test]
fn every_ended_answer_is_valid_against_its_schema_with_smollm2s_vocabulary() {
    let Some(path) = nmb_test_support::assets::smollm2_gguf() else {
        return;
    };
    let tokenizer = Tokenizer::open(&path).expect("SmolLM2's tokenizer");
    let eog = tokenizer
        .token_to_id("<|im_end|>")
        .expect("an end-of-turn token");
    check_vocabulary(&tokenizer, eog, 120, 1);
}

#[test]
fn every_ended_answer_is_valid_against_its_schema_with_gemmas_vocabulary() {
    let Some(path) = nmb_test_support::assets::gemma3_gguf() else {
        return;
    };
    let tokenizer = Tokenizer::open(&path).expect("Gemma 3's tokenizer");
    let eog = tokenizer
        .token_to_id("<end_of_turn>")
        .expect("an end-of-turn token");
    check_vocabulary(&tokenizer, eog, 60, 2);
}

#[test]
fn a_character_split_across_tokens_is_matched_whole() {
    // "é" is C3 A9: the first byte alone leaves a partial character that a string can complete, a number cannot.
    let pieces = vec![
        b"\"".to_vec(),
        vec![0xC3],
        vec![0xA9],
        b"1".to_vec(),
        b"<eog>".to_vec(),
    ];
    let vocab = Arc::new(Vocab::new(pieces, vec![4]));
    let string = Arc::new(Grammar::from_schema(&json!({"type": "string"})).unwrap());
    let mut s = State::new(string, vocab.clone());
    assert!(!s.allows(1) && !s.allows(4), "a string opens with a quote");
    s.accept(0);
    assert!(
        s.allows(1) && !s.allows(2),
        "the lead byte, not the continuation byte alone"
    );
    s.accept(1);
    assert!(
        s.allows(2) && !s.allows(0) && !s.allows(4),
        "only the character's end may follow"
    );
    s.accept(2);
    s.accept(0);
    assert!(s.allows(4), "the string is complete");
    let number = Arc::new(Grammar::from_schema(&json!({"type": "integer"})).unwrap());
    let n = State::new(number, vocab);
    assert!(n.allows(3) && !n.allows(1) && !n.allows(4));
}
