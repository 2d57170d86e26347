//! Image bytes and volumes for nmb: where an image comes from, what format it really is, its content hash, and
//! how a DICOM series or NIfTI volume becomes the PNGs a model sees.
//!
//! This crate sniffs formats from magic numbers (never from a label or a file extension), hashes content with
//! SHA-256, reads dimensions from headers, and decodes or re-encodes on demand. Volumes are read with dicom-rs
//! and the `nifti` crate ([`load_volume`]), reoriented to RAS ([`Volume::to_ras`]) and rendered
//! ([`render::render`]) under [`RenderOptions`]. It does not know about cases or prompts (that is `nmb-suite` and
//! `nmb-plan`), it does not cache renders (the caller keys them with [`render_key`]), and it never keeps decoded
//! pixels around. [`describe`] reads a volume's headers and shape for `nmb image info` and writes them as text.
//!
//! Every decoder is held to the budgets in [`limits`]: what a header declares (element lengths, image sizes,
//! inflated sizes, slices, grids) is checked against what the file holds and against fixed caps before
//! anything is allocated or decoded, so a hostile file is an error naming the file and the tag or field. A
//! series directory's files must resolve, by their real paths, inside it ([`series_files`]).

pub mod describe;
mod dicom;
mod jpeg;
pub mod limits;
pub mod meta;
mod nifti;
mod normal;
pub mod options;
pub mod perturb;
pub mod render;
pub mod volume;

pub use describe::{volume_info, VolumeInfo};
pub use meta::{SeriesSummary, VolumeMeta};
pub use options::{Layout, RenderOptions, Slices, View, Window};
pub use perturb::Perturbation;
pub use render::{render_path, RenderedView, RENDERER_VERSION};
pub use volume::Volume;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Errors from reading or decoding image bytes.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("cannot read image file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("image is empty (0 bytes)")]
    Empty,
    #[error("unrecognised image bytes (first bytes {0}); expected PNG, JPEG, GIF, WebP, BMP, TIFF, DICOM or NIfTI")]
    UnknownFormat(String),
    #[error("cannot decode {format} image: {message}")]
    Decode {
        format: ImageFormat,
        message: String,
    },
}

/// Errors from reading or rendering a volume. Each names the file (or directory) it is about.
#[derive(Debug, thiserror::Error)]
pub enum VolumeError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Dicom { path: PathBuf, message: String },
    #[error("{path}: cannot decode pixel data in transfer syntax {uid} ({name}): {message}")]
    TransferSyntax {
        path: PathBuf,
        uid: String,
        name: String,
        message: String,
    },
    #[error("{path}: not a NIfTI-1 volume: {message}")]
    Nifti { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Render { path: PathBuf, message: String },
    /// Orientation, spacing or positions that are not finite.
    #[error("{path}: {message}")]
    Geometry { path: PathBuf, message: String },
    #[error("{path}: not a volume; expected a DICOM file, a directory of DICOM files, or a .nii/.nii.gz file")]
    NotVolume { path: PathBuf },
    /// A series member whose real path is outside its directory (a symlink out, or one that cannot be resolved).
    #[error("{path}: {message}")]
    Escape { path: PathBuf, message: String },
}

/// Reads a DICOM file, the series in a DICOM directory, or a NIfTI file, in storage order. `opts.series` and
/// `opts.volume` pick a series or a 4-D volume; the other options only matter when rendering.
pub fn load_volume(path: &Path, opts: &RenderOptions) -> Result<(Volume, VolumeMeta), VolumeError> {
    let (volume, mut meta) = if path.is_dir() {
        dicom::load(path, opts.series.as_deref())?
    } else {
        match sniff_file(path) {
            Some(ImageFormat::Dicom) => dicom::load(path, opts.series.as_deref())?,
            Some(ImageFormat::Nifti) => nifti::load(path, opts.volume)?,
            _ => {
                return Err(VolumeError::NotVolume {
                    path: path.to_path_buf(),
                })
            }
        }
    };
    volume
        .check_geometry()
        .map_err(|message| VolumeError::Geometry {
            path: path.to_path_buf(),
            message,
        })?;
    if meta.orientation.is_empty() {
        meta.orientation = meta::axis_codes(&volume.affine);
    }
    Ok((volume, meta))
}

/// What a volume's headers say (modality, sequence, plane, spacing...), without decoding pixels: cheap enough
/// for loading a suite.
pub fn describe_volume(path: &Path, opts: &RenderOptions) -> Result<VolumeMeta, VolumeError> {
    let meta = if path.is_dir() || sniff_file(path) == Some(ImageFormat::Dicom) {
        dicom::describe(path, opts.series.as_deref())?
    } else if sniff_file(path) == Some(ImageFormat::Nifti) {
        nifti::describe(path)?
    } else {
        return Err(VolumeError::NotVolume {
            path: path.to_path_buf(),
        });
    };
    Ok(meta)
}

/// Whether a path is something [`load_volume`] reads: a directory, or a DICOM or NIfTI file.
pub fn is_volume_path(path: &Path) -> bool {
    path.is_dir()
        || matches!(
            sniff_file(path),
            Some(ImageFormat::Dicom | ImageFormat::Nifti)
        )
}

/// Sniffs a file's format from its first bytes (gzip-compressed NIfTI included).
pub fn sniff_file(path: &Path) -> Option<ImageFormat> {
    use std::io::Read;
    let mut head = Vec::with_capacity(512);
    std::fs::File::open(path)
        .ok()?
        .take(512)
        .read_to_end(&mut head)
        .ok()?;
    sniff(&head)
}

/// The content hash of a volume source: a file's SHA-256, or for a directory a hash over its files' names and
/// hashes (in name order), so that renaming, adding or changing any file changes it.
pub fn source_hash(path: &Path) -> Result<String, VolumeError> {
    if !path.is_dir() {
        return std::fs::read(path)
            .map(|b| content_hash(&b))
            .map_err(|source| VolumeError::Read {
                path: path.to_path_buf(),
                source,
            });
    }
    let mut h = Sha256::new();
    h.update(b"nmb-series-v1\n");
    for (name, file) in series_files(path)? {
        let bytes =
            std::fs::read(&file).map_err(|source| VolumeError::Read { path: file, source })?;
        h.update(format!("{name}\t{}\n", content_hash(&bytes)).as_bytes());
    }
    Ok(hex::encode(h.finalize()))
}

/// The files of a series directory by name, each resolved to its real path first: a member that resolves
/// outside the directory (a symlink out of it) or cannot be resolved (a symlink loop, a dangling link) is an
/// error naming it, so nothing outside the directory is ever read or hashed. Subdirectories are not read.
pub fn series_files(dir: &Path) -> Result<Vec<(String, PathBuf)>, VolumeError> {
    let read_err = |source| VolumeError::Read {
        path: dir.to_path_buf(),
        source,
    };
    let root = dir.canonicalize().map_err(read_err)?;
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(read_err)? {
        let path = entry.map_err(read_err)?.path();
        let escape = |message: String| VolumeError::Escape {
            path: path.clone(),
            message,
        };
        let real = path.canonicalize().map_err(|e| {
            escape(format!(
                "cannot resolve this series member ({e}); expected a file"
            ))
        })?;
        if !real.starts_with(&root) {
            return Err(escape(format!(
                "this series member resolves to {}, outside its directory {}; expected the series' own files",
                real.display(),
                root.display()
            )));
        }
        if real.is_file() {
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            files.push((name, path));
        }
    }
    files.sort();
    Ok(files)
}

/// The cache key of a render: the source's content, the options and the renderer version, so that a re-run
/// reuses a render and any change to the bytes, an option or the renderer makes a new one.
pub fn render_key(source_hash: &str, opts: &RenderOptions) -> String {
    content_hash(
        format!(
            "nmb-render-v{RENDERER_VERSION}\n{source_hash}\n{}",
            opts.key()
        )
        .as_bytes(),
    )
}

/// The format of an image, detected from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    Png,
    Jpeg,
    Gif,
    Webp,
    Bmp,
    Tiff,
    Dicom,
    Nifti,
}

impl ImageFormat {
    /// Lower-case short name, as used in stats output (`png`, `jpeg`, ...).
    pub fn name(self) -> &'static str {
        match self {
            ImageFormat::Png => "png",
            ImageFormat::Jpeg => "jpeg",
            ImageFormat::Gif => "gif",
            ImageFormat::Webp => "webp",
            ImageFormat::Bmp => "bmp",
            ImageFormat::Tiff => "tiff",
            ImageFormat::Dicom => "dicom",
            ImageFormat::Nifti => "nifti",
        }
    }

    /// MIME type for data URLs and API payloads.
    pub fn mime(self) -> &'static str {
        match self {
            ImageFormat::Png => "image/png",
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Gif => "image/gif",
            ImageFormat::Webp => "image/webp",
            ImageFormat::Bmp => "image/bmp",
            ImageFormat::Tiff => "image/tiff",
            ImageFormat::Dicom => "application/dicom",
            ImageFormat::Nifti => "application/x-nifti",
        }
    }

    /// Whether model APIs accept this format directly (the others must be rendered to PNG first).
    pub fn is_web_image(self) -> bool {
        matches!(
            self,
            ImageFormat::Png | ImageFormat::Jpeg | ImageFormat::Gif | ImageFormat::Webp
        )
    }
}

impl fmt::Display for ImageFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Detects the format from magic bytes. Returns `None` for bytes no supported format claims.
pub fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
    // DICOM first: its 128-byte preamble is free-form and often starts with TIFF's magic ("II*\0").
    if bytes.len() >= 132 && &bytes[128..132] == b"DICM" {
        return Some(ImageFormat::Dicom);
    }
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some(ImageFormat::Png);
    }
    if bytes.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Some(ImageFormat::Jpeg);
    }
    if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        return Some(ImageFormat::Gif);
    }
    if bytes.len() >= 12 && &bytes[0..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        return Some(ImageFormat::Webp);
    }
    if bytes.starts_with(b"BM") && bytes.len() > 14 {
        return Some(ImageFormat::Bmp);
    }
    if bytes.starts_with(b"II*\0") || bytes.starts_with(b"MM\0*") {
        return Some(ImageFormat::Tiff);
    }
    if is_nifti(bytes) {
        return Some(ImageFormat::Nifti);
    }
    None
}

fn is_nifti(bytes: &[u8]) -> bool {
    // NIfTI-1: sizeof_hdr == 348 and magic "n+1\0"/"ni1\0" at 344; NIfTI-2: sizeof_hdr == 540, magic at 4.
    // Gzipped NIfTI (.nii.gz): look at the start of the decompressed stream.
    if bytes.starts_with(&[0x1f, 0x8b]) {
        use std::io::Read;
        let mut head = Vec::with_capacity(348);
        let mut gz = flate2::read::GzDecoder::new(bytes).take(348);
        let _ = gz.read_to_end(&mut head);
        return !head.starts_with(&[0x1f, 0x8b]) && is_nifti(&head);
    }
    if bytes.len() >= 348 {
        let magic = &bytes[344..348];
        if magic == b"n+1\0" || magic == b"ni1\0" {
            return true;
        }
    }
    if bytes.len() >= 12 && (&bytes[4..8] == b"n+2\0" || &bytes[4..8] == b"ni2\0") {
        return true;
    }
    false
}

/// Where an image's bytes live. Files are read on demand; inline bytes (for example from a data URL) are shared.
#[derive(Clone)]
pub enum ImageSource {
    File(PathBuf),
    Bytes(Arc<[u8]>),
}

impl fmt::Debug for ImageSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ImageSource::File(p) => write!(f, "File({})", p.display()),
            ImageSource::Bytes(b) => write!(f, "Bytes({} bytes)", b.len()),
        }
    }
}

impl ImageSource {
    /// Reads the raw bytes (cheap clone for inline bytes).
    pub fn read(&self) -> Result<Arc<[u8]>, ImageError> {
        match self {
            ImageSource::Bytes(b) => Ok(b.clone()),
            ImageSource::File(path) => {
                std::fs::read(path)
                    .map(Arc::from)
                    .map_err(|source| ImageError::Read {
                        path: path.clone(),
                        source,
                    })
            }
        }
    }

    /// A short human description: the file path, or "inline".
    pub fn describe(&self) -> String {
        match self {
            ImageSource::File(p) => p.display().to_string(),
            ImageSource::Bytes(b) => format!("inline ({} bytes)", b.len()),
        }
    }

    pub fn path(&self) -> Option<&Path> {
        match self {
            ImageSource::File(p) => Some(p),
            ImageSource::Bytes(_) => None,
        }
    }
}

/// SHA-256 of the bytes, lower-case hex.
pub fn content_hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// What is known about an image after reading its bytes once: format, hash, size and dimensions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageInfo {
    pub format: ImageFormat,
    pub sha256: String,
    pub bytes: u64,
    /// Width and height in pixels, where the header says (DICOM/NIfTI report `None` until decoded).
    pub width: Option<u32>,
    pub height: Option<u32>,
}

/// Checks bytes and describes them without decoding pixels.
pub fn inspect(bytes: &[u8]) -> Result<ImageInfo, ImageError> {
    if bytes.is_empty() {
        return Err(ImageError::Empty);
    }
    let format = sniff(bytes).ok_or_else(|| ImageError::UnknownFormat(hex_prefix(bytes)))?;
    let (width, height) = match header_dimensions(bytes, format) {
        Some((w, h)) => (Some(w), Some(h)),
        None => (None, None),
    };
    Ok(ImageInfo {
        format,
        sha256: content_hash(bytes),
        bytes: bytes.len() as u64,
        width,
        height,
    })
}

fn header_dimensions(bytes: &[u8], format: ImageFormat) -> Option<(u32, u32)> {
    let fmt = match format {
        ImageFormat::Png => image::ImageFormat::Png,
        ImageFormat::Jpeg => image::ImageFormat::Jpeg,
        _ => return None,
    };
    let reader = image::ImageReader::with_format(std::io::Cursor::new(bytes), fmt);
    reader.into_dimensions().ok()
}

/// Decodes PNG/JPEG bytes fully. Fails with a clear message on truncated or corrupt data.
pub fn decode(bytes: &[u8]) -> Result<image::DynamicImage, ImageError> {
    let format = sniff(bytes).ok_or_else(|| ImageError::UnknownFormat(hex_prefix(bytes)))?;
    let fmt = match format {
        ImageFormat::Png => image::ImageFormat::Png,
        ImageFormat::Jpeg => image::ImageFormat::Jpeg,
        other => {
            return Err(ImageError::Decode {
                format: other,
                message: "this is a volume format; it is read with load_volume and rendered, not decoded here"
                    .into(),
            })
        }
    };
    decode_raster(bytes, fmt).map_err(|e| ImageError::Decode {
        format,
        message: e.to_string(),
    })
}

/// Decodes raster bytes under [`limits::max_raster_bytes`], which the decoder checks against the header's size
/// before it allocates the pixels.
fn decode_raster(bytes: &[u8], fmt: image::ImageFormat) -> image::ImageResult<image::DynamicImage> {
    let mut reader = image::ImageReader::with_format(std::io::Cursor::new(bytes), fmt);
    let mut budget = image::Limits::default();
    budget.max_alloc = Some(limits::max_raster_bytes());
    reader.limits(budget);
    reader.decode()
}

/// Checks that the bytes are a whole image: web and raster formats are decoded in full (a truncated or corrupt
/// file fails here, not when a prompt is built). DICOM and NIfTI bytes are only recognised here: volumes are
/// checked by rendering them ([`render_path`]), which needs their path (a series is a directory).
pub fn verify(bytes: &[u8]) -> Result<ImageFormat, ImageError> {
    if bytes.is_empty() {
        return Err(ImageError::Empty);
    }
    let format = sniff(bytes).ok_or_else(|| ImageError::UnknownFormat(hex_prefix(bytes)))?;
    let Some(fmt) = raster_format(format) else {
        return Ok(format);
    };
    // Decoded pixels are dropped at once: only whether every byte decodes matters here.
    decode_raster(bytes, fmt)
        .map(|_| format)
        .map_err(|e| ImageError::Decode {
            format,
            message: e.to_string(),
        })
}

fn raster_format(format: ImageFormat) -> Option<image::ImageFormat> {
    match format {
        ImageFormat::Png => Some(image::ImageFormat::Png),
        ImageFormat::Jpeg => Some(image::ImageFormat::Jpeg),
        ImageFormat::Gif => Some(image::ImageFormat::Gif),
        ImageFormat::Webp => Some(image::ImageFormat::WebP),
        ImageFormat::Bmp => Some(image::ImageFormat::Bmp),
        ImageFormat::Tiff => Some(image::ImageFormat::Tiff),
        ImageFormat::Dicom | ImageFormat::Nifti => None,
    }
}

fn hex_prefix(bytes: &[u8]) -> String {
    let n = bytes.len().min(8);
    let mut s = hex::encode(&bytes[..n]);
    if bytes.len() > n {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny_png() -> Vec<u8> {
        let img = image::GrayImage::from_pixel(3, 2, image::Luma([128]));
        let mut out = std::io::Cursor::new(Vec::new());
        img.write_to(&mut out, image::ImageFormat::Png).unwrap();
        out.into_inner()
    }

    #[test]
    fn sniffs_png_regardless_of_label() {
        let png = tiny_png();
        assert_eq!(sniff(&png), Some(ImageFormat::Png));
        let info = inspect(&png).unwrap();
        assert_eq!((info.width, info.height), (Some(3), Some(2)));
        assert_eq!(info.sha256.len(), 64);
    }

    #[test]
    fn rejects_empty_and_unknown() {
        assert!(matches!(inspect(&[]), Err(ImageError::Empty)));
        assert!(matches!(
            inspect(b"hello world"),
            Err(ImageError::UnknownFormat(_))
        ));
    }

    /// PNG signature and a valid IHDR chunk (with its CRC), then nothing: what a header-only check accepts.
    fn header_only_png() -> Vec<u8> {
        let png = tiny_png();
        png[..8 + 25].to_vec()
    }

    #[test]
    fn verify_decodes_in_full() {
        assert_eq!(verify(&tiny_png()).unwrap(), ImageFormat::Png);
        let head = header_only_png();
        assert_eq!(head.len(), 33);
        assert!(inspect(&head).is_ok(), "the header alone looks fine");
        let err = verify(&head).unwrap_err();
        assert!(
            matches!(
                err,
                ImageError::Decode {
                    format: ImageFormat::Png,
                    ..
                }
            ),
            "{err}"
        );
        let png = tiny_png();
        assert!(
            verify(&png[..png.len() - 16]).is_err(),
            "cut inside the last IDAT chunk"
        );
        let mut jpeg = std::io::Cursor::new(Vec::new());
        image::GrayImage::from_pixel(16, 16, image::Luma([90]))
            .write_to(&mut jpeg, image::ImageFormat::Jpeg)
            .unwrap();
        let jpeg = jpeg.into_inner();
        assert_eq!(verify(&jpeg).unwrap(), ImageFormat::Jpeg);
        assert!(verify(&jpeg[..jpeg.len() / 2]).is_err());
    }

    #[test]
    fn truncated_png_fails_to_decode_without_panic() {
        let png = tiny_png();
        let cut = &png[..png.len() / 2];
        assert!(decode(cut).is_err());
    }
}
