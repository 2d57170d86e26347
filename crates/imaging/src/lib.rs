//! Image bytes for nmb: where an image's bytes come from, what format they really are, and their content hash.
//!
//! This crate owns the byte level only. It sniffs formats from magic numbers (never from a label or a file
//! extension), hashes content with SHA-256, reads dimensions from headers, and decodes or re-encodes on demand.
//! It does not know about cases, sequences or planes (that is `nmb-suite`), and it never keeps decoded pixels
//! around: callers ask for them when they need them and drop them afterwards.

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
    if bytes.len() >= 132 && &bytes[128..132] == b"DICM" {
        return Some(ImageFormat::Dicom);
    }
    if is_nifti(bytes) {
        return Some(ImageFormat::Nifti);
    }
    None
}

fn is_nifti(bytes: &[u8]) -> bool {
    // NIfTI-1: sizeof_hdr == 348 and magic "n+1\0"/"ni1\0" at 344; NIfTI-2: sizeof_hdr == 540, magic at 4.
    // Gzipped NIfTI (.nii.gz) starts with the gzip magic; accept it and let the decoder confirm.
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
                message: "decoding this format is not supported yet".into(),
            })
        }
    };
    image::load_from_memory_with_format(bytes, fmt).map_err(|e| ImageError::Decode {
        format,
        message: e.to_string(),
    })
}

/// Checks that the bytes are a whole image: web and raster formats are decoded in full (a truncated or corrupt
/// file fails here, not when a prompt is built); DICOM and NIfTI are recognised by their magic numbers only,
/// since rendering volumes is not part of this crate yet.
pub fn verify(bytes: &[u8]) -> Result<ImageFormat, ImageError> {
    if bytes.is_empty() {
        return Err(ImageError::Empty);
    }
    let format = sniff(bytes).ok_or_else(|| ImageError::UnknownFormat(hex_prefix(bytes)))?;
    let Some(fmt) = raster_format(format) else {
        return Ok(format);
    };
    // Decoded pixels are dropped at once: only whether every byte decodes matters here.
    image::load_from_memory_with_format(bytes, fmt)
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
