//! AVX2 products of K-quant weights (Q4_K, Q5_K, Q6_K) with Q8_K columns, to the bit what
//! [`super::super::kquant::dot_row`] computes.
//!
//! Every one of llama.cpp's paths is integer sums followed by a fixed chain of f32 steps, and the integer sums
//! are exact whatever their order. So each super-block is unpacked once into eight vectors of 32 unsigned
//! weights with their scales as i16 lanes, and for each column the integer lanes come from llama.cpp's own
//! AVX2 sequence (`maddubs`, then `madd` with the scales: lane `u` of a 32-weight vector holds weights
//! `4u..4u + 4`); the lanes, summed per pair of sub-blocks or across the vector, then go through exactly the f32
//! steps of the column's [`Path`]: `vec_dot`'s in the column's own eight lanes, the others' (one sum per column)
//! for all of a tile's columns in one vector, lane `k` for column `k`. llama.cpp's K-quant code has no VNNI
//! flavour, and neither has this.

use std::arch::x86_64::*;

use super::super::kquant::{hsum8, paths, Path, Q4_K_BYTES, Q5_K_BYTES, Q6_K_BYTES, QK_K};
use super::super::{Format, QMatrix, Tile, TILE};
use super::{load, load_ps};

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

/// Q4_K/Q5_K's 6-bit scales and minimums (the 12 bytes at `block[4..16]`), as llama.cpp unpacks them: the
/// scales broadcast to one vector per sub-block, the minimums as eight i16.
///
/// # Safety
/// `block` holds a Q4_K or Q5_K super-block; the CPU has AVX2.
#[inline(always)]
unsafe fn scales_and_mins(block: &[u8]) -> ([__m256i; 8], __m128i) {
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const TOP2: u32 = 0x0303_0303;
    let word = |i: usize| {
        u32::from_le_bytes([
            block[4 + 4 * i],
            block[5 + 4 * i],
            block[6 + 4 * i],
            block[7 + 4 * i],
        ])
    };
    let (a, b, c) = (word(0), word(1), word(2));
    // Bytes 0..8: the scales; 8..16: the minimums.
    let scales = [
        a & LOW6,
        (c & LOW4) | (((a >> 6) & TOP2) << 4),
        b & LOW6,
        ((c >> 4) & LOW4) | (((b >> 6) & TOP2) << 4),
    ];
    // SAFETY: the caller's: a CPU with AVX2.
    unsafe {
        let both = _mm256_cvtepu8_epi16(_mm_set_epi32(
            scales[3] as i32,
            scales[2] as i32,
            scales[1] as i32,
            scales[0] as i32,
        ));
        let low = _mm256_castsi256_si128(both);
        let scales = _mm256_set_m128i(low, low);
        let mut v = [_mm256_setzero_si256(); 8];
        for (j, v) in v.iter_mut().enumerate() {
            // i16 lane j everywhere: bytes 2j and 2j + 1 in every pair.
            let pick = _mm256_set1_epi16(i16::from_le_bytes([2 * j as u8, 2 * j as u8 + 1]));
            *v = _mm256_shuffle_epi8(scales, pick);
        }
        (v, _mm256_extracti128_si256(both, 1))
    }
}

/// The f16 at `block[at..at + 2]`, as f32 (F16C).
#[inline(always)]
unsafe fn f16_at(block: &[u8], at: usize) -> f32 {
    let bits = u16::from_le_bytes([block[at], block[at + 1]]);
    // SAFETY: the caller's: a CPU with F16C.
    unsafe { _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits)))) }
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
                d: f16_at(block, 0),
                dmin: f16_at(block, 2),
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
            // Each byte's next fifth bit in bit 0, then moved to bit 4 (16-bit shifts: the mask drops what
            // crosses bytes).
            let mut high = load(block.as_ptr().add(16) as *const i8);
            let mut w = [_mm256_setzero_si256(); 8];
            for p in 0..4 {
                let v = load(block.as_ptr().add(48 + 32 * p) as *const i8);
                let bit = _mm256_slli_epi16(_mm256_and_si256(high, one), 4);
                w[2 * p] = _mm256_or_si256(_mm256_and_si256(v, low), bit);
                high = _mm256_srli_epi16(high, 1);
                let bit = _mm256_slli_epi16(_mm256_and_si256(high, one), 4);
                w[2 * p + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), low), bit);
                high = _mm256_srli_epi16(high, 1);
            }
            Unpacked {
                w,
                sc,
                mins,
                sc16: _mm256_setzero_si256(),
                d: f16_at(block, 0),
                dmin: f16_at(block, 2),
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
                // Two high bits per value: bits 0-1 of `qh` for group 0, 2-3 for group 1, and so on.
                let hi0 = _mm256_slli_epi16(_mm256_and_si256(qh, two_bits), 4);
                let hi1 =
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), two_bits), 4);
                let hi2 =
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), two_bits), 4);
                let hi3 =
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), two_bits), 4);
                w[4 * h] = _mm256_or_si256(_mm256_and_si256(ql1, low), hi0);
                w[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(ql2, low), hi1);
                w[4 * h + 2] =
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), low), hi2);
                w[4 * h + 3] =
                    _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql2, 4), low), hi3);
            }
            let sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(p.add(192) as *const __m128i));
            // Vector `i` takes scale 2i on its first 16 bytes and 2i + 1 on the others: the i32 holding
            // i16 lanes 2i and 2i + 1 of `sc16` everywhere, then its first i16 over the low half, its second
            // over the high half.
            let halves = _mm256_set_epi64x(
                0x0302_0302_0302_0302,
                0x0302_0302_0302_0302,
                0x0100_0100_0100_0100,
                0x0100_0100_0100_0100,
            );
            let mut sc = [_mm256_setzero_si256(); 8];
            for (i, v) in sc.iter_mut().enumerate() {
                let pair = _mm256_permutevar8x32_epi32(sc16, _mm256_set1_epi32(i as i32));
                *v = _mm256_shuffle_epi8(pair, halves);
            }
            Unpacked {
                w,
                sc,
                mins: _mm_setzero_si128(),
                sc16,
                d: f16_at(block, 208),
                dmin: 0.0,
            }
        }
    }
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

/// The running sums of one row's products. `vec_dot` keeps eight lanes per column (and Q4_K four of minimums,
/// Q5_K one); the other paths keep one sum per column, so all columns' go in one vector (lane `k`: column `k`)
/// and each super-block's f32 steps take one instruction for the whole tile. Both of repacked Q4_K's kernels are
/// followed for every column; each column's path picks its result at the end.
struct Sums<const N: usize> {
    lanes: [__m256; N],
    mins: [__m128; N],
    q5_mins: [f32; N],
    grouped: __m256,
    grouped_min: __m256,
    whole: __m256,
    whole_min: __m256,
    tiled: __m256,
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
    let per_tile = path[..N].iter().any(|&p| p != Path::VecDot);
    // Only the four-column kernel needs each pair of sub-blocks' sum apart.
    let grouped = path[..N].contains(&Path::Repacked(true));
    // SAFETY (all below): the caller's contract: every row holds whole super-blocks, and the tile as many per
    // column (`N` of them) with `TILE` scales and 16 · `TILE` sums by sixteen per super-block.
    unsafe {
        for r in rows {
            let z = _mm256_setzero_ps();
            let mut s = Sums::<N> {
                lanes: [z; N],
                mins: [_mm_setzero_ps(); N],
                q5_mins: [0.0; N],
                grouped: z,
                grouped_min: z,
                whole: z,
                whole_min: z,
                tiled: z,
            };
            for (b, block) in w.row(r).chunks_exact(S::BYTES).enumerate() {
                let u = S::unpack(block);
                // Per column: four partial sums (`grouped`: one per pair of sub-blocks) and Q4_K/Q5_K's four
                // minimum products, for the per-tile paths.
                let mut part = [_mm_setzero_si128(); TILE];
                let mut mins = [_mm_setzero_si128(); TILE];
                for k in 0..N {
                    let slot = b * TILE + k;
                    let q = x.q.as_ptr().add((b * N + k) * QK_K);
                    let bsums = x.bsums.as_ptr().add(slot * 16);
                    let pairs = pair_sums(&u, q);
                    let mut sum = all(pairs);
                    if S::FORMAT == Format::Q6K {
                        // The weights' offset of 32, out of lane `l`: 32 · (sc[2l]·bsums[2l] + sc[2l+1]·bsums[2l+1]).
                        let offset = _mm256_madd_epi16(u.sc16, load_bsums(bsums));
                        sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(offset, 5));
                    } else {
                        mins[k] = min_products(u.mins, bsums);
                    }
                    if path[k] == Path::VecDot {
                        let yd = *x.d.get_unchecked(slot);
                        s.lanes[k] = _mm256_fmadd_ps(
                            _mm256_set1_ps(yd * u.d),
                            _mm256_cvtepi32_ps(sum),
                            s.lanes[k],
                        );
                        let dm = -yd * u.dmin;
                        if S::FORMAT == Format::Q4K {
                            s.mins[k] =
                                _mm_fmadd_ps(_mm_set1_ps(dm), _mm_cvtepi32_ps(mins[k]), s.mins[k]);
                        } else if S::FORMAT == Format::Q5K {
                            s.q5_mins[k] = dm.mul_add(hsum4(mins[k]) as f32, s.q5_mins[k]);
                        }
                    }
                    if per_tile {
                        part[k] = if grouped {
                            reduce_pairs(pairs)
                        } else {
                            _mm_add_epi32(
                                _mm256_castsi256_si128(sum),
                                _mm256_extracti128_si256(sum, 1),
                            )
                        };
                    }
                }
                if per_tile {
                    let yd = load_ps(x.d.as_ptr().add(b * TILE));
                    tile_block::<S, N>(
                        &mut s,
                        (repacked, grouped),
                        &u,
                        yd,
                        transpose(&part),
                        transpose(&mins),
                    );
                }
            }
            for (k, &p) in path.iter().enumerate().take(N) {
                let lanes: [f32; 8] = std::mem::transmute(s.lanes[k]);
                let mins: [f32; 4] = std::mem::transmute(s.mins[k]);
                let lane = |v: __m256| -> f32 { std::mem::transmute::<__m256, [f32; 8]>(v)[k] };
                out(
                    r,
                    k,
                    match (p, S::FORMAT) {
                        (Path::Repacked(true), _) => lane(s.grouped) - lane(s.grouped_min),
                        (Path::Repacked(false), _) => lane(s.whole) - lane(s.whole_min),
                        (Path::Tiled, _) => lane(s.tiled),
                        (Path::VecDot, Format::Q4K) => {
                            hsum8(lanes) + ((mins[0] + mins[2]) + (mins[1] + mins[3]))
                        }
                        (Path::VecDot, Format::Q5K) => hsum8(lanes) + s.q5_mins[k],
                        (Path::VecDot, _) => hsum8(lanes),
                    },
                );
            }
        }
    }
}

/// One super-block into the per-tile sums, every column at once: `part[p]` and `mins[p]` (lane `k`: column `k`)
/// are the four partial integer sums and minimum products, `yd` the columns' scales; `repacked`: the matrix is
/// repacked Q4_K, `grouped`: some column takes its four-column kernel. The f32 steps are those of
/// `kquant::q45_k_block` and `kquant::q6_k_block`, lane by lane.
#[inline(always)]
unsafe fn tile_block<S: Super, const N: usize>(
    s: &mut Sums<N>,
    (repacked, grouped): (bool, bool),
    u: &Unpacked,
    yd: __m256,
    part: [__m256i; 4],
    mins: [__m256i; 4],
) {
    // SAFETY: the caller's: a CPU with AVX2 and FMA.
    unsafe {
        let (sum, min) = (_mm256_cvtepi32_ps(all(part)), _mm256_cvtepi32_ps(all(mins)));
        let (d, dmin) = (_mm256_set1_ps(u.d), _mm256_set1_ps(u.dmin));
        if repacked {
            let (scale, min_scale) = (_mm256_mul_ps(d, yd), _mm256_mul_ps(dmin, yd));
            // `part` holds each pair's sum only where some column is `grouped` (see `rows_of`).
            if grouped {
                for p in 0..4 {
                    s.grouped = _mm256_fmadd_ps(_mm256_cvtepi32_ps(part[p]), scale, s.grouped);
                    s.grouped_min =
                        _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins[p]), min_scale, s.grouped_min);
                }
            }
            s.whole = _mm256_fmadd_ps(sum, scale, s.whole);
            s.whole_min = _mm256_fmadd_ps(min, min_scale, s.whole_min);
        } else if S::FORMAT == Format::Q6K {
            s.tiled = _mm256_fmadd_ps(_mm256_mul_ps(d, sum), yd, s.tiled);
        } else {
            let minus_dmin = _mm256_sub_ps(_mm256_setzero_ps(), dmin);
            let v = _mm256_fmadd_ps(minus_dmin, min, _mm256_mul_ps(d, sum));
            s.tiled = _mm256_fmadd_ps(v, yd, s.tiled);
        }
    }
}

/// Eight columns' four i32 lanes each to four vectors of eight columns: `out[p]` lane `k` = `v[k]` lane `p`.
#[inline(always)]
unsafe fn transpose(v: &[__m128i; TILE]) -> [__m256i; 4] {
    // SAFETY: the caller's: a CPU with AVX2.
    unsafe {
        let t: [__m256i; 4] = [
            _mm256_set_m128i(v[4], v[0]),
            _mm256_set_m128i(v[5], v[1]),
            _mm256_set_m128i(v[6], v[2]),
            _mm256_set_m128i(v[7], v[3]),
        ];
        let u0 = _mm256_unpacklo_epi32(t[0], t[1]);
        let u1 = _mm256_unpackhi_epi32(t[0], t[1]);
        let u2 = _mm256_unpacklo_epi32(t[2], t[3]);
        let u3 = _mm256_unpackhi_epi32(t[2], t[3]);
        [
            _mm256_unpacklo_epi64(u0, u2),
            _mm256_unpackhi_epi64(u0, u2),
            _mm256_unpacklo_epi64(u1, u3),
            _mm256_unpackhi_epi64(u1, u3),
        ]
    }
}

/// The four pair vectors' totals, `[Σ pairs[0], Σ pairs[1], Σ pairs[2], Σ pairs[3]]`.
#[inline(always)]
unsafe fn reduce_pairs(pairs: [__m256i; 4]) -> __m128i {
    // SAFETY: the caller's: a CPU with AVX2.
    unsafe {
        let h = _mm256_hadd_epi32(
            _mm256_hadd_epi32(pairs[0], pairs[1]),
            _mm256_hadd_epi32(pairs[2], pairs[3]),
        );
        _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1))
    }
}

/// Q4_K/Q5_K's minimum products from a column's sums by sixteen: lane `l` = m[2l]·s32[2l] + m[2l+1]·s32[2l+1],
/// where s32 are the sums by 32 (at most 32 · 127: no i16 overflow).
#[inline(always)]
unsafe fn min_products(mins: __m128i, bsums: *const i16) -> __m128i {
    // SAFETY: the caller's: sixteen sums at `bsums`, a CPU with AVX2.
    unsafe {
        let b = load_bsums(bsums);
        let s32 = _mm_hadd_epi16(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
        _mm_madd_epi16(mins, s32)
    }
}

/// The column at `q` times the unpacked weights, as four vectors of eight i32 lanes, one per pair of 32-weight
/// vectors: llama.cpp's `madd(scales, maddubs(weights, activations))`, added pair by pair.
#[inline(always)]
unsafe fn pair_sums(u: &Unpacked, q: *const i8) -> [__m256i; 4] {
    // SAFETY: the caller's: 256 readable bytes at `q`.
    unsafe {
        let mut pairs = [_mm256_setzero_si256(); 4];
        for (p, pair) in pairs.iter_mut().enumerate() {
            let (i, j) = (2 * p, 2 * p + 1);
            let a = _mm256_madd_epi16(u.sc[i], _mm256_maddubs_epi16(u.w[i], load(q.add(32 * i))));
            let b = _mm256_madd_epi16(u.sc[j], _mm256_maddubs_epi16(u.w[j], load(q.add(32 * j))));
            *pair = _mm256_add_epi32(a, b);
        }
        pairs
    }
}

/// The column's sixteen sums by sixteen at `bsums`.
#[inline(always)]
unsafe fn load_bsums(bsums: *const i16) -> __m256i {
    // SAFETY: the caller's: sixteen readable i16s.
    unsafe { _mm256_loadu_si256(bsums as *const __m256i) }
}

/// The four vectors added lane by lane.
#[inline(always)]
unsafe fn all(v: [__m256i; 4]) -> __m256i {
    // SAFETY: the caller's: a CPU with AVX2.
    unsafe { _mm256_add_epi32(_mm256_add_epi32(v[0], v[1]), _mm256_add_epi32(v[2], v[3])) }
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
