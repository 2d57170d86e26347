//! Decoding many sequences together: requests join a batch, each is prefilled once, its n samples share the
//! prompt's KV cache, and every step advances all unfinished sequences of all requests in one forward pass.
//!
//! Each sample has its own seeded random stream: sample `i` of a request with seed `s` uses seed `s + i`, so
//! sample 0 is what a one-sample request with the same seed gets.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::{Column, Engine, Sequence};
use crate::sample::{Sampler, Sampling};
use crate::FinishReason;

/// Prompt tokens run through the model per step of a prefill; bounds its scratch memory.
const PREFILL_CHUNK: usize = 512;

/// What one request asks for.
pub(crate) struct Job {
    pub prompt: Vec<u32>,
    pub n: usize,
    pub sampling: Sampling,
    pub seed: u64,
    /// Most tokens to sample per sequence.
    pub budget: usize,
}

/// One finished sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRun {
    /// The sampled tokens, without the end-of-turn token when generation stopped on one.
    pub tokens: Vec<u32>,
    pub finish: FinishReason,
    /// The seed of this sample's random stream.
    pub seed: u64,
}

/// A finished request: its samples, or why it failed; and its timings.
pub(crate) struct Done<T> {
    pub tag: T,
    pub result: Result<Vec<TokenRun>, String>,
    /// Time from joining the batch to the first sampled tokens (the prompt's prefill).
    pub prefill: Duration,
    /// Time from joining the batch to the last sample finishing.
    pub latency: Duration,
}

impl<T> Done<T> {
    /// The tag, and the rest without it.
    pub(crate) fn split(self) -> (T, Done<()>) {
        let rest = Done {
            tag: (),
            result: self.result,
            prefill: self.prefill,
            latency: self.latency,
        };
        (self.tag, rest)
    }
}

struct Sample {
    seq: Sequence,
    sampler: Sampler,
    seed: u64,
    tokens: Vec<u32>,
    finish: Option<FinishReason>,
}

struct Active<T> {
    tag: T,
    samples: Vec<Sample>,
    budget: usize,
    joined: Instant,
    prefill: Duration,
    /// KV bytes this request may reach: its prompt once, plus every sample's full budget.
    reserved: usize,
}

/// The requests being decoded. `T` tags each request so its owner can route the result.
pub(crate) struct Batch<'e, T> {
    engine: &'e Engine,
    stop_ids: &'e [u32],
    active: Vec<Active<T>>,
}

impl<'e, T> Batch<'e, T> {
    pub(crate) fn new(engine: &'e Engine, stop_ids: &'e [u32]) -> Batch<'e, T> {
        Batch {
            engine,
            stop_ids,
            active: Vec::new(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.active.is_empty()
    }

    /// Drops the requests whose tag fails `keep` (their callers gave up), freeing their sequences.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.active.retain(|a| keep(&a.tag));
    }

    /// Sequences the next step advances.
    pub(crate) fn live_sequences(&self) -> usize {
        self.active
            .iter()
            .map(|a| a.samples.iter().filter(|s| s.finish.is_none()).count())
            .sum()
    }

    /// KV bytes the active requests may reach before they finish.
    pub(crate) fn reserved_bytes(&self) -> usize {
        self.active.iter().map(|a| a.reserved).sum()
    }

    /// KV bytes `job` may reach: see [`Batch::reserved_bytes`].
    pub(crate) fn bytes_for(&self, job: &Job) -> usize {
        (job.prompt.len() + job.n * job.budget) * self.engine.cfg.kv_bytes_per_token()
    }

    /// Prefills `job`'s prompt and samples each sequence's first token. A request finished by that (stop
    /// token at once, or a budget of one) comes straight back.
    pub(crate) fn admit(&mut self, tag: T, job: Job) -> Option<Done<T>> {
        let joined = Instant::now();
        let reserved = self.bytes_for(&job);
        let mut prompt = Sequence::new(self.engine.cfg.layers);
        let mut logits = Vec::new();
        let chunks = job.prompt.chunks(PREFILL_CHUNK).count();
        for (i, chunk) in job.prompt.chunks(PREFILL_CHUNK).enumerate() {
            let cols: Vec<Column> = chunk
                .iter()
                .enumerate()
                .map(|(j, &token)| Column {
                    seq: 0,
                    token,
                    logits: i + 1 == chunks && j + 1 == chunk.len(),
                })
                .collect();
            logits = self.engine.step(&mut [&mut prompt], &cols);
        }
        let prefix = Arc::new(prompt.into_cache());
        let mut active = Active {
            tag,
            samples: (0..job.n)
                .map(|i| {
                    let seed = job.seed.wrapping_add(i as u64);
                    Sample {
                        seq: Sequence::after(prefix.clone()),
                        sampler: Sampler::new(job.sampling, seed),
                        seed,
                        tokens: Vec::new(),
                        finish: None,
                    }
                })
                .collect(),
            budget: job.budget,
            joined,
            prefill: Duration::ZERO,
            reserved,
        };
        let Some(last) = logits.pop() else {
            return Some(failed(active, "the prompt gave no logits".into()));
        };
        for s in &mut active.samples {
            advance(s, &last, self.stop_ids, job.budget);
        }
        active.prefill = joined.elapsed();
        if active.samples.iter().all(|s| s.finish.is_some()) {
            return Some(done(active));
        }
        self.active.push(active);
        None
    }

    /// Advances every unfinished sequence by one token in one forward pass; returns the requests that finished.
    pub(crate) fn step(&mut self) -> Vec<Done<T>> {
        let mut cols = Vec::new();
        let mut live: Vec<&mut Sample> = Vec::new();
        let mut budgets = Vec::new();
        for a in &mut self.active {
            for s in a.samples.iter_mut().filter(|s| s.finish.is_none()) {
                budgets.push(a.budget);
                let token = *s
                    .tokens
                    .last()
                    .expect("an unfinished sample has sampled a token");
                cols.push(Column {
                    seq: live.len(),
                    token,
                    logits: true,
                });
                live.push(s);
            }
        }
        let logits = {
            let mut seqs: Vec<&mut Sequence> = live.iter_mut().map(|s| &mut s.seq).collect();
            self.engine.step(&mut seqs, &cols)
        };
        for ((s, l), budget) in live.into_iter().zip(&logits).zip(budgets) {
            advance(s, l, self.stop_ids, budget);
        }
        let mut finished = Vec::new();
        let mut i = 0;
        while i < self.active.len() {
            if self.active[i].samples.iter().all(|s| s.finish.is_some()) {
                finished.push(done(self.active.swap_remove(i)));
            } else {
                i += 1;
            }
        }
        finished
    }
}

/// Samples the next token of `s` from `logits` and records whether the sequence is done.
fn advance(s: &mut Sample, logits: &[f32], stop_ids: &[u32], budget: usize) {
    let next = s.sampler.sample(logits);
    if stop_ids.contains(&next) {
        s.finish = Some(FinishReason::Stop);
        return;
    }
    s.tokens.push(next);
    if s.tokens.len() >= budget {
        s.finish = Some(FinishReason::Length);
    }
}

fn done<T>(a: Active<T>) -> Done<T> {
    Done {
        result: Ok(a
            .samples
            .into_iter()
            .map(|s| TokenRun {
                tokens: s.tokens,
                finish: s.finish.unwrap_or(FinishReason::Length),
                seed: s.seed,
            })
            .collect()),
        prefill: a.prefill,
        latency: a.joined.elapsed(),
        tag: a.tag,
    }
}

fn failed<T>(a: Active<T>, message: String) -> Done<T> {
    Done {
        result: Err(message),
        prefill: a.prefill,
        latency: a.joined.elapsed(),
        tag: a.tag,
    }
}
