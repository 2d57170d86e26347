//! F16 and BF16 weights. llama.cpp rounds the activations to the weights' type and multiplies with one of two
//! kernels, which add up their products in different orders:
//! - a product of one column takes `ggml_vec_dot_f16` / `ggml_vec_dot_bf16`: four 8-lane accumulators, one
//!   per 8 values of each 32, folded together at the end (each type folds them its own way);
//! - a product of two columns or more (a prompt) takes llamafile's `tinyBLAS` when the row count is a multiple of
//!   four: one 8-lane accumulator per output, summed across its lanes at the end.
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
    if format == Format::F16 {
        // GGML_F16_VEC_REDUCE: 0+2 and 1+3, then those; halves added; then two horizontal adds.
        let t: [f32; 4] = std::array::from_fn(|i| s[i] + s[i + 4]);
        (t[0] + t[1]) + (t[2] + t[3])
    } else {
        // `ggml_vec_dot_bf16`: (0+2) + (1+3); halves added; then lanes 0+2 and 1+3, then those.
        let g: [f32; 4] = std::array::from_fn(|i| s[i + 4] + s[i]);
        (g[0] + g[2]) + (g[1] + g[3])
    }
}
