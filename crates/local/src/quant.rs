//! Quantised weights kept as the GGUF stores them, activations quantised the way llama.cpp does it, and the
//! matrix products between them.
//!
//! - **Weights.** Q4_1 (20-byte blocks: f16 scale `d`, f16 minimum `m`, 32 four-bit values), Q8_0 (34-byte
//!   blocks: f16 scale, 32 signed bytes), the K-quants Q4_K, Q5_K and Q6_K (super-blocks of 256, see
//!   [`kquant`]), F16 and BF16 (see [`float`]) and Q4_0, Q5_0 and Q5_1 (see [`legacy`]), read straight from
//!   the file's bytes; F32 for the norms.
//! - **Activations.** Each weight format multiplies with the format llama.cpp pairs it with: Q8_1 for Q4_1 and
//!   Q5_1 (scale and `d * Σq` per block), Q8_0 for Q8_0, Q4_0 and Q5_0, Q8_K for the K-quants (an f32 scale and sums
//!   by sixteen per 256 values); F16 and BF16 weights take activations rounded to their type. Q8_0 and Q8_1
//!   scales are rounded to f16 as llama.cpp stores them, and values round half to even (its SIMD quantiser), so
//!   the integer sums are the ones llama.cpp computes.
//! - **Kernels.** Every block format has an AVX2 kernel with FMA and F16C ([`avx2`]), chosen at run time: the
//!   legacy formats take their integer sums from AVX-512 VNNI where the CPU has it (there two or more columns
//!   of Q8_0, Q5_0 or Q4_0 weights take two rows or two columns per 512-bit register, see `avx2::zmm`), the
//!   K-quants from `maddubs` as llama.cpp's do. Q4_1 and Q8_0 fall back to a scalar kernel with the same integer sums; the other formats
//!   to one portable kernel that follows llama.cpp's order of f32 operations exactly (so they equal llama.cpp on
//!   every CPU), which their AVX2 kernels equal bit for bit (tested on random blocks). F16 and BF16 take the
//!   portable kernel, compiled once more with AVX2 and FMA. A product takes up to eight activation columns per
//!   pass over a weight row, so a batch of sequences (or a prompt) reads each weight once per eight columns;
//!   rows are spread over the rayon pool the caller installs. F16 and BF16 products whose every column llama.cpp
//!   multiplies with tinyBLAS (a prompt, an image's patches) go block by block instead: blocks of rows by blocks
//!   of columns spread over the pool, four rows by three columns at a time within a block (see
//!   `float::gemm_block`), each output's arithmetic unchanged. Activations and products live in buffers the
//!   forward pass reuses (see [`crate::scratch`]).

use half::f16;
use rayon::prelude::*;

use crate::scratch::{self, Buf};

/// Values per quantisation block, in every format here.
pub(crate) const BLOCK: usize = 32;

#[cfg(target_arch = "x86_64")]
mod avx2;
mod float;
mod kquant;
mod legacy;

/// A weight format this engine multiplies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Q4_1,
    Q8_0,
    Q4K,
    Q5K,
    Q6K,
    F16,
    BF16,
    Q5_0,
    Q5_1,
    Q4_0,
}

impl Format {
    /// Every format the kernels take as stored, in the order messages list them.
    pub(crate) const ALL: [Format; 10] = [
        Format::Q4_0,
        Format::Q4_1,
        Format::Q5_0,
        Format::Q5_1,
        Format::Q8_0,
        Format::Q4K,
        Format::Q5K,
        Format::Q6K,
        Format::F16,
        Format::BF16,
    ];

    pub(crate) fn block_bytes(self) -> usize {
        match self {
            Format::Q4_1 => 20,
            Format::Q8_0 => 34,
            Format::Q4K => kquant::Q4_K_BYTES,
            Format::Q5K => kquant::Q5_K_BYTES,
            Format::Q6K => kquant::Q6_K_BYTES,
            // Thirty-two 2-byte values, taken as a block so rows divide as the other formats' do.
            Format::F16 | Format::BF16 => 2 * BLOCK,
            Format::Q5_0 => legacy::Q5_0_BYTES,
            Format::Q5_1 => legacy::Q5_1_BYTES,
            Format::Q4_0 => legacy::Q4_0_BYTES,
        }
    }

    /// Weights per block: 32, or 256 for the K-quants' super-blocks.
    pub(crate) fn block_values(self) -> usize {
        if self.is_k() {
            kquant::QK_K
        } else {
            BLOCK
        }
    }

    /// Bytes of a row of `cols` weights. F16 and BF16 rows take any width, as ggml's do; the block formats'
    /// rows hold whole blocks.
    pub(crate) fn row_bytes(self, cols: usize) -> usize {
        if self.is_float() {
            2 * cols
        } else {
            cols / self.block_values() * self.block_bytes()
        }
    }

    /// Whether the weights multiply with Q8_K activations (blocks of 256 with sums by sixteen).
    fn is_k(self) -> bool {
        matches!(self, Format::Q4K | Format::Q5K | Format::Q6K)
    }

    /// Whether the weights are 16-bit floats, multiplied with activations rounded to the same type.
    fn is_float(self) -> bool {
        matches!(self, Format::F16 | Format::BF16)
    }

    /// Whether the scalar fallback is the portable kernel ([`portable_dot_rows`]), which gives llama.cpp's AVX2
    /// results on every CPU (all but Q4_1 and Q8_0, whose scalar kernel follows ggml's generic code).
    fn is_portable(self) -> bool {
        self.is_k() || self.is_float() || matches!(self, Format::Q4_0 | Format::Q5_0 | Format::Q5_1)
    }

    /// Whether the activations carry Q8_1's `d · Σq` per block (for the weights' minimums).
    fn has_min(self) -> bool {
        matches!(self, Format::Q4_1 | Format::Q5_1)
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Format::Q4_1 => "Q4_1",
            Format::Q8_0 => "Q8_0",
            Format::Q4K => "Q4_K",
            Format::Q5K => "Q5_K",
            Format::Q6K => "Q6_K",
            Format::F16 => "F16",
            Format::BF16 => "BF16",
            Format::Q5_0 => "Q5_0",
            Format::Q5_1 => "Q5_1",
            Format::Q4_0 => "Q4_0",
        }
    }
}

/// What the local engine reads, for messages: the formats its kernels take, and those it requantises.
pub(crate) fn supported_types() -> String {
    let names: Vec<&str> = Format::ALL.iter().map(|f| f.name()).collect();
    format!(
        "{} as stored, and Q2_K, Q3_K and F32 matrices requantised to Q8_0",
        names.join(", ")
    )
}

/// A `rows × cols` weight matrix in a block format, row-major, bytes exactly as stored in the GGUF.
pub(crate) struct QMatrix {
    pub format: Format,
    pub rows: usize,
    pub cols: usize,
    bytes: Vec<u8>,
}

impl QMatrix {
    /// `bytes` must hold `rows` rows of [`Format::row_bytes`]; `cols` must be a multiple of the block but for
    /// F16 and BF16 (the loader checks both).
    pub(crate) fn new(format: Format, rows: usize, cols: usize, bytes: Vec<u8>) -> QMatrix {
        debug_assert!(format.is_float() || cols.is_multiple_of(format.block_values()));
        debug_assert_eq!(bytes.len(), rows * format.row_bytes(cols));
        QMatrix {
            format,
            rows,
            cols,
            bytes,
        }
    }

    fn row_bytes(&self) -> usize {
        self.format.row_bytes(self.cols)
    }

    fn row(&self, r: usize) -> &[u8] {
        let n = self.row_bytes();
        &self.bytes[r * n..(r + 1) * n]
    }

    /// Row `r` as f32 (an embedding lookup), computed as llama.cpp's `dequantize_row_*` computes it.
    pub(crate) fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        if self.format.is_float() {
            float::dequantize(self.format, self.row(r), &mut out[..self.cols]);
            return;
        }
        let bb = self.format.block_bytes();
        for (block, dst) in self
            .row(r)
            .chunks_exact(bb)
            .zip(out.chunks_exact_mut(self.format.block_values()))
        {
            let d = half(block, 0);
            match self.format {
                Format::Q4K => kquant::dequantize_q4_k(block, dst),
                Format::Q5K => kquant::dequantize_q5_k(block, dst),
                Format::Q6K => kquant::dequantize_q6_k(block, dst),
                Format::F16 | Format::BF16 => float::dequantize(self.format, block, dst),
                Format::Q4_0 | Format::Q5_0 | Format::Q5_1 => {
                    legacy::dequantize(self.format, block, dst)
                }
                Format::Q4_1 => {
                    let m = half(block, 2);
                    for j in 0..16 {
                        dst[j] = d * f32::from(block[4 + j] & 0x0F) + m;
                        dst[j + 16] = d * f32::from(block[4 + j] >> 4) + m;
                    }
                }
                Format::Q8_0 => {
                    for (x, &q) in dst.iter_mut().zip(&block[2..]) {
                        *x = d * f32::from(q as i8);
                    }
                }
            }
        }
    }

    /// `out[c * rows + r] = row r · column c` for every activation column.
    #[cfg(test)]
    pub(crate) fn matmul(&self, x: &Acts, out: &mut [f32]) {
        matmul_many(&[(self, x, 0)], out, self.rows);
    }

    /// Quantises f32 values to Q8_0 the way llama.cpp's reference quantiser does (for weights stored in a
    /// format the kernels do not take).
    pub(crate) fn quantize_q8_0(values: &[f32], rows: usize, cols: usize) -> QMatrix {
        let mut bytes = Vec::with_capacity(values.len() / BLOCK * 34);
        for block in values.chunks_exact(BLOCK) {
            let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
            let d = amax / 127.0;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            bytes.extend(f16::from_f32(d).to_bits().to_le_bytes());
            bytes.extend(block.iter().map(|v| (v * id).round() as i8 as u8));
        }
        QMatrix::new(Format::Q8_0, rows, cols, bytes)
    }
}

/// Several products at once, each `(weights, activations, row offset)`, into `out`, whose columns are
/// `stride` values wide: `out[c * stride + offset + r]`. One parallel loop covers all of them, so a layer's
/// Q, K and V (or gate and up) cost one hand-off to the thread pool.
pub(crate) fn matmul_many(jobs: &[(&QMatrix, &Acts, usize)], out: &mut [f32], stride: usize) {
    let kernel = Kernel::detect();
    let threads = rayon::current_num_threads();
    let mut tasks = Vec::new();
    for (j, (w, x, _)) in jobs.iter().enumerate() {
        assert_eq!(x.cols, w.cols, "activation width must match the weights");
        assert!(out.len() >= x.n * stride);
        if kernel.gemm(w, x) {
            // Blocks of rows by blocks of columns, each multiplied as a whole (see `float::gemm_block`).
            for start in (0..w.rows).step_by(float::GEMM_ROWS) {
                for from in (0..x.n).step_by(float::GEMM_COLS) {
                    let rows = start..(start + float::GEMM_ROWS).min(w.rows);
                    tasks.push((j, rows, Some(from..(from + float::GEMM_COLS).min(x.n))));
                }
            }
            continue;
        }
        // Enough chunks to keep every thread busy and even out finishing times, few enough that the
        // per-task cost stays small next to the work.
        let chunk = w.rows.div_ceil(threads * 4).max(16);
        for start in (0..w.rows).step_by(chunk) {
            tasks.push((j, start..(start + chunk).min(w.rows), None));
        }
    }
    let out = SharedOut(out.as_mut_ptr());
    tasks.into_par_iter().for_each(|(j, rows, cols)| {
        let (w, x, offset) = jobs[j];
        let out = &out;
        if let Some(cols) = cols {
            let mut write = |r: usize, c: usize, v: f32| {
                // SAFETY: as below: each task writes only its own block of its own product.
                unsafe {
                    *out.0
                        .add((cols.start + c) * stride + offset + rows.start + r) = v
                };
            };
            let k = w.cols;
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Kernel::gemm` holds only for `Kernel::Avx2` (AVX2, FMA and F16C) and F16 or BF16 weights,
            // whose width is a multiple of 8 and row count a multiple of four, as each block's is.
            unsafe {
                float::gemm_block(
                    w.format,
                    &w.bytes[rows.start * w.row_bytes()..rows.end * w.row_bytes()],
                    &x.f[cols.start * k..cols.end * k],
                    k,
                    &mut write,
                )
            };
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (k, &mut write);
            return;
        }
        for t in 0..x.n.div_ceil(TILE) {
            let mut write = |r: usize, k: usize, v: f32| {
                // SAFETY: each task writes only its own rows of its own product, so no two tasks touch one
                // cell, and `out` outlives the parallel loop.
                unsafe { *out.0.add((t * TILE + k) * stride + offset + r) = v };
            };
            kernel.dot_rows(w, rows.clone(), &x.tile(t), &mut write);
        }
    });
}

/// `out[i * n + j]` = row `i` of `a` · row `j` of `b` (`n` rows of `k` values each), every sum as tinyBLAS
/// adds it up (one 8-lane chain of fused multiply-adds, then `hsum`), block by block over the rayon pool as
/// [`matmul_many`] multiplies F16 weights. `a` must hold a multiple of four rows and `k` be a multiple of 8 (pad
/// both with zeros: a zero lane leaves a sum that starts at +0 unchanged). `None` on CPUs without AVX2.
pub(crate) fn tinyblas_f32(a: &[f32], b: &[f32], k: usize) -> Option<Vec<f32>> {
    assert!(k.is_multiple_of(8) && a.len().is_multiple_of(4 * k) && b.len().is_multiple_of(k));
    #[cfg(target_arch = "x86_64")]
    if Kernel::detect() == Kernel::Avx2 {
        let (m, n) = (a.len() / k, b.len() / k);
        let mut out = vec![0f32; m * n];
        let tasks: Vec<(usize, usize)> = (0..m)
            .step_by(float::GEMM_ROWS)
            .flat_map(|i| (0..n).step_by(float::GEMM_COLS).map(move |j| (i, j)))
            .collect();
        let shared = SharedOut(out.as_mut_ptr());
        tasks.into_par_iter().for_each(|(i, j)| {
            let shared = &shared;
            let (i1, j1) = ((i + float::GEMM_ROWS).min(m), (j + float::GEMM_COLS).min(n));
            let mut write = |r: usize, c: usize, v: f32| {
                // SAFETY: each task writes only its own block of `out`, which outlives the loop.
                unsafe { *shared.0.add((i + r) * n + j + c) = v };
            };
            // SAFETY: `Kernel::Avx2` is only chosen on CPUs with AVX2, FMA and F16C; blocks of `a` start at
            // multiples of 64 rows, so each holds a multiple of four rows.
            unsafe { float::gemm_f32(&a[i * k..i1 * k], &b[j * k..j1 * k], k, &mut write) };
        });
        return Some(out);
    }
    None
}

/// The output pointer shared by the row tasks of one product; they write disjoint cells.
struct SharedOut(*mut f32);
// SAFETY: see the write in `QMatrix::matmul`: tasks write disjoint cells of a buffer that outlives them.
unsafe impl Sync for SharedOut {}

/// `n` activation vectors of width `cols`, quantised for one weight format: 32 signed bytes per block with an
/// f32 scale (already rounded to f16) and, for Q8_1, the f16-rounded `d * Σq`.
///
/// Laid out for the kernels, in tiles of [`TILE`] columns (the last may be narrower): within a tile, block by
/// block, its columns' 32 values side by side, so one pointer walks every column of a tile; and [`TILE`]
/// scales (and sums) per block, one per column (zero past the last), so one load brings a block's for all.
///
/// For the K-quants the blocks are Q8_K's: 256 values, an f32 scale (not rounded) and sixteen sums of sixteen
/// values each (`bsums`, sixteen per slot).
pub(crate) struct Acts {
    pub n: usize,
    pub cols: usize,
    qs: Buf<i8>,
    d: Buf<f32>,
    s: Buf<f32>,
    bsums: Buf<i16>,
    /// For F16 and BF16 weights: the columns one after another, rounded to that type.
    f: Vec<f32>,
    /// Per column, the product llama.cpp would compute it in (see [`Batch`]).
    batch: Vec<Batch>,
}

/// `v` as `parts` runs of `size` values, or `parts` empty runs where `v` is empty (an array the format does not
/// use).
fn split_or_empty<T>(v: &mut [T], size: usize, parts: usize) -> Vec<&mut [T]> {
    if v.is_empty() {
        return (0..parts).map(|_| <&mut [T]>::default()).collect();
    }
    v.chunks_mut(size).collect()
}

/// Where llama.cpp, running one sequence alone, multiplies an activation column: as column `index` of a
/// product of `size` columns (a prompt's chunk; 1 for a decoded token). Q8_0 and Q4_1 products are the same
/// whatever it is; the K-quants' are not, as llama.cpp picks its kernel by the column count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Batch {
    pub size: usize,
    pub index: usize,
}

impl Batch {
    /// A column multiplied on its own.
    pub(crate) const ALONE: Batch = Batch { size: 1, index: 0 };
}

/// Which of llama.cpp's kernels that depend on the column count a model's layers use: the K-quants' tiled one
/// (for eight columns or more; Q5_K, Q6_K and Q4_K not repacked), the repacked Q4_K ones, and llamafile's
/// `tinyBLAS` (two columns or more; F16 and BF16). Whether a position computes the same in two prompts depends
/// on them (the prompt cache asks).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct KPaths {
    pub tiled: bool,
    pub repacked_q4_k: bool,
    pub sgemm: bool,
}

impl KPaths {
    /// The paths of `weights`.
    pub(crate) fn of<'a>(weights: impl IntoIterator<Item = &'a QMatrix>) -> KPaths {
        let mut paths = KPaths::default();
        for w in weights {
            match w.format {
                Format::Q4K if w.rows.is_multiple_of(8) => paths.repacked_q4_k = true,
                Format::Q4K | Format::Q5K | Format::Q6K => paths.tiled = true,
                Format::F16 | Format::BF16 if sgemm_shape(w) => paths.sgemm = true,
                _ => {}
            }
        }
        paths
    }

    /// What decides a column's products in `batch`: equal keys, equal results.
    pub(crate) fn key(self, batch: Batch) -> (bool, bool, bool) {
        (
            self.tiled && batch.size >= kquant::TILED_FROM,
            self.repacked_q4_k && kquant::four_at_a_time(batch),
            self.sgemm && batch.size >= 2,
        )
    }
}

impl Acts {
    /// Quantises `x` (`n` rows of `cols` values) for multiplying with weights of `format`, every column as
    /// llama.cpp multiplies a column on its own.
    #[cfg(test)]
    pub(crate) fn quantize(x: &[f32], cols: usize, format: Format) -> Acts {
        Acts::quantize_in(x, cols, format, &[])
    }

    /// As [`Acts::quantize`], with `batch[c]` the product llama.cpp would compute column `c` in (empty: each
    /// column alone).
    pub(crate) fn quantize_in(x: &[f32], cols: usize, format: Format, batch: &[Batch]) -> Acts {
        let n = x.len() / cols;
        let block = format.block_values();
        let nb = cols / block;
        let slots = n.div_ceil(TILE) * nb * TILE;
        let mut acts = Acts {
            n,
            cols,
            qs: scratch::zeroed(if format.is_float() { 0 } else { x.len() }),
            d: scratch::zeroed(slots),
            s: scratch::zeroed(if format.has_min() { slots } else { 0 }),
            bsums: scratch::zeroed(if format.is_k() { slots * 16 } else { 0 }),
            f: if format.is_float() {
                float::round_all(format, x)
            } else {
                Vec::new()
            },
            batch: if batch.is_empty() {
                vec![Batch::ALONE; n]
            } else {
                batch.to_vec()
            },
        };
        assert_eq!(acts.batch.len(), n, "one batch per column");
        if format.is_float() {
            return acts;
        }
        let kernel = Kernel::detect();
        // Each tile of columns owns a run of every array: its quantised values, then its slots.
        let tile = |t: usize, qs: &mut [i8], d: &mut [f32], s: &mut [f32], bsums: &mut [i16]| {
            let width = TILE.min(n - t * TILE);
            for k in 0..width {
                let column = &x[(t * TILE + k) * cols..][..cols];
                for (b, src) in column.chunks_exact(block).enumerate() {
                    let (at, slot) = ((b * width + k) * block, b * TILE + k);
                    if format.is_k() {
                        let sums = &mut bsums[slot * 16..slot * 16 + 16];
                        d[slot] = kernel.quantize_q8_k(src, &mut qs[at..at + block], sums);
                        continue;
                    }
                    let (scale, sum) = kernel.quantize_block(src, &mut qs[at..at + BLOCK]);
                    d[slot] = round_f16(scale);
                    if format.has_min() {
                        s[slot] = round_f16(scale * sum as f32);
                    }
                }
            }
        };
        let tiles = n.div_ceil(TILE);
        let slots_per_tile = nb * TILE;
        let parts: Vec<_> = acts
            .qs
            .chunks_mut(TILE * cols)
            .zip(acts.d.chunks_mut(slots_per_tile))
            .zip(split_or_empty(&mut acts.s, slots_per_tile, tiles))
            .zip(split_or_empty(&mut acts.bsums, 16 * slots_per_tile, tiles))
            .enumerate()
            .collect();
        // A prompt's or an image's activations are quantised across the pool; one token's alone.
        if x.len() >= 1 << 16 {
            parts
                .into_par_iter()
                .for_each(|(t, (((qs, d), s), bsums))| tile(t, qs, d, s, bsums));
        } else {
            for (t, (((qs, d), s), bsums)) in parts {
                tile(t, qs, d, s, bsums);
            }
        }
        acts
    }

    /// Tile `t`: columns `t * TILE..` up to `TILE` of them.
    fn tile(&self, t: usize) -> Tile<'_> {
        let nb = self.d.len() / self.n.div_ceil(TILE) / TILE;
        let n = TILE.min(self.n - t * TILE);
        let q0 = t * TILE * self.cols;
        let slots = t * nb * TILE..(t + 1) * nb * TILE;
        Tile {
            n,
            q: if self.qs.is_empty() {
                &[]
            } else {
                &self.qs[q0..q0 + n * self.cols]
            },
            d: &self.d[slots.clone()],
            s: if self.s.is_empty() {
                &[]
            } else {
                &self.s[slots.clone()]
            },
            bsums: if self.bsums.is_empty() {
                &[]
            } else {
                &self.bsums[slots.start * 16..slots.end * 16]
            },
            f: if self.f.is_empty() {
                &[]
            } else {
                &self.f[q0..q0 + n * self.cols]
            },
            batch: &self.batch[t * TILE..t * TILE + n],
        }
    }
}

/// Quantises one block to signed bytes as llama.cpp's SIMD quantisers do (scale `amax / 127`, values times
/// `127 / amax`, rounded half to even); returns the scale and the sum of the bytes.
#[inline(always)]
fn quantize_block(src: &[f32], qs: &mut [i8]) -> (f32, i32) {
    let amax = src.iter().fold(0f32, |m, v| m.max(v.abs()));
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let mut sum = 0i32;
    for (q, v) in qs.iter_mut().zip(src) {
        *q = (v * id).round_ties_even() as i8;
        sum += i32::from(*q);
    }
    (amax / 127.0, sum)
}

/// `x` rounded to the nearest f16 (ties to even), as f32: how llama.cpp stores scales and the KV cache.
pub(crate) fn round_f16(x: f32) -> f32 {
    f16::from_f32(x).to_f32()
}

/// Every value of `x` as [`round_f16`] rounds it, eight at a time with F16C where the CPU has it (one value at
/// a time is a call into `half` for each direction), large slices split across the rayon pool.
pub(crate) fn round_f16_all(x: &[f32]) -> Vec<f32> {
    let mut out = x.to_vec();
    round_f16_in_place(&mut out);
    out
}

/// [`round_f16_all`] in place.
pub(crate) fn round_f16_in_place(x: &mut [f32]) {
    // Below this many values a split costs more than it saves.
    const PART: usize = 1 << 15;
    if x.len() >= 2 * PART {
        x.par_chunks_mut(PART).for_each(round_f16_part);
    } else {
        round_f16_part(x);
    }
}

fn round_f16_part(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if Kernel::detect() == Kernel::Avx2 {
        // SAFETY: `Kernel::Avx2` is only chosen after `avx2::available()` confirmed AVX2, FMA and F16C.
        unsafe { avx2::round_f16(x) };
        return;
    }
    for v in x {
        *v = round_f16(*v);
    }
}

/// The f16 at `block[at..at + 2]`, as f32.
fn half(block: &[u8], at: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([block[at], block[at + 1]])).to_f32()
}

/// Which dot-product code this CPU runs. `Avx2` covers CPUs with AVX-512 VNNI too (the attention code tests
/// for `Avx2` and runs its AVX2 loops on both); only their matrix products differ, see [`Kernel::vnni`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    Scalar,
    #[cfg(target_arch = "x86_64")]
    Avx2,
}

impl Kernel {
    /// The best kernel this CPU runs (AVX2 unless `NMB_LOCAL_SCALAR` is set), decided once.
    pub(crate) fn detect() -> Kernel {
        static CHOSEN: std::sync::OnceLock<Kernel> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            if std::env::var_os("NMB_LOCAL_SCALAR").is_none() && avx2::available() {
                return Kernel::Avx2;
            }
            Kernel::Scalar
        })
    }

    /// Whether the `Avx2` matrix products take their integer sums from AVX-512 VNNI (`vpdpbusd`): where the CPU
    /// has it, unless `NMB_LOCAL_AVX2` is set; decided once. The results are the same bit for bit.
    fn vnni(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self == Kernel::Avx2 {
            static VNNI: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
            return *VNNI.get_or_init(|| {
                std::env::var_os("NMB_LOCAL_AVX2").is_none() && avx2::vnni_available()
            });
        }
        false
    }

    /// What runs, as run manifests record it: "scalar", "avx2", or "avx512vnni" (AVX2 with VNNI sums).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 if self.vnni() => "avx512vnni",
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => "avx2",
        }
    }

    fn quantize_block(self, src: &[f32], qs: &mut [i8]) -> (f32, i32) {
        match self {
            Kernel::Scalar => quantize_block(src, qs),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Kernel::Avx2` is only chosen after `avx2::available()` confirmed AVX2, FMA and F16C.
            Kernel::Avx2 => unsafe { avx2::quantize_block(src, qs) },
        }
    }

    fn quantize_q8_k(self, src: &[f32], qs: &mut [i8], bsums: &mut [i16]) -> f32 {
        match self {
            Kernel::Scalar => kquant::quantize_q8_k(src, qs, bsums),
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Kernel::Avx2` is only chosen after `avx2::available()` confirmed AVX2, FMA and F16C.
            Kernel::Avx2 => unsafe { avx2::quantize_q8_k(src, qs, bsums) },
        }
    }

    /// Whether `w · x` is multiplied block by block ([`float::gemm_block`]): F16 or BF16 weights whose every
    /// column llama.cpp multiplies with tinyBLAS (a row count that is a multiple of four, each column in a
    /// product of two or more), on a CPU with AVX2.
    fn gemm(self, w: &QMatrix, x: &Acts) -> bool {
        #[cfg(target_arch = "x86_64")]
        if self == Kernel::Avx2 {
            return w.format.is_float() && sgemm_shape(w) && x.batch.iter().all(|b| b.size >= 2);
        }
        let _ = (w, x);
        false
    }

    /// `out(r, k)` = row `r` of `w` · column `k` of tile `x`, for each row in `rows`.
    fn dot_rows(
        self,
        w: &QMatrix,
        rows: std::ops::Range<usize>,
        x: &Tile<'_>,
        out: &mut impl FnMut(usize, usize, f32),
    ) {
        assert!(
            (if w.format.is_float() {
                x.f.len() == x.n * w.cols
            } else {
                x.q.len() == x.n * w.cols
            }) && x.d.len() == w.cols / w.format.block_values() * TILE
                && (!w.format.has_min() || x.s.len() == x.d.len())
                && (!w.format.is_k() || x.bsums.len() == x.d.len() * 16)
                && rows.end <= w.rows,
            "the tile must match the weights"
        );
        #[cfg(target_arch = "x86_64")]
        if self == Kernel::Avx2 && w.format.is_float() {
            // SAFETY: `Kernel::Avx2` is only chosen after `avx2::available()` confirmed AVX2, FMA and F16C.
            unsafe { avx2::portable_dot_rows(w, rows, x, out) };
            return;
        }
        match self {
            Kernel::Scalar if w.format.is_portable() => portable_dot_rows(w, rows, x, out),
            Kernel::Scalar => {
                for r in rows {
                    let mut sums = [0f32; TILE];
                    scalar_dot(w.format, w.row(r), x, &mut sums);
                    for (k, &v) in sums[..x.n].iter().enumerate() {
                        out(r, k, v);
                    }
                }
            }
            #[cfg(target_arch = "x86_64")]
            // SAFETY: `Kernel::Avx2` is only chosen after `avx2::available()` confirmed AVX2, FMA and F16C, and
            // `vnni()` only after `avx2::vnni_available()`; `rows` lie inside `w`, and the tile holds as many
            // blocks per column (checked above).
            Kernel::Avx2 => unsafe { avx2::dot_rows(self.vnni(), w, rows, x, out) },
        }
    }
}

/// Whether llamafile's tinyBLAS takes F16 or BF16 weights of this shape (on AVX2): a row count that is a
/// multiple of four and a width that is a multiple of 8 (`llamafile_sgemm` returns false on `k % 8`, and
/// ggml falls back to `ggml_vec_dot_f16` / `ggml_vec_dot_bf16`).
fn sgemm_shape(w: &QMatrix) -> bool {
    w.rows.is_multiple_of(4) && w.cols.is_multiple_of(8)
}

/// Activation columns multiplied per pass over a weight row.
pub(crate) const TILE: usize = 8;

/// One tile of [`Acts`]: `n` (at most [`TILE`]) columns' values block by block (column `k`'s block `b` at
/// `(b * n + k) * block`), and `TILE` scales and (Q8_1) sums per block (column `k`'s block `b` at
/// `b * TILE + k`), or for Q8_K sixteen sums by sixteen per slot.
pub(crate) struct Tile<'a> {
    pub n: usize,
    pub q: &'a [i8],
    pub d: &'a [f32],
    pub s: &'a [f32],
    pub bsums: &'a [i16],
    pub f: &'a [f32],
    pub batch: &'a [Batch],
}

/// Products with K-quant, Q4_0, Q5_0, Q5_1 and 16-bit float weights, one row and column at a time in the order
/// of llama.cpp's AVX2 code (see [`kquant`], [`legacy`] and [`float`]): the scalar fallback, the statement the
/// AVX2 kernels of the block formats are tested against, and for F16 and BF16 inlined into
/// [`avx2::portable_dot_rows`] so that the same code runs with vector instructions there.
#[inline(always)]
fn portable_dot_rows(
    w: &QMatrix,
    rows: std::ops::Range<usize>,
    x: &Tile<'_>,
    out: &mut impl FnMut(usize, usize, f32),
) {
    // llama.cpp repacks Q4_K and Q4_0 matrices whose row count is a multiple of eight (on CPUs with AVX2,
    // where the results are compared) and multiplies them with kernels of their own.
    let repacked = matches!(w.format, Format::Q4K | Format::Q4_0) && w.rows.is_multiple_of(8);
    let shape = sgemm_shape(w);
    let sgemm: Vec<bool> = x.batch.iter().map(|b| shape && b.size >= 2).collect();
    let mut sums = [0f32; TILE];
    for r in rows {
        let row = w.row(r);
        let sums = &mut sums[..x.n];
        if w.format.is_float() {
            float::dot_row(w.format, row, x, &sgemm, sums);
        } else if w.format.is_k() {
            kquant::dot_row(w.format, row, x, repacked, sums);
        } else {
            legacy::dot_row(w.format, row, x, repacked, sums);
        }
        for (k, &v) in sums.iter().enumerate() {
            out(r, k, v);
        }
    }
}

fn scalar_dot(format: Format, row: &[u8], x: &Tile<'_>, sums: &mut [f32; TILE]) {
    let bb = format.block_bytes();
    for (k, sum) in sums.iter_mut().enumerate().take(x.n) {
        let mut acc = 0f32;
        for (b, block) in row.chunks_exact(bb).enumerate() {
            let at = (b * x.n + k) * BLOCK;
            let q = &x.q[at..at + BLOCK];
            let (xd, xs) = (
                x.d[b * TILE + k],
                x.s.get(b * TILE + k).copied().unwrap_or(0.0),
            );
            let d = half(block, 0);
            match format {
                Format::Q4_1 => {
                    let mut sumi = 0i32;
                    for j in 0..16 {
                        sumi += i32::from(block[4 + j] & 0x0F) * i32::from(q[j]);
                        sumi += i32::from(block[4 + j] >> 4) * i32::from(q[j + 16]);
                    }
                    acc += d * xd * sumi as f32 + half(block, 2) * xs;
                }
                Format::Q8_0 => {
                    let sumi: i32 = block[2..]
                        .iter()
                        .zip(q)
                        .map(|(&w, &a)| i32::from(w as i8) * i32::from(a))
                        .sum();
                    acc += d * xd * sumi as f32;
                }
                _ => unreachable!("see `portable_dot_rows`"),
            }
        }
        *sum = acc;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random stream, so the tests need no extra crate.
    /// An F16 or BF16 matrix of `values(seed, ..)` within ±1.
    fn float_matrix(format: Format, rows: usize, cols: usize, seed: u64) -> QMatrix {
        let bytes: Vec<u8> = values(seed, rows * cols, 2.0)
            .into_iter()
            .flat_map(|v| match format {
                Format::F16 => f16::from_f32(v).to_bits().to_le_bytes(),
                _ => half::bf16::from_f32(v).to_bits().to_le_bytes(),
            })
            .collect();
        QMatrix::new(format, rows, cols, bytes)
    }

    fn values(seed: u64, n: usize, scale: f32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((s >> 33) as f32 / (1u64 << 31) as f32 - 0.5) * scale
            })
            .collect()
    }

    /// Quantises `w` to `format` the way llama.cpp's reference quantisers do, for building test matrices.
    fn quantize_weights(w: &[f32], rows: usize, cols: usize, format: Format) -> QMatrix {
        let mut bytes = Vec::new();
        for block in w.chunks_exact(BLOCK) {
            match format {
                Format::Q4_1 => {
                    let min = block.iter().cloned().fold(f32::INFINITY, f32::min);
                    let max = block.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
                    let d = (max - min) / 15.0;
                    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                    bytes.extend(f16::from_f32(d).to_bits().to_le_bytes());
                    bytes.extend(f16::from_f32(min).to_bits().to_le_bytes());
                    for j in 0..16 {
                        let lo = (((block[j] - min) * id + 0.5) as u8).min(15);
                        let hi = (((block[j + 16] - min) * id + 0.5) as u8).min(15);
                        bytes.push(lo | (hi << 4));
                    }
                }
                Format::Q8_0 => {
                    let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
                    let d = amax / 127.0;
                    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                    bytes.extend(f16::from_f32(d).to_bits().to_le_bytes());
                    bytes.extend(block.iter().map(|v| (v * id).round() as i8 as u8));
                }
                _ => unreachable!("the K-quants have tests of their own"),
            }
        }
        QMatrix::new(format, rows, cols, bytes)
    }

    fn reference(w: &QMatrix, x: &[f32]) -> Vec<f32> {
        let n = x.len() / w.cols;
        let mut row = vec![0f32; w.cols];
        let mut out = vec![0f32; n * w.rows];
        for r in 0..w.rows {
            w.dequantize_row(r, &mut row);
            for c in 0..n {
                let xc = &x[c * w.cols..(c + 1) * w.cols];
                out[c * w.rows + r] = row.iter().zip(xc).map(|(a, b)| a * b).sum();
            }
        }
        out
    }

    /// Every product of `w` with `x` through one kernel (`Some(vnni)`: the AVX2 one, with VNNI sums or not), as
    /// `out[c * rows + r]`.
    fn products(w: &QMatrix, x: &Acts, avx2: Option<bool>) -> Vec<f32> {
        let mut out = vec![0f32; x.n * w.rows];
        for t in 0..x.n.div_ceil(TILE) {
            let mut write = |r: usize, k: usize, v: f32| out[(t * TILE + k) * w.rows + r] = v;
            match avx2 {
                None => Kernel::Scalar.dot_rows(w, 0..w.rows, &x.tile(t), &mut write),
                #[cfg(target_arch = "x86_64")]
                // SAFETY: the callers pass `Some` only where `avx2::available()` (and for `Some(true)`
                // `avx2::vnni_available()`) holds; the tile has as many blocks as the weights' rows.
                Some(vnni) => unsafe { avx2::dot_rows(vnni, w, 0..w.rows, &x.tile(t), &mut write) },
                #[cfg(not(target_arch = "x86_64"))]
                Some(_) => unreachable!("no AVX2 kernel off x86_64"),
            }
        }
        out
    }

    fn check(format: Format, rows: usize, cols: usize, n: usize) {
        let w = quantize_weights(&values(1, rows * cols, 2.0), rows, cols, format);
        let x = values(2, n * cols, 4.0);
        let acts = Acts::quantize(&x, cols, format);
        let scalar = products(&w, &acts, None);
        let mut fast = vec![0f32; n * rows];
        w.matmul(&acts, &mut fast);
        // The AVX2 kernels with and without VNNI (where the CPU runs them) do the same f32 arithmetic, so they
        // and the product the engine runs (unless forced to the scalar one) agree bit for bit.
        #[cfg(target_arch = "x86_64")]
        if avx2::available() {
            let plain = products(&w, &acts, Some(false));
            let engine = if Kernel::detect() == Kernel::Avx2 {
                &fast
            } else {
                &plain
            };
            assert_eq!(
                bits(&plain),
                bits(engine),
                "{format:?} {n} columns: avx2 vs {}",
                Kernel::detect().name()
            );
            if avx2::vnni_available() {
                let vnni = products(&w, &acts, Some(true));
                assert_eq!(
                    bits(&plain),
                    bits(&vnni),
                    "{format:?} {n} columns: avx2 vs avx512vnni"
                );
            }
        }
        let exact = reference(&w, &x);
        for i in 0..n * rows {
            // The scalar kernel differs from the others only in the order of f32 additions.
            assert!(
                (scalar[i] - fast[i]).abs() <= 1e-4 * (1.0 + scalar[i].abs()),
                "{format:?} cell {i}: scalar {} vs {} {}",
                scalar[i],
                Kernel::detect().name(),
                fast[i]
            );
            // Quantising the activations to 8 bits costs well under 1% of the product's scale.
            let scale: f32 = x[..cols].iter().map(|v| v.abs()).sum::<f32>() + 1.0;
            assert!(
                (exact[i] - fast[i]).abs() <= 0.02 * scale,
                "{format:?} cell {i}: f32 {} vs quantised {}",
                exact[i],
                fast[i]
            );
        }
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn kernels_agree_with_each_other_and_with_f32() {
        for n in (1..=17).chain([24, 29]) {
            for (rows, cols) in [(70, 96), (33, 32), (7, 576)] {
                check(Format::Q4_1, rows, cols, n);
                check(Format::Q8_0, rows, cols, n);
            }
        }
    }

    /// Weights and activations at the ends of their ranges (Q8_0's -128, ±127 activations, all-zero blocks),
    /// where a saturating or sign-losing integer step would show.
    #[test]
    fn kernels_agree_at_extreme_values() {
        let (rows, cols) = (9, 64);
        for n in [1, 5, 8, 11] {
            for format in [Format::Q4_1, Format::Q8_0] {
                let mut w = quantize_weights(&values(3, rows * cols, 2.0), rows, cols, format);
                let bb = format.block_bytes();
                for (i, block) in w.bytes.chunks_exact_mut(bb).enumerate() {
                    let fill = match (format, i % 3) {
                        (_, 2) => continue,
                        (Format::Q4_1, 0) => 0xFF,
                        (Format::Q4_1, _) => 0x00,
                        (Format::Q8_0, 0) => 0x80,
                        (Format::Q8_0, _) => 0x7F,
                        _ => unreachable!(),
                    };
                    let from = if format == Format::Q4_1 { 4 } else { 2 };
                    block[from..].fill(fill);
                }
                let x: Vec<f32> = values(4, n * cols, 4.0)
                    .iter()
                    .enumerate()
                    .map(|(i, v)| match i % 64 / 32 {
                        0 => v.signum() * 9.0,
                        _ => *v,
                    })
                    .collect();
                let acts = Acts::quantize(&x, cols, format);
                let scalar = products(&w, &acts, None);
                let mut fast = vec![0f32; n * rows];
                w.matmul(&acts, &mut fast);
                for (s, f) in scalar.iter().zip(&fast) {
                    assert!(
                        (s - f).abs() <= 1e-4 * (1.0 + s.abs()),
                        "{format:?}: scalar {s} vs {f}"
                    );
                }
                #[cfg(target_arch = "x86_64")]
                if avx2::vnni_available() {
                    assert_eq!(
                        bits(&products(&w, &acts, Some(false))),
                        bits(&products(&w, &acts, Some(true)))
                    );
                }
            }
        }
    }

    /// A matrix of random blocks, their f16 scales set so that the weights stay near ±1.
    fn random_k(format: Format, rows: usize, cols: usize, seed: u64) -> QMatrix {
        let mut s = seed;
        let blocks = rows * cols / format.block_values();
        let mut bytes: Vec<u8> = (0..blocks * format.block_bytes())
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 33) as u8
            })
            .collect();
        let scales: &[usize] = match format {
            Format::Q6K => &[208],
            Format::Q4_0 | Format::Q5_0 => &[0],
            _ => &[0, 2],
        };
        for block in bytes.chunks_exact_mut(format.block_bytes()) {
            for &at in scales {
                block[at..at + 2].copy_from_slice(&f16::from_f32(1e-3).to_bits().to_le_bytes());
            }
        }
        QMatrix::new(format, rows, cols, bytes)
    }

    fn k_products(w: &QMatrix, x: &Acts, kernel: Kernel) -> Vec<f32> {
        let mut out = vec![0f32; x.n * w.rows];
        for t in 0..x.n.div_ceil(TILE) {
            let mut write = |r: usize, k: usize, v: f32| out[(t * TILE + k) * w.rows + r] = v;
            kernel.dot_rows(w, 0..w.rows, &x.tile(t), &mut write);
        }
        out
    }

    /// Every path llama.cpp takes for the K-quants (Q4_K repacked or not, one column or a prompt's in fours,
    /// `vec_dot` or tiled) and for Q5_0 and Q5_1 lands near the f32 product, and the portable kernel and its
    /// AVX2 build agree to the bit.
    #[test]
    fn block_formats_agree_with_f32_on_every_path_and_with_their_avx2_build() {
        let cols = 512;
        for format in [
            Format::Q4K,
            Format::Q5K,
            Format::Q6K,
            Format::Q5_0,
            Format::Q5_1,
            Format::Q4_0,
        ] {
            for rows in [16, 7] {
                let w = random_k(format, rows, cols, rows as u64);
                for n in [1, 3, 4, 5, 9] {
                    let x = values(2, n * cols, 4.0);
                    let exact = reference(&w, &x);
                    let prompt: Vec<Batch> = (0..n).map(|index| Batch { size: n, index }).collect();
                    for batch in [&[][..], &prompt] {
                        let acts = Acts::quantize_in(&x, cols, format, batch);
                        let scalar = k_products(&w, &acts, Kernel::Scalar);
                        #[cfg(target_arch = "x86_64")]
                        if avx2::available() {
                            assert_eq!(
                                bits(&scalar),
                                bits(&k_products(&w, &acts, Kernel::Avx2)),
                                "{format:?} {rows}x{cols}, {n} columns: portable vs avx2"
                            );
                        }
                        let mut row = vec![0f32; cols];
                        for (i, (&e, &q)) in exact.iter().zip(&scalar).enumerate() {
                            let (c, r) = (i / rows, i % rows);
                            w.dequantize_row(r, &mut row);
                            let scale: f32 = row
                                .iter()
                                .zip(&x[c * cols..(c + 1) * cols])
                                .map(|(a, b)| (a * b).abs())
                                .sum();
                            assert!(
                                (e - q).abs() <= 0.01 * scale,
                                "{format:?} {rows} rows, {n} columns, cell {i}: f32 {e} vs quantised {q}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The AVX2 kernels of the block formats (with and without VNNI where the CPU has it) equal the portable
    /// kernel bit for bit: random blocks (random sub-block scales and minimums, every third block's values all
    /// ones at the top of their range), every tile width, and columns that each take their own path (alone, in a
    /// prompt, Q4_K's fours and their remainder).
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn avx2_block_kernels_equal_the_portable_one() {
        if !avx2::available() {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        let cols = 512;
        for format in [
            Format::Q4K,
            Format::Q5K,
            Format::Q6K,
            Format::Q5_0,
            Format::Q5_1,
            Format::Q4_0,
        ] {
            for rows in [16, 7] {
                let mut w = random_k(format, rows, cols, 5 + rows as u64);
                // Where each block's values (and fifth or high bits) lie.
                let (from, to) = match format {
                    Format::Q4K | Format::Q5K => (16, format.block_bytes()),
                    Format::Q6K => (0, 192),
                    Format::Q5_1 => (4, format.block_bytes()),
                    _ => (2, format.block_bytes()),
                };
                for block in w.bytes.chunks_exact_mut(format.block_bytes()).step_by(3) {
                    block[from..to].fill(0xFF);
                }
                for n in (1..=17).chain([24]) {
                    let x = values(7 + n as u64, n * cols, 4.0);
                    let alone = vec![Batch::ALONE; n];
                    let prompt: Vec<Batch> = (0..n).map(|index| Batch { size: n, index }).collect();
                    let mixed: Vec<Batch> = (0..n)
                        .map(|c| {
                            let size = [1, 3, 8, 10, 13, 5][c % 6];
                            Batch {
                                size,
                                index: (c * 7) % size,
                            }
                        })
                        .collect();
                    for batch in [&alone, &prompt, &mixed] {
                        let acts = Acts::quantize_in(&x, cols, format, batch);
                        let portable = bits(&k_products(&w, &acts, Kernel::Scalar));
                        let mut variants = vec![false];
                        if avx2::vnni_available() {
                            variants.push(true);
                        }
                        for vnni in variants {
                            assert_eq!(
                                portable,
                                bits(&products(&w, &acts, Some(vnni))),
                                "{format:?} {rows}x{cols}, {n} columns {batch:?}: portable vs avx2 (vnni {vnni})"
                            );
                        }
                    }
                }
            }
        }
    }

    /// F16 and BF16 weights, one column at a time and in a prompt (tinyBLAS), near the f32 product and the same
    /// from the portable kernel and its AVX2 build, at widths of whole 32s, of 8s (tinyBLAS) and of neither
    /// (`ggml_vec_dot`'s leftovers: under 32 values, the whole sum is f32 products added in f64).
    #[test]
    fn float_weights_agree_with_f32_on_both_paths_and_with_their_avx2_build() {
        let rows = 12;
        for (format, cols) in [Format::F16, Format::BF16]
            .into_iter()
            .flat_map(|f| [96, 136, 140, 12].map(|c| (f, c)))
        {
            let w = float_matrix(format, rows, cols, 5);
            for n in [1, 2, 9] {
                let x = values(6, n * cols, 4.0);
                let exact = reference(&w, &x);
                let prompt: Vec<Batch> = (0..n).map(|index| Batch { size: n, index }).collect();
                for batch in [&[][..], &prompt] {
                    let acts = Acts::quantize_in(&x, cols, format, batch);
                    let portable = k_products(&w, &acts, Kernel::Scalar);
                    #[cfg(target_arch = "x86_64")]
                    if avx2::available() {
                        assert_eq!(
                            bits(&portable),
                            bits(&k_products(&w, &acts, Kernel::Avx2)),
                            "{format:?}, {n} columns: portable vs avx2"
                        );
                    }
                    if cols < 32 {
                        let mut row = vec![0f32; cols];
                        for (c, col) in acts.f.chunks_exact(cols).enumerate() {
                            for r in 0..rows {
                                w.dequantize_row(r, &mut row);
                                let sum: f64 =
                                    row.iter().zip(col).map(|(a, b)| f64::from(a * b)).sum();
                                assert_eq!(
                                    portable[c * rows + r].to_bits(),
                                    (sum as f32).to_bits()
                                );
                            }
                        }
                    }
                    for (e, p) in exact.iter().zip(&portable) {
                        // Rounding the activations to BF16 keeps 8 bits of each.
                        assert!(
                            (e - p).abs() <= 0.02 * (1.0 + e.abs()),
                            "{format:?}: f32 {e} vs {p}"
                        );
                    }
                }
            }
        }
    }

    /// F16 and BF16 products whose every column is tinyBLAS's, which `matmul_many` multiplies block by block
    /// (`float::gemm_block`), equal the column-by-column portable kernel bit for bit: row counts within one block
    /// and across several, column counts that leave one or two columns of a block of three, and products
    /// sharing one output.
    #[test]
    fn blocked_float_products_equal_the_column_by_column_kernel() {
        let cols = 96;
        for format in [Format::F16, Format::BF16] {
            for rows in [4, 12, 132] {
                let w = float_matrix(format, rows, cols, 9 + rows as u64);
                for n in [2, 5, 49, 100] {
                    let x = values(6 + n as u64, n * cols, 4.0);
                    let prompt: Vec<Batch> = (0..n).map(|index| Batch { size: n, index }).collect();
                    let acts = Acts::quantize_in(&x, cols, format, &prompt);
                    let want = bits(&k_products(&w, &acts, Kernel::Scalar));
                    let mut got = vec![0f32; n * rows];
                    w.matmul(&acts, &mut got);
                    assert_eq!(bits(&got), want, "{format:?} {rows}x{cols}, {n} columns");
                    // Two products into one output, each at its row offset.
                    let mut both = vec![0f32; n * 2 * rows];
                    matmul_many(&[(&w, &acts, 0), (&w, &acts, rows)], &mut both, 2 * rows);
                    for c in 0..n {
                        for half in 0..2 {
                            let at = c * 2 * rows + half * rows;
                            assert_eq!(
                                bits(&both[at..at + rows]),
                                want[c * rows..(c + 1) * rows],
                                "{format:?} {rows} rows, {n} columns: product {half} of two"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The K-quant kernel that unpacks each super-block once for a whole tile equals, bit for bit, the plain
    /// one-column statement of each of llama.cpp's kernels, on every path.
    #[test]
    fn k_quant_tiles_equal_their_one_column_statement() {
        let cols = 512;
        for format in [Format::Q4K, Format::Q5K, Format::Q6K] {
            for rows in [16, 7] {
                let w = random_k(format, rows, cols, 11);
                let repacked = format == Format::Q4K && rows % 8 == 0;
                for n in [1, 5, 8, 11] {
                    let x = values(3, n * cols, 4.0);
                    let prompt: Vec<Batch> = (0..n).map(|index| Batch { size: n, index }).collect();
                    for batch in [&[][..], &prompt] {
                        let acts = Acts::quantize_in(&x, cols, format, batch);
                        for t in 0..n.div_ceil(TILE) {
                            let tile = acts.tile(t);
                            for r in 0..rows {
                                let mut got = vec![0f32; tile.n];
                                kquant::dot_row(format, w.row(r), &tile, repacked, &mut got);
                                for (k, g) in got.iter().enumerate() {
                                    let want = kquant::dot(format, w.row(r), &tile, k, repacked);
                                    assert_eq!(
                                        g.to_bits(),
                                        want.to_bits(),
                                        "{format:?} {rows} rows, {n} columns, row {r} column {k}"
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn q8_k_activations_follow_llama_cpp_rules() {
        // The value of largest magnitude (154.5, positive) maps to -127: the scale keeps its sign.
        let x: Vec<f32> = (0..256).map(|i| i as f32 - 100.5).collect();
        let a = Acts::quantize(&x, 256, Format::Q6K);
        assert_eq!(a.d[0], 1.0 / (-127.0 / 154.5));
        assert_eq!(a.qs[255], -127);
        let sum: i16 = a.qs[240..].iter().map(|&q| i16::from(q)).sum();
        assert_eq!(a.bsums[15], sum);
    }

    #[test]
    fn activation_quantisation_matches_llama_cpp_rules() {
        let x: Vec<f32> = (0..32).map(|i| i as f32 - 15.5).collect();
        let a = Acts::quantize(&x, 32, Format::Q4_1);
        // amax 15.5 maps to ±127; d is stored as f16.
        assert_eq!(a.d[0], round_f16(15.5 / 127.0));
        assert_eq!(a.qs[31], 127);
        assert_eq!(a.qs[0], -127);
        let sum: i32 = a.qs.iter().map(|&q| i32::from(q)).sum();
        assert_eq!(a.s[0], round_f16(15.5 / 127.0 * sum as f32));
        // Half-way values round to even, as llama.cpp's SIMD quantiser does.
        let b = Acts::quantize(
            &[[127.0f32, 0.5, 1.5, 2.5].as_slice(), &[0.0; 28]].concat(),
            32,
            Format::Q8_0,
        );
        assert_eq!(&b.qs[..4], &[127, 0, 2, 2]);
    }
}
