//! F16 and BF16 weights. llama.cpp rounds the activations to the weights' type and multiplies with one of two
//! kernels, which add up their products in different orders:
//! - a product of one column takes `ggml_vec_dot_f16` / `ggml_vec_dot_bf16`: four 8-lane accumulators, one
//!   per 8 values of each 32, folded together at the end (each type folds them its own way), then the values
//!   past the last whole 32 (a width that is no multiple of 32), each product rounded to f32 and added in f64;
//! - a product of two columns or more (a prompt) takes llamafile's `tinyBLAS` when the row count is a multiple of
//!   four and the width a multiple of 8: one 8-lane accumulator per output, summed across its lanes at the end.
//!
//! The multiply-adds are fused in all of them (GCC contracts the BF16 kernel's multiply and add).

use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};

use super::{Format, Tile};

/// A weight or activation value as f32 (exact for both types).
#[inline(always)]
fn value(format: Format, bytes: &[u8], i: usize) -> f32 {
    let bits = u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]);
    match format {
        Format::F16 => f16::from_bits(bits).to_f32(),
        _ => bf16::from_bits(bits).to_f32(),
    }
}

/// `x` rounded to the weights' type (to nearest, ties to even, as llama.cpp converts), as f32.
#[inline(always)]
pub(crate) fn round_to(format: Format, x: f32) -> f32 {
    match format {
        Format::F16 => f16::from_f32(x).to_f32(),
        _ => bf16::from_f32(x).to_f32(),
    }
}

/// Every value of `x` rounded as [`round_to`] rounds it (F16 vectorised, [`super::round_f16_all`]).
pub(crate) fn round_all(format: Format, x: &[f32]) -> Vec<f32> {
    match format {
        Format::F16 => super::round_f16_all(x),
        _ => x.iter().map(|&v| round_to(format, v)).collect(),
    }
}

pub(crate) fn dequantize(format: Format, block: &[u8], out: &mut [f32]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = value(format, block, i);
    }
}

/// Row `row` · every column of `x` (already rounded to the weights' type) into `out`. `sgemm[k]`: llama.cpp
/// multiplies column `k` with tinyBLAS. The row is converted to f32 once for all columns.
#[inline(always)]
pub(crate) fn dot_row(format: Format, row: &[u8], x: &Tile<'_>, sgemm: &[bool], out: &mut [f32]) {
    let cols = row.len() / 2;
    let w: Vec<f32> = if format == Format::F16 {
        // The slice conversion uses F16C where the CPU has it; one value at a time does not.
        let bits: Vec<f16> = row
            .chunks_exact(2)
            .map(|b| f16::from_bits(u16::from_le_bytes([b[0], b[1]])))
            .collect();
        let mut w = vec![0f32; cols];
        bits.convert_to_f32_slice(&mut w);
        w
    } else {
        (0..cols).map(|i| value(format, row, i)).collect()
    };
    for (k, o) in out.iter_mut().enumerate() {
        *o = dot(format, &w, &x.f[k * cols..(k + 1) * cols], sgemm[k]);
    }
}

#[inline(always)]
fn dot(format: Format, w: &[f32], y: &[f32], sgemm: bool) -> f32 {
    if sgemm {
        // tinyBLAS: one accumulator per lane, then `hsum`: halves added, then lanes 0+2 and 1+3, then those.
        let mut acc = [0f32; 8];
        for (ws, ys) in w.chunks_exact(8).zip(y.chunks_exact(8)) {
            for (lane, a) in acc.iter_mut().enumerate() {
                *a = ws[lane].mul_add(ys[lane], *a);
            }
        }
        let r: [f32; 4] = std::array::from_fn(|i| acc[i + 4] + acc[i]);
        return (r[0] + r[2]) + (r[1] + r[3]);
    }
    let mut acc = [[0f32; 8]; 4];
    for (ws, ys) in w.chunks_exact(32).zip(y.chunks_exact(32)) {
        for (j, a) in acc.iter_mut().enumerate() {
            for (lane, s) in a.iter_mut().enumerate() {
                *s = ws[8 * j + lane].mul_add(ys[8 * j + lane], *s);
            }
        }
    }
    let lanes = |a: [f32; 8], b: [f32; 8]| -> [f32; 8] { std::array::from_fn(|i| a[i] + b[i]) };
    let s = lanes(lanes(acc[0], acc[2]), lanes(acc[1], acc[3]));
    let whole = if format == Format::F16 {
        // GGML_F16_VEC_REDUCE: 0+2 and 1+3, then those; halves added; then two horizontal adds.
        let t: [f32; 4] = std::array::from_fn(|i| s[i] + s[i + 4]);
        (t[0] + t[1]) + (t[2] + t[3])
    } else {
        // `ggml_vec_dot_bf16`: (0+2) + (1+3); halves added; then lanes 0+2 and 1+3, then those.
        let g: [f32; 4] = std::array::from_fn(|i| s[i + 4] + s[i]);
        (g[0] + g[2]) + (g[1] + g[3])
    };
    let tail = w.len() / 32 * 32;
    if tail == w.len() {
        return whole;
    }
    // The leftovers: `sumf` is a `ggml_float` (f64), each product an f32 (not fused), the sum rounded at the end.
    let sum = w[tail..]
        .iter()
        .zip(&y[tail..])
        .fold(f64::from(whole), |sum, (a, b)| sum + f64::from(a * b));
    sum as f32
}

/// Rows of weights converted to f32 once per block of [`gemm_block`], and multiplied with every column of it.
pub(super) const GEMM_ROWS: usize = 64;
/// Columns per block of [`gemm_block`]: with [`GEMM_ROWS`] rows, the block's weights and columns stay in a
/// core's L2 cache while every pair of them is multiplied.
pub(super) const GEMM_COLS: usize = 48;

/// tinyBLAS's product of a block of weight rows (`rows`: whole rows of `k` values, as stored; a multiple of four
/// rows) with a block of columns (`cols`: whole columns of `k` f32 values, already rounded to the weights' type),
/// `out(r, c, value)` for each pair, blocked over both: four rows by three columns at a time, twelve 8-lane
/// accumulators side by side. Each output's arithmetic is tinyBLAS's (one 8-lane chain of fused multiply-adds
/// over its `k` values, then `hsum`), the same as [`dot`] with `sgemm`, whichever block it falls in.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; `k` is a multiple of 8.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn gemm_block(
    format: Format,
    rows: &[u8],
    cols: &[f32],
    k: usize,
    out: &mut impl FnMut(usize, usize, f32),
) {
    assert!(
        k.is_multiple_of(8) && rows.len().is_multiple_of(8 * k) && cols.len().is_multiple_of(k)
    );
    let mut a = vec![0f32; rows.len() / 2];
    if format == Format::F16 {
        use std::arch::x86_64::*;
        for (src, dst) in rows.chunks_exact(16).zip(a.chunks_exact_mut(8)) {
            // SAFETY: 16 bytes are read from `src` and 8 f32s written to `dst`.
            unsafe {
                let h = _mm_loadu_si128(src.as_ptr().cast());
                _mm256_storeu_ps(dst.as_mut_ptr(), _mm256_cvtph_ps(h));
            }
        }
    } else {
        for (i, v) in a.iter_mut().enumerate() {
            *v = value(format, rows, i);
        }
    }
    // SAFETY: the caller's contract.
    unsafe { gemm_f32(&a, cols, k, out) };
}

/// [`gemm_block`] on rows already in f32: `a` holds a multiple of four rows of `k` values, `cols` whole columns.
///
/// # Safety
/// The CPU must have AVX2 and FMA; `k` is a multiple of 8.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn gemm_f32(
    a: &[f32],
    cols: &[f32],
    k: usize,
    out: &mut impl FnMut(usize, usize, f32),
) {
    assert!(k.is_multiple_of(8) && a.len().is_multiple_of(4 * k) && cols.len().is_multiple_of(k));
    let (m, n) = (a.len() / k, cols.len() / k);
    let mut j = 0;
    while j < n {
        let rn = (n - j).min(3);
        for i in (0..m).step_by(4) {
            // SAFETY: rows `i..i + 4` of `a` and columns `j..j + rn` of `cols` hold `k` values each.
            let b = unsafe { cols.as_ptr().add(j * k) };
            let a = unsafe { a.as_ptr().add(i * k) };
            match rn {
                3 => emit(unsafe { tile::<3>(a, b, k) }, i, j, out),
                2 => emit(unsafe { tile::<2>(a, b, k) }, i, j, out),
                _ => emit(unsafe { tile::<1>(a, b, k) }, i, j, out),
            }
        }
        j += rn;
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn emit<const RN: usize>(
    sums: [[f32; RN]; 4],
    i: usize,
    j: usize,
    out: &mut impl FnMut(usize, usize, f32),
) {
    for (di, row) in sums.iter().enumerate() {
        for (dj, &v) in row.iter().enumerate() {
            out(i + di, j + dj, v);
        }
    }
}

/// Four rows at `a` times `RN` columns at `b` (each `k` f32 values), tinyBLAS's way.
///
/// # Safety
/// The CPU must have AVX2 and FMA; `a` holds four rows and `b` `RN` columns of `k` values, `k` a multiple of 8.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn tile<const RN: usize>(a: *const f32, b: *const f32, k: usize) -> [[f32; RN]; 4] {
    use std::arch::x86_64::*;
    let z = _mm256_setzero_ps();
    let (mut c0, mut c1, mut c2, mut c3) = ([z; RN], [z; RN], [z; RN], [z; RN]);
    let mut l = 0;
    while l < k {
        // SAFETY: `l + 8 <= k` for each row and column (the caller's contract).
        unsafe {
            let bv: [__m256; RN] = std::array::from_fn(|j| _mm256_loadu_ps(b.add(j * k + l)));
            let a0 = _mm256_loadu_ps(a.add(l));
            for j in 0..RN {
                c0[j] = _mm256_fmadd_ps(a0, bv[j], c0[j]);
            }
            let a1 = _mm256_loadu_ps(a.add(k + l));
            for j in 0..RN {
                c1[j] = _mm256_fmadd_ps(a1, bv[j], c1[j]);
            }
            let a2 = _mm256_loadu_ps(a.add(2 * k + l));
            for j in 0..RN {
                c2[j] = _mm256_fmadd_ps(a2, bv[j], c2[j]);
            }
            let a3 = _mm256_loadu_ps(a.add(3 * k + l));
            for j in 0..RN {
                c3[j] = _mm256_fmadd_ps(a3, bv[j], c3[j]);
            }
        }
        l += 8;
    }
    [c0, c1, c2, c3].map(|c| c.map(|v| hsum(v)))
}

/// tinyBLAS's `hsum`: the halves added, then lanes 0 + 2 and 1 + 3, then those two.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn hsum(v: std::arch::x86_64::__m256) -> f32 {
    use std::arch::x86_64::*;
    let x = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    let x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)))
}
