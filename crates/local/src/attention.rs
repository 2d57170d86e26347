//! Attention of one query head over its sequence's cached keys and values, computed the way llama.cpp's CPU
//! flash attention computes it for f16 caches (its AVX2 build), so that greedy answers match llama.cpp's token
//! for token. Each step below follows its order of operations; the rounding of every sum depends on it.
//!
//! llama.cpp picks one of three paths, and so does [`path`]:
//! - **Tiled**, for a prompt chunk of at least 64 tokens of one sequence: f32 throughout (the query is not
//!   rounded), keys in tiles of 64 at absolute positions, each score a sequential chain of fused multiply-adds,
//!   the tile's softmax with ggml's vectorised exp ([`ggml_v_expf`]) summed in f64, values added with fused
//!   multiply-adds in key order.
//! - **One pass**, for fewer tokens: the query rounded to f16, one key at a time with a running maximum, the
//!   weighted sum of values kept in f16 and rounded after every update (`one_pass`).
//! - **Split**, for a single decoding token once llama.cpp's padded KV length (a multiple of 256, at least 256)
//!   reaches 512: the one pass over each half of the padded range, as its two threads do, then merged.
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

/// `dst` = attention of query `q` over keys `0..=pos`, by `path`. `q` is the query as computed (f32); `kt` is
/// the head's [`transpose_keys`], which the tiled path needs.
pub(crate) fn attend(
    path: Path,
    q: &[f32],
    keys: &Keys<'_>,
    kt: Option<&[f32]>,
    pos: usize,
    scale: f32,
    dst: &mut [f32],
) {
    match path {
        Path::Tiled => {
            let owned;
            let kt = match kt {
                Some(kt) => kt,
                None => {
                    owned = transpose_keys(keys, pos + 1);
                    &owned
                }
            };
            tiled(q, keys, kt, pos + 1, scale, dst)
        }
        Path::OnePass => {
            let q16: Vec<f32> = q.iter().map(|&v| round_f16(v)).collect();
            normalize(&one_pass(&q16, keys, 0..pos + 1, scale), dst);
        }
        Path::Split { at } => {
            let q16: Vec<f32> = q.iter().map(|&v| round_f16(v)).collect();
            let first = one_pass(&q16, keys, 0..at.min(pos + 1), scale);
            let second = one_pass(&q16, keys, at.min(pos + 1)..pos + 1, scale);
            normalize(&merge([first, second]), dst);
        }
    }
}

/// The one pass over `range`: the score of each key, a running maximum, and the values' weighted sum kept in
/// f16, rounded after each update (rescaling on a new maximum, then adding the value).
fn one_pass(q16: &[f32], keys: &Keys<'_>, range: std::ops::Range<usize>, scale: f32) -> Partial {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::Kernel::detect() == crate::quant::Kernel::Avx2 && q16.len().is_multiple_of(32)
    {
        // SAFETY: `Kernel::Avx2` is only chosen on CPUs with AVX2, FMA and F16C; every row is as long as `q16`,
        // whose length was just checked.
        let (max, sum, acc) =
            unsafe { crate::quant::one_pass_avx2(q16, range.map(|p| keys.row(p)), scale) };
        return Partial { max, sum, acc };
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

/// The tiled path for one query over keys `0..len`; `kt` from [`transpose_keys`] over at least `len` keys.
pub(crate) fn tiled(
    q: &[f32],
    keys: &Keys<'_>,
    kt: &[f32],
    len: usize,
    scale: f32,
    dst: &mut [f32],
) {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::Kernel::detect() == crate::quant::Kernel::Avx2 {
        // SAFETY: `Kernel::Avx2` is only chosen on CPUs with AVX2 and FMA.
        return unsafe { tiled_avx2(q, keys, kt, len, scale, dst) };
    }
    tiled_body(q, keys, kt, len, scale, dst);
}

/// [`tiled_body`] compiled for AVX2 and FMA: the same operations, eight keys or values per instruction.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tiled_avx2(
    q: &[f32],
    keys: &Keys<'_>,
    kt: &[f32],
    len: usize,
    scale: f32,
    dst: &mut [f32],
) {
    tiled_body(q, keys, kt, len, scale, dst);
}

#[inline(always)]
fn tiled_body(q: &[f32], keys: &Keys<'_>, kt: &[f32], len: usize, scale: f32, dst: &mut [f32]) {
    let dim = keys.dim;
    let (mut max, mut sum) = (f32::NEG_INFINITY, 0f32);
    let mut acc = vec![0f32; dim];
    for (t, start) in (0..len).step_by(TILE).enumerate() {
        let n = TILE.min(len - start);
        // One sequential chain of fused multiply-adds per score, over the head's dimensions in order, as
        // ggml's f32 GEMM computes it; the eight keys of a lane group run side by side.
        let mut scores = [0f32; TILE];
        for (d, &qd) in q.iter().enumerate() {
            let row = &kt[(t * dim + d) * TILE..(t * dim + d + 1) * TILE];
            for (s, &k) in scores.iter_mut().zip(row) {
                *s = qd.mul_add(k, *s);
            }
        }
        for (j, s) in scores.iter_mut().enumerate() {
            *s = if j < n { *s * scale } else { f32::NEG_INFINITY };
        }
        let tile_max = scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s));
        let new_max = max.max(tile_max);
        if new_max > max {
            let ms = (max - new_max).exp();
            for a in acc.iter_mut() {
                *a *= ms;
            }
            sum *= ms;
        }
        max = new_max;
        for s in scores.iter_mut() {
            *s = ggml_v_expf(*s - max);
        }
        let mut total = 0f64;
        for c in scores.chunks_exact(8) {
            total += f64::from(((c[0] + c[4]) + (c[2] + c[6])) + ((c[1] + c[5]) + (c[3] + c[7])));
        }
        sum = (f64::from(sum) + total) as f32;
        for (j, &p) in scores.iter().enumerate().take(n) {
            let v = keys.row(start + j).1;
            for (a, &x) in acc.iter_mut().zip(v) {
                *a = p.mul_add(x, *a);
            }
        }
    }
    let inv = 1.0 / sum;
    for (d, &a) in dst.iter_mut().zip(&acc) {
        *d = a * inv;
    }
}

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

    #[test]
    fn paths_follow_llama_cpp_thresholds() {
        assert_eq!(path(64, 63, 4096), Path::Tiled);
        assert_eq!(path(63, 62, 4096), Path::OnePass);
        assert_eq!(path(1, 255, 4096), Path::OnePass);
        assert_eq!(path(1, 256, 4096), Path::Split { at: 256 });
        assert_eq!(path(1, 600, 4096), Path::Split { at: 384 });
        assert_eq!(path(1, 300, 400), Path::OnePass);
    }

    /// The AVX2 one pass and the portable one give the same bits.
    #[test]
    fn one_pass_kernels_agree_bit_for_bit() {
        let dim = 64;
        let val = |i: usize| round_f16(((i * 7919 % 1000) as f32 / 500.0 - 1.0) * 0.5);
        let k: Vec<f32> = (0..40 * dim).map(val).collect();
        let v: Vec<f32> = (0..40 * dim).map(|i| val(i + 13)).collect();
        let keys = Keys {
            runs: [(&k[..], &v[..]), (&[], &[])],
            stride: dim,
            offset: 0,
            dim,
        };
        let q: Vec<f32> = (0..dim).map(|i| round_f16(val(i + 5) * 3.0)).collect();
        let a = one_pass(&q, &keys, 0..40, 0.125);
        let b = one_pass_portable(&q, &keys, 0..40, 0.125);
        assert_eq!((a.max, a.sum), (b.max, b.sum));
        assert_eq!(a.acc, b.acc);
    }

    /// All three paths compute softmax attention; they differ only in rounding.
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
        let scores: Vec<f64> = (0..len)
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
                (0..len)
                    .map(|p| w[p] * f64::from(v[p * dim + d]))
                    .sum::<f64>()
                    / total
            })
            .collect();
        for path in [Path::Tiled, Path::OnePass, Path::Split { at: 256 }] {
            let mut out = vec![0f32; dim];
            attend(path, &q, &keys, None, len - 1, scale, &mut out);
            for d in 0..dim {
                assert!(
                    (f64::from(out[d]) - exact[d]).abs() < 3e-3,
                    "{path:?} dim {d}"
                );
            }
        }
    }
}
