//! The vision tower's operations other than the quantised matrix products, each as ggml's CPU build computes
//! it (its AVX2 code paths), so that the image embeddings equal llama.cpp's to the bit.

use rayon::prelude::*;

use crate::activation::gelu_table;
use half::f16;

/// `ggml_norm` (mean and variance of each row, `(x - mean) / sqrt(var + eps)`) then `ggml_mul` by `w` and
/// `ggml_add` of `b`, each rounded as its own op. The mean is summed in f64 in index order; the variance is
/// `ggml_vec_cvar_f32`'s: blocks of eight squared differences summed pairwise in f32 (halves, then pairs, then
/// the last two), each block's sum added in f64, the tail one by one.
pub(crate) fn layer_norm(x: &[f32], w: &[f32], b: &[f32], eps: f32) -> Vec<f32> {
    let n = w.len();
    let mut out = vec![0f32; x.len()];
    out.par_chunks_mut(n)
        .zip(x.par_chunks(n))
        .for_each(|(y, x)| {
            let sum: f64 = x.iter().map(|&v| f64::from(v)).sum();
            let mean = (sum as f32) / n as f32;
            let mut var = 0f64;
            let mut i = 0;
            while i + 8 <= n {
                let mut d = [0f32; 8];
                for j in 0..8 {
                    let v = x[i + j] - mean;
                    y[i + j] = v;
                    d[j] = v * v;
                }
                let h: [f32; 4] = std::array::from_fn(|j| d[j] + d[j + 4]);
                let s = (h[0] + h[2]) + (h[1] + h[3]);
                var += f64::from(s);
                i += 8;
            }
            for j in i..n {
                let v = x[j] - mean;
                y[j] = v;
                var += f64::from(v * v);
            }
            let var = (var / n as f64) as f32;
            let scale = 1.0 / (var + eps).sqrt();
            for ((v, &wi), &bi) in y.iter_mut().zip(w).zip(b) {
                *v = *v * scale * wi + bi;
            }
        });
    out
}

/// `ggml_rms_norm` (sum of squares in f64) then `ggml_mul` by `w`.
pub(crate) fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let n = w.len();
    let mut out = x.to_vec();
    for row in out.chunks_exact_mut(n) {
        let sum: f64 = row.iter().map(|&v| f64::from(v * v)).sum();
        let scale = 1.0 / ((sum / n as f64) as f32 + eps).sqrt();
        for (v, &wi) in row.iter_mut().zip(w) {
            *v = *v * scale * wi;
        }
    }
    out
}

/// Values per rayon job in the elementwise ops below: enough work to be worth a thread.
const PART: usize = 1 << 14;

/// `x += bias` for each row of `x` (rows as wide as `bias`).
pub(crate) fn add_rows(x: &mut [f32], bias: &[f32]) {
    let rows = (PART / bias.len()).max(1) * bias.len();
    x.par_chunks_mut(rows).for_each(|part| {
        for row in part.chunks_exact_mut(bias.len()) {
            for (v, &b) in row.iter_mut().zip(bias) {
                *v += b;
            }
        }
    });
}

/// `x += y`, elementwise.
pub(crate) fn add(x: &mut [f32], y: &[f32]) {
    x.par_chunks_mut(PART)
        .zip(y.par_chunks(PART))
        .for_each(|(x, y)| {
            for (a, &b) in x.iter_mut().zip(y) {
                *a += b;
            }
        });
}

/// `ggml_gelu` with ggml's f16 table (`GGML_GELU_FP16`): 0 at or below -10, `x` at or above 10.
pub(crate) fn gelu(x: &mut [f32]) {
    use half::slice::HalfFloatSliceExt;
    let table = gelu_table();
    x.par_chunks_mut(PART).for_each(|part| {
        // The slice conversions use F16C where the CPU has it; one value at a time does not.
        let mut halves = vec![f16::ZERO; part.len()];
        halves.convert_from_f32_slice(part);
        for h in &mut halves {
            *h = f16::from_bits(table[usize::from(h.to_bits())]);
        }
        let mut looked_up = vec![0f32; part.len()];
        halves.convert_to_f32_slice(&mut looked_up);
        for (v, g) in part.iter_mut().zip(looked_up) {
            *v = if *v <= -10.0 {
                0.0
            } else if *v >= 10.0 {
                *v
            } else {
                g
            };
        }
    });
}

/// The dot product of two rows of f16 values (held as f32) as ggml multiplies F16 matrices: llamafile's
/// tinyBLAS where `tiny_blas` (one 8-lane accumulator of fused multiply-adds, a last partial group of eight
/// taking only the lanes it fills, summed across lanes at the end),
/// otherwise `ggml_vec_dot_f16` (four 8-lane accumulators over each 32 values, folded in f32, then the products
/// of the tail added one by one in f64).
pub(crate) fn dot_f16(x: &[f32], y: &[f32], tiny_blas: bool) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::Kernel::detect() == crate::quant::Kernel::Avx2 {
        // SAFETY: `Kernel::Avx2` is only chosen on CPUs with AVX2 and FMA.
        return unsafe { dot_f16_fma(x, y, tiny_blas) };
    }
    dot_f16_body(x, y, tiny_blas)
}

/// [`dot_f16_body`] compiled with FMA, so each `mul_add` is one instruction rather than a call into libm.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_f16_fma(x: &[f32], y: &[f32], tiny_blas: bool) -> f32 {
    dot_f16_body(x, y, tiny_blas)
}

#[inline(always)]
fn dot_f16_body(x: &[f32], y: &[f32], tiny_blas: bool) -> f32 {
    let n = x.len();
    if tiny_blas {
        let mut acc = [0f32; 8];
        for (xs, ys) in x.chunks(8).zip(y.chunks(8)) {
            for ((a, &xv), &yv) in acc.iter_mut().zip(xs).zip(ys) {
                *a = xv.mul_add(yv, *a);
            }
        }
        let r: [f32; 4] = std::array::from_fn(|i| acc[i + 4] + acc[i]);
        return (r[0] + r[2]) + (r[1] + r[3]);
    }
    let np = n - n % 32;
    let mut acc = [[0f32; 8]; 4];
    for (xs, ys) in x[..np].chunks_exact(32).zip(y[..np].chunks_exact(32)) {
        for (j, a) in acc.iter_mut().enumerate() {
            for (lane, s) in a.iter_mut().enumerate() {
                *s = xs[8 * j + lane].mul_add(ys[8 * j + lane], *s);
            }
        }
    }
    let lanes = |a: [f32; 8], b: [f32; 8]| -> [f32; 8] { std::array::from_fn(|i| a[i] + b[i]) };
    let s = lanes(lanes(acc[0], acc[2]), lanes(acc[1], acc[3]));
    let t: [f32; 4] = std::array::from_fn(|i| s[i] + s[i + 4]);
    let mut sum = f64::from((t[0] + t[1]) + (t[2] + t[3]));
    for i in np..n {
        sum += f64::from(x[i] * y[i]);
    }
    sum as f32
}

/// `ggml_pool_2d` averaging `k × k` blocks (stride `k`) of a `side × side` grid of `width`-wide rows (row `y *
/// side + x`): each block summed in f32 row by row, then divided by `k²`. Rows of the result in the same order.
pub(crate) fn avg_pool(x: &[f32], side: usize, width: usize, k: usize) -> Vec<f32> {
    let out_side = side / k;
    let mut out = vec![0f32; out_side * out_side * width];
    for oy in 0..out_side {
        for ox in 0..out_side {
            let dst = &mut out[(oy * out_side + ox) * width..][..width];
            for (e, d) in dst.iter_mut().enumerate() {
                let mut res = 0f32;
                for ky in 0..k {
                    for kx in 0..k {
                        res += x[((oy * k + ky) * side + ox * k + kx) * width + e];
                    }
                }
                *d = res / (k * k) as f32;
            }
        }
    }
    out
}

/// llama.cpp's `build_patch_merge_permute` (Idefics3's pixel shuffle) of a `side × side` grid of `width`-wide
/// rows: each `s × s` block becomes one row of `s² · width` values, ordered by the block's row, then column,
/// then channel; blocks in row order.
pub(crate) fn pixel_shuffle(x: &[f32], side: usize, width: usize, s: usize) -> Vec<f32> {
    let out_side = side / s;
    let mut out = Vec::with_capacity(x.len());
    for by in 0..out_side {
        for bx in 0..out_side {
            for dy in 0..s {
                for dx in 0..s {
                    let p = (by * s + dy) * side + bx * s + dx;
                    out.extend_from_slice(&x[p * width..(p + 1) * width]);
                }
            }
        }
    }
    out
}
