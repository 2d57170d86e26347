//! Decoding many sequences together: requests join a batch, each is prefilled once, its n samples share the
//! prompt's KV cache, and every step advances all unfinished sequences of all requests in one forward pass.
//! A joining request's prompt is prefilled in chunks that ride along with those steps (one chunk of one prompt
//! per step), so the sequences already decoding do not stop while it is read. Every column's arithmetic is
//! the same whatever else shares its step, so joining changes no one's tokens.
//!
//! Each sample has its own seeded random stream: sample `i` of a request with seed `s` uses seed `s + i`, so
//! sample 0 is what a one-sample request with the same seed gets.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::prelude::*;

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

/// A request whose prompt is being read, chunk by chunk.
struct Prefilling<T> {
    tag: T,
    job: Job,
    seq: Sequence,
    /// Prompt tokens already run.
    done: usize,
    joined: Instant,
    reserved: usize,
}

/// The requests being decoded. `T` tags each request so its owner can route the result.
pub(crate) struct Batch<'e, T> {
    engine: &'e Engine,
    stop_ids: &'e [u32],
    active: Vec<Active<T>>,
    /// Requests waiting for (or in) their prefill, first come first served.
    prefilling: std::collections::VecDeque<Prefilling<T>>,
}

impl<'e, T> Batch<'e, T> {
    pub(crate) fn new(engine: &'e Engine, stop_ids: &'e [u32]) -> Batch<'e, T> {
        Batch {
            engine,
            stop_ids,
            active: Vec::new(),
            prefilling: Default::default(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.active.is_empty() && self.prefilling.is_empty()
    }

    /// Drops the requests whose tag fails `keep` (their callers gave up), freeing their sequences.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.active.retain(|a| keep(&a.tag));
        self.prefilling.retain(|p| keep(&p.tag));
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
        self.active.iter().map(|a| a.reserved).sum::<usize>()
            + self.prefilling.iter().map(|p| p.reserved).sum::<usize>()
    }

    /// KV bytes `job` may reach: see [`Batch::reserved_bytes`].
    pub(crate) fn bytes_for(&self, job: &Job) -> usize {
        (job.prompt.len() + job.n * job.budget) * self.engine.cfg.kv_bytes_per_token()
    }

    /// Queues `job`: its prompt is read over the next steps, then its samples decode with the rest.
    pub(crate) fn admit(&mut self, tag: T, job: Job) {
        self.prefilling.push_back(Prefilling {
            reserved: self.bytes_for(&job),
            seq: Sequence::new(self.engine.cfg.layers),
            tag,
            job,
            done: 0,
            joined: Instant::now(),
        });
    }

    /// One forward pass: the next token of every decoding sequence, plus the next chunk of the first prompt
    /// being read. Returns the requests that finished.
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
        let reading = self.prefilling.front_mut();
        let chunk_end = reading
            .as_ref()
            .map(|p| (p.done + PREFILL_CHUNK).min(p.job.prompt.len()));
        if let (Some(p), Some(end)) = (&reading, chunk_end) {
            let last = p.job.prompt.len();
            cols.extend((p.done..end).map(|i| Column {
                seq: live.len(),
                token: p.job.prompt[i],
                logits: i + 1 == last,
            }));
        }
        let mut logits = {
            let mut seqs: Vec<&mut Sequence> = live.iter_mut().map(|s| &mut s.seq).collect();
            if let Some(p) = reading {
                seqs.push(&mut p.seq);
            }
            self.engine.step(&mut seqs, &cols)
        };
        let prompt_logits = match (&self.prefilling.front(), chunk_end) {
            (Some(p), Some(end)) if end == p.job.prompt.len() => logits.pop(),
            _ => None,
        };
        // Each sample draws from its own stream, so they can be sampled in parallel; with five or more samples
        // a step's sampling (a softmax over the vocabulary each) is otherwise a visible serial part.
        let stop_ids = self.stop_ids;
        self.engine.install(|| {
            live.into_par_iter()
                .zip(&logits)
                .zip(budgets)
                .for_each(|((s, l), budget)| advance(s, l, stop_ids, budget));
        });
        let mut finished = Vec::new();
        if let Some(end) = chunk_end {
            let p = self
                .prefilling
                .front_mut()
                .expect("a prompt was read this step");
            p.done = end;
            if end == p.job.prompt.len() {
                let p = self.prefilling.pop_front().expect("checked above");
                match prompt_logits {
                    Some(l) => {
                        if let Some(d) = self.start(p, &l) {
                            finished.push(d);
                        }
                    }
                    None => finished.push(Done {
                        result: Err("the prompt gave no logits".into()),
                        prefill: p.joined.elapsed(),
                        latency: p.joined.elapsed(),
                        tag: p.tag,
                    }),
                }
            }
        }
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

    /// A read prompt's samples, sharing its cache, each with its first token sampled from `logits`. Returns
    /// the request if that already finished it (a stop token at once, or a budget of one).
    fn start(&mut self, p: Prefilling<T>, logits: &[f32]) -> Option<Done<T>> {
        let prefix = Arc::new(p.seq.into_cache());
        let job = p.job;
        let mut active = Active {
            tag: p.tag,
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
            joined: p.joined,
            prefill: Duration::ZERO,
            reserved: p.reserved,
        };
        for s in &mut active.samples {
            advance(s, logits, self.stop_ids, job.budget);
        }
        active.prefill = p.joined.elapsed();
        if active.samples.iter().all(|s| s.finish.is_some()) {
            return Some(done(active));
        }
        self.active.push(active);
        None
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
