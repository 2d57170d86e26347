//! Decoding many sequences together: requests join a batch, each is prefilled once, its n samples share the
//! prompt's KV cache, and every step advances all unfinished sequences of all requests in one forward pass.
//! A joining request's prompt is prefilled in chunks that ride along with those steps (one chunk of one prompt
//! per step), so the sequences already decoding do not stop while it is read. Every column's arithmetic is
//! the same whatever else shares its step, so joining changes no one's tokens.
//!
//! Each sample has its own seeded random stream: sample `i` of a request with seed `s` uses seed `s + i`, so
//! sample 0 is what a one-sample request with the same seed gets.
//!
//! **Prompt cache.** Read prompts stay cached (newest kept, up to a memory limit), and a request whose prompt
//! starts like a cached one reads only the rest: the next turn of a consult re-reads none of the conversation
//! before it, and the same prompt asked again (the n one-sample conversations of a consult's first turn) is
//! not read again at all. Reuse is exact: a cached position is taken only where the engine would compute it
//! the same way for the new prompt (same tokens before it, and the same attention path, which follows from
//! the prompt's length; see [`reusable_in`]), so an answer never depends on what happened to be cached.
//!
//! **Images.** A prompt may hold images ([`ImageRun`]): their positions take the image's embeddings instead of
//! token embeddings, and are read as llama.cpp's server reads them, each text run and each image in chunks of
//! its own from its start (an image's chunk attending both ways where it is non-causal). The prompt cache
//! compares an image's positions by its content hash, so prompts that differ in an image share nothing from
//! that image on, and a reused start never ends inside an image.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rayon::prelude::*;

use crate::attention::{self, PROMPT_CHUNK};
use crate::engine::{Cache, Column, Engine, Inputs, Sequence};
use crate::grammar::{self, Grammar, Vocab};
use crate::quant::KPaths;
use crate::sample::{Sampler, Sampling};
use crate::FinishReason;

/// KV memory the prompt cache holds by default.
pub(crate) const PROMPT_CACHE_BYTES: usize = 1 << 30;

/// What one request asks for.
pub(crate) struct Job {
    /// Token ids, with a placeholder at each position an image fills.
    pub prompt: Vec<u32>,
    /// The images in the prompt, in order (none for a text prompt).
    pub images: Vec<ImageRun>,
    pub n: usize,
    pub sampling: Sampling,
    pub seed: u64,
    /// Most tokens to sample per sequence.
    pub budget: usize,
    /// The grammar every sample keeps to, if any.
    pub constraint: Option<Constraint>,
}

/// An image in a prompt: positions `start..start + len` take these rows of embeddings (the text model's width)
/// instead of token embeddings.
#[derive(Clone)]
pub(crate) struct ImageRun {
    pub start: usize,
    pub len: usize,
    pub embd: Arc<[f32]>,
    /// Whether the image's positions attend to each other both ways (Gemma 3), as llama.cpp's `mtmd` decodes.
    pub non_causal: bool,
    /// The image's content hash: what the prompt cache compares at its positions.
    pub hash: Arc<str>,
}

/// A prompt as the prompt cache and the prefill see it: its tokens and where its images stand.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    pub tokens: &'a [u32],
    pub images: &'a [ImageRun],
}

/// What one position of a prompt holds, for comparing prompts.
#[derive(PartialEq, Eq)]
enum Key<'a> {
    Token(u32),
    /// An image by content hash, and the offset in it.
    Image(&'a str, usize),
}

impl<'a> View<'a> {
    #[cfg(test)]
    pub(crate) fn text(tokens: &'a [u32]) -> View<'a> {
        View {
            tokens,
            images: &[],
        }
    }

    fn len(&self) -> usize {
        self.tokens.len()
    }

    /// The image holding position `p`, if any.
    fn image_at(&self, p: usize) -> Option<&'a ImageRun> {
        self.images
            .iter()
            .find(|i| (i.start..i.start + i.len).contains(&p))
    }

    fn key(&self, p: usize) -> Key<'a> {
        match self.image_at(p) {
            Some(i) => Key::Image(&i.hash, p - i.start),
            None => Key::Token(self.tokens[p]),
        }
    }

    /// The chunk llama.cpp reads position `p` in: each text run and each image is read in chunks of
    /// [`PROMPT_CHUNK`] from its own start. A prompt without images is read as [`attention::prompt_chunk`] says,
    /// its end in chunks of its own for a model with sliding-window layers; whether the server also cuts the
    /// last text run of a prompt with images at those checkpoints is not modelled.
    fn chunk(&self, p: usize, checkpoints: bool) -> std::ops::Range<usize> {
        if self.images.is_empty() {
            let chunk = attention::prompt_chunk(self.len(), p, checkpoints);
            return chunk.start..chunk.end();
        }
        let (start, end) = match self.image_at(p) {
            Some(i) => (i.start, i.start + i.len),
            None => {
                let start = self
                    .images
                    .iter()
                    .map(|i| i.start + i.len)
                    .filter(|&e| e <= p)
                    .max()
                    .unwrap_or(0);
                let end = self
                    .images
                    .iter()
                    .map(|i| i.start)
                    .filter(|&s| s > p)
                    .min()
                    .unwrap_or(self.len());
                (start, end)
            }
        };
        let from = p - (p - start) % PROMPT_CHUNK;
        from..(from + PROMPT_CHUNK).min(end)
    }
}

/// A grammar and the tokens as it reads them.
#[derive(Clone)]
pub(crate) struct Constraint {
    pub grammar: Arc<Grammar>,
    pub vocab: Arc<Vocab>,
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
    /// Prompt tokens taken from the prompt cache rather than read.
    pub reused: usize,
}

impl<T> Done<T> {
    /// The tag, and the rest without it.
    pub(crate) fn split(self) -> (T, Done<()>) {
        let rest = Done {
            tag: (),
            result: self.result,
            prefill: self.prefill,
            latency: self.latency,
            reused: self.reused,
        };
        (self.tag, rest)
    }
}

struct Sample {
    seq: Sequence,
    sampler: Sampler,
    grammar: Option<grammar::State>,
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
    reused: usize,
}

/// A request whose prompt is being read, chunk by chunk.
struct Prefilling<T> {
    tag: T,
    job: Job,
    seq: Sequence,
    /// Prompt tokens already run (or taken from the prompt cache).
    done: usize,
    /// Whether the prompt cache was asked for this prompt's start.
    looked_up: bool,
    reused: usize,
    joined: Instant,
    reserved: usize,
}

/// A read prompt: its tokens, its KV cache and the logits after its last token.
struct Cached {
    tokens: Vec<u32>,
    images: Vec<ImageRun>,
    cache: Arc<Cache>,
    logits: Arc<[f32]>,
}

/// Read prompts, oldest first, within a memory limit.
struct PromptCache {
    entries: VecDeque<Cached>,
    bytes_per_token: usize,
    limit: usize,
}

impl Cached {
    fn view(&self) -> View<'_> {
        View {
            tokens: &self.tokens,
            images: &self.images,
        }
    }
}

impl PromptCache {
    fn bytes(&self) -> usize {
        self.entries.iter().map(|e| e.tokens.len()).sum::<usize>() * self.bytes_per_token
    }

    /// The entry `prompt` can take the most positions from, and how many.
    fn best(&self, prompt: View<'_>, engine: &Engine) -> Option<(&Cached, usize)> {
        self.entries
            .iter()
            .map(|e| (e, reusable_in(e.view(), prompt, Reading::of(engine))))
            .filter(|(_, n)| *n > 0)
            .max_by_key(|(_, n)| *n)
    }

    /// Keeps `entry`, dropping the entries it makes redundant (prompts it extends) and then the oldest until
    /// the cache fits its limit.
    fn insert(&mut self, entry: Cached, engine: &Engine) {
        self.entries
            .retain(|e| reusable_in(e.view(), entry.view(), Reading::of(engine)) < e.tokens.len());
        self.entries.push_back(entry);
        while self.bytes() > self.limit && !self.entries.is_empty() {
            self.entries.pop_front();
        }
    }
}

/// What decides how an engine computes a prompt position: its context window, its kernels, and whether it
/// reads the end of a prompt in chunks of its own ([`attention::prompt_chunk`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading {
    pub context: usize,
    pub kernels: KPaths,
    pub checkpoints: bool,
}

impl Reading {
    fn of(engine: &Engine) -> Reading {
        Reading {
            context: engine.context,
            kernels: engine.kpaths,
            checkpoints: engine.cfg.swa.is_some(),
        }
    }
}

/// [`reusable_in`] for two text prompts.
#[cfg(test)]
pub(crate) fn reusable(cached: &[u32], next: &[u32], reading: Reading) -> usize {
    reusable_in(View::text(cached), View::text(next), reading)
}

/// How many leading positions of `cached` (a read prompt) prompt `next` can take as they are: the positions
/// they share (the same token, or the same image by content hash at the same place), up to the first position
/// whose attention path or (with K-quant weights, see [`KPaths`]) matrix product kernel differs between the two
/// prompts (it would round differently; a position's chunk follows its own text run or image, and the end of a
/// text prompt its checkpoints), never ending inside an image (whose positions are read together), and never
/// `next`'s last position unless the prompts are equal (its logits are needed).
pub(crate) fn reusable_in(cached: View<'_>, next: View<'_>, reading: Reading) -> usize {
    let Reading {
        context,
        kernels,
        checkpoints,
    } = reading;
    let shorter = cached.len().min(next.len());
    let common = (0..shorter)
        .take_while(|&p| cached.key(p) == next.key(p))
        .count();
    if common == cached.len() && common == next.len() {
        return common;
    }
    let limit = common.min(next.len().saturating_sub(1));
    let path = |v: &View<'_>, p: usize| {
        let chunk = v.chunk(p, checkpoints);
        let size = chunk.len();
        (
            attention::path(size, p, context),
            kernels.key(crate::engine::batch(size, p - chunk.start)),
            v.image_at(p).map(|i| (i.non_causal, chunk.end)),
        )
    };
    let n = (0..limit)
        .find(|&p| path(&cached, p) != path(&next, p))
        .unwrap_or(limit);
    match next.image_at(n) {
        Some(image) if image.start < n => image.start,
        _ => n,
    }
}

/// The requests being decoded. `T` tags each request so its owner can route the result.
pub(crate) struct Batch<'e, T> {
    engine: &'e Engine,
    stop_ids: &'e [u32],
    active: Vec<Active<T>>,
    /// Requests waiting for (or in) their prefill, first come first served.
    prefilling: VecDeque<Prefilling<T>>,
    prompts: PromptCache,
}

impl<'e, T> Batch<'e, T> {
    pub(crate) fn new(engine: &'e Engine, stop_ids: &'e [u32]) -> Batch<'e, T> {
        Batch {
            engine,
            stop_ids,
            active: Vec::new(),
            prefilling: Default::default(),
            prompts: PromptCache {
                entries: VecDeque::new(),
                bytes_per_token: engine.cfg.kv_bytes_per_token(),
                limit: PROMPT_CACHE_BYTES,
            },
        }
    }

    /// Caps the KV memory of the prompt cache (0 turns it off).
    pub(crate) fn with_prompt_cache(mut self, bytes: usize) -> Batch<'e, T> {
        self.prompts.limit = bytes;
        self
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
            looked_up: false,
            reused: 0,
            joined: Instant::now(),
        });
    }

    /// Starts the prompts at the front that the prompt cache holds whole, and lets the next one to read skip
    /// the start it shares with a cached prompt. Returns requests this finished.
    fn take_cached(&mut self) -> Vec<Done<T>> {
        let mut finished = Vec::new();
        while let Some(p) = self.prefilling.front_mut() {
            if p.looked_up {
                break;
            }
            p.looked_up = true;
            let view = View {
                tokens: &p.job.prompt,
                images: &p.job.images,
            };
            let Some((entry, n)) = self.prompts.best(view, self.engine) else {
                break;
            };
            let (cache, logits) = (entry.cache.clone(), entry.logits.clone());
            if n < p.job.prompt.len() {
                p.seq = Sequence::after_part(cache, n);
                p.done = n;
                p.reused = n;
                break;
            }
            let mut p = self.prefilling.pop_front().expect("front exists");
            p.reused = n;
            finished.extend(self.start(p, cache, &logits));
        }
        finished
    }

    /// One forward pass: the next token of every decoding sequence, plus the next chunk of the first prompt
    /// being read. Returns the requests that finished.
    pub(crate) fn step(&mut self) -> Vec<Done<T>> {
        let mut finished = self.take_cached();
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
                    chunk: 1,
                    index: 0,
                });
                live.push(s);
            }
        }
        let reading = self.prefilling.front_mut();
        let decoding = cols.len();
        let chunk_end = reading.as_ref().map(|p| {
            let (chunk, end) = prompt_columns(self.engine, &p.job, p.done, live.len());
            cols.extend(chunk);
            end
        });
        let mut logits = {
            let mut seqs: Vec<&mut Sequence> = live.iter_mut().map(|s| &mut s.seq).collect();
            match reading {
                Some(Prefilling { seq, job, done, .. }) => {
                    seqs.push(seq);
                    if job.images.is_empty() {
                        self.engine.step(&mut seqs, &cols)
                    } else {
                        let inputs = image_inputs(
                            job,
                            *done,
                            decoding,
                            cols.len(),
                            self.engine.cfg.swa.is_some(),
                        );
                        self.engine.step_with(&mut seqs, &cols, &inputs)
                    }
                }
                None => self.engine.step(&mut seqs, &cols),
            }
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
        if let Some(end) = chunk_end {
            let p = self
                .prefilling
                .front_mut()
                .expect("a prompt was read this step");
            p.done = end;
            if end == p.job.prompt.len() {
                let p = self.prefilling.pop_front().expect("checked above");
                match prompt_logits {
                    Some(l) => finished.extend(self.read(p, l)),
                    None => finished.push(Done {
                        result: Err("the prompt gave no logits".into()),
                        prefill: p.joined.elapsed(),
                        latency: p.joined.elapsed(),
                        reused: p.reused,
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

    /// A prompt just read: cached for later requests, then started.
    fn read(&mut self, mut p: Prefilling<T>, logits: Vec<f32>) -> Option<Done<T>> {
        let seq = std::mem::replace(&mut p.seq, Sequence::new(0));
        let cache = Arc::new(seq.into_cache());
        let logits: Arc<[f32]> = logits.into();
        if self.prompts.limit > 0 {
            let entry = Cached {
                tokens: p.job.prompt.clone(),
                images: p.job.images.clone(),
                cache: cache.clone(),
                logits: logits.clone(),
            };
            self.prompts.insert(entry, self.engine);
        }
        self.start(p, cache, &logits)
    }

    /// A read prompt's samples, sharing its cache, each with its first token sampled from `logits`. Returns
    /// the request if that already finished it (a stop token at once, or a budget of one).
    fn start(&mut self, p: Prefilling<T>, prefix: Arc<Cache>, logits: &[f32]) -> Option<Done<T>> {
        let job = p.job;
        let mut active = Active {
            tag: p.tag,
            samples: (0..job.n)
                .map(|i| {
                    let seed = job.seed.wrapping_add(i as u64);
                    Sample {
                        seq: Sequence::after(prefix.clone()),
                        sampler: Sampler::new(job.sampling, seed),
                        grammar: job
                            .constraint
                            .as_ref()
                            .map(|c| grammar::State::new(c.grammar.clone(), c.vocab.clone())),
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
            reused: p.reused,
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

/// The columns of the next piece of `job`'s prompt to read from position `done`, as sequence `seq`, and where
/// that piece ends: the end of llama.cpp's chunk, so a prefill resumed mid-chunk realigns with it.
fn prompt_columns(engine: &Engine, job: &Job, done: usize, seq: usize) -> (Vec<Column>, usize) {
    let prompt = &job.prompt;
    let view = View {
        tokens: prompt,
        images: &job.images,
    };
    let chunk = view.chunk(done, engine.cfg.swa.is_some());
    let cols = (done..chunk.end)
        .map(|i| Column {
            seq,
            token: prompt[i],
            logits: i + 1 == prompt.len(),
            chunk: chunk.len(),
            index: i - chunk.start,
        })
        .collect();
    (cols, chunk.end)
}

/// What the columns of a step take besides their tokens when the prompt being read holds images: the first
/// `decoding` columns are sequences decoding (none), the rest the piece of `job`'s prompt from `done`: an
/// image's rows in place of token embeddings, and for a non-causal image the end of its chunk as the end of
/// each column's attention.
fn image_inputs(
    job: &Job,
    done: usize,
    decoding: usize,
    total: usize,
    checkpoints: bool,
) -> Inputs<'_> {
    let view = View {
        tokens: &job.prompt,
        images: &job.images,
    };
    let mut inputs = Inputs {
        embd: vec![None; decoding],
        ends: vec![None; decoding],
    };
    for p in done..done + (total - decoding) {
        match view.image_at(p) {
            Some(image) => {
                let dim = image.embd.len() / image.len;
                let row = p - image.start;
                inputs
                    .embd
                    .push(Some(&image.embd[row * dim..(row + 1) * dim]));
                inputs
                    .ends
                    .push(image.non_causal.then(|| view.chunk(p, checkpoints).end));
            }
            None => {
                inputs.embd.push(None);
                inputs.ends.push(None);
            }
        }
    }
    inputs
}

/// Samples the next token of `s` from `logits` and records whether the sequence is done.
fn advance(s: &mut Sample, logits: &[f32], stop_ids: &[u32], budget: usize) {
    let next = match &s.grammar {
        None => Some(s.sampler.sample(logits)),
        Some(g) => constrained(&mut s.sampler, g, logits),
    };
    // A grammar that allows no token at all (a vocabulary that cannot spell what it asks for) ends the sample.
    let Some(next) = next else {
        s.finish = Some(FinishReason::Stop);
        return;
    };
    if stop_ids.contains(&next) {
        s.finish = Some(FinishReason::Stop);
        return;
    }
    if let Some(g) = &mut s.grammar {
        g.accept(next);
    }
    s.tokens.push(next);
    if s.tokens.len() >= budget {
        s.finish = Some(FinishReason::Length);
    }
}

/// llama.cpp's grammar-based rejection sampling: the token sampled from every logit when the grammar allows it,
/// else one sampled again from the tokens the grammar allows (`None` when it allows none).
pub(crate) fn constrained(
    sampler: &mut Sampler,
    g: &grammar::State,
    logits: &[f32],
) -> Option<u32> {
    let first = sampler.sample(logits);
    if g.allows(first) {
        return Some(first);
    }
    let mut masked = logits.to_vec();
    g.mask(&mut masked);
    if masked.iter().all(|&l| l == f32::NEG_INFINITY) || g.is_dead() {
        return None;
    }
    Some(sampler.sample(&masked))
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
        reused: a.reused,
        tag: a.tag,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(context: usize, kernels: KPaths) -> Reading {
        Reading {
            context,
            kernels,
            checkpoints: false,
        }
    }

    #[test]
    fn reuse_stops_where_the_attention_path_would_change() {
        let (ctx, none) = (usize::MAX, KPaths::default());
        let p: Vec<u32> = (0..700).collect();
        // The same prompt: all of it (its logits are cached too).
        assert_eq!(reusable(&p[..100], &p[..100], reading(ctx, none)), 100);
        // A prompt that extends a cached one within its first chunk: every cached position (tiled either way).
        assert_eq!(reusable(&p[..200], &p[..500], reading(ctx, none)), 200);
        // Across the chunk boundary: the cached prompt's second chunk (88 tokens) is tiled, as in the longer one.
        assert_eq!(reusable(&p[..600], &p[..700], reading(ctx, none)), 600);
        // A cached second chunk of 18 tokens took the one-pass path; the longer prompt tiles those positions.
        assert_eq!(reusable(&p[..530], &p[..700], reading(ctx, none)), 512);
        // A short prompt (one pass) and a long one (tiled) share nothing computed alike.
        assert_eq!(reusable(&p[..30], &p[..100], reading(ctx, none)), 0);
        // A prompt that is a start of the cached one: all but its last position, whose logits are needed.
        assert_eq!(reusable(&p[..500], &p[..300], reading(ctx, none)), 299);
        // Different tokens part them.
        let mut q = p[..300].to_vec();
        q[150] = 9999;
        assert_eq!(reusable(&p[..200], &q, reading(ctx, none)), 150);
    }

    /// With K-quant or 16-bit float weights reuse also stops where llama.cpp would multiply a position with
    /// another kernel.
    #[test]
    fn reuse_stops_where_a_matrix_kernel_would_change() {
        let ctx = usize::MAX;
        let p: Vec<u32> = (0..700).collect();
        let tiled = KPaths {
            tiled: true,
            ..KPaths::default()
        };
        let repacked = KPaths {
            repacked_q4_k: true,
            ..KPaths::default()
        };
        let sgemm = KPaths {
            sgemm: true,
            ..KPaths::default()
        };
        // A 5-token prompt is multiplied column by column, a 40-token one with the tiled kernel.
        assert_eq!(
            reusable(&p[..5], &p[..40], reading(ctx, KPaths::default())),
            5
        );
        assert_eq!(reusable(&p[..5], &p[..40], reading(ctx, tiled)), 0);
        // Both at least eight tokens long: the tiled kernel either way.
        assert_eq!(reusable(&p[..20], &p[..40], reading(ctx, tiled)), 20);
        // Q4_K's repacked kernels take 66 tokens as sixteen fours and two singles, 100 tokens all in fours.
        assert_eq!(
            reusable(&p[..66], &p[..100], reading(ctx, KPaths::default())),
            66
        );
        assert_eq!(reusable(&p[..66], &p[..100], reading(ctx, repacked)), 64);
        assert_eq!(reusable(&p[..530], &p[..700], reading(ctx, repacked)), 512);
        // A one-token prompt is multiplied alone, a longer one by tinyBLAS.
        assert_eq!(
            reusable(&p[..1], &p[..5], reading(ctx, KPaths::default())),
            1
        );
        assert_eq!(reusable(&p[..1], &p[..5], reading(ctx, sgemm)), 0);
    }

    /// Reads `prompt` into `seq` from position `done` as the batch does; the logits after its last token.
    fn read(engine: &Engine, seq: &mut Sequence, prompt: &[u32], mut done: usize) -> Vec<f32> {
        let mut logits = Vec::new();
        while done < prompt.len() {
            let job = Job {
                prompt: prompt.to_vec(),
                images: Vec::new(),
                n: 1,
                sampling: Sampling::Greedy,
                seed: 0,
                budget: 1,
                constraint: None,
            };
            let (cols, end) = prompt_columns(engine, &job, done, 0);
            logits = engine
                .step(&mut [&mut *seq], &cols)
                .pop()
                .unwrap_or_default();
            done = end;
        }
        logits
    }

    #[test]
    fn a_prompt_read_after_a_cached_start_has_the_logits_of_one_read_whole() {
        let Some(path) = nmb_test_support::assets::smollm2_gguf() else {
            return;
        };
        resumed_prompts_read_as_whole(
            &crate::LocalModel::load(&path).expect("SmolLM2 loads"),
            true,
        );
    }

    /// Gemma 3 reads the last 4 (and 516) prompt tokens in chunks of their own, which a longer prompt reads
    /// inside a larger one: reuse stops before them. (530 tokens start with a 14-token chunk, 700 with a
    /// 184-token one: they share no position computed alike.)
    #[test]
    fn a_prompt_read_after_a_cached_start_has_the_logits_of_one_read_whole_with_gemma3() {
        let Some(path) = nmb_test_support::assets::gemma3_gguf() else {
            return;
        };
        let model = crate::LocalModel::load(&path).expect("Gemma 3 loads");
        let p: Vec<u32> = (0..700).collect();
        let reading = Reading::of(&model.engine);
        assert_eq!(reusable(&p[..530], &p, reading), 0);
        assert!(reusable(&p[..451], &p[..466], reading) <= 447);
        resumed_prompts_read_as_whole(&model, false);
    }

    /// Prompts read after a cached start of theirs have the logits of the prompt read whole (with `short_tail`,
    /// also after a cached prompt whose second chunk is too short to be tiled).
    fn resumed_prompts_read_as_whole(model: &crate::LocalModel, short_tail: bool) {
        let engine = &model.engine;
        let case = model
            .prompt_tokens(include_str!("../benches/prompt.txt"))
            .expect("tokens");
        let more = model
            .prompt_tokens("The patient's daughter adds that she had a similar episode last month.")
            .expect("tokens");
        let long: Vec<u32> = case.iter().chain(&more).chain(&case).copied().collect();
        assert!(long.len() > 700, "{} tokens", long.len());
        // (cached, next): within a chunk, across the 512-token boundary, and a cached second chunk too short to
        // be tiled.
        let mut pairs = vec![
            (case.clone(), long[..case.len() + more.len()].to_vec()),
            (long[..600].to_vec(), long.clone()),
        ];
        if short_tail {
            pairs.push((long[..530].to_vec(), long[..700].to_vec()));
        }
        for (cached, next) in pairs {
            let mut seq = Sequence::new(engine.cfg.layers);
            read(engine, &mut seq, &cached, 0);
            let n = reusable(&cached, &next, Reading::of(engine));
            assert!(
                n > 0,
                "{} then {} tokens reuse nothing",
                cached.len(),
                next.len()
            );
            let mut resumed = Sequence::after_part(Arc::new(seq.into_cache()), n);
            let got = read(engine, &mut resumed, &next, n);
            let want = engine.prompt_logits(&next);
            let same = got
                .iter()
                .zip(&want)
                .all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(
                same && got.len() == want.len(),
                "{} tokens after {n} cached of {} differ from reading them whole",
                next.len(),
                cached.len()
            );
        }
    }
}
