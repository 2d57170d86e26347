//! The budgets every volume decoder and render is held to, checked against what a file's headers declare before
//! anything is allocated or decoded, so that a hostile or corrupt file is an error, never an abort or a hang.
//!
//! The defaults fit a 24 GB machine with room to spare: one volume's decoded voxels take at most 1 GiB as
//! `f32`, and decoding holds about three copies of them at the peak (the decoder's samples, the `f32` values, the
//! stacked volume).

use std::sync::atomic::{AtomicU64, Ordering};

/// Voxels in one decoded DICOM file or series by default (512 x 512 x 1024; 1 GiB as `f32`).
pub const MAX_VOXELS: u64 = 1 << 28;

/// Bytes a compressed stream (a `.nii.gz` file, a deflated DICOM data set) may inflate to by default, whatever
/// its size.
pub const MAX_INFLATED: u64 = 2 << 30;

/// Inflated bytes per compressed byte beyond [`INFLATE_FLOOR`]: real scans compress 2 to 20 times; a stream that
/// inflates a hundredfold is a decompression bomb.
pub const MAX_INFLATE_RATIO: u64 = 100;

/// Bytes any stream may inflate to whatever its ratio, so that small, very regular files (masks, phantoms) pass.
pub const INFLATE_FLOOR: u64 = 64 << 20;

/// Decoded bytes per byte of encapsulated (JPEG, JPEG 2000, RLE) pixel data beyond [`INFLATE_FLOOR`].
pub const MAX_CODEC_RATIO: u64 = 1000;

/// Nesting of DICOM sequences and items: real files nest a few levels; a deeper file would recurse the parser.
pub const MAX_DICOM_DEPTH: usize = 32;

/// Bytes a PNG, JPEG, GIF, WebP, BMP or TIFF image may decode to by default (the `image` crate's own default,
/// made explicit): a 100,000 x 100,000 PNG header is refused before its pixels are allocated.
pub const MAX_RASTER_BYTES: u64 = 512 << 20;

/// The three memory budgets a process may set for a bigger (or smaller) machine than the defaults fit: the
/// command line's `--max-voxels`, `--max-inflated-mib` and `--max-image-mib`. The others bound work, not memory,
/// and stay fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budgets {
    pub voxels: u64,
    pub inflated_bytes: u64,
    pub raster_bytes: u64,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            voxels: MAX_VOXELS,
            inflated_bytes: MAX_INFLATED,
            raster_bytes: MAX_RASTER_BYTES,
        }
    }
}

static VOXELS: AtomicU64 = AtomicU64::new(MAX_VOXELS);
static INFLATED: AtomicU64 = AtomicU64::new(MAX_INFLATED);
static RASTER: AtomicU64 = AtomicU64::new(MAX_RASTER_BYTES);

/// Sets the budgets for the rest of the process (a value of 0 keeps the default).
pub fn set_budgets(b: Budgets) {
    let or_default = |v: u64, d: u64| if v == 0 { d } else { v };
    VOXELS.store(or_default(b.voxels, MAX_VOXELS), Ordering::Relaxed);
    INFLATED.store(
        or_default(b.inflated_bytes, MAX_INFLATED),
        Ordering::Relaxed,
    );
    RASTER.store(
        or_default(b.raster_bytes, MAX_RASTER_BYTES),
        Ordering::Relaxed,
    );
}

/// Voxels in one decoded DICOM file or series ([`MAX_VOXELS`] unless set).
pub fn max_voxels() -> usize {
    usize::try_from(VOXELS.load(Ordering::Relaxed)).unwrap_or(usize::MAX)
}

/// Bytes a compressed stream may inflate to, whatever its size ([`MAX_INFLATED`] unless set).
pub fn max_inflated() -> u64 {
    INFLATED.load(Ordering::Relaxed)
}

/// Bytes a raster image may decode to ([`MAX_RASTER_BYTES`] unless set).
pub fn max_raster_bytes() -> u64 {
    RASTER.load(Ordering::Relaxed)
}

/// Slices one render may show (the largest montage, 16 x 16).
pub const MAX_SLICES: usize = 256;

/// Positions an `mm:` range may step through before duplicates are dropped.
pub const MAX_MM_POSITIONS: usize = 4096;

/// The longest side of a slice image and of a montage, in pixels, before the backend's own limit shrinks it.
pub const MAX_SIDE: u32 = 8192;

/// The most bytes a compressed stream of `compressed` bytes may inflate to.
pub fn inflate_cap(compressed: u64) -> u64 {
    compressed
        .saturating_mul(MAX_INFLATE_RATIO)
        .clamp(INFLATE_FLOOR.min(max_inflated()), max_inflated())
}

/// The most bytes `encoded` bytes of encapsulated pixel data may decode to.
pub fn codec_cap(encoded: u64) -> u64 {
    encoded.saturating_mul(MAX_CODEC_RATIO).max(INFLATE_FLOOR)
}
