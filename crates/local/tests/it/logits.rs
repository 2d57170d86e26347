//! The engine's logits against the forward pass nmb used before it: candle-transformers' `quantized_llama` on
//! the same GGUF with every weight dequantised to f32 (exact weights, f32 activations, f32 KV cache).
//!
//! The two differ by design: this engine quantises activations to 8 bits per block and rounds keys, values
//! and queries to f16, as llama.cpp does. The stated tolerance, on logits that span about 30 units here:
//! - the same most likely token after every prompt;
//! - at least 8 of the 10 most likely tokens shared;
//! - after taking out the shift common to all logits (it changes no probability), mean absolute difference at
//!   most 0.15 and largest at most 1.5 (measured here: mean 0.09 to 0.12, largest 0.52 to 0.75).

use std::io::Cursor;

use candle_core::quantized::gguf_file::{self, Content, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use candle_transformers::models::quantized_llama::ModelWeights;
use nmb_local::LocalModel;

use crate::common;

/// The GGUF with every tensor dequantised to f32, the way nmb loaded small models before its own engine.
fn candle_f32(path: &std::path::Path) -> ModelWeights {
    let mut file = std::fs::File::open(path).expect("opens");
    let content = Content::read(&mut file).expect("GGUF header");
    let mut names: Vec<&String> = content.tensor_infos.keys().collect();
    names.sort();
    let tensors: Vec<(&str, QTensor)> = names
        .into_iter()
        .map(|name| {
            let q = content
                .tensor(&mut file, name, &Device::Cpu)
                .expect("tensor");
            let f = q
                .dequantize(&Device::Cpu)
                .and_then(|t| QTensor::quantize(&t, GgmlDType::F32))
                .expect("f32");
            (name.as_str(), f)
        })
        .collect();
    let metadata: Vec<(&str, &Value)> = content
        .metadata
        .iter()
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    let refs: Vec<(&str, &QTensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    let mut buf = Cursor::new(Vec::new());
    gguf_file::write(&mut buf, &metadata, &refs).expect("writes");
    buf.set_position(0);
    let converted = Content::read(&mut buf).expect("reads back");
    ModelWeights::from_gguf(converted, &mut buf, &Device::Cpu).expect("candle loads")
}

fn top(l: &[f32], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..l.len()).collect();
    idx.sort_by(|&a, &b| l[b].total_cmp(&l[a]));
    idx.truncate(k);
    idx
}

#[test]
fn logits_match_candle_f32_within_the_stated_tolerance() {
    let Some(path) = common::smollm2() else {
        return;
    };
    let ours = LocalModel::load(&path).expect("loads");
    let reference = candle_f32(&path);
    let prompts = [
        "<|im_start|>user\nWhat is the most common cause of subarachnoid haemorrhage?<|im_end|>\n<|im_start|>assistant\n",
        "<|im_start|>system\nYou are a neurologist.<|im_end|>\n<|im_start|>user\nA 71-year-old man has a resting \
         tremor of the left hand and a shuffling gait. What is the most likely diagnosis?<|im_end|>\n\
         <|im_start|>assistant\n",
        "Multiple sclerosis is a disease in which",
    ];
    for text in prompts {
        let ids = ours.prompt_tokens(text).expect("tokenizes");
        let a = ours.prompt_logits(&ids).expect("our logits");
        let mut w = reference.clone();
        let input = Tensor::new(ids.as_slice(), &Device::Cpu)
            .and_then(|t| t.unsqueeze(0))
            .expect("input");
        let b: Vec<f32> = w
            .forward(&input, 0)
            .and_then(|t| t.squeeze(0))
            .and_then(|t| t.to_vec1())
            .expect("candle logits");
        assert_eq!(a.len(), b.len());
        // A shift common to every logit changes no probability, so it is taken out first.
        let shift = a.iter().zip(&b).map(|(x, y)| x - y).sum::<f32>() / a.len() as f32;
        let diffs: Vec<f32> = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y - shift).abs())
            .collect();
        let max = diffs.iter().cloned().fold(0.0, f32::max);
        let mean = diffs.iter().sum::<f32>() / diffs.len() as f32;
        let (ta, tb) = (top(&a, 10), top(&b, 10));
        let shared = ta.iter().filter(|t| tb.contains(t)).count();
        let summary = format!(
            "{text:?}: common shift {shift:.3}, then max |diff| {max:.3}, mean {mean:.4}, top-10 shared {shared}"
        );
        println!("{summary}");
        assert_eq!(ta[0], tb[0], "most likely token differs; {summary}");
        assert!(shared >= 8, "{summary}");
        assert!(mean <= 0.15 && max <= 1.5, "{summary}");
    }
}
