//! AVX2 kernels: dot products of a run of weight rows with up to four activation columns (each weight block is
//! unpacked once and multiplied with every column, `maddubs` on unsigned × signed bytes as llama.cpp's AVX2
//! kernels do), and the activation quantiser compiled for AVX2.

use std::arch::x86_64::*;

use super::{Cols, Format, BLOCK};

/// Whether this CPU has everything the kernels use.
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// Raw pointers to up to eight columns' quantised values, scales and (Q8_1) sums.
struct Ptrs<const N: usize> {
    q: [*const i8; N],
    d: [*const f32; N],
    s: [*const f32; N],
}

impl<const N: usize> Ptrs<N> {
    fn new(x: &Cols<'_>) -> Ptrs<N> {
        Ptrs {
            q: std::array::from_fn(|k| x.q[k].as_ptr()),
            d: std::array::from_fn(|k| x.d[k].as_ptr()),
            s: std::array::from_fn(|k| x.s[k].as_ptr()),
        }
    }
}

/// Writes `out(r, k)` = weight row `r` · column `k` for each row in `rows` (rows of `row_bytes` bytes from
/// `weights`).
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C ([`available`]). `weights` holds every row in `rows`, each of whole
/// blocks of `format`; every column in `x` holds as many blocks (and, for Q4_1, its sums).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_rows<F: FnMut(usize, usize, f32)>(
    format: Format,
    weights: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    x: &Cols<'_>,
    out: &mut F,
) {
    unsafe {
        match (format, x.n) {
            (Format::Q4_1, 1) => q4_1::<1, F>(weights, row_bytes, rows, x, out),
            (Format::Q4_1, 2) => q4_1::<2, F>(weights, row_bytes, rows, x, out),
            (Format::Q4_1, 3) => q4_1::<3, F>(weights, row_bytes, rows, x, out),
            (Format::Q4_1, 4) => q4_1::<4, F>(weights, row_bytes, rows, x, out),
            (Format::Q4_1, 5) => q4_1_wide::<5, F>(weights, row_bytes, rows, x, out),
            (Format::Q4_1, 6) => q4_1_wide::<6, F>(weights, row_bytes, rows, x, out),
            (Format::Q4_1, 7) => q4_1_wide::<7, F>(weights, row_bytes, rows, x, out),
            (Format::Q4_1, _) => q4_1_wide::<8, F>(weights, row_bytes, rows, x, out),
            (Format::Q8_0, 1) => q8_0::<1, F>(weights, row_bytes, rows, x, out),
            (Format::Q8_0, 2) => q8_0::<2, F>(weights, row_bytes, rows, x, out),
            (Format::Q8_0, 3) => q8_0::<3, F>(weights, row_bytes, rows, x, out),
            (Format::Q8_0, 4) => q8_0::<4, F>(weights, row_bytes, rows, x, out),
            (Format::Q8_0, 5) => q8_0_wide::<5, F>(weights, row_bytes, rows, x, out),
            (Format::Q8_0, 6) => q8_0_wide::<6, F>(weights, row_bytes, rows, x, out),
            (Format::Q8_0, 7) => q8_0_wide::<7, F>(weights, row_bytes, rows, x, out),
            (Format::Q8_0, _) => q8_0_wide::<8, F>(weights, row_bytes, rows, x, out),
        }
    }
}

// Each column `k` indexes several parallel arrays (accumulators, pointers); an index reads plainest.
#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1<const N: usize, F: FnMut(usize, usize, f32)>(
    weights: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    x: &Cols<'_>,
    out: &mut F,
) {
    let nb = row_bytes / 20;
    let p = Ptrs::<N>::new(x);
    let low = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    for r in rows {
        let mut acc = [_mm256_setzero_ps(); N];
        let mut mins = [0f32; N];
        let row = unsafe { weights.as_ptr().add(r * row_bytes) };
        for b in 0..nb {
            unsafe {
                let block = row.add(b * 20);
                // d and m are adjacent f16s: convert both at once.
                let dm = _mm_cvtph_ps(_mm_cvtsi32_si128((block as *const i32).read_unaligned()));
                let d = _mm_cvtss_f32(dm);
                let m = _mm_cvtss_f32(_mm_movehdup_ps(dm));
                let packed = _mm_loadu_si128(block.add(4) as *const __m128i);
                // Low nibbles are values 0..16, high nibbles 16..32.
                let w = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), low);
                for k in 0..N {
                    let q = _mm256_loadu_si256(p.q[k].add(b * BLOCK) as *const __m256i);
                    let dot = _mm256_madd_epi16(ones, _mm256_maddubs_epi16(w, q));
                    let scale = _mm256_set1_ps(d * *p.d[k].add(b));
                    acc[k] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(dot), acc[k]);
                    // Fused, as llama.cpp's compiled kernel fuses it.
                    mins[k] = m.mul_add(*p.s[k].add(b), mins[k]);
                }
            }
        }
        for k in 0..N {
            out(r, k, hsum(acc[k]) + mins[k]);
        }
    }
}

#[allow(clippy::needless_range_loop)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0<const N: usize, F: FnMut(usize, usize, f32)>(
    weights: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    x: &Cols<'_>,
    out: &mut F,
) {
    let nb = row_bytes / 34;
    let p = Ptrs::<N>::new(x);
    let ones = _mm256_set1_epi16(1);
    for r in rows {
        let mut acc = [_mm256_setzero_ps(); N];
        let row = unsafe { weights.as_ptr().add(r * row_bytes) };
        for b in 0..nb {
            unsafe {
                let block = row.add(b * 34);
                let bits = i32::from((block as *const u16).read_unaligned());
                let d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits)));
                let w = _mm256_loadu_si256(block.add(2) as *const __m256i);
                // maddubs wants one unsigned operand: |w| times q with w's sign moved onto q.
                let abs_w = _mm256_sign_epi8(w, w);
                for k in 0..N {
                    let q = _mm256_loadu_si256(p.q[k].add(b * BLOCK) as *const __m256i);
                    let signed_q = _mm256_sign_epi8(q, w);
                    let dot = _mm256_madd_epi16(ones, _mm256_maddubs_epi16(abs_w, signed_q));
                    let scale = _mm256_set1_ps(d * *p.d[k].add(b));
                    acc[k] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(dot), acc[k]);
                }
            }
        }
        for k in 0..N {
            out(r, k, hsum(acc[k]));
        }
    }
}

/// Five to eight columns: each column's accumulator is its own variable (an array indexed in a loop was kept
/// in memory, which made every multiply-add a load and a store), the columns' blocks are laid out block by
/// block behind one pointer, and the minimum terms of all columns are one vector multiply-add per block.
/// Same arithmetic per column as [`q4_1`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_wide<const N: usize, F: FnMut(usize, usize, f32)>(
    weights: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    x: &Cols<'_>,
    out: &mut F,
) {
    let nb = row_bytes / 20;
    let p = Ptrs::<N>::new(x);
    // SAFETY: every column holds `nb` blocks, scales and sums (the caller's contract).
    let (scales, sums, qs) = unsafe {
        (
            by_block(&p.d, nb),
            by_block(&p.s, nb),
            blocks_by_block(&p.q, nb),
        )
    };
    let low = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    for r in rows {
        let z = _mm256_setzero_ps();
        let (mut a0, mut a1, mut a2, mut a3, mut a4, mut a5, mut a6, mut a7) =
            (z, z, z, z, z, z, z, z);
        // Lane k: column k's running sum of m * s, each step fused as in `q4_1`.
        let mut mins = z;
        let row = unsafe { weights.as_ptr().add(r * row_bytes) };
        for b in 0..nb {
            unsafe {
                let block = row.add(b * 20);
                let dm = _mm_cvtph_ps(_mm_cvtsi32_si128((block as *const i32).read_unaligned()));
                let d = _mm_cvtss_f32(dm);
                let m = _mm256_set1_ps(_mm_cvtss_f32(_mm_movehdup_ps(dm)));
                mins = _mm256_fmadd_ps(m, _mm256_loadu_ps(sums.as_ptr().add(b * 8)), mins);
                let packed = _mm_loadu_si128(block.add(4) as *const __m128i);
                let w = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), low);
                let base = qs.as_ptr().add(b * N * BLOCK);
                let sc = scales.as_ptr().add(b * 8);
                macro_rules! col {
                    ($k:literal, $a:ident) => {
                        if $k < N {
                            let q = _mm256_loadu_si256(base.add($k * BLOCK) as *const __m256i);
                            let dot = _mm256_madd_epi16(ones, _mm256_maddubs_epi16(w, q));
                            let scale = _mm256_set1_ps(d * *sc.add($k));
                            $a = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(dot), $a);
                        }
                    };
                }
                col!(0, a0);
                col!(1, a1);
                col!(2, a2);
                col!(3, a3);
                col!(4, a4);
                col!(5, a5);
                col!(6, a6);
                col!(7, a7);
            }
        }
        let mut m = [0f32; 8];
        unsafe { _mm256_storeu_ps(m.as_mut_ptr(), mins) };
        for (k, a) in [a0, a1, a2, a3, a4, a5, a6, a7]
            .into_iter()
            .enumerate()
            .take(N)
        {
            out(r, k, hsum(a) + m[k]);
        }
    }
}

/// Five to eight columns of Q8_0, laid out as in [`q4_1_wide`]; same arithmetic per column as [`q8_0`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_wide<const N: usize, F: FnMut(usize, usize, f32)>(
    weights: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    x: &Cols<'_>,
    out: &mut F,
) {
    let nb = row_bytes / 34;
    let p = Ptrs::<N>::new(x);
    // SAFETY: every column holds `nb` blocks and scales (the caller's contract).
    let (scales, qs) = unsafe { (by_block(&p.d, nb), blocks_by_block(&p.q, nb)) };
    let ones = _mm256_set1_epi16(1);
    for r in rows {
        let z = _mm256_setzero_ps();
        let (mut a0, mut a1, mut a2, mut a3, mut a4, mut a5, mut a6, mut a7) =
            (z, z, z, z, z, z, z, z);
        let row = unsafe { weights.as_ptr().add(r * row_bytes) };
        for b in 0..nb {
            unsafe {
                let block = row.add(b * 34);
                let bits = i32::from((block as *const u16).read_unaligned());
                let d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits)));
                let w = _mm256_loadu_si256(block.add(2) as *const __m256i);
                let abs_w = _mm256_sign_epi8(w, w);
                let base = qs.as_ptr().add(b * N * BLOCK);
                let sc = scales.as_ptr().add(b * 8);
                macro_rules! col {
                    ($k:literal, $a:ident) => {
                        if $k < N {
                            let q = _mm256_loadu_si256(base.add($k * BLOCK) as *const __m256i);
                            let signed_q = _mm256_sign_epi8(q, w);
                            let dot =
                                _mm256_madd_epi16(ones, _mm256_maddubs_epi16(abs_w, signed_q));
                            let scale = _mm256_set1_ps(d * *sc.add($k));
                            $a = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(dot), $a);
                        }
                    };
                }
                col!(0, a0);
                col!(1, a1);
                col!(2, a2);
                col!(3, a3);
                col!(4, a4);
                col!(5, a5);
                col!(6, a6);
                col!(7, a7);
            }
        }
        for (k, a) in [a0, a1, a2, a3, a4, a5, a6, a7]
            .into_iter()
            .enumerate()
            .take(N)
        {
            out(r, k, hsum(a));
        }
    }
}

/// Each column's per-block activation scales (and, for Q8_1, sums) laid out block by block, eight to a block,
/// so one load brings a block's values for every column.
///
/// # Safety
/// Every pointer in `cols` points at `nb` values.
unsafe fn by_block<const N: usize>(cols: &[*const f32; N], nb: usize) -> Vec<f32> {
    let mut out = vec![0f32; nb * 8];
    for (k, &col) in cols.iter().enumerate() {
        for b in 0..nb {
            // SAFETY: `b < nb`, and the column holds `nb` values.
            out[b * 8 + k] = unsafe { *col.add(b) };
        }
    }
    out
}

/// The columns' quantised values block by block (`(b * N + k) * 32`), behind one pointer.
///
/// # Safety
/// Every pointer in `cols` points at `nb * 32` values.
unsafe fn blocks_by_block<const N: usize>(cols: &[*const i8; N], nb: usize) -> Vec<i8> {
    let mut out = vec![0i8; nb * N * BLOCK];
    for (k, &col) in cols.iter().enumerate() {
        for b in 0..nb {
            // SAFETY: `b < nb`, and the column holds `nb` blocks of 32 values.
            let src = unsafe { std::slice::from_raw_parts(col.add(b * BLOCK), BLOCK) };
            out[(b * N + k) * BLOCK..(b * N + k + 1) * BLOCK].copy_from_slice(src);
        }
    }
    out
}

#[target_feature(enable = "avx2,fma,f16c")]
fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

/// The portable quantiser, compiled with AVX2 so its rounding and loops use vector instructions.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C ([`available`]).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn quantize_block(src: &[f32], qs: &mut [i8]) -> (f32, i32) {
    super::quantize_block(src, qs)
}
