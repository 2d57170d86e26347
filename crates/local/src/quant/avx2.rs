//! AVX2 kernels: dot products of a run of weight rows with up to eight activation columns (each weight block is
//! unpacked once and multiplied with every column), and the activation quantiser compiled for AVX2. The integer
//! part of each block's product is `maddubs` on unsigned × signed bytes, as llama.cpp's AVX2 kernels do, or on
//! CPUs with AVX-512 VNNI one `vpdpbusd` (same 256-bit registers, same exact sums; there eight Q4_1 or Q5_1
//! columns also take weight rows in pairs); the f32 arithmetic is the same in both, so they agree bit for bit.
//! One generic body per family of formats (signed weights: Q8_0, Q4_0, Q5_0; unsigned with a minimum: Q4_1,
//! Q5_1), inlined into one function per instruction set. The K-quants' kernels are in [`kquant`]; each format
//! other than Q4_1 and Q8_0 gives, to the bit, what its portable kernel gives.

use std::arch::x86_64::*;

use super::{Format, QMatrix, Tile, BLOCK, TILE};

/// `$body` with `$N` a constant equal to `$n` (1 to 8; more counts as 8): one monomorphised kernel per column
/// count, so the loops over columns unroll and the accumulators stay in registers.
macro_rules! per_width {
    ($n:expr, $N:ident => $body:expr) => {
        match $n {
            1 => {
                const $N: usize = 1;
                $body
            }
            2 => {
                const $N: usize = 2;
                $body
            }
            3 => {
                const $N: usize = 3;
                $body
            }
            4 => {
                const $N: usize = 4;
                $body
            }
            5 => {
                const $N: usize = 5;
                $body
            }
            6 => {
                const $N: usize = 6;
                $body
            }
            7 => {
                const $N: usize = 7;
                $body
            }
            _ => {
                const $N: usize = TILE;
                $body
            }
        }
    };
}

mod kquant;
mod zmm;

/// Whether this CPU has everything the kernels use.
pub(super) fn available() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// Whether this CPU can also run the VNNI flavour of the dot products.
pub(super) fn vnni_available() -> bool {
    available()
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni")
}

/// Writes `out(r, k)` = weight row `r` · column `k` of `x` for each row in `rows`, with `vpdpbusd` if `vnni`,
/// else `maddubs` (the K-quants take `maddubs` either way, as llama.cpp's do).
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C ([`available`]), and if `vnni` AVX-512 VNNI ([`vnni_available`]).
/// `w` is in a block format (not F16 or BF16); `rows` lie inside it; `x` holds as many blocks per column (and
/// their scales, Q8_1 sums or Q8_K sums by sixteen).
pub(super) unsafe fn dot_rows<F: FnMut(usize, usize, f32)>(
    vnni: bool,
    w: &QMatrix,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    // SAFETY: the caller's contract.
    unsafe {
        if w.format.is_k() {
            kquant::dot_rows(w, rows, x, out)
        } else if vnni {
            dot_rows_vnni(w, rows, x, out)
        } else {
            dot_rows_avx2(w, rows, x, out)
        }
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_rows_avx2<F: FnMut(usize, usize, f32)>(
    w: &QMatrix,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    // SAFETY: the caller's contract; `Maddubs` needs only AVX2.
    unsafe { by_width::<Maddubs, F>(w, rows, x, out) }
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512vl,avx512vnni")]
unsafe fn dot_rows_vnni<F: FnMut(usize, usize, f32)>(
    w: &QMatrix,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    // SAFETY: the caller's contract; this function enables what `Dpbusd` needs.
    unsafe { by_width::<Dpbusd, F>(w, rows, x, out) }
}

/// The integer part of a block's product: for each group of four bytes, `Σ u[i] * s[i]` (u unsigned, s signed)
/// as one i32 lane. Exact for the values here (|u| ≤ 128, |s| ≤ 127), so both ways give the same sums.
trait Dot {
    /// # Safety
    /// Inlined only into functions that enable the instructions it uses.
    unsafe fn dot(u: __m256i, s: __m256i) -> __m256i;

    /// Whether eight Q4_1 columns take weight rows two at a time ([`q4_1_pairs`]): sixteen accumulators and
    /// their temporaries fit AVX-512's 32 vector registers, not AVX2's 16.
    const ROW_PAIRS: bool;

    /// Whether eight columns of the signed formats take two weight rows per 512-bit register ([`zmm`]).
    const ZMM: bool;
}

/// AVX2: byte pairs to i16 (at most 2 · 128 · 127, no saturation), then pairs of those to i32.
struct Maddubs;

impl Dot for Maddubs {
    const ROW_PAIRS: bool = false;
    const ZMM: bool = false;

    #[inline(always)]
    unsafe fn dot(u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: the trait's contract.
        unsafe { _mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(u, s)) }
    }
}

/// AVX-512 VNNI: the four products summed into an i32 lane in one instruction.
struct Dpbusd;

impl Dot for Dpbusd {
    const ROW_PAIRS: bool = true;
    const ZMM: bool = true;

    #[inline(always)]
    unsafe fn dot(u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: the trait's contract.
        unsafe { _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s) }
    }
}

/// The kernel for `w`'s format and the tile's column count.
#[inline(always)]
unsafe fn by_width<D: Dot, F: FnMut(usize, usize, f32)>(
    w: &QMatrix,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    let (weights, row_bytes) = (&w.bytes[..], w.row_bytes());
    // llama.cpp repacks Q4_0 matrices whose row count is a multiple of eight (see `portable_dot_rows`).
    let repacked = w.format == Format::Q4_0 && w.rows.is_multiple_of(8);
    // SAFETY: the caller's contract.
    unsafe {
        per_width!(x.n, N => match w.format {
            Format::Q4_1 if N == TILE && D::ROW_PAIRS => {
                unsigned_pairs::<D, Q4_1, F>(weights, row_bytes, rows, x, out)
            }
            Format::Q4_1 => unsigned::<D, Q4_1, N, F>(weights, row_bytes, rows, x, out),
            Format::Q5_1 if N == TILE && D::ROW_PAIRS => {
                unsigned_pairs::<D, Q5_1, F>(weights, row_bytes, rows, x, out)
            }
            Format::Q5_1 => unsigned::<D, Q5_1, N, F>(weights, row_bytes, rows, x, out),
            Format::Q8_0 if N == TILE && D::ZMM => {
                zmm::signed_pairs::<Q8_0, F>(weights, row_bytes, rows, x, out)
            }
            Format::Q8_0 if N >= 2 && D::ZMM => {
                zmm::column_pairs::<Q8_0, N, F>(weights, row_bytes, rows, x, out)
            }
            Format::Q8_0 => signed::<D, Q8_0, N, F>(weights, row_bytes, rows, x, out),
            Format::Q5_0 if N == TILE && D::ZMM => {
                zmm::signed_pairs::<Q5_0, F>(weights, row_bytes, rows, x, out)
            }
            Format::Q5_0 if N >= 2 && D::ZMM => {
                zmm::column_pairs::<Q5_0, N, F>(weights, row_bytes, rows, x, out)
            }
            Format::Q5_0 => signed::<D, Q5_0, N, F>(weights, row_bytes, rows, x, out),
            Format::Q4_0 if repacked => q4_0_repacked::<D, N, F>(weights, row_bytes, rows, x, out),
            Format::Q4_0 if N == TILE && D::ZMM => {
                zmm::signed_pairs::<Q4_0, F>(weights, row_bytes, rows, x, out)
            }
            Format::Q4_0 if N >= 2 && D::ZMM => {
                zmm::column_pairs::<Q4_0, N, F>(weights, row_bytes, rows, x, out)
            }
            Format::Q4_0 => signed::<D, Q4_0, N, F>(weights, row_bytes, rows, x, out),
            _ => unreachable!("the K-quants take `kquant::dot_rows`, F16 and BF16 the portable kernel"),
        })
    }
}

/// A block format whose 32 values unpack to one vector of bytes, in value order.
trait Unpack {
    const BYTES: usize;

    /// # Safety
    /// `block` holds one block of the format; the CPU has AVX2.
    unsafe fn unpack(block: *const u8) -> __m256i;
}

/// Unsigned values with an f16 minimum after the scale (Q8_1 columns).
struct Q4_1;
struct Q5_1;
/// Signed values (Q8_0 columns).
struct Q8_0;
struct Q4_0;
struct Q5_0;

impl Unpack for Q4_1 {
    const BYTES: usize = 20;

    #[inline(always)]
    unsafe fn unpack(block: *const u8) -> __m256i {
        // SAFETY: the trait's contract.
        unsafe { nibbles(block.add(4)) }
    }
}

impl Unpack for Q5_1 {
    const BYTES: usize = super::legacy::Q5_1_BYTES;

    #[inline(always)]
    unsafe fn unpack(block: *const u8) -> __m256i {
        // SAFETY: the trait's contract: the fifth bits at 4..8, the nibbles at 8..24.
        unsafe { _mm256_or_si256(nibbles(block.add(8)), fifth_bits(block.add(4))) }
    }
}

impl Unpack for Q8_0 {
    const BYTES: usize = 34;

    #[inline(always)]
    unsafe fn unpack(block: *const u8) -> __m256i {
        // SAFETY: the trait's contract.
        unsafe { load(block.add(2) as *const i8) }
    }
}

impl Unpack for Q4_0 {
    const BYTES: usize = super::legacy::Q4_0_BYTES;

    #[inline(always)]
    unsafe fn unpack(block: *const u8) -> __m256i {
        // SAFETY: the trait's contract.
        unsafe { _mm256_sub_epi8(nibbles(block.add(2)), _mm256_set1_epi8(8)) }
    }
}

impl Unpack for Q5_0 {
    const BYTES: usize = super::legacy::Q5_0_BYTES;

    #[inline(always)]
    unsafe fn unpack(block: *const u8) -> __m256i {
        // SAFETY: the trait's contract: the fifth bits at 2..6, the nibbles at 6..22.
        unsafe {
            let v = _mm256_or_si256(nibbles(block.add(6)), fifth_bits(block.add(2)));
            _mm256_sub_epi8(v, _mm256_set1_epi8(16))
        }
    }
}

/// 16 bytes of nibbles at `p` as 32 bytes: the low nibbles are values 0..16, the high nibbles 16..32.
///
/// # Safety
/// 16 readable bytes at `p`; the CPU has AVX2.
#[inline(always)]
unsafe fn nibbles(p: *const u8) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe {
        let packed = _mm_lddqu_si128(p as *const __m128i);
        _mm256_and_si256(
            _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed),
            _mm256_set1_epi8(0x0F),
        )
    }
}

/// The 32 bits at `p` (little-endian) as bytes, 0x10 where bit `j` is set: the Q5 types' fifth bits, by
/// llama.cpp's `bytes_from_bits_32` (each byte gets its bit's byte of the word, then all its other bits set).
///
/// # Safety
/// 4 readable bytes at `p`; the CPU has AVX2.
#[inline(always)]
unsafe fn fifth_bits(p: *const u8) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe {
        let bits = i32::from_le_bytes(*(p as *const [u8; 4]));
        let spread = _mm256_shuffle_epi8(
            _mm256_set1_epi32(bits),
            _mm256_set_epi64x(
                0x0303_0303_0303_0303,
                0x0202_0202_0202_0202,
                0x0101_0101_0101_0101,
                0,
            ),
        );
        let others = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe);
        let set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi8(-1));
        _mm256_and_si256(set, _mm256_set1_epi8(0x10))
    }
}

/// Multiplies one weight block's unsigned values `w` (already unpacked) with the block's 32 values of each of the
/// `N` columns at `q` and adds `scale_k * (float)Σ` into accumulator `k`, where `scale_k` = `scales[k]`
/// (`d_w * d_k`, see [`block_scales`]), taken as a broadcast operand of the multiply-add. `sign`, if given,
/// is the signed weights, whose signs move onto the columns' values (Q8_0: `w` is then their magnitudes).
/// Each accumulator is its own variable: an array indexed in a loop was kept in memory, which made every
/// multiply-add a load and a store.
macro_rules! columns {
    ($D:ty, $N:expr, $w:expr, $sign:expr, $q:expr, $scales:expr, [$($k:literal $a:ident),*]) => {
        $(
            if $k < $N {
                let q = load($q.add($k * BLOCK));
                let q = match $sign {
                    Some(w) => _mm256_sign_epi8(q, w),
                    None => q,
                };
                let dot = <$D>::dot($w, q);
                let scale = _mm256_set1_ps(*$scales.add($k));
                $a = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(dot), $a);
            }
        )*
    };
}

/// 32 bytes from `p`, unaligned. `_mm256_loadu_si256` is a copy through a stack temporary, and with debug
/// assertions (this crate's dev-profile build, which the main job runs) its overlap check stayed in the inner
/// loops; `lddqu` is a plain load.
#[inline(always)]
unsafe fn load(p: *const i8) -> __m256i {
    // SAFETY: the caller's: 32 readable bytes at `p`, and a CPU with AVX.
    unsafe { _mm256_lddqu_si256(p as *const __m256i) }
}

/// Eight f32s from `p`, unaligned, as [`load`].
#[inline(always)]
unsafe fn load_ps(p: *const f32) -> __m256 {
    // SAFETY: the caller's: 32 readable bytes at `p`, and a CPU with AVX.
    unsafe { _mm256_castsi256_ps(_mm256_lddqu_si256(p as *const __m256i)) }
}

/// The f16 at `p` in every lane, broadcast before converting: had the compiler seen a broadcast f32 it turned
/// the per-column `d * d_k` (one multiply with a broadcast load) into a scalar multiply and a broadcast.
#[inline(always)]
unsafe fn splat_f16(p: *const u8) -> __m256 {
    // SAFETY: the caller's: two readable bytes at `p`, and a CPU with F16C.
    unsafe { _mm256_cvtph_ps(_mm_set1_epi16(i16::from_le_bytes(*(p as *const [u8; 2])))) }
}

/// Column counts from which a row's scale products are worked out before its block loop ([`row_scales`]): the
/// block loop then takes each as the broadcast operand of a multiply-add instead of spending a multiply and a
/// broadcast per column. For fewer columns the extra pass over the row costs more than it saves.
const PRESCALE: usize = 4;

/// The block at `block`'s f16 scale times each column's at `ds` (eight columns per multiply: the same rounding
/// as one at a time).
///
/// # Safety
/// `block` starts with an f16, `ds` holds `TILE` f32s.
#[inline(always)]
unsafe fn block_scales(block: *const u8, ds: *const f32) -> [f32; TILE] {
    // SAFETY: the caller's contract; `__m256` and `[f32; 8]` are the same bytes.
    unsafe { std::mem::transmute(_mm256_mul_ps(splat_f16(block), load_ps(ds))) }
}

/// [`block_scales`] for every block of a row.
///
/// # Safety
/// `row` holds `scales.len()` blocks of `block_bytes` bytes, each starting with its f16 scale; `ds` holds
/// `TILE` scales per block.
#[inline(always)]
unsafe fn row_scales(
    row: *const u8,
    block_bytes: usize,
    ds: *const f32,
    scales: &mut [[f32; TILE]],
) {
    for (b, s) in scales.iter_mut().enumerate() {
        // SAFETY: the caller's contract.
        *s = unsafe { block_scales(row.add(b * block_bytes), ds.add(b * TILE)) };
    }
}

/// Q4_1 or Q5_1 weights × Q8_1 columns: `Σ_b d_w d_k Σ(w q) + m_w s_k`, the `m s` terms summed apart (fused
/// multiply-adds, as llama.cpp's compiled kernel fuses them, all columns' in one vector) and added after the
/// reduction.
// `b` indexes the row's blocks, the tile's blocks and `pre` alike; an index reads plainest.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn unsigned<D: Dot, U: Unpack, const N: usize, F: FnMut(usize, usize, f32)>(
    weights: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    let nb = row_bytes / U::BYTES;
    let (qs, ds, ss) = (x.q.as_ptr(), x.d.as_ptr(), x.s.as_ptr());
    let mut pre = vec![[0f32; TILE]; if N >= PRESCALE { nb } else { 0 }];
    // SAFETY (all below): the caller's contract: rows lie inside `weights`, and the tile holds `nb` blocks of
    // `N` columns with `TILE` scales and sums per block.
    unsafe {
        for r in rows {
            let z = _mm256_setzero_ps();
            let (mut a0, mut a1, mut a2, mut a3, mut a4, mut a5, mut a6, mut a7) =
                (z, z, z, z, z, z, z, z);
            // Lane k: column k's running sum of m * s.
            let mut mins = z;
            let row = weights.as_ptr().add(r * row_bytes);
            if N >= PRESCALE {
                row_scales(row, U::BYTES, ds, &mut pre);
            }
            for b in 0..nb {
                let block = row.add(b * U::BYTES);
                let here = block_scales(block, ds.add(b * TILE));
                let scales = if N >= PRESCALE {
                    pre[b].as_ptr()
                } else {
                    here.as_ptr()
                };
                let m = splat_f16(block.add(2));
                mins = _mm256_fmadd_ps(m, load_ps(ss.add(b * TILE)), mins);
                let w = U::unpack(block);
                let q = qs.add(b * N * BLOCK);
                let sign: Option<__m256i> = None;
                columns!(D, N, w, sign, q, scales, [0 a0, 1 a1, 2 a2, 3 a3, 4 a4, 5 a5, 6 a6, 7 a7]);
            }
            let m: [f32; TILE] = std::mem::transmute(mins);
            for (k, a) in [a0, a1, a2, a3, a4, a5, a6, a7]
                .into_iter()
                .enumerate()
                .take(N)
            {
                out(r, k, hsum(a) + m[k]);
            }
        }
    }
}

/// Eight columns as [`unsigned`], two weight rows per pass, so each column block loaded serves both (about a
/// tenth faster on a prompt); an odd last row goes through [`unsigned`]. Same arithmetic per row and column.
// `b` indexes the rows' blocks, the tile's blocks and the scale buffers alike; an index reads plainest.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn unsigned_pairs<D: Dot, U: Unpack, F: FnMut(usize, usize, f32)>(
    weights: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    const N: usize = TILE;
    let nb = row_bytes / U::BYTES;
    let (qs, ds, ss) = (x.q.as_ptr(), x.d.as_ptr(), x.s.as_ptr());
    let (mut pre0, mut pre1) = (vec![[0f32; TILE]; nb], vec![[0f32; TILE]; nb]);
    let pairs_end = rows.start + rows.len() / 2 * 2;
    // SAFETY (all below): as in `unsigned`.
    unsafe {
        for r in (rows.start..pairs_end).step_by(2) {
            let z = _mm256_setzero_ps();
            let (mut a0, mut a1, mut a2, mut a3, mut a4, mut a5, mut a6, mut a7) =
                (z, z, z, z, z, z, z, z);
            let (mut c0, mut c1, mut c2, mut c3, mut c4, mut c5, mut c6, mut c7) =
                (z, z, z, z, z, z, z, z);
            let (mut mins0, mut mins1) = (z, z);
            let row0 = weights.as_ptr().add(r * row_bytes);
            let row1 = row0.add(row_bytes);
            row_scales(row0, U::BYTES, ds, &mut pre0);
            row_scales(row1, U::BYTES, ds, &mut pre1);
            for b in 0..nb {
                let (block0, block1) = (row0.add(b * U::BYTES), row1.add(b * U::BYTES));
                let sums = load_ps(ss.add(b * TILE));
                mins0 = _mm256_fmadd_ps(splat_f16(block0.add(2)), sums, mins0);
                mins1 = _mm256_fmadd_ps(splat_f16(block1.add(2)), sums, mins1);
                let (w0, w1) = (U::unpack(block0), U::unpack(block1));
                let q = qs.add(b * N * BLOCK);
                let (sign, s0, s1): (Option<__m256i>, _, _) =
                    (None, pre0[b].as_ptr(), pre1[b].as_ptr());
                columns!(D, N, w0, sign, q, s0, [0 a0, 1 a1, 2 a2, 3 a3, 4 a4, 5 a5, 6 a6, 7 a7]);
                columns!(D, N, w1, sign, q, s1, [0 c0, 1 c1, 2 c2, 3 c3, 4 c4, 5 c5, 6 c6, 7 c7]);
            }
            let m0: [f32; TILE] = std::mem::transmute::<__m256, _>(mins0);
            let m1: [f32; TILE] = std::mem::transmute::<__m256, _>(mins1);
            for (k, a) in [a0, a1, a2, a3, a4, a5, a6, a7].into_iter().enumerate() {
                out(r, k, hsum(a) + m0[k]);
            }
            for (k, a) in [c0, c1, c2, c3, c4, c5, c6, c7].into_iter().enumerate() {
                out(r + 1, k, hsum(a) + m1[k]);
            }
        }
        unsigned::<D, U, N, F>(weights, row_bytes, pairs_end..rows.end, x, out);
    }
}

/// Q8_0, Q4_0 or Q5_0 weights × Q8_0 columns: `Σ_b d_w d_k Σ(w q)`, with `|w|` times `q` carrying `w`'s sign
/// (the unsigned operand must be the weights' magnitudes).
// `b` indexes the row's blocks, the tile's blocks and `pre` alike; an index reads plainest.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn signed<D: Dot, S: Unpack, const N: usize, F: FnMut(usize, usize, f32)>(
    weights: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    let nb = row_bytes / S::BYTES;
    let (qs, ds) = (x.q.as_ptr(), x.d.as_ptr());
    let mut pre = vec![[0f32; TILE]; if N >= PRESCALE { nb } else { 0 }];
    // SAFETY (all below): as in `unsigned`.
    unsafe {
        for r in rows {
            let z = _mm256_setzero_ps();
            let (mut a0, mut a1, mut a2, mut a3, mut a4, mut a5, mut a6, mut a7) =
                (z, z, z, z, z, z, z, z);
            let row = weights.as_ptr().add(r * row_bytes);
            if N >= PRESCALE {
                row_scales(row, S::BYTES, ds, &mut pre);
            }
            for b in 0..nb {
                let block = row.add(b * S::BYTES);
                let here = block_scales(block, ds.add(b * TILE));
                let scales = if N >= PRESCALE {
                    pre[b].as_ptr()
                } else {
                    here.as_ptr()
                };
                let w = S::unpack(block);
                let abs_w = _mm256_sign_epi8(w, w);
                let q = qs.add(b * N * BLOCK);
                columns!(D, N, abs_w, Some(w), q, scales, [0 a0, 1 a1, 2 a2, 3 a3, 4 a4, 5 a5, 6 a6, 7 a7]);
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
}

/// Q4_0 weights that llama.cpp repacks (a multiple of eight rows) × Q8_0 columns: its kernels add each block's
/// whole integer sum and scale it into one f32 accumulator per column, `acc = fma(Σ, d_w d_k, acc)`.
// `b` indexes the row's blocks and the tile's blocks alike; an index reads plainest.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn q4_0_repacked<D: Dot, const N: usize, F: FnMut(usize, usize, f32)>(
    weights: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    let nb = row_bytes / Q4_0::BYTES;
    let (qs, ds) = (x.q.as_ptr(), x.d.as_ptr());
    // SAFETY (all below): as in `unsigned`.
    unsafe {
        for r in rows {
            let mut acc = [0f32; N];
            let row = weights.as_ptr().add(r * row_bytes);
            for b in 0..nb {
                let block = row.add(b * Q4_0::BYTES);
                let scales = block_scales(block, ds.add(b * TILE));
                let w = Q4_0::unpack(block);
                let abs_w = _mm256_sign_epi8(w, w);
                let q = qs.add(b * N * BLOCK);
                for (k, a) in acc.iter_mut().enumerate() {
                    let column = _mm256_sign_epi8(load(q.add(k * BLOCK)), w);
                    let sum = hsum_i32(D::dot(abs_w, column));
                    *a = (sum as f32).mul_add(scales[k], *a);
                }
            }
            for (k, &a) in acc.iter().enumerate() {
                out(r, k, a);
            }
        }
    }
}

/// The eight i32 lanes of `v` added (exact: the order does not matter).
#[inline(always)]
unsafe fn hsum_i32(v: __m256i) -> i32 {
    // SAFETY: the caller's: a CPU with AVX2.
    unsafe {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
        _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)))
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_extractf128_ps(v, 1), _mm256_castps256_ps128(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)))
}

/// The portable products of F16 and BF16 weights ([`super::portable_dot_rows`]), compiled with AVX2 and FMA: the
/// same arithmetic, with vector instructions and one instruction for each fused multiply-add.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C ([`available`]).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn portable_dot_rows<F: FnMut(usize, usize, f32)>(
    w: &QMatrix,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut F,
) {
    super::portable_dot_rows(w, rows, x, out)
}

/// The portable quantiser, compiled with AVX2 so its rounding and loops use vector instructions.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C ([`available`]).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn quantize_block(src: &[f32], qs: &mut [i8]) -> (f32, i32) {
    super::quantize_block(src, qs)
}

/// The portable Q8_K quantiser, compiled with AVX2 (the same arithmetic: its rounding is exact).
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C ([`available`]).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn quantize_q8_k(src: &[f32], qs: &mut [i8], bsums: &mut [i16]) -> f32 {
    super::kquant::quantize_q8_k(src, qs, bsums)
}

/// Each value rounded to the nearest f16 (ties to even: F16C's rounding mode 0, which `half` uses for one
/// value too) and back to f32, eight at a time.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C ([`available`]).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn round_f16(x: &mut [f32]) {
    let mut parts = x.chunks_exact_mut(8);
    for part in &mut parts {
        // SAFETY: 8 f32s are read from and written to `part`.
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(part.as_ptr()));
            _mm256_storeu_ps(part.as_mut_ptr(), _mm256_cvtph_ps(h));
        }
    }
    for v in parts.into_remainder() {
        *v = super::round_f16(*v);
    }
}
