//! AVX2 products of K-quant weights (Q4_K, Q5_K, Q6_K) with Q8_K columns, to the bit what
//! [`super::super::kquant::dot_row`] computes.
//!
//! Every one of llama.cpp's paths is integer sums followed by a fixed chain of f32 steps, and the integer sums
//! are exact whatever their order. So each super-block is unpacked once into eight vectors of 32 unsigned
//! weights with their scales as i16 lanes, and for each column the integer lanes come from llama.cpp's own
//! AVX2 sequence (`maddubs`, then `madd` with the scales: lane `u` of a 32-weight vector holds weights
//! `4u..4u + 4`); the lanes, summed per pair of sub-blocks or across the vector, then go through exactly the f32
//! steps of the column's [`Path`]. llama.cpp's K-quant code has no VNNI flavour, and neither has this.

use std::arch::x86_64::*;

use super::super::kquant::{hsum8, paths, Path, Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES, QK_K};
use super::super::{half, Format, QMatrix, Tile, TILE};
use super::{hsum_i32, load};

/// A super-block unpacked for every column's product.
struct Unpacked {
    /// 32 unsigned weights per vector, in value order.
    w: [__m256i; 8],
    /// The i16 scale of each byte pair of `w[i]` (Q4_K/Q5_K: one per vector; Q6_K: one per 16 bytes).
    sc: [__m256i; 8],
    /// Q4_K/Q5_K: the eight sub-blocks' minimums as i16.
    mins: __m128i,
    /// Q6_K: the sixteen scales as i16, for taking out the weights' offset of 32.
    sc16: __m256i,
    d: f32,
    dmin: f32,
}

/// The K-quant formats' unpacking.
trait Super {
    const FORMAT: Format;
    const BYTES: usize;

    /// # Safety
    /// `block` holds one super-block; the CPU has AVX2.
    unsafe fn unpack(block: &[u8]) -> Unpacked;
}

struct Q4K;
struct Q5K;
struct Q6K;

/// Q4_K/Q5_K's 6-bit scales and minimums (the 12 bytes at `block[4..16]`), the scales broadcast per sub-block.
#[inline(always)]
unsafe fn scales_and_mins(block: &[u8]) -> ([__m256i; 8], __m128i) {
    let q = &block[4..16];
    let mut sc = [0i16; 8];
    let mut m = [0i16; 8];
    for j in 0..8 {
        let (s, mm) = if j < 4 {
            (q[j] & 63, q[j + 4] & 63)
        } else {
            (
                (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4),
                (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
            )
        };
        sc[j] = i16::from(s);
        m[j] = i16::from(mm);
    }
    // SAFETY: the caller's: a CPU with AVX2; `m` is 16 bytes.
    unsafe {
        (
            sc.map(|s| _mm256_set1_epi16(s)),
            _mm_loadu_si128(m.as_ptr() as *const __m128i),
        )
    }
}

impl Super for Q4K {
    const FORMAT: Format = Format::Q4K;
    const BYTES: usize = Q4_K_BYTES;

    #[inline(always)]
    unsafe fn unpack(block: &[u8]) -> Unpacked {
        // SAFETY: the trait's contract; 16 + 4 · 32 = 144 bytes.
        unsafe {
            let (sc, mins) = scales_and_mins(block);
            let low = _mm256_set1_epi8(0x0F);
            let mut w = [_mm256_setzero_si256(); 8];
            for p in 0..4 {
                let v = load(block.as_ptr().add(16 + 32 * p) as *const i8);
                w[2 * p] = _mm256_and_si256(v, low);
                w[2 * p + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low);
            }
            Unpacked {
                w,
                sc,
                mins,
                sc16: _mm256_setzero_si256(),
                d: half(block, 0),
                dmin: half(block, 2),
            }
        }
    }
}

impl Super for Q5K {
    const FORMAT: Format = Format::Q5K;
    const BYTES: usize = Q5_K_BYTES;

    #[inline(always)]
    unsafe fn unpack(block: &[u8]) -> Unpacked {
        // SAFETY: the trait's contract; 48 + 4 · 32 = 176 bytes.
        unsafe {
            let (sc, mins) = scales_and_mins(block);
            let (low, one) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(1));
            let high = load(block.as_ptr().add(16) as *const i8);
            // Bit `s` of each byte of `high`, moved to bit 4 (16-bit shifts: the mask drops what crosses bytes).
            let bit = |s: i32| {
                let b = _mm256_and_si256(_mm256_srl_epi16(high, _mm_cvtsi32_si128(s)), one);
                _mm256_slli_epi16(b, 4)
            };
            let mut w = [_mm256_setzero_si256(); 8];
            for p in 0..4 {
                let v = load(block.as_ptr().add(48 + 32 * p) as *const i8);
                w[2 * p] = _mm256_or_si256(_mm256_and_si256(v, low), bit(2 * p as i32));
                w[2 * p + 1] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(v, 4), low),
                    bit(2 * p as i32 + 1),
                );
            }
            Unpacked {
                w,
                sc,
                mins,
                sc16: _mm256_setzero_si256(),
                d: half(block, 0),
                dmin: half(block, 2),
            }
        }
    }
}

impl Super for Q6K {
    const FORMAT: Format = Format::Q6K;
    const BYTES: usize = Q6_K_BYTES;

    #[inline(always)]
    unsafe fn unpack(block: &[u8]) -> Unpacked {
        // SAFETY: the trait's contract; the last load ends at 192 + 16 bytes, the scale at 210.
        unsafe {
            let p = block.as_ptr();
            let (low, two_bits) = (_mm256_set1_epi8(0x0F), _mm256_set1_epi8(3));
            let mut w = [_mm256_setzero_si256(); 8];
            for h in 0..2 {
                let ql1 = load(p.add(64 * h) as *const i8);
                let ql2 = load(p.add(64 * h + 32) as *const i8);
                let qh = load(p.add(128 + 32 * h) as *const i8);
                let hi = |v: __m256i| _mm256_slli_epi16(_mm256_and_si256(v, two_bits), 4);
                w[4 * h] = _mm256_or_si256(_mm256_and_si256(ql1, low), hi(qh));
                w[4 * h + 1] =
                    _mm256_or_si256(_mm256_and_si256(ql2, low), hi(_mm256_srli_epi16(qh, 2)));
                w[4 * h + 2] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql1, 4), low),
                    hi(_mm256_srli_epi16(qh, 4)),
                );
                w[4 * h + 3] = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(ql2, 4), low),
                    hi(_mm256_srli_epi16(qh, 6)),
                );
            }
            let s: [i16; 16] = std::array::from_fn(|i| i16::from(block[192 + i] as i8));
            let sc = std::array::from_fn(|i| {
                _mm256_set_m128i(_mm_set1_epi16(s[2 * i + 1]), _mm_set1_epi16(s[2 * i]))
            });
            Unpacked {
                w,
                sc,
                mins: _mm_setzero_si128(),
                sc16: _mm256_loadu_si256(s.as_ptr() as *const __m256i),
                d: half(block, 208),
                dmin: 0.0,
            }
        }
    }
}

/// One column's running sums, whichever [`Path`] it takes (as the portable kernel's).
#[derive(Clone, Copy)]
struct Sums {
    lanes: __m256,
    mins: __m128,
    scalar: f32,
    scalar_min: f32,
}

/// Rows `rows` of K-quant matrix `w` · every column of `x`, into `out(r, k, value)`.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C; `w` is Q4_K, Q5_K or Q6_K and `x` holds as many super-blocks per
/// column, with their scales and sums by sixteen.
#[target_feature(enable = "avx2,fma,f16c")]
pub(in super::super) unsafe fn dot_rows<F: FnMut(usize, usize, f32)>(
    w: &QMatrix,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    // SAFETY: the caller's contract.
    unsafe {
        per_width!(x.n, N => match w.format {
            Format::Q4K => rows_of::<Q4K, N, F>(w, rows, x, out),
            Format::Q5K => rows_of::<Q5K, N, F>(w, rows, x, out),
            Format::Q6K => rows_of::<Q6K, N, F>(w, rows, x, out),
            _ => unreachable!("not a K-quant"),
        })
    }
}

#[inline(always)]
unsafe fn rows_of<S: Super, const N: usize, F: FnMut(usize, usize, f32)>(
    w: &QMatrix,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    // llama.cpp repacks Q4_K matrices whose row count is a multiple of eight (see `portable_dot_rows`).
    let repacked = S::FORMAT == Format::Q4K && w.rows.is_multiple_of(8);
    let path = paths(S::FORMAT, x, repacked);
    // SAFETY (all below): the caller's contract: every row holds whole super-blocks, and the tile as many per
    // column (`N` of them) with `TILE` scales and 16 · `TILE` sums by sixteen per super-block.
    unsafe {
        for r in rows {
            let mut sums = [Sums {
                lanes: _mm256_setzero_ps(),
                mins: _mm_setzero_ps(),
                scalar: 0.0,
                scalar_min: 0.0,
            }; N];
            for (b, block) in w.row(r).chunks_exact(S::BYTES).enumerate() {
                let u = S::unpack(block);
                for (k, s) in sums.iter_mut().enumerate() {
                    let slot = b * TILE + k;
                    let q = x.q.as_ptr().add((b * N + k) * QK_K);
                    let bsums = x.bsums.as_ptr().add(slot * 16);
                    let yd = *x.d.get_unchecked(slot);
                    let pairs = pair_sums(&u, q);
                    if S::FORMAT == Format::Q6K {
                        q6_k_block(s, path[k], &u, pairs, bsums, yd);
                    } else {
                        q45_k_block(S::FORMAT, s, path[k], &u, pairs, bsums, yd);
                    }
                }
            }
            for (k, s) in sums.iter().enumerate() {
                let lanes: [f32; 8] = std::mem::transmute(s.lanes);
                let mins: [f32; 4] = std::mem::transmute(s.mins);
                out(
                    r,
                    k,
                    match (path[k], S::FORMAT) {
                        (Path::Repacked(_), _) => s.scalar - s.scalar_min,
                        (Path::Tiled, _) => s.scalar,
                        (Path::VecDot, Format::Q4K) => {
                            hsum8(lanes) + ((mins[0] + mins[2]) + (mins[1] + mins[3]))
                        }
                        (Path::VecDot, Format::Q5K) => hsum8(lanes) + s.scalar,
                        (Path::VecDot, _) => hsum8(lanes),
                    },
                );
            }
        }
    }
}

/// The column at `q` times the unpacked weights, as four vectors of eight i32 lanes, one per pair of 32-weight
/// vectors: llama.cpp's `madd(scales, maddubs(weights, activations))`, added pair by pair.
#[inline(always)]
unsafe fn pair_sums(u: &Unpacked, q: *const i8) -> [__m256i; 4] {
    // SAFETY: the caller's: 256 readable bytes at `q`.
    unsafe {
        let dot = |i: usize| {
            _mm256_madd_epi16(
                u.sc[i],
                _mm256_maddubs_epi16(u.w[i], load(q.add(32 * i))),
            )
        };
        std::array::from_fn(|p| _mm256_add_epi32(dot(2 * p), dot(2 * p + 1)))
    }
}

/// The column's sixteen sums by sixteen at `bsums`.
#[inline(always)]
unsafe fn load_bsums(bsums: *const i16) -> __m256i {
    // SAFETY: the caller's: sixteen readable i16s.
    unsafe { _mm256_loadu_si256(bsums as *const __m256i) }
}

/// One Q4_K or Q5_K super-block into a column's sums, the f32 steps of `kquant::q45_k_block`.
#[inline(always)]
unsafe fn q45_k_block(
    format: Format,
    s: &mut Sums,
    path: Path,
    u: &Unpacked,
    pairs: [__m256i; 4],
    bsums: *const i16,
    yd: f32,
) {
    // SAFETY: the caller's: sixteen sums at `bsums`, a CPU with AVX2 and FMA.
    unsafe {
        let b = load_bsums(bsums);
        // Sums by 32 (at most 32 · 127: no i16 overflow), then lane `l` = m[2l]·s32[2l] + m[2l+1]·s32[2l+1].
        let s32 = _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
        let mp = _mm_madd_epi16(u.mins, s32);
        let (d, dmin) = (u.d, u.dmin);
        match path {
            Path::Repacked(grouped) => {
                let (scale, min_scale) = (d * yd, dmin * yd);
                if grouped {
                    let pm: [i32; 4] = std::mem::transmute(mp);
                    for (pair, &m) in pairs.iter().zip(&pm) {
                        s.scalar = (hsum_i32(*pair) as f32).mul_add(scale, s.scalar);
                        s.scalar_min = (m as f32).mul_add(min_scale, s.scalar_min);
                    }
                } else {
                    let sum = hsum_i32(all(pairs));
                    let min = hsum4(mp);
                    s.scalar = (sum as f32).mul_add(scale, s.scalar);
                    s.scalar_min = (min as f32).mul_add(min_scale, s.scalar_min);
                }
            }
            Path::Tiled => {
                let (sum, min) = (hsum_i32(all(pairs)), hsum4(mp));
                let v = (-dmin).mul_add(min as f32, d * sum as f32);
                s.scalar = v.mul_add(yd, s.scalar);
            }
            Path::VecDot => {
                let (dd, dm) = (yd * d, -yd * dmin);
                if format == Format::Q4K {
                    s.mins = _mm_fmadd_ps(_mm_set1_ps(dm), _mm_cvtepi32_ps(mp), s.mins);
                } else {
                    s.scalar = dm.mul_add(hsum4(mp) as f32, s.scalar);
                }
                s.lanes = _mm256_fmadd_ps(
                    _mm256_set1_ps(dd),
                    _mm256_cvtepi32_ps(all(pairs)),
                    s.lanes,
                );
            }
        }
    }
}

/// One Q6_K super-block into a column's sums, the f32 steps of `kquant::q6_k_block`: the offset of 32 comes
/// out of lane `u` as 32 · (sc[2u]·bsums[2u] + sc[2u+1]·bsums[2u+1]).
#[inline(always)]
unsafe fn q6_k_block(
    s: &mut Sums,
    path: Path,
    u: &Unpacked,
    pairs: [__m256i; 4],
    bsums: *const i16,
    yd: f32,
) {
    // SAFETY: the caller's: sixteen sums at `bsums`, a CPU with AVX2 and FMA.
    unsafe {
        let offset = _mm256_slli_epi32(_mm256_madd_epi16(u.sc16, load_bsums(bsums)), 5);
        let lanes = _mm256_sub_epi32(all(pairs), offset);
        if path == Path::Tiled {
            s.scalar = (u.d * hsum_i32(lanes) as f32).mul_add(yd, s.scalar);
        } else {
            s.lanes = _mm256_fmadd_ps(
                _mm256_set1_ps(yd * u.d),
                _mm256_cvtepi32_ps(lanes),
                s.lanes,
            );
        }
    }
}

/// The four pair vectors added lane by lane.
#[inline(always)]
unsafe fn all(pairs: [__m256i; 4]) -> __m256i {
    // SAFETY: the caller's: a CPU with AVX2.
    unsafe {
        _mm256_add_epi32(
            _mm256_add_epi32(pairs[0], pairs[1]),
            _mm256_add_epi32(pairs[2], pairs[3]),
        )
    }
}

/// The four i32 lanes of `v` added.
#[inline(always)]
unsafe fn hsum4(v: __m128i) -> i32 {
    // SAFETY: the caller's: a CPU with SSE2.
    unsafe {
        let s = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
        _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)))
    }
}
