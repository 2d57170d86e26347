//! Q8_0 columns times Q8_0, Q5_0 or Q4_0 weights on CPUs with AVX-512 VNNI, two lanes of eight per 512-bit
//! register, so one `vpdpbusd`, one conversion and one multiply-add do the work of two:
//! - eight columns (a prompt): two weight rows per register ([`signed_pairs`]; row `r` in the low eight
//!   lanes, row `r + 1` in the high eight);
//! - two to seven columns (several sequences decoding): two columns per register ([`column_pairs`]), one
//!   row at a time. Two rows at a time there halved decoding speed (measured on Gemma 3 270M), it seems from
//!   reading two rows' weights at once where the weights stream from memory.
//!
//! One column stays with the 256-bit kernel.
//!
//! `vpdpbusd` wants unsigned weights, and AVX-512 has no `vpsignb` to move their signs onto the columns as the
//! 256-bit kernel does. So each weight gets its format's offset `o` (its raw code: Q8_0 128, Q5_0 16, Q4_0 8)
//! and each lane's sum starts at `-o · Σq` over the same four column bytes: `Σ(w + o)q - oΣq = Σwq`, the very
//! integer the lane held before. The scale products, conversions and multiply-adds are the 256-bit kernel's,
//! lane for lane, so the results equal its (and llama.cpp's) bit for bit.

use std::arch::x86_64::*;

use super::{hsum, load, Dot, Dpbusd, Unpack, Q4_0, Q5_0, Q8_0};
use crate::quant::{Tile, BLOCK, TILE};

/// A signed block format and the offset that makes its values unsigned.
pub(super) trait Signed: Unpack {
    /// Added to each value (wrapping, as a byte): the value's raw code, 0 to 255.
    const OFFSET: i8;
}

impl Signed for Q8_0 {
    const OFFSET: i8 = i8::MIN;
}

impl Signed for Q5_0 {
    const OFFSET: i8 = 16;
}

impl Signed for Q4_0 {
    const OFFSET: i8 = 8;
}

/// `out(r, k)` for eight columns and each row in `rows`, two rows at a time; an odd last row goes through
/// the 256-bit [`super::signed`].
///
/// # Safety
/// As [`super::dot_rows`], with AVX-512 VNNI; the tile has [`TILE`] columns.
// `b` indexes the rows' blocks, the tile's blocks and `start` alike; an index reads plainest.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
pub(super) unsafe fn signed_pairs<S: Signed, F: FnMut(usize, usize, f32)>(
    weights: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    let nb = row_bytes / S::BYTES;
    let (qs, ds) = (x.q.as_ptr(), x.d.as_ptr());
    let pairs_end = rows.start + rows.len() / 2 * 2;
    // SAFETY (all below): the caller's contract: rows lie inside `weights`, and the tile holds `nb` blocks of
    // `TILE` columns with `TILE` scales per block.
    unsafe {
        let start = starts::<S>(qs, nb);
        let offset = _mm256_set1_epi8(S::OFFSET);
        for r in (rows.start..pairs_end).step_by(2) {
            let z = _mm512_setzero_ps();
            let (mut a0, mut a1, mut a2, mut a3, mut a4, mut a5, mut a6, mut a7) =
                (z, z, z, z, z, z, z, z);
            let row0 = weights.as_ptr().add(r * row_bytes);
            let row1 = row0.add(row_bytes);
            for b in 0..nb {
                let (block0, block1) = (row0.add(b * S::BYTES), row1.add(b * S::BYTES));
                let u0 = _mm256_add_epi8(S::unpack(block0), offset);
                let u1 = _mm256_add_epi8(S::unpack(block1), offset);
                let u = _mm512_inserti64x4(_mm512_castsi256_si512(u0), u1, 1);
                let dw = _mm512_cvtph_ps(_mm256_set_m128i(f16_splat(block1), f16_splat(block0)));
                let q = qs.add(b * TILE * BLOCK);
                let (st, d) = (start.as_ptr().add(b * TILE), ds.add(b * TILE));
                macro_rules! column {
                    ($($k:literal $a:ident),*) => {$(
                        let column = _mm512_broadcast_i64x4(load(q.add($k * BLOCK)));
                        let dot = _mm512_dpbusd_epi32(*st.add($k), u, column);
                        let scale = _mm512_mul_ps(dw, _mm512_set1_ps(*d.add($k)));
                        $a = _mm512_fmadd_ps(scale, _mm512_cvtepi32_ps(dot), $a);
                    )*};
                }
                column!(0 a0, 1 a1, 2 a2, 3 a3, 4 a4, 5 a5, 6 a6, 7 a7);
            }
            for (k, a) in [a0, a1, a2, a3, a4, a5, a6, a7].into_iter().enumerate() {
                out(r, k, hsum(_mm512_castps512_ps256(a)));
                out(r + 1, k, hsum(high(a)));
            }
        }
        super::signed::<Dpbusd, S, TILE, F>(weights, row_bytes, pairs_end..rows.end, x, out);
    }
}

/// Per block and column, `-OFFSET · Σq` of each four of the column's bytes, in both halves of a register.
///
/// # Safety
/// `qs` holds `nb` blocks of [`TILE`] columns; the CPU has AVX-512 VNNI.
#[inline(always)]
unsafe fn starts<S: Signed>(qs: *const i8, nb: usize) -> Vec<__m512i> {
    // A loop, not a closure: a closure would not inherit the caller's target features, and its intrinsics
    // would stay calls.
    let mut starts = Vec::with_capacity(nb * TILE);
    // SAFETY: the caller's contract.
    unsafe {
        for i in 0..nb * TILE {
            starts.push(_mm512_broadcast_i64x4(start::<S>(qs.add(i * BLOCK))));
        }
    }
    starts
}

/// `-OFFSET · Σq` of each four of the 32 column bytes at `q`: a lane's starting sum.
///
/// # Safety
/// 32 readable bytes at `q`; the CPU has AVX-512 VNNI.
#[inline(always)]
unsafe fn start<S: Signed>(q: *const i8) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe {
        let sums = Dpbusd::dot(_mm256_set1_epi8(S::OFFSET), load(q));
        _mm256_sub_epi32(_mm256_setzero_si256(), sums)
    }
}

/// The block's f16 scale (its first two bytes) in all eight 16-bit lanes.
///
/// # Safety
/// Two readable bytes at `block`.
#[inline(always)]
unsafe fn f16_splat(block: *const u8) -> __m128i {
    // SAFETY: the caller's contract.
    unsafe { _mm_set1_epi16(i16::from_le_bytes(*(block as *const [u8; 2]))) }
}

/// The high eight lanes.
#[inline(always)]
unsafe fn high(a: __m512) -> __m256 {
    // SAFETY: AVX-512F, which the callers enable.
    unsafe { _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)) }
}

/// `out(r, k)` for the tile's `N` columns (2 to 7) and each row in `rows`, one row at a time with two columns
/// per 512-bit register (column `2p` in the low eight lanes, `2p + 1` in the high eight), so the weights are
/// read in one sequential pass, as decoding several sequences wants; an odd last column takes a 256-bit
/// register. The same offset and starting sums as [`signed_pairs`], so the same results.
///
/// # Safety
/// As [`super::dot_rows`], with AVX-512 VNNI; the tile has `N` columns.
// `b` indexes the row's blocks, the tile's blocks and the per-block tables alike; an index reads plainest.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
pub(super) unsafe fn column_pairs<S: Signed, const N: usize, F: FnMut(usize, usize, f32)>(
    weights: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    let nb = row_bytes / S::BYTES;
    let pairs = N / 2;
    let (qs, ds) = (x.q.as_ptr(), x.d.as_ptr());
    // SAFETY (all below): the caller's contract: rows lie inside `weights`, and the tile holds `nb` blocks of
    // `N` columns with `TILE` scales per block.
    unsafe {
        let offset = _mm256_set1_epi8(S::OFFSET);
        // Per block: each pair's starting sums and column scales, then the odd column's starting sums.
        let mut pair_start = Vec::with_capacity(nb * pairs);
        let mut pair_scale = Vec::with_capacity(nb * pairs);
        let mut odd_start = Vec::with_capacity(nb);
        for b in 0..nb {
            for p in 0..pairs {
                let q = qs.add((b * N + 2 * p) * BLOCK);
                pair_start.push(_mm512_inserti64x4(
                    _mm512_castsi256_si512(start::<S>(q)),
                    start::<S>(q.add(BLOCK)),
                    1,
                ));
                let d = ds.add(b * TILE + 2 * p);
                pair_scale.push(_mm512_castpd_ps(_mm512_insertf64x4(
                    _mm512_castpd256_pd512(_mm256_castps_pd(_mm256_set1_ps(*d))),
                    _mm256_castps_pd(_mm256_set1_ps(*d.add(1))),
                    1,
                )));
            }
            if N % 2 == 1 {
                odd_start.push(start::<S>(qs.add((b * N + N - 1) * BLOCK)));
            }
        }
        for r in rows {
            let z = _mm512_setzero_ps();
            let (mut c0, mut c1, mut c2, mut c3) = (z, z, z, z);
            let mut odd = _mm256_setzero_ps();
            let row = weights.as_ptr().add(r * row_bytes);
            for b in 0..nb {
                let block = row.add(b * S::BYTES);
                let u = _mm256_add_epi8(S::unpack(block), offset);
                let u2 = _mm512_broadcast_i64x4(u);
                let dw = _mm512_cvtph_ps(_mm256_broadcastsi128_si256(f16_splat(block)));
                let q = qs.add(b * N * BLOCK);
                let (st, sc) = (
                    pair_start.as_ptr().add(b * pairs),
                    pair_scale.as_ptr().add(b * pairs),
                );
                macro_rules! pair {
                    ($($p:literal $c:ident),*) => {$(
                        if $p < N / 2 {
                            let columns = _mm512_loadu_si512(q.add(2 * $p * BLOCK) as *const __m512i);
                            let dot = _mm512_dpbusd_epi32(*st.add($p), u2, columns);
                            let s = _mm512_mul_ps(dw, *sc.add($p));
                            $c = _mm512_fmadd_ps(s, _mm512_cvtepi32_ps(dot), $c);
                        }
                    )*};
                }
                pair!(0 c0, 1 c1, 2 c2, 3 c3);
                if N % 2 == 1 {
                    let column = load(q.add((N - 1) * BLOCK));
                    let dot = _mm256_dpbusd_epi32(odd_start[b], u, column);
                    let s = _mm256_mul_ps(
                        _mm512_castps512_ps256(dw),
                        _mm256_set1_ps(*ds.add(b * TILE + N - 1)),
                    );
                    odd = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(dot), odd);
                }
            }
            for (p, c) in [c0, c1, c2, c3].into_iter().enumerate().take(pairs) {
                out(r, 2 * p, hsum(_mm512_castps512_ps256(c)));
                out(r, 2 * p + 1, hsum(high(c)));
            }
            if N % 2 == 1 {
                out(r, N - 1, hsum(odd));
            }
        }
    }
}
