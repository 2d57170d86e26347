//! The K-quants (Q4_K, Q5_K, Q6_K): super-blocks of 256 weights with 6- or 8-bit sub-block scales, multiplied
//! with Q8_K activations (an f32 scale, 256 signed bytes and their sums by sixteen).
//!
//! The products are written as scalar code that follows, lane by lane, the arithmetic of the AVX2 code
//! llama.cpp's CPU backend runs, so they give its results to the bit on any CPU. Which code it runs depends on
//! the type and on how many activation columns it multiplies at once ([`Batch`]):
//! - **Q4_K** with a multiple of eight rows is repacked eight rows at a time; a prompt's columns read four at a
//!   time (`gemm`) accumulate in f32 per 64 weights, the others (`gemv`) per 256.
//! - Other K-quant products take `vec_dot` (eight partial sums per row, added at the end) when fewer than
//!   eight columns are multiplied together, else its tiled kernel (one exact integer sum per super-block,
//!   scaled and accumulated in f32 super-block by super-block).
//!
//! The integer parts are exact whatever the order; only where each f32 rounding happens matters, and that is
//! what each function below mirrors. This is the scalar fallback and the statement the AVX2 kernel
//! (`avx2::kquant`) is tested against bit for bit.

use super::{Batch, Format, Tile};

/// Values per super-block.
pub(crate) const QK_K: usize = 256;

pub(crate) const Q4_K_BYTES: usize = 144;
pub(crate) const Q5_K_BYTES: usize = 176;
pub(crate) const Q6_K_BYTES: usize = 210;

fn half(block: &[u8], at: usize) -> f32 {
    super::half(block, at)
}

/// Sub-block `j`'s 6-bit scale and minimum from the 12 packed bytes of a Q4_K or Q5_K super-block.
#[inline(always)]
fn scale_min(j: usize, q: &[u8]) -> (i32, i32) {
    if j < 4 {
        (i32::from(q[j] & 63), i32::from(q[j + 4] & 63))
    } else {
        (
            i32::from((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4)),
            i32::from((q[j + 4] >> 4) | ((q[j] >> 6) << 4)),
        )
    }
}

/// Quantises 256 values to Q8_K as llama.cpp's reference quantiser does (which its CPU backend uses for
/// these types): the scale comes from the value of largest magnitude, keeping its sign; values round half to
/// even. Returns the scale; fills the bytes and their sums by sixteen.
#[inline(always)]
pub(crate) fn quantize_q8_k(src: &[f32], qs: &mut [i8], bsums: &mut [i16]) -> f32 {
    let (mut max, mut amax) = (0f32, 0f32);
    for &v in src {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax == 0.0 {
        qs.fill(0);
        bsums.fill(0);
        return 0.0;
    }
    let iscale = -127.0 / max;
    for (q, &v) in qs.iter_mut().zip(src) {
        *q = ((iscale * v).round_ties_even() as i32).min(127) as i8;
    }
    for (sum, group) in bsums.iter_mut().zip(qs.chunks_exact(16)) {
        *sum = group.iter().map(|&q| i16::from(q)).sum();
    }
    1.0 / iscale
}

/// A super-block's values as f32, as llama.cpp's `dequantize_row_*` computes them (an embedding lookup).
pub(crate) fn dequantize_q4_k(block: &[u8], out: &mut [f32]) {
    let (d, min) = (half(block, 0), half(block, 2));
    let (scales, qs) = (&block[4..16], &block[16..144]);
    for (j, (q, dst)) in qs
        .chunks_exact(32)
        .zip(out.chunks_exact_mut(64))
        .enumerate()
    {
        let (sc, m) = scale_min(2 * j, scales);
        let (d1, m1) = (d * sc as f32, min * m as f32);
        let (sc, m) = scale_min(2 * j + 1, scales);
        let (d2, m2) = (d * sc as f32, min * m as f32);
        for l in 0..32 {
            dst[l] = d1 * f32::from(q[l] & 0x0F) - m1;
            dst[l + 32] = d2 * f32::from(q[l] >> 4) - m2;
        }
    }
}

pub(crate) fn dequantize_q5_k(block: &[u8], out: &mut [f32]) {
    let (d, min) = (half(block, 0), half(block, 2));
    let (scales, qh, qs) = (&block[4..16], &block[16..48], &block[48..176]);
    for (j, (q, dst)) in qs
        .chunks_exact(32)
        .zip(out.chunks_exact_mut(64))
        .enumerate()
    {
        let (sc, m) = scale_min(2 * j, scales);
        let (d1, m1) = (d * sc as f32, min * m as f32);
        let (sc, m) = scale_min(2 * j + 1, scales);
        let (d2, m2) = (d * sc as f32, min * m as f32);
        for l in 0..32 {
            let lo = (q[l] & 0x0F) + ((qh[l] >> (2 * j)) & 1) * 16;
            let hi = (q[l] >> 4) + ((qh[l] >> (2 * j + 1)) & 1) * 16;
            dst[l] = d1 * f32::from(lo) - m1;
            dst[l + 32] = d2 * f32::from(hi) - m2;
        }
    }
}

pub(crate) fn dequantize_q6_k(block: &[u8], out: &mut [f32]) {
    let d = half(block, 208);
    for half_block in 0..2 {
        let ql = &block[half_block * 64..half_block * 64 + 64];
        let qh = &block[128 + half_block * 32..128 + half_block * 32 + 32];
        let sc = &block[192 + half_block * 8..192 + half_block * 8 + 8];
        let dst = &mut out[half_block * 128..half_block * 128 + 128];
        for l in 0..32 {
            let is = l / 16;
            let q = q6(ql, qh, l);
            for (g, &v) in q.iter().enumerate() {
                dst[l + 32 * g] = d * f32::from(sc[is + 2 * g] as i8) * f32::from(v as i8 - 32);
            }
        }
    }
}

/// The four 6-bit values at `l` of a 128-value half of a Q6_K super-block (groups 0..4 of 32 values each).
#[inline(always)]
fn q6(ql: &[u8], qh: &[u8], l: usize) -> [u8; 4] {
    [
        (ql[l] & 0x0F) | ((qh[l] & 3) << 4),
        (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4),
        (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
        (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
    ]
}

/// AVX2's `hsum_float_8`: the halves added, then pairs, then the two sums.
#[inline(always)]
pub(super) fn hsum8(a: [f32; 8]) -> f32 {
    let r = [a[0] + a[4], a[1] + a[5], a[2] + a[6], a[3] + a[7]];
    (r[0] + r[2]) + (r[1] + r[3])
}

/// Sum of four byte products, `u` weights (non-negative) with `q` activations: one i32 lane of `maddubs` then
/// `madd` (exact here: no pair reaches i16 saturation for these value ranges).
#[inline(always)]
fn dot4(u: &[u8], q: &[i8]) -> i32 {
    u.iter()
        .zip(q)
        .map(|(&a, &b)| i32::from(a) * i32::from(b))
        .sum()
}

/// Column `k` of the tile: its super-block `b`'s bytes, scale and sums by sixteen.
#[inline(always)]
fn column<'a>(x: &'a Tile<'_>, k: usize, b: usize) -> (&'a [i8], f32, &'a [i16]) {
    let at = (b * x.n + k) * QK_K;
    let slot = b * super::TILE + k;
    (
        &x.q[at..at + QK_K],
        x.d[slot],
        &x.bsums[slot * 16..slot * 16 + 16],
    )
}

/// The sums of 32 activations per Q4_K/Q5_K sub-block, from the sums by sixteen.
#[inline(always)]
fn sums32(bsums: &[i16]) -> [i32; 8] {
    std::array::from_fn(|j| i32::from(bsums[2 * j]) + i32::from(bsums[2 * j + 1]))
}

/// Columns multiplied together from which llama.cpp takes its tiled kernel for the K-quants.
pub(crate) const TILED_FROM: usize = 8;

/// Whether repacked Q4_K takes this column in its four-column kernel: the columns go in fours from the first,
/// and the last one to three one by one.
pub(crate) fn four_at_a_time(batch: Batch) -> bool {
    batch.index < batch.size - batch.size % 4
}

/// Which of llama.cpp's kernels computes a column's product with a K-quant matrix.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Path {
    /// Repacked Q4_K; `true`: its four-column `gemm`.
    Repacked(bool),
    VecDot,
    Tiled,
}

/// The path of each column of `x` (columns past the tile's last: [`Path::VecDot`]).
#[inline(always)]
pub(super) fn paths(format: Format, x: &Tile<'_>, repacked: bool) -> [Path; super::TILE] {
    std::array::from_fn(|k| match x.batch.get(k) {
        Some(&batch) if format == Format::Q4K && repacked => Path::Repacked(four_at_a_time(batch)),
        Some(batch) if batch.size >= TILED_FROM => Path::Tiled,
        _ => Path::VecDot,
    })
}

/// One column's running sums, whichever [`Path`] it takes.
#[derive(Clone, Copy, Default)]
struct Sums {
    lanes: [f32; 8],
    mins: [f32; 4],
    scalar: f32,
    scalar_min: f32,
}

/// Row `row` of a K-quant matrix · every column of `x` into `out`, each in the order of the llama.cpp kernel
/// that computes it (see the module notes). `repacked`: the matrix is Q4_K with a multiple of eight rows. Each
/// super-block is unpacked once for all columns.
#[inline(always)]
pub(crate) fn dot_row(format: Format, row: &[u8], x: &Tile<'_>, repacked: bool, out: &mut [f32]) {
    let paths = paths(format, x, repacked);
    let mut sums = [Sums::default(); super::TILE];
    let mut w = [0u8; QK_K];
    for (b, block) in row.chunks_exact(format.block_bytes()).enumerate() {
        // Unsigned weights in value order; Q4_K/Q5_K 6-bit scales and minimums per 32, Q6_K 8-bit scales per 16.
        let (mut sc, mut m) = ([0i32; 16], [0i32; 8]);
        let (d, dmin) = match format {
            Format::Q6K => {
                for half_block in 0..2 {
                    let ql = &block[half_block * 64..half_block * 64 + 64];
                    let qh = &block[128 + half_block * 32..128 + half_block * 32 + 32];
                    for l in 0..32 {
                        for (g, v) in q6(ql, qh, l).into_iter().enumerate() {
                            w[half_block * 128 + g * 32 + l] = v;
                        }
                    }
                }
                for (s, &byte) in sc.iter_mut().zip(&block[192..208]) {
                    *s = i32::from(byte as i8);
                }
                (half(block, 208), 0.0)
            }
            _ => {
                let (scales, qh, qs) = if format == Format::Q4K {
                    (&block[4..16], None, &block[16..144])
                } else {
                    (&block[4..16], Some(&block[16..48]), &block[48..176])
                };
                for pair in 0..4 {
                    for l in 0..32 {
                        let (mut lo, mut hi) = (qs[pair * 32 + l] & 0x0F, qs[pair * 32 + l] >> 4);
                        if let Some(qh) = qh {
                            lo |= ((qh[l] >> (2 * pair)) & 1) << 4;
                            hi |= ((qh[l] >> (2 * pair + 1)) & 1) << 4;
                        }
                        w[pair * 64 + l] = lo;
                        w[pair * 64 + 32 + l] = hi;
                    }
                }
                for j in 0..8 {
                    (sc[j], m[j]) = scale_min(j, scales);
                }
                (half(block, 0), half(block, 2))
            }
        };
        for (k, (s, &path)) in sums.iter_mut().zip(&paths).enumerate().take(out.len()) {
            let (q, yd, bsums) = column(x, k, b);
            // Sums of four byte products, the unit of every kernel's integer lanes.
            let l4: [i32; 64] =
                std::array::from_fn(|t| dot4(&w[4 * t..4 * t + 4], &q[4 * t..4 * t + 4]));
            if format == Format::Q6K {
                q6_k_block(s, path, &l4, &sc, bsums, d, yd);
            } else {
                q45_k_block(format, s, path, &l4, (&sc, &m), bsums, (d, dmin, yd));
            }
        }
    }
    for ((o, s), &path) in out.iter_mut().zip(&sums).zip(&paths) {
        *o = match (path, format) {
            (Path::Repacked(_), _) => s.scalar - s.scalar_min,
            (Path::Tiled, _) => s.scalar,
            (Path::VecDot, Format::Q4K) => {
                hsum8(s.lanes) + ((s.mins[0] + s.mins[2]) + (s.mins[1] + s.mins[3]))
            }
            (Path::VecDot, Format::Q5K) => hsum8(s.lanes) + s.scalar,
            (Path::VecDot, _) => hsum8(s.lanes),
        };
    }
}

/// One Q4_K or Q5_K super-block into a column's sums. `l4[t]`: weights `4t..4t + 4` times the column's.
/// `(sc, m)`: the sub-blocks' scales and minimums; `(d, dmin, yd)`: the block's scale and minimum scale, and
/// the column's scale.
#[inline(always)]
fn q45_k_block(
    format: Format,
    s: &mut Sums,
    path: Path,
    l4: &[i32; 64],
    (sc, m): (&[i32; 16], &[i32; 8]),
    bsums: &[i16],
    (d, dmin, yd): (f32, f32, f32),
) {
    let s32 = sums32(bsums);
    let sub = |j: usize| -> i32 { l4[8 * j..8 * j + 8].iter().sum() };
    match path {
        Path::Repacked(grouped) => {
            let (scale, min_scale) = (d * yd, dmin * yd);
            let (mut sum, mut min) = (0i32, 0i32);
            for pair in 0..4 {
                let ps = sc[2 * pair] * sub(2 * pair) + sc[2 * pair + 1] * sub(2 * pair + 1);
                let pm = m[2 * pair] * s32[2 * pair] + m[2 * pair + 1] * s32[2 * pair + 1];
                if grouped {
                    s.scalar = (ps as f32).mul_add(scale, s.scalar);
                    s.scalar_min = (pm as f32).mul_add(min_scale, s.scalar_min);
                } else {
                    sum += ps;
                    min += pm;
                }
            }
            if !grouped {
                s.scalar = (sum as f32).mul_add(scale, s.scalar);
                s.scalar_min = (min as f32).mul_add(min_scale, s.scalar_min);
            }
        }
        Path::Tiled => {
            let sum: i32 = (0..8).map(|j| sc[j] * sub(j)).sum();
            let min: i32 = (0..8).map(|j| m[j] * s32[j]).sum();
            let v = (-dmin).mul_add(min as f32, d * sum as f32);
            s.scalar = v.mul_add(yd, s.scalar);
        }
        Path::VecDot => {
            let (dd, dm) = (yd * d, -yd * dmin);
            if format == Format::Q4K {
                // Q4_K keeps four lanes of minimums, Q5_K one scalar sum.
                for (l, a) in s.mins.iter_mut().enumerate() {
                    let prod = m[2 * l] * s32[2 * l] + m[2 * l + 1] * s32[2 * l + 1];
                    *a = dm.mul_add(prod as f32, *a);
                }
            } else {
                let all: i32 = (0..8).map(|j| m[j] * s32[j]).sum();
                s.scalar = dm.mul_add(all as f32, s.scalar);
            }
            for (u, a) in s.lanes.iter_mut().enumerate() {
                let lane: i32 = (0..4)
                    .map(|p| sc[2 * p] * l4[16 * p + u] + sc[2 * p + 1] * l4[16 * p + 8 + u])
                    .sum();
                *a = dd.mul_add(lane as f32, *a);
            }
        }
    }
}

/// One Q6_K super-block into a column's sums (weights unsigned, their offset of 32 taken out through the
/// activation sums as each kernel does).
#[inline(always)]
fn q6_k_block(
    s: &mut Sums,
    path: Path,
    l4: &[i32; 64],
    sc: &[i32; 16],
    bsums: &[i16],
    d: f32,
    yd: f32,
) {
    match path {
        Path::Tiled => {
            let sum: i32 = (0..16)
                .map(|j| {
                    let raw: i32 = l4[4 * j..4 * j + 4].iter().sum();
                    sc[j] * (raw - 32 * i32::from(bsums[j]))
                })
                .sum();
            s.scalar = (d * sum as f32).mul_add(yd, s.scalar);
        }
        _ => {
            let dd = yd * d;
            for (u, a) in s.lanes.iter_mut().enumerate() {
                let mut lane = 0i32;
                for half_block in 0..2 {
                    for g in 0..4 {
                        lane +=
                            sc[half_block * 8 + 2 * g + u / 4] * l4[32 * half_block + 8 * g + u];
                    }
                }
                lane -= 32
                    * (i32::from(bsums[2 * u]) * sc[2 * u]
                        + i32::from(bsums[2 * u + 1]) * sc[2 * u + 1]);
                *a = dd.mul_add(lane as f32, *a);
            }
        }
    }
}

/// Row `row` of a K-quant matrix · column `k` of `x`, one column at a time: the plain statement of what
/// [`dot_row`] computes for all of a tile's columns at once, kept as its test. `repacked`: the matrix is Q4_K with a multiple of eight
/// rows, which llama.cpp repacks and multiplies with kernels of their own.
#[cfg(test)]
pub(crate) fn dot(format: Format, row: &[u8], x: &Tile<'_>, k: usize, repacked: bool) -> f32 {
    let batch = x.batch[k];
    if format == Format::Q4K && repacked {
        return repacked_q4_k(row, x, k, four_at_a_time(batch));
    }
    match (format, batch.size >= TILED_FROM) {
        (Format::Q4K, false) => vec_dot_q4_k(row, x, k),
        (Format::Q5K, false) => dot_q5_k(row, x, k),
        (Format::Q6K, false) => dot_q6_k(row, x, k),
        (Format::Q4K | Format::Q5K | Format::Q6K, true) => tiled(format, row, x, k),
        _ => unreachable!("not a K-quant"),
    }
}

/// llama.cpp's tiled kernel: per super-block an exact integer sum (and one of minimums times activation
/// sums), `d · Σ` with the minimums taken off in one fused step, then a fused multiply-add by the
/// activations' scale into the running sum.
#[cfg(test)]
fn tiled(format: Format, row: &[u8], x: &Tile<'_>, k: usize) -> f32 {
    let mut acc = 0f32;
    for (b, block) in row.chunks_exact(format.block_bytes()).enumerate() {
        let (q, yd, bsums) = column(x, k, b);
        let (d, dmin, sum, min) = match format {
            Format::Q4K | Format::Q5K => {
                let (scales, qh, qs) = if format == Format::Q4K {
                    (&block[4..16], None, &block[16..144])
                } else {
                    (&block[4..16], Some(&block[16..48]), &block[48..176])
                };
                let s32 = sums32(bsums);
                let (mut sum, mut min) = (0i32, 0i32);
                for pair in 0..4 {
                    let packed = &qs[pair * 32..pair * 32 + 32];
                    let (mut lo, mut hi) = (0i32, 0i32);
                    for l in 0..32 {
                        let (mut wl, mut wh) = (packed[l] & 0x0F, packed[l] >> 4);
                        if let Some(qh) = qh {
                            wl |= ((qh[l] >> (2 * pair)) & 1) << 4;
                            wh |= ((qh[l] >> (2 * pair + 1)) & 1) << 4;
                        }
                        lo += i32::from(wl) * i32::from(q[pair * 64 + l]);
                        hi += i32::from(wh) * i32::from(q[pair * 64 + 32 + l]);
                    }
                    let (sc0, m0) = scale_min(2 * pair, scales);
                    let (sc1, m1) = scale_min(2 * pair + 1, scales);
                    sum += sc0 * lo + sc1 * hi;
                    min += m0 * s32[2 * pair] + m1 * s32[2 * pair + 1];
                }
                (half(block, 0), half(block, 2), sum, min)
            }
            _ => {
                let mut sum = 0i32;
                for half_block in 0..2 {
                    let ql = &block[half_block * 64..half_block * 64 + 64];
                    let qh = &block[128 + half_block * 32..128 + half_block * 32 + 32];
                    for l in 0..32 {
                        for (g, v) in q6(ql, qh, l).into_iter().enumerate() {
                            let at = half_block * 128 + g * 32 + l;
                            let scale = i32::from(block[192 + at / 16] as i8);
                            sum += scale * (i32::from(v) - 32) * i32::from(q[at]);
                        }
                    }
                }
                (half(block, 208), 0.0, sum, 0)
            }
        };
        let mut v = d * sum as f32;
        if format != Format::Q6K {
            v = (-dmin).mul_add(min as f32, v);
        }
        acc = v.mul_add(yd, acc);
    }
    acc
}

/// Row `row` (Q4_K, repacked) · column `k`: `grouped` picks llama.cpp's four-column `gemm` over its `gemv`.
#[cfg(test)]
fn repacked_q4_k(row: &[u8], x: &Tile<'_>, k: usize, grouped: bool) -> f32 {
    let (mut acc, mut acc_min) = (0f32, 0f32);
    for (b, block) in row.chunks_exact(Q4_K_BYTES).enumerate() {
        let (q, yd, bsums) = column(x, k, b);
        let (scale, min_scale) = (half(block, 0) * yd, half(block, 2) * yd);
        let (scales, qs) = (&block[4..16], &block[16..144]);
        let s32 = sums32(bsums);
        let (mut block_sum, mut block_min) = (0i32, 0i32);
        for pair in 0..4 {
            let packed = &qs[pair * 32..pair * 32 + 32];
            let (lo, hi) = (
                &q[pair * 64..pair * 64 + 32],
                &q[pair * 64 + 32..pair * 64 + 64],
            );
            let (dot_lo, dot_hi) = packed.iter().zip(lo.iter().zip(hi)).fold(
                (0i32, 0i32),
                |(a, b), (&w, (&l, &h))| {
                    (
                        a + i32::from(w & 0x0F) * i32::from(l),
                        b + i32::from(w >> 4) * i32::from(h),
                    )
                },
            );
            let (sc0, m0) = scale_min(2 * pair, scales);
            let (sc1, m1) = scale_min(2 * pair + 1, scales);
            let sum = sc0 * dot_lo + sc1 * dot_hi;
            let min = m0 * s32[2 * pair] + m1 * s32[2 * pair + 1];
            if grouped {
                acc = (sum as f32).mul_add(scale, acc);
                acc_min = (min as f32).mul_add(min_scale, acc_min);
            } else {
                block_sum += sum;
                block_min += min;
            }
        }
        if !grouped {
            acc = (block_sum as f32).mul_add(scale, acc);
            acc_min = (block_min as f32).mul_add(min_scale, acc_min);
        }
    }
    acc - acc_min
}

/// llama.cpp's AVX2 `ggml_vec_dot_q4_K_q8_K`: eight lanes of integer sums per super-block, each scaled into
/// its own f32 accumulator; the minimums in four more.
#[cfg(test)]
fn vec_dot_q4_k(row: &[u8], x: &Tile<'_>, k: usize) -> f32 {
    let mut acc = [0f32; 8];
    let mut acc_m = [0f32; 4];
    for (b, block) in row.chunks_exact(Q4_K_BYTES).enumerate() {
        let (q, yd, bsums) = column(x, k, b);
        let d = yd * half(block, 0);
        let dmin = -yd * half(block, 2);
        let (scales, qs) = (&block[4..16], &block[16..144]);
        let s32 = sums32(bsums);
        for (l, a) in acc_m.iter_mut().enumerate() {
            let (_, m0) = scale_min(2 * l, scales);
            let (_, m1) = scale_min(2 * l + 1, scales);
            *a = dmin.mul_add((m0 * s32[2 * l] + m1 * s32[2 * l + 1]) as f32, *a);
        }
        let mut sumi = [0i32; 8];
        for pair in 0..4 {
            let packed = &qs[pair * 32..pair * 32 + 32];
            let (sc0, _) = scale_min(2 * pair, scales);
            let (sc1, _) = scale_min(2 * pair + 1, scales);
            let lo: [u8; 32] = std::array::from_fn(|i| packed[i] & 0x0F);
            let hi: [u8; 32] = std::array::from_fn(|i| packed[i] >> 4);
            for (u, s) in sumi.iter_mut().enumerate() {
                let at = pair * 64 + 4 * u;
                *s += sc0 * dot4(&lo[4 * u..4 * u + 4], &q[at..at + 4])
                    + sc1 * dot4(&hi[4 * u..4 * u + 4], &q[at + 32..at + 36]);
            }
        }
        for (a, &s) in acc.iter_mut().zip(&sumi) {
            *a = d.mul_add(s as f32, *a);
        }
    }
    hsum8(acc) + ((acc_m[0] + acc_m[2]) + (acc_m[1] + acc_m[3]))
}

/// llama.cpp's AVX2 `ggml_vec_dot_q5_K_q8_K`: as Q4_K's, but the minimums go into one scalar sum, one fused
/// multiply-add per super-block.
#[cfg(test)]
fn dot_q5_k(row: &[u8], x: &Tile<'_>, k: usize) -> f32 {
    let mut acc = [0f32; 8];
    let mut summs = 0f32;
    for (b, block) in row.chunks_exact(Q5_K_BYTES).enumerate() {
        let (q, yd, bsums) = column(x, k, b);
        let d = yd * half(block, 0);
        let dmin = -yd * half(block, 2);
        let (scales, qh, qs) = (&block[4..16], &block[16..48], &block[48..176]);
        let s32 = sums32(bsums);
        let mins: i32 = (0..8).map(|j| scale_min(j, scales).1 * s32[j]).sum();
        summs = dmin.mul_add(mins as f32, summs);
        let mut sumi = [0i32; 8];
        for pair in 0..4 {
            let packed = &qs[pair * 32..pair * 32 + 32];
            let (sc0, _) = scale_min(2 * pair, scales);
            let (sc1, _) = scale_min(2 * pair + 1, scales);
            let lo: [u8; 32] =
                std::array::from_fn(|i| (packed[i] & 0x0F) | (((qh[i] >> (2 * pair)) & 1) << 4));
            let hi: [u8; 32] =
                std::array::from_fn(|i| (packed[i] >> 4) | (((qh[i] >> (2 * pair + 1)) & 1) << 4));
            for (u, s) in sumi.iter_mut().enumerate() {
                let at = pair * 64 + 4 * u;
                *s += sc0 * dot4(&lo[4 * u..4 * u + 4], &q[at..at + 4])
                    + sc1 * dot4(&hi[4 * u..4 * u + 4], &q[at + 32..at + 36]);
            }
        }
        for (a, &s) in acc.iter_mut().zip(&sumi) {
            *a = d.mul_add(s as f32, *a);
        }
    }
    hsum8(acc) + summs
}

/// llama.cpp's AVX2 `ggml_vec_dot_q6_K_q8_K`: the unsigned 6-bit values times the activations, with the
/// `-32` offset taken out of each lane afterwards through the sums by sixteen (lane `u` takes sub-blocks
/// `2u` and `2u + 1`'s share).
#[cfg(test)]
fn dot_q6_k(row: &[u8], x: &Tile<'_>, k: usize) -> f32 {
    let mut acc = [0f32; 8];
    for (b, block) in row.chunks_exact(Q6_K_BYTES).enumerate() {
        let (q, yd, bsums) = column(x, k, b);
        let d = yd * half(block, 208);
        let sc: [i32; 16] = std::array::from_fn(|i| i32::from(block[192 + i] as i8));
        let mut sumi = [0i32; 8];
        for half_block in 0..2 {
            let ql = &block[half_block * 64..half_block * 64 + 64];
            let qh = &block[128 + half_block * 32..128 + half_block * 32 + 32];
            let groups: [[u8; 32]; 4] =
                std::array::from_fn(|g| std::array::from_fn(|l| q6(ql, qh, l)[g]));
            for (g, w) in groups.iter().enumerate() {
                let base = half_block * 128 + g * 32;
                for (u, s) in sumi.iter_mut().enumerate() {
                    let scale = sc[half_block * 8 + 2 * g + u / 4];
                    *s += scale * dot4(&w[4 * u..4 * u + 4], &q[base + 4 * u..base + 4 * u + 4]);
                }
            }
        }
        for (u, s) in sumi.iter_mut().enumerate() {
            *s -= 32
                * (i32::from(bsums[2 * u]) * sc[2 * u]
                    + i32::from(bsums[2 * u + 1]) * sc[2 * u + 1]);
        }
        for (a, &s) in acc.iter_mut().zip(&sumi) {
            *a = d.mul_add(s as f32, *a);
        }
    }
    hsum8(acc)
}
