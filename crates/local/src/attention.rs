//! Attention of one query head over its sequence's cached keys and values, computed the way llama.cpp's CPU
//! flash attention computes it for f16 caches (its AVX2 build), so that greedy answers match llama.cpp's token
//! for token. Each step below follows its order of operations; the rounding of every sum depends on it.
//!
//! llama.cpp picks one of three paths, and so does [`path`]:
//! - **Tiled**, for a prompt chunk of at least 64 tokens of one sequence: f32 throughout (the query is not
//!   rounded), keys in tiles of 64 at absolute positions, each score a sequential chain of fused multiply-adds,
//!   the tile's softmax with ggml's vectorised exp ([`ggml_v_expf`]) summed in f64, values added with fused
//!   multiply-adds in key order. Queries that share keys (an image's patches) can walk the tiles together
//!   ([`tiled_group`]), each with the same arithmetic as alone.
//! - **One pass**, for fewer tokens: the query rounded to f16, one key at a time with a running maximum, the
//!   weighted sum of values kept in f16 and rounded after every update, the softmax sum updated as `S*ms + vs`
//!   with two roundings, not fused: compared tensor by tensor with llama.cpp's own (see `engine`), the fused
//!   form parted from it in the last bit of whole heads (`one_pass`).
//! - **Split**, for a single decoding token once llama.cpp's padded KV length (a multiple of 256, at least 256)
//!   reaches 512: the one pass over each half of the padded range, as its two threads do, then merged.
//!
//! A sliding-window layer (Gemma 3) attends over the keys in its window only: llama.cpp masks the others, and
//! each path skips masked keys as it does, so the arithmetic over the window is the same as over a whole
//! sequence. Its KV cache is smaller (the window plus a prompt chunk, padded), which caps the padded length
//! the split decision sees.
//!
//! The split follows llama.cpp running with two threads; with more, llama.cpp splits finer and rounds
//! differently.

use crate::quant::round_f16;

/// Keys per tile in the tiled path, and the prompt chunk from which it is used.
pub(crate) const TILE: usize = 64;

/// llama.cpp pads the KV length it attends over to this multiple (and at least this much).
const KV_PAD: usize = 256;

/// From this padded KV length a single decoding query is split over two threads.
const SPLIT_FROM: usize = 512;

/// llama.cpp reads a prompt in chunks (ubatches) of this many tokens.
pub(crate) const PROMPT_CHUNK: usize = 512;

/// The most tokens llama.cpp's server puts in one batch (`n_batch`); `llama_decode` cuts a batch into chunks of
/// [`PROMPT_CHUNK`] from its start.
const SERVER_BATCH: usize = 2048;

/// For a model with sliding-window attention, llama.cpp's server ends a prompt batch where this many tokens are
/// left (each capped at [`SERVER_BATCH`]), to save a context checkpoint there (`tools/server/server-context.cpp`,
/// `update_slots`, after each prompt token is added to the batch):
///
/// ```text
/// // - the model uses SWA and we are not using `swa_full`
/// do_checkpoint = do_checkpoint && (... || (llama_model_n_swa(model) > 0 && !params_base.swa_full));
/// ...
/// // process the last few tokens of the prompt separately in order to allow for a checkpoint to be created.
/// static const int checkpoint_offsets[] = {4 + n_ubatch, 4};
/// for (int offset : checkpoint_offsets) {
///     const int n_last = std::min(n_batch, offset);
///     if (slot.task->n_tokens() == slot.prompt.n_tokens() + n_last) { should_break = true; break; }
/// }
/// ```
///
/// The last tokens of such a prompt are thus read in chunks of their own, and round differently from a prompt
/// read in one batch (on Gemma 3 270M, enough to change which of two close tokens a greedy answer takes).
const CHECKPOINT_OFFSETS: [usize; 2] = [4 + PROMPT_CHUNK, 4];

/// A chunk (ubatch) of a prompt as llama.cpp's server reads it: its first position and its length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Chunk {
    pub start: usize,
    pub size: usize,
}

impl Chunk {
    pub(crate) fn end(self) -> usize {
        self.start + self.size
    }
}

/// The chunk llama.cpp's server reads prompt position `pos` in, for a prompt of `len` tokens (`checkpoints`:
/// the model has sliding-window layers, see [`CHECKPOINT_OFFSETS`]): the path of that position's query and its
/// products follow from it, wherever this engine's own steps happen to break the prompt.
pub(crate) fn prompt_chunk(len: usize, pos: usize, checkpoints: bool) -> Chunk {
    let mut start = 0;
    let end = loop {
        let end = batch_end(len, start, checkpoints);
        if pos < end || end >= len {
            break end;
        }
        start = end;
    };
    let first = start + (pos - start) / PROMPT_CHUNK * PROMPT_CHUNK;
    Chunk {
        start: first,
        size: (first + PROMPT_CHUNK).min(end) - first,
    }
}

/// Where the server's batch that starts at `start` ends: after [`SERVER_BATCH`] tokens, at the end of the
/// prompt, or (with `checkpoints`) once a checkpoint offset's tokens are left, if at least one token is in.
fn batch_end(len: usize, start: usize, checkpoints: bool) -> usize {
    let mut end = (start + SERVER_BATCH).min(len);
    if checkpoints {
        for offset in CHECKPOINT_OFFSETS {
            if let Some(cut) = len.checked_sub(offset.min(SERVER_BATCH)) {
                if cut > start {
                    end = end.min(cut);
                }
            }
        }
    }
    end
}

/// How one query is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Path {
    Tiled,
    OnePass,
    /// The one pass over keys `0..at` and `at..`, merged.
    Split {
        at: usize,
    },
}

/// The path for a query at position `pos`, one of `tokens` run for its sequence in this step, in a context
/// window of `context` positions.
pub(crate) fn path(tokens: usize, pos: usize, context: usize) -> Path {
    if tokens >= TILE {
        return Path::Tiled;
    }
    let padded = (pos + 1).next_multiple_of(KV_PAD).max(KV_PAD).min(context);
    if tokens == 1 && padded >= SPLIT_FROM {
        Path::Split {
            at: padded.div_ceil(2),
        }
    } else {
        Path::OnePass
    }
}

/// One head's keys and values for positions `0..len`, held in up to two runs of rows (a shared prefix and the
/// sequence's own part). Rows are `stride` values wide; the head's slice starts at `offset`.
pub(crate) struct Keys<'a> {
    pub runs: [(&'a [f32], &'a [f32]); 2],
    pub stride: usize,
    pub offset: usize,
    pub dim: usize,
}

impl Keys<'_> {
    fn rows_in(&self, run: usize) -> usize {
        self.runs[run].0.len() / self.stride
    }

    /// Keys and values of the positions in `range`, in order, without a division per row (as [`Keys::row`]
    /// takes): the one pass reads every row twice, and decoding spends its attention time there.
    fn rows(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = (&[f32], &[f32])> + Clone + '_ {
        let first = self.rows_in(0);
        let (dim, offset, stride) = (self.dim, self.offset, self.stride);
        let run = move |r: usize, from: usize, to: usize| {
            let (k, v) = self.runs[r];
            k[from * stride..to * stride]
                .chunks_exact(stride)
                .zip(v[from * stride..to * stride].chunks_exact(stride))
                .map(move |(k, v)| (&k[offset..offset + dim], &v[offset..offset + dim]))
        };
        let (start, end) = (range.start, range.end);
        run(0, start.min(first), end.min(first)).chain(run(
            1,
            start.max(first) - first,
            end.max(first) - first,
        ))
    }

    /// Key and value of position `p`.
    fn row(&self, p: usize) -> (&[f32], &[f32]) {
        let first = self.rows_in(0);
        let (run, i) = if p < first { (0, p) } else { (1, p - first) };
        let at = i * self.stride + self.offset;
        let (k, v) = self.runs[run];
        (&k[at..at + self.dim], &v[at..at + self.dim])
    }
}

/// A query's unnormalised result over some keys: running maximum, softmax sum and weighted values.
pub(crate) struct Partial {
    max: f32,
    sum: f32,
    acc: Vec<f32>,
}

/// `dst` = attention of query `q` over the keys in `range` (`0..=pos`, or a sliding window ending at `pos`),
/// by `path`. `q` is the query as computed (f32); `kt` is the head's [`transpose_keys`], which the tiled path
/// needs. llama.cpp masks the keys before the window; each path skips them as it does (see [`tiled`]).
pub(crate) fn attend(
    path: Path,
    q: &[f32],
    keys: &Keys<'_>,
    kt: Option<&[f32]>,
    range: std::ops::Range<usize>,
    scale: f32,
    dst: &mut [f32],
) {
    let (first, len) = (range.start, range.end);
    match path {
        Path::Tiled => {
            let owned;
            let kt = match kt {
                Some(kt) => kt,
                None => {
                    owned = transpose_keys(keys, len);
                    &owned
                }
            };
            tiled(q, keys, kt, range, scale, dst)
        }
        Path::OnePass => {
            let q16 = crate::quant::round_f16_all(q);
            normalize(&one_pass(&q16, keys, range, scale), dst);
        }
        Path::Split { at } => {
            let q16 = crate::quant::round_f16_all(q);
            let at = at.clamp(first, len);
            let first = one_pass(&q16, keys, first..at, scale);
            let second = one_pass(&q16, keys, at..len, scale);
            normalize(&merge([first, second]), dst);
        }
    }
}

/// The one pass over `range`: the score of each key, a running maximum, and the values' weighted sum kept in
/// f16, rounded after each update (rescaling on a new maximum, then adding the value).
fn one_pass(q16: &[f32], keys: &Keys<'_>, range: std::ops::Range<usize>, scale: f32) -> Partial {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::Kernel::detect() == crate::quant::Kernel::Avx2 {
        // SAFETY: `Kernel::Avx2` is only chosen on CPUs with AVX2, FMA and F16C; every row is as long as `q16`,
        // and each arm gives the lane count of its length.
        unsafe {
            match q16.len() {
                32 => return staged::one_pass::<4>(q16, keys, range, scale),
                64 => return staged::one_pass::<8>(q16, keys, range, scale),
                96 => return staged::one_pass::<12>(q16, keys, range, scale),
                128 => return staged::one_pass::<16>(q16, keys, range, scale),
                // Gemma 3's heads.
                256 => return staged::one_pass::<32>(q16, keys, range, scale),
                _ => {}
            }
        }
    }
    one_pass_portable(q16, keys, range, scale)
}

fn one_pass_portable(
    q16: &[f32],
    keys: &Keys<'_>,
    range: std::ops::Range<usize>,
    scale: f32,
) -> Partial {
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
    let mut acc = vec![0f32; keys.dim];
    for p in range {
        let (k, v) = keys.row(p);
        let s = dot_f16(q16, k) * scale;
        let (mut ms, mut vs) = (1f32, 1f32);
        if s > max {
            ms = (max - s).exp();
            max = s;
            for a in acc.iter_mut() {
                *a = round_f16(*a * ms);
            }
        } else {
            vs = (s - max).exp();
        }
        for (a, &x) in acc.iter_mut().zip(v) {
            *a = round_f16(x.mul_add(vs, *a));
        }
        sum = sum * ms + vs;
    }
    Partial { max, sum, acc }
}

/// ggml's `ggml_vec_dot_f16` (AVX2) on exact f16 values: four 8-lane accumulators over each 32 values with
/// fused multiply-adds, `(a0 + a2) + (a1 + a3)`, the two 128-bit halves added, then two horizontal adds; values
/// past the last multiple of 32 are added one by one in f64, as ggml's tail loop does.
fn dot_f16(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 32];
    for (ca, cb) in a.chunks_exact(32).zip(b.chunks_exact(32)) {
        for i in 0..32 {
            acc[i] = ca[i].mul_add(cb[i], acc[i]);
        }
    }
    let c: [f32; 8] = std::array::from_fn(|l| (acc[l] + acc[16 + l]) + (acc[8 + l] + acc[24 + l]));
    let t: [f32; 4] = std::array::from_fn(|l| c[l] + c[l + 4]);
    let simd = (t[0] + t[1]) + (t[2] + t[3]);
    let tail = a
        .chunks_exact(32)
        .remainder()
        .iter()
        .zip(b.chunks_exact(32).remainder());
    tail.fold(f64::from(simd), |s, (x, y)| s + f64::from(x * y)) as f32
}

/// Two partial results merged in order, as llama.cpp's split reduction does (fused multiply-adds).
fn merge(parts: [Partial; 2]) -> Partial {
    let dim = parts[0].acc.len();
    let mut out = Partial {
        max: f32::NEG_INFINITY,
        sum: 0.0,
        acc: vec![0.0; dim],
    };
    for p in parts {
        if p.max == f32::NEG_INFINITY {
            continue;
        }
        let max = out.max.max(p.max);
        let (old, new) = ((out.max - max).exp(), (p.max - max).exp());
        for (a, &x) in out.acc.iter_mut().zip(&p.acc) {
            *a = a.mul_add(old, x * new);
        }
        out.sum = out.sum.mul_add(old, p.sum * new);
        out.max = max;
    }
    out
}

fn normalize(p: &Partial, dst: &mut [f32]) {
    let inv = if p.sum == 0.0 { 0.0 } else { 1.0 / p.sum };
    for (d, &a) in dst.iter_mut().zip(&p.acc) {
        *d = a * inv;
    }
}

/// Keys of one head laid out for the tiled path: per tile of 64 positions, `dim` rows of 64 values (key `j`'s
/// value `d` at `d * 64 + j`), so a score chain runs over `d` with eight keys per vector lane. Positions past the
/// end are zero (their scores are masked).
pub(crate) fn transpose_keys(keys: &Keys<'_>, len: usize) -> Vec<f32> {
    let tiles = len.div_ceil(TILE);
    let mut kt = vec![0f32; tiles * keys.dim * TILE];
    for p in 0..len {
        let (t, j) = (p / TILE, p % TILE);
        for (d, &x) in keys.row(p).0.iter().enumerate() {
            kt[(t * keys.dim + d) * TILE + j] = x;
        }
    }
    kt
}

/// The tiled path for one query over the keys in `range`; `kt` from [`transpose_keys`] over at least
/// `range.end` keys. Tiles stay at absolute positions: a tile wholly before the range is skipped, as llama.cpp
/// skips a tile whose scores its mask makes all minus infinity, and within a tile the keys before the range
/// score minus infinity.
pub(crate) fn tiled(
    q: &[f32],
    keys: &Keys<'_>,
    kt: &[f32],
    range: std::ops::Range<usize>,
    scale: f32,
    dst: &mut [f32],
) {
    tiled_group(&[q], keys, kt, range, scale, &mut [dst]);
}

/// Several queries of one head over the same keys by the tiled path, each computed exactly as [`tiled`] computes
/// it, but tile by tile for all of them: each tile of keys and values is read once for the whole group rather
/// than once per query. `queries` are the queries' rows (each `dim` values from its start), `dsts` their results.
pub(crate) fn tiled_group(
    queries: &[&[f32]],
    keys: &Keys<'_>,
    kt: &[f32],
    range: std::ops::Range<usize>,
    scale: f32,
    dsts: &mut [&mut [f32]],
) {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::Kernel::detect() == crate::quant::Kernel::Avx2 {
        // SAFETY: `Kernel::Avx2` is only chosen on CPUs with AVX2 and FMA.
        return unsafe { tiled_group_avx2(queries, keys, kt, range, scale, dsts) };
    }
    tiled_group_body(queries, keys, kt, range, scale, dsts);
}

/// [`tiled_group_body`] compiled for AVX2 and FMA: the same operations, eight keys or values per instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tiled_group_avx2(
    queries: &[&[f32]],
    keys: &Keys<'_>,
    kt: &[f32],
    range: std::ops::Range<usize>,
    scale: f32,
    dsts: &mut [&mut [f32]],
) {
    tiled_group_body(queries, keys, kt, range, scale, dsts);
}

#[inline(always)]
fn tiled_group_body(
    queries: &[&[f32]],
    keys: &Keys<'_>,
    kt: &[f32],
    range: std::ops::Range<usize>,
    scale: f32,
    dsts: &mut [&mut [f32]],
) {
    let mut states: Vec<TiledQuery> = queries.iter().map(|_| TiledQuery::new(keys.dim)).collect();
    for start in (0..range.end).step_by(TILE) {
        for (state, q) in states.iter_mut().zip(queries) {
            state.tile(&q[..keys.dim], keys, kt, start, range.clone(), scale);
        }
    }
    for (state, dst) in states.iter().zip(dsts.iter_mut()) {
        state.finish(dst);
    }
}

/// One query's running state in the tiled path: maximum, softmax sum and the weighted values.
struct TiledQuery {
    max: f32,
    sum: f32,
    acc: Vec<f32>,
}

impl TiledQuery {
    fn new(dim: usize) -> TiledQuery {
        TiledQuery {
            max: f32::NEG_INFINITY,
            sum: 0.0,
            acc: vec![0f32; dim],
        }
    }

    /// The tile of keys from `start` (a multiple of [`TILE`]) for query `q` over the keys in `range`.
    #[inline(always)]
    fn tile(
        &mut self,
        q: &[f32],
        keys: &Keys<'_>,
        kt: &[f32],
        start: usize,
        range: std::ops::Range<usize>,
        scale: f32,
    ) {
        let dim = keys.dim;
        let (first, len) = (range.start, range.end);
        if start + TILE <= first {
            return;
        }
        let t = start / TILE;
        let n = TILE.min(len - start);
        // Keys before this one in the tile are masked.
        let from = first.saturating_sub(start);
        // One sequential chain of fused multiply-adds per score, over the head's dimensions in order, as
        // ggml's f32 GEMM computes it; the eight keys of a lane group run side by side.
        let mut scores = tile_scores(q, &kt[t * dim * TILE..(t + 1) * dim * TILE]);
        for (j, s) in scores.iter_mut().enumerate() {
            *s = if (from..n).contains(&j) {
                *s * scale
            } else {
                f32::NEG_INFINITY
            };
        }
        let tile_max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        let new_max = self.max.max(tile_max);
        if new_max > self.max {
            let ms = (self.max - new_max).exp();
            for a in self.acc.iter_mut() {
                *a *= ms;
            }
            self.sum *= ms;
        }
        self.max = new_max;
        for s in scores.iter_mut() {
            *s = ggml_v_expf(*s - self.max);
        }
        let mut total = 0f64;
        for c in scores.chunks_exact(8) {
            total += f64::from(((c[0] + c[4]) + (c[2] + c[6])) + ((c[1] + c[5]) + (c[3] + c[7])));
        }
        self.sum = (f64::from(self.sum) + total) as f32;
        add_values(&mut self.acc, keys, start, &scores[from..n], from);
    }

    fn finish(&self, dst: &mut [f32]) {
        let inv = 1.0 / self.sum;
        for (d, &a) in dst.iter_mut().zip(&self.acc) {
            *d = a * inv;
        }
    }
}

/// `acc += p_j · value(start + skip + j)` for each weight `p_j` of `weights`, key after key for every
/// dimension (the order of each dimension's multiply-adds is all that fixes the result). Dimensions go
/// [`VALUE_RUN`] at a time through every key, so that run of `acc` stays in registers instead of being loaded and
/// stored once per key.
#[inline(always)]
fn add_values(acc: &mut [f32], keys: &Keys<'_>, start: usize, weights: &[f32], skip: usize) {
    // The rows of each run walked by index, not looked up one by one (`Keys::row` divides, and an iterator
    // chained over both runs kept the accumulators in memory).
    let from = start + skip;
    let first = keys.rows_in(0);
    let split = first.saturating_sub(from).min(weights.len());
    let (v0, v1) = (keys.runs[0].1, keys.runs[1].1);
    add_run(acc, v0, from, &weights[..split], keys);
    add_run(
        acc,
        v1,
        (from + split).saturating_sub(first),
        &weights[split..],
        keys,
    );
}

/// The scores of query `q` against one tile of transposed keys (`kt`: `q.len()` rows of [`TILE`] keys): for each
/// key one chain of fused multiply-adds over the dimensions in order.
#[inline(always)]
fn tile_scores(q: &[f32], kt: &[f32]) -> [f32; TILE] {
    assert_eq!(kt.len(), q.len() * TILE);
    #[cfg(target_arch = "x86_64")]
    if crate::quant::Kernel::detect() == crate::quant::Kernel::Avx2 {
        // SAFETY: `Kernel::Avx2` is only chosen on CPUs with AVX2 and FMA; `kt` holds `q.len()` rows of `TILE`.
        return unsafe { tile_scores_avx2(q, kt) };
    }
    let mut scores = [0f32; TILE];
    for (&qd, row) in q.iter().zip(kt.chunks_exact(TILE)) {
        for (s, &k) in scores.iter_mut().zip(row) {
            *s = qd.mul_add(k, *s);
        }
    }
    scores
}

/// [`tile_scores`] with the 64 scores in eight AVX2 registers (a loop over an array of them stored the array
/// after every dimension).
///
/// # Safety
/// The CPU must have AVX2 and FMA; `kt` holds `q.len()` rows of [`TILE`] values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile_scores_avx2(q: &[f32], kt: &[f32]) -> [f32; TILE] {
    use std::arch::x86_64::*;
    const _: () = assert!(TILE == 64);
    let z = _mm256_setzero_ps();
    let (mut s0, mut s1, mut s2, mut s3, mut s4, mut s5, mut s6, mut s7) = (z, z, z, z, z, z, z, z);
    for (&qd, row) in q.iter().zip(kt.chunks_exact(TILE)) {
        let (w, r) = (_mm256_set1_ps(qd), row.as_ptr());
        // SAFETY: `row` holds `TILE` (64) values.
        unsafe {
            s0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r), s0);
            s1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(8)), s1);
            s2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(16)), s2);
            s3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(24)), s3);
            s4 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(32)), s4);
            s5 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(40)), s5);
            s6 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(48)), s6);
            s7 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(56)), s7);
        }
    }
    let mut scores = [0f32; TILE];
    for (i, v) in [s0, s1, s2, s3, s4, s5, s6, s7].into_iter().enumerate() {
        // SAFETY: `scores` holds 64 values.
        unsafe { _mm256_storeu_ps(scores.as_mut_ptr().add(8 * i), v) };
    }
    scores
}

/// [`add_values`] over rows `row..row + weights.len()` of one run's values `v`.
#[inline(always)]
fn add_run(acc: &mut [f32], v: &[f32], row: usize, weights: &[f32], keys: &Keys<'_>) {
    if weights.is_empty() {
        return;
    }
    let (stride, offset) = (keys.stride, keys.offset);
    let rows = &v[row * stride..(row + weights.len()) * stride];
    #[cfg(target_arch = "x86_64")]
    if acc.len().is_multiple_of(8) && crate::quant::Kernel::detect() == crate::quant::Kernel::Avx2 {
        // SAFETY: `Kernel::Avx2` is only chosen on CPUs with AVX2 and FMA; `rows` holds `weights.len()` rows of
        // `stride` values, each with `acc.len()` values from `offset`.
        return unsafe { add_run_avx2(acc, rows, weights, stride, offset) };
    }
    let runs = acc.len() / VALUE_RUN;
    for r in 0..runs {
        let at = offset + r * VALUE_RUN;
        let mut a: [f32; VALUE_RUN] = acc[r * VALUE_RUN..(r + 1) * VALUE_RUN]
            .try_into()
            .expect("a run");
        for (&p, x) in weights.iter().zip(rows.chunks_exact(stride)) {
            let x: &[f32; VALUE_RUN] = x[at..at + VALUE_RUN].try_into().expect("a run");
            for (a, &x) in a.iter_mut().zip(x) {
                *a = p.mul_add(x, *a);
            }
        }
        acc[r * VALUE_RUN..(r + 1) * VALUE_RUN].copy_from_slice(&a);
    }
    let tail = runs * VALUE_RUN;
    for (&p, x) in weights.iter().zip(rows.chunks_exact(stride)) {
        let x = &x[offset + tail..offset + keys.dim];
        for (a, &x) in acc[tail..].iter_mut().zip(x) {
            *a = p.mul_add(x, *a);
        }
    }
}

/// [`add_run`] with the accumulators in AVX2 registers, eight of them at a time (a loop over an array of them
/// kept the array in memory, a load and a store per key): for each dimension the same fused multiply-adds in the
/// same key order.
///
/// # Safety
/// The CPU must have AVX2 and FMA; `acc.len()` is a multiple of 8, `rows` holds `weights.len()` rows of `stride`
/// values with `acc.len()` values from `offset` in each.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn add_run_avx2(
    acc: &mut [f32],
    rows: &[f32],
    weights: &[f32],
    stride: usize,
    offset: usize,
) {
    use std::arch::x86_64::*;
    assert!(rows.len() >= weights.len() * stride && offset + acc.len() <= stride);
    // SAFETY: every load and store below lies inside `acc` and inside each row (dimensions `d..d + 8 * k`).
    unsafe {
        let (dim, a, x) = (acc.len(), acc.as_mut_ptr(), rows.as_ptr().add(offset));
        let mut d = 0;
        while d + 64 <= dim {
            let (mut a0, mut a1, mut a2, mut a3) = (
                _mm256_loadu_ps(a.add(d)),
                _mm256_loadu_ps(a.add(d + 8)),
                _mm256_loadu_ps(a.add(d + 16)),
                _mm256_loadu_ps(a.add(d + 24)),
            );
            let (mut a4, mut a5, mut a6, mut a7) = (
                _mm256_loadu_ps(a.add(d + 32)),
                _mm256_loadu_ps(a.add(d + 40)),
                _mm256_loadu_ps(a.add(d + 48)),
                _mm256_loadu_ps(a.add(d + 56)),
            );
            for (j, &p) in weights.iter().enumerate() {
                let (w, r) = (_mm256_set1_ps(p), x.add(j * stride + d));
                a0 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r), a0);
                a1 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(8)), a1);
                a2 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(16)), a2);
                a3 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(24)), a3);
                a4 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(32)), a4);
                a5 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(40)), a5);
                a6 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(48)), a6);
                a7 = _mm256_fmadd_ps(w, _mm256_loadu_ps(r.add(56)), a7);
            }
            for (i, v) in [a0, a1, a2, a3, a4, a5, a6, a7].into_iter().enumerate() {
                _mm256_storeu_ps(a.add(d + 8 * i), v);
            }
            d += 64;
        }
        while d < dim {
            let mut a0 = _mm256_loadu_ps(a.add(d));
            for (j, &p) in weights.iter().enumerate() {
                a0 = _mm256_fmadd_ps(
                    _mm256_set1_ps(p),
                    _mm256_loadu_ps(x.add(j * stride + d)),
                    a0,
                );
            }
            _mm256_storeu_ps(a.add(d), a0);
            d += 8;
        }
    }
}

/// Dimensions of the value accumulator that [`add_values`] keeps in registers: eight AVX2 vectors.
const VALUE_RUN: usize = 64;

/// ggml's vectorised `expf` (its AVX2 variant), one lane: a degree-5 polynomial after reduction by ln 2, with
/// separate handling where the exponent leaves the normal range. Not exactly libm's `expf`; llama.cpp's tiled
/// softmax uses this, so the same bits come out here.
#[inline(always)]
pub(crate) fn ggml_v_expf(x: f32) -> f32 {
    let r = f32::from_bits(0x4b40_0000); // 0x1.8p23
    let z = x.mul_add(f32::from_bits(0x3fb8_aa3b), r); // 0x1.715476p+0
    let n = z - r;
    let b = (-n).mul_add(
        f32::from_bits(0x35bf_be8e),                  // 0x1.7f7d1cp-20
        (-n).mul_add(f32::from_bits(0x3f31_7200), x), // 0x1.62e4p-1
    );
    let e = z.to_bits() << 23;
    let k = f32::from_bits(e.wrapping_add(1f32.to_bits()));
    let u = b * b;
    let j = f32::from_bits(0x3c07_2010) // 0x1.0e4020p-7
        .mul_add(b, f32::from_bits(0x3d2b_9f17)) // 0x1.573e2ep-5
        .mul_add(
            u,
            f32::from_bits(0x3e2a_af33).mul_add(b, f32::from_bits(0x3eff_fedb)), // 0x1.555e66p-3, 0x1.fffdb6p-2
        )
        .mul_add(u, f32::from_bits(0x3f7f_fff6) * b); // 0x1.ffffecp-1
                                                      // Both results are computed and one is selected, as the SIMD code does, so loops over this vectorise.
    let normal = j.mul_add(k, k);
    let g: u32 = if n <= 0.0 { 0x8200_0000 } else { 0 };
    let s1 = f32::from_bits(g.wrapping_add(0x7f00_0000));
    let s2 = f32::from_bits(e.wrapping_sub(g));
    let far = if n.abs() > 192.0 {
        s1 * s1
    } else {
        s2.mul_add(j, s2) * s1
    };
    if n.abs() > 126.0 {
        far
    } else {
        normal
    }
}

/// The one pass in stages (heads of 32, 64, 96 or 128), with the same arithmetic as [`one_pass_portable`]: first every
/// key's score, then the running maximum (which keys raise it, and so each key's exp argument), then every exp
/// at once with [`expf`] (libm's `expf` to the bit, four lanes at a time), and last the f16-rounded sum of
/// values. Decoding spends most of its attention time here; in stages the dot products and the exps vectorise
/// and the value sum keeps its accumulators in registers.
#[cfg(target_arch = "x86_64")]
mod staged {
    use std::arch::x86_64::*;

    use super::{expf, Keys, Partial};

    /// `LANES` vectors of eight: a fixed count per head size, so the loops unroll and the accumulators stay in
    /// registers.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; `q16` and every key and value row are `LANES * 8` long, and
    /// `LANES` is a multiple of 4.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn one_pass<const LANES: usize>(
        q16: &[f32],
        keys: &Keys<'_>,
        range: std::ops::Range<usize>,
        scale: f32,
    ) -> Partial {
        assert!(q16.len() == LANES * 8 && keys.dim == q16.len() && LANES.is_multiple_of(4));
        // SAFETY: `q16` holds `LANES * 8` values.
        let q: [__m256; LANES] =
            std::array::from_fn(|i| unsafe { _mm256_loadu_ps(q16.as_ptr().add(i * 8)) });
        let mut e: Vec<f32> = keys
            .rows(range.clone())
            .map(|(k, _)| {
                // ggml_vec_dot_f16's order: four accumulators over each 32 values, then (a0 + a2) + (a1 + a3).
                let mut a = [_mm256_setzero_ps(); 4];
                for (i, &qi) in q.iter().enumerate() {
                    // SAFETY: `k` holds `LANES * 8` values.
                    let y = unsafe { _mm256_loadu_ps(k.as_ptr().add(i * 8)) };
                    a[i % 4] = _mm256_fmadd_ps(qi, y, a[i % 4]);
                }
                let d = _mm256_add_ps(_mm256_add_ps(a[0], a[2]), _mm256_add_ps(a[1], a[3]));
                hsum_hadd(d) * scale
            })
            .collect();
        let mut raises = vec![false; e.len()];
        let mut max = f32::NEG_INFINITY;
        for (s, r) in e.iter_mut().zip(&mut raises) {
            if *s > max {
                (*s, max, *r) = (max - *s, *s, true);
            } else {
                *s -= max;
            }
        }
        exp_all(&mut e);
        let round = |v: __m256| _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v));
        let mut acc = [_mm256_setzero_ps(); LANES];
        let mut sum = 0f32;
        for (((_, v), &x), &raised) in keys.rows(range).zip(&e).zip(&raises) {
            let (ms, vs) = if raised { (x, 1.0) } else { (1.0, x) };
            if raised {
                let m = _mm256_set1_ps(ms);
                for a in acc.iter_mut() {
                    *a = round(_mm256_mul_ps(*a, m));
                }
            }
            let w = _mm256_set1_ps(vs);
            for (i, a) in acc.iter_mut().enumerate() {
                // SAFETY: `v` holds `LANES * 8` values.
                let x = unsafe { _mm256_loadu_ps(v.as_ptr().add(i * 8)) };
                *a = round(_mm256_fmadd_ps(x, w, *a));
            }
            sum = sum * ms + vs;
        }
        let mut out = vec![0f32; LANES * 8];
        for (i, a) in acc.iter().enumerate() {
            // SAFETY: `out` holds `LANES * 8` values.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr().add(i * 8), *a) };
        }
        Partial { max, sum, acc: out }
    }

    /// `(t0 + t1) + (t2 + t3)` where `t = low half + high half`: `_mm_hadd_ps` twice, as ggml reduces.
    #[target_feature(enable = "avx2,fma,f16c")]
    fn hsum_hadd(v: __m256) -> f32 {
        let t = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let t = _mm_hadd_ps(t, t);
        _mm_cvtss_f32(_mm_hadd_ps(t, t))
    }

    /// [`expf`] of every value, four at a time (same operations in each lane).
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) fn exp_all(xs: &mut [f32]) {
        use super::exp_consts::*;
        let mut chunks = xs.chunks_exact_mut(4);
        for c in &mut chunks {
            // SAFETY: `c` holds 4 values; the table has 32 entries and every index is masked to 0..32.
            unsafe {
                let x = _mm_loadu_ps(c.as_ptr());
                let xd = _mm256_cvtps_pd(x);
                let inv = _mm256_set1_pd(INV_LN2_N);
                let shift = _mm256_set1_pd(SHIFT);
                let kd = _mm256_fmadd_pd(inv, xd, shift);
                let ki = _mm256_castpd_si256(kd);
                let r = _mm256_fmsub_pd(inv, xd, _mm256_sub_pd(kd, shift));
                let idx = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
                let t = _mm256_i64gather_epi64::<8>(TAB.as_ptr() as *const i64, idx);
                let s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64::<47>(ki)));
                let z = _mm256_fmadd_pd(_mm256_set1_pd(C[0]), r, _mm256_set1_pd(C[1]));
                let y = _mm256_fmadd_pd(_mm256_set1_pd(C[2]), r, _mm256_set1_pd(1.0));
                let y = _mm256_mul_pd(_mm256_fmadd_pd(z, _mm256_mul_pd(r, r), y), s);
                let y = _mm256_cvtpd_ps(y);
                // Below the underflow bound (and at -inf) the answer is 0.
                let low = _mm_cmp_ps::<_CMP_LT_OQ>(x, _mm_set1_ps(UNDERFLOW));
                _mm_storeu_ps(c.as_mut_ptr(), _mm_andnot_ps(low, y));
            }
        }
        for x in chunks.into_remainder() {
            *x = expf(*x);
        }
    }
}

/// The constants of glibc's `expf` (Arm's optimized-routines algorithm: a 32-entry table of 2^(i/32) and a
/// cubic, in f64).
mod exp_consts {
    /// `bits(2^(i/32)) - (i << 47)`.
    pub(super) const TAB: [u64; 32] = [
        0x3ff0000000000000,
        0x3fefd9b0d3158574,
        0x3fefb5586cf9890f,
        0x3fef9301d0125b51,
        0x3fef72b83c7d517b,
        0x3fef54873168b9aa,
        0x3fef387a6e756238,
        0x3fef1e9df51fdee1,
        0x3fef06fe0a31b715,
        0x3feef1a7373aa9cb,
        0x3feedea64c123422,
        0x3feece086061892d,
        0x3feebfdad5362a27,
        0x3feeb42b569d4f82,
        0x3feeab07dd485429,
        0x3feea47eb03a5585,
        0x3feea09e667f3bcd,
        0x3fee9f75e8ec5f74,
        0x3feea11473eb0187,
        0x3feea589994cce13,
        0x3feeace5422aa0db,
        0x3feeb737b0cdc5e5,
        0x3feec49182a3f090,
        0x3feed503b23e255d,
        0x3feee89f995ad3ad,
        0x3feeff76f2fb5e47,
        0x3fef199bdd85529c,
        0x3fef3720dcef9069,
        0x3fef5818dcfba487,
        0x3fef7c97337b9b5f,
        0x3fefa4afa2a490da,
        0x3fefd0765b6e4540,
    ];
    /// 32 / ln 2.
    pub(super) const INV_LN2_N: f64 = f64::from_bits(0x3ff7_1547_652b_82fe) * 32.0;
    /// 0x1.8p52: adding it rounds to an integer, kept in the low bits.
    pub(super) const SHIFT: f64 = f64::from_bits(0x4338_0000_0000_0000);
    /// The cubic's coefficients, scaled by 32^-3, 32^-2 and 32^-1.
    pub(super) const C: [f64; 3] = [
        f64::from_bits(0x3fac_6af8_4b91_2394) / 32768.0,
        f64::from_bits(0x3fce_bfce_50fa_c4f3) / 1024.0,
        f64::from_bits(0x3fe6_2e42_ff0c_52d6) / 32.0,
    ];
    /// Below this (`-0x1.9fe368p6`, about -103.97) `expf` underflows to 0.
    pub(super) const UNDERFLOW: f32 = f32::from_bits(0xc2cf_f1b4);
}

/// glibc's `expf` for arguments at most 0 (all softmax needs), bit for bit as this machine's libm computes it
/// with FMA (checked against `f32::exp` in the tests): llama.cpp's one pass calls libm's `expf`, and this can
/// run four lanes at a time.
#[inline(always)]
fn expf(x: f32) -> f32 {
    use exp_consts::*;
    if x < UNDERFLOW || x.is_nan() {
        return if x.is_nan() { x } else { 0.0 };
    }
    let xd = f64::from(x);
    let kd = INV_LN2_N.mul_add(xd, SHIFT);
    let ki = kd.to_bits();
    let r = INV_LN2_N.mul_add(xd, -(kd - SHIFT));
    let s = f64::from_bits(TAB[(ki % 32) as usize].wrapping_add(ki << 47));
    let z = C[0].mul_add(r, C[1]);
    let y = C[2].mul_add(r, 1.0);
    (z.mul_add(r * r, y) * s) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vectorised_exp_is_close_to_libm_and_handles_the_ends() {
        for i in -2000..=200 {
            let x = i as f32 * 0.0437;
            let (a, b) = (ggml_v_expf(x), x.exp());
            assert!((a - b).abs() <= 1e-6 * b + 1e-37, "{x}: {a} vs {b}");
        }
        assert_eq!(ggml_v_expf(f32::NEG_INFINITY), 0.0);
        assert_eq!(ggml_v_expf(0.0), 1.0);
        assert!(ggml_v_expf(-100.0) > 0.0 && ggml_v_expf(-100.0) < 1e-40);
    }

    /// Every chunk of an `len`-token prompt, in order.
    fn chunks(len: usize, checkpoints: bool) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for pos in 0..len {
            let c = prompt_chunk(len, pos, checkpoints);
            assert!(c.start <= pos && pos < c.end(), "{pos} outside {c:?}");
            if out.last() != Some(&(c.start, c.end())) {
                out.push((c.start, c.end()));
            }
        }
        out
    }

    #[test]
    fn a_prompt_is_read_in_the_chunks_of_llama_cpps_server() {
        // Without sliding-window layers: chunks of 512 from the start, within batches of 2048.
        assert_eq!(chunks(451, false), [(0, 451)]);
        assert_eq!(chunks(1300, false), [(0, 512), (512, 1024), (1024, 1300)]);
        // With them, a batch also ends where 516 and where 4 tokens are left (once it holds a token).
        assert_eq!(chunks(4, true), [(0, 4)]);
        assert_eq!(chunks(5, true), [(0, 1), (1, 5)]);
        assert_eq!(chunks(451, true), [(0, 447), (447, 451)]);
        assert_eq!(chunks(516, true), [(0, 512), (512, 516)]);
        assert_eq!(chunks(517, true), [(0, 1), (1, 513), (513, 517)]);
        assert_eq!(
            chunks(1300, true),
            [(0, 512), (512, 784), (784, 1296), (1296, 1300)]
        );
        assert_eq!(
            chunks(3000, true),
            [
                (0, 512),
                (512, 1024),
                (1024, 1536),
                (1536, 2048),
                (2048, 2484),
                (2484, 2996),
                (2996, 3000)
            ]
        );
    }

    #[test]
    fn paths_follow_llama_cpp_thresholds() {
        assert_eq!(path(64, 63, 4096), Path::Tiled);
        assert_eq!(path(63, 62, 4096), Path::OnePass);
        assert_eq!(path(1, 255, 4096), Path::OnePass);
        assert_eq!(path(1, 256, 4096), Path::Split { at: 256 });
        assert_eq!(path(1, 600, 4096), Path::Split { at: 384 });
        assert_eq!(path(1, 300, 400), Path::OnePass);
    }

    /// The AVX2 one pass and the portable one give the same bits, over ranges long enough for the maximum to
    /// move many times.
    #[test]
    fn one_pass_kernels_agree_bit_for_bit() {
        for (dim, len) in [
            (64, 40),
            (64, 700),
            (32, 300),
            (96, 50),
            (128, 300),
            (256, 300),
        ] {
            let val = |i: usize| round_f16(((i * 7919 % 1000) as f32 / 500.0 - 1.0) * 0.5);
            let k: Vec<f32> = (0..len * dim).map(val).collect();
            let v: Vec<f32> = (0..len * dim).map(|i| val(i + 13)).collect();
            // A shared prefix of 17 rows, then the sequence's own.
            let split = 17 * dim;
            let keys = Keys {
                runs: [(&k[..split], &v[..split]), (&k[split..], &v[split..])],
                stride: dim,
                offset: 0,
                dim,
            };
            let q: Vec<f32> = (0..dim).map(|i| round_f16(val(i + 5) * 3.0)).collect();
            for range in [0..len, 3..len - 1, 20..len, 0..10] {
                let a = one_pass(&q, &keys, range.clone(), 0.125);
                let b = one_pass_portable(&q, &keys, range, 0.125);
                assert_eq!((a.max, a.sum), (b.max, b.sum), "dim {dim}, {len} keys");
                assert_eq!(a.acc, b.acc, "dim {dim}, {len} keys");
            }
        }
    }

    /// The `expf` copy equals libm's on every 61st float from 0 down to past its underflow, and at the ends.
    #[test]
    fn expf_is_libm_expf_to_the_bit() {
        let check = |x: f32| {
            let (a, b) = (expf(x), x.exp());
            assert_eq!(a.to_bits(), b.to_bits(), "expf({x:e}): {a:e} vs libm {b:e}");
        };
        let mut bits = (-0.0f32).to_bits();
        while bits <= (-110.0f32).to_bits() {
            check(f32::from_bits(bits));
            bits += 61;
        }
        for x in [
            0.0,
            -0.0,
            -1e-30,
            -1.0,
            -87.5,
            -103.97,
            -104.0,
            -1e30,
            f32::NEG_INFINITY,
        ] {
            check(x);
        }
        #[cfg(target_arch = "x86_64")]
        if crate::quant::Kernel::detect() == crate::quant::Kernel::Avx2 {
            let mut xs: Vec<f32> = (0..4001).map(|i| -(i as f32) * 0.0271).collect();
            xs.extend([f32::NEG_INFINITY, -103.972, -103.973, -0.0]);
            let want: Vec<u32> = xs.iter().map(|x| x.exp().to_bits()).collect();
            // SAFETY: checked for AVX2 just above.
            unsafe { staged::exp_all(&mut xs) };
            let got: Vec<u32> = xs.iter().map(|x| x.to_bits()).collect();
            assert_eq!(got, want);
        }
    }

    /// The tiled path as first written (one query at a time, a plain loop per score and per value, every key
    /// row looked up by position): the statement the vectorised and grouped forms are held to.
    fn tiled_reference(
        q: &[f32],
        keys: &Keys<'_>,
        kt: &[f32],
        range: std::ops::Range<usize>,
    ) -> Vec<f32> {
        let (dim, scale) = (keys.dim, 0.125);
        let (first, len) = (range.start, range.end);
        let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
        let mut acc = vec![0f32; dim];
        for (t, start) in (0..len).step_by(TILE).enumerate() {
            if start + TILE <= first {
                continue;
            }
            let n = TILE.min(len - start);
            let from = first.saturating_sub(start);
            let mut scores = [0f32; TILE];
            for (d, &qd) in q.iter().enumerate() {
                for (j, s) in scores.iter_mut().enumerate() {
                    *s = qd.mul_add(kt[(t * dim + d) * TILE + j], *s);
                }
            }
            for (j, s) in scores.iter_mut().enumerate() {
                *s = if (from..n).contains(&j) {
                    *s * scale
                } else {
                    f32::NEG_INFINITY
                };
            }
            let new_max = scores.iter().fold(max, |m, &s| m.max(s));
            if new_max > max {
                let ms = (max - new_max).exp();
                acc.iter_mut().for_each(|a| *a *= ms);
                sum *= ms;
            }
            max = new_max;
            scores.iter_mut().for_each(|s| *s = ggml_v_expf(*s - max));
            let mut total = 0f64;
            for c in scores.chunks_exact(8) {
                total +=
                    f64::from(((c[0] + c[4]) + (c[2] + c[6])) + ((c[1] + c[5]) + (c[3] + c[7])));
            }
            sum = (f64::from(sum) + total) as f32;
            for (j, &p) in scores[from..n].iter().enumerate() {
                for (a, &x) in acc.iter_mut().zip(keys.row(start + from + j).1) {
                    *a = p.mul_add(x, *a);
                }
            }
        }
        acc.iter().map(|a| a * (1.0 / sum)).collect()
    }

    /// The tiled path, one query at a time and in groups walking the tiles together, equals its plain statement
    /// bit for bit: heads of several sizes (a multiple of 64 and not), a head's slice inside wider rows, keys in
    /// two runs, and ranges starting mid-tile and past the first tile.
    #[test]
    fn the_tiled_path_alone_and_in_groups_equals_its_plain_statement() {
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<u32>>();
        for (dim, len) in [(64, 300), (72, 200), (32, 130), (128, 64)] {
            let (stride, offset) = (3 * dim, dim);
            let val = |i: usize| round_f16(((i * 7919 % 1000) as f32 / 500.0 - 1.0) * 0.5);
            let k: Vec<f32> = (0..len * stride).map(val).collect();
            let v: Vec<f32> = (0..len * stride).map(|i| val(i + 13)).collect();
            let split = 37 * stride;
            let keys = Keys {
                runs: [(&k[..split], &v[..split]), (&k[split..], &v[split..])],
                stride,
                offset,
                dim,
            };
            let kt = transpose_keys(&keys, len);
            let qs: Vec<Vec<f32>> = (0..5)
                .map(|c| (0..dim).map(|i| val(i * 3 + c * 101 + 5) * 3.0).collect())
                .collect();
            for range in [0..len, 70..len, 10..len - 1] {
                let want: Vec<Vec<u32>> = qs
                    .iter()
                    .map(|q| bits(&tiled_reference(q, &keys, &kt, range.clone())))
                    .collect();
                for (q, want) in qs.iter().zip(&want) {
                    let mut out = vec![0f32; dim];
                    tiled(q, &keys, &kt, range.clone(), 0.125, &mut out);
                    assert_eq!(&bits(&out), want, "dim {dim}, {range:?}: one query");
                }
                let queries: Vec<&[f32]> = qs.iter().map(|q| &q[..]).collect();
                let mut res = vec![0f32; qs.len() * dim];
                let mut dsts: Vec<&mut [f32]> = res.chunks_mut(dim).collect();
                tiled_group(&queries, &keys, &kt, range.clone(), 0.125, &mut dsts);
                for (out, want) in res.chunks(dim).zip(&want) {
                    assert_eq!(&bits(out), want, "dim {dim}, {range:?}: a group");
                }
            }
        }
    }

    /// All three paths compute softmax attention, over a whole sequence or a window ending at its last key
    /// (starting mid-tile, at a tile boundary, and past the split); they differ only in rounding.
    #[test]
    fn the_paths_agree_with_plain_softmax_attention() {
        let dim = 64;
        let len = 300;
        let val = |i: usize| round_f16(((i * 7919 % 1000) as f32 / 500.0 - 1.0) * 0.5);
        let k: Vec<f32> = (0..len * dim).map(val).collect();
        let v: Vec<f32> = (0..len * dim).map(|i| val(i + 13)).collect();
        let keys = Keys {
            runs: [
                (&k[..100 * dim], &v[..100 * dim]),
                (&k[100 * dim..], &v[100 * dim..]),
            ],
            stride: dim,
            offset: 0,
            dim,
        };
        let q: Vec<f32> = (0..dim).map(|i| val(i + 5) * 3.0).collect();
        let scale = 0.125;
        for first in [0, 70, 128, 260] {
            let scores: Vec<f64> = (first..len)
                .map(|p| {
                    let kr = &k[p * dim..(p + 1) * dim];
                    q.iter().zip(kr).map(|(a, b)| f64::from(a * b)).sum::<f64>() * 0.125
                })
                .collect();
            let m = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
            let total: f64 = w.iter().sum();
            let exact: Vec<f64> = (0..dim)
                .map(|d| {
                    (first..len)
                        .map(|p| w[p - first] * f64::from(v[p * dim + d]))
                        .sum::<f64>()
                        / total
                })
                .collect();
            for path in [Path::Tiled, Path::OnePass, Path::Split { at: 256 }] {
                let mut out = vec![0f32; dim];
                attend(path, &q, &keys, None, first..len, scale, &mut out);
                for d in 0..dim {
                    assert!(
                        (f64::from(out[d]) - exact[d]).abs() < 3e-3,
                        "{path:?} from {first}, dim {d}"
                    );
                }
            }
        }
    }
}
