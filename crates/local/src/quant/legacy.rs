//! Q4_0, Q5_0 and Q5_1 weights (blocks of 32: an f16 scale, for Q5_1 an f16 minimum, for the Q5 types 32 fifth
//! bits, then 16 bytes of low nibbles), multiplied with Q8_0 (Q8_1 for Q5_1) activations as llama.cpp's AVX2
//! code does:
//! - `vec_dot`: eight lanes, each the integer sum of four byte products, scaled into its own f32 accumulator
//!   block by block and summed across lanes at the end; Q5_1's `m · s` terms go into one scalar sum of fused
//!   multiply-adds. llamafile's `tinyBLAS`, which llama.cpp takes for Q4_0 and Q5_0 products of several
//!   columns, does the same arithmetic, so one kernel serves every column count.
//! - Q4_0 matrices with a multiple of eight rows are repacked by llama.cpp, and its kernels for them (one
//!   column or four) scale each block's whole integer sum into one f32 accumulator.
//!
//! This is the scalar fallback and the statement the AVX2 kernels (`avx2`) are tested against bit for bit.

use super::{half, Format, Tile, BLOCK, TILE};

pub(crate) const Q4_0_BYTES: usize = 18;
pub(crate) const Q5_0_BYTES: usize = 22;
pub(crate) const Q5_1_BYTES: usize = 24;

/// The 32 five-bit values of a block, without the offset: low nibbles first, then high nibbles, each with its
/// bit from `qh` as bit 4.
#[inline(always)]
fn values(qh: &[u8], qs: &[u8]) -> [u8; 32] {
    let bits = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    std::array::from_fn(|j| {
        let nibble = if j < 16 {
            qs[j] & 0x0F
        } else {
            qs[j - 16] >> 4
        };
        nibble | ((((bits >> j) & 1) as u8) << 4)
    })
}

/// A Q4_0 block's 32 four-bit values less their offset of 8: low nibbles first, then high nibbles.
#[inline(always)]
fn values_q4_0(qs: &[u8]) -> [i32; 32] {
    std::array::from_fn(|j| {
        let nibble = if j < 16 {
            qs[j] & 0x0F
        } else {
            qs[j - 16] >> 4
        };
        i32::from(nibble) - 8
    })
}

pub(crate) fn dequantize(format: Format, block: &[u8], out: &mut [f32]) {
    let d = half(block, 0);
    match format {
        Format::Q4_0 => {
            for (o, v) in out.iter_mut().zip(values_q4_0(&block[2..18])) {
                *o = v as f32 * d;
            }
        }
        Format::Q5_0 => {
            for (o, v) in out.iter_mut().zip(values(&block[2..6], &block[6..22])) {
                *o = (i32::from(v) - 16) as f32 * d;
            }
        }
        _ => {
            let m = half(block, 2);
            for (o, v) in out.iter_mut().zip(values(&block[4..8], &block[8..24])) {
                *o = f32::from(v) * d + m;
            }
        }
    }
}

/// Row `row` · every column of `x` into `out`. `repacked`: the matrix is Q4_0 with a multiple of eight rows,
/// which llama.cpp repacks and multiplies with kernels of their own. Each block is unpacked once for all
/// columns; each column's sums run block by block as llama.cpp's do.
#[inline(always)]
pub(crate) fn dot_row(format: Format, row: &[u8], x: &Tile<'_>, repacked: bool, out: &mut [f32]) {
    let mut acc = [[0f32; 8]; TILE];
    let mut summs = [0f32; TILE];
    let mut whole = [0f32; TILE];
    for (b, block) in row.chunks_exact(format.block_bytes()).enumerate() {
        let dw = half(block, 0);
        let w: [i32; 32] = match format {
            Format::Q4_0 => values_q4_0(&block[2..18]),
            Format::Q5_0 => values(&block[2..6], &block[6..22]).map(|v| i32::from(v) - 16),
            _ => values(&block[4..8], &block[8..24]).map(i32::from),
        };
        for k in 0..out.len() {
            let at = (b * x.n + k) * BLOCK;
            let q = &x.q[at..at + BLOCK];
            let slot = b * TILE + k;
            let d = dw * x.d[slot];
            let lane =
                |u: usize| -> i32 { (4 * u..4 * u + 4).map(|i| w[i] * i32::from(q[i])).sum() };
            if repacked {
                let sum: i32 = (0..8).map(lane).sum();
                whole[k] = (sum as f32).mul_add(d, whole[k]);
                continue;
            }
            if format == Format::Q5_1 {
                summs[k] = half(block, 2).mul_add(x.s[slot], summs[k]);
            }
            for (u, a) in acc[k].iter_mut().enumerate() {
                *a = d.mul_add(lane(u) as f32, *a);
            }
        }
    }
    for (k, o) in out.iter_mut().enumerate() {
        *o = if repacked {
            whole[k]
        } else {
            let a = acc[k];
            let r: [f32; 4] = std::array::from_fn(|i| a[i] + a[i + 4]);
            (r[0] + r[2]) + (r[1] + r[3]) + summs[k]
        };
    }
}
