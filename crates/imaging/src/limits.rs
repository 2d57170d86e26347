//! The budgets every volume decoder and render is held to, checked against what a file's headers declare before
//! anything is allocated or decoded, so that a hostile or corrupt file is an error, never an abort or a hang.
//!
//! The defaults fit a 24 GB machine with room to spare: one volume's decoded voxels take at most 1 GiB as
//! `f32`, and decoding holds about three copies of them at the peak (the decoder's samples, the `f32` values, the
//! stacked volume).

/// Voxels in one decoded DICOM file or series (512 x 512 x 1024; 1 GiB as `f32`).
pub const MAX_VOXELS: usize = 1 << 28;

/// Bytes a compressed stream (a `.nii.gz` file, a deflated DICOM data set) may inflate to, whatever its size.
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

/// Bytes a PNG, JPEG, GIF, WebP, BMP or TIFF image may decode to (the `image` crate's own default, made
/// explicit): a 100,000 x 100,000 PNG header is refused before its pixels are allocated.
pub const MAX_RASTER_BYTES: u64 = 512 << 20;

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
        .clamp(INFLATE_FLOOR, MAX_INFLATED)
}

/// The most bytes `encoded` bytes of encapsulated pixel data may decode to.
pub fn codec_cap(encoded: u64) -> u64 {
    encoded.saturating_mul(MAX_CODEC_RATIO).max(INFLATE_FLOOR)
}
