//! Thumbnails: stored image bytes are decoded and re-encoded as a small PNG, never passed through. A file that
//! claims to be an image but carries anything else (markup, a polyglot, a broken header) yields no thumbnail,
//! only a note.

use std::io::Cursor;

use base64::Engine;

use serde::Serialize;

/// A small PNG made by nmb from a stored image: decoded, resized and re-encoded, so that nothing from the
/// stored bytes reaches the page except pixels.
#[derive(Debug, Clone, Serialize)]
pub struct Thumbnail {
    pub width: u32,
    pub height: u32,
    /// Base64 of the PNG; `None` when the stored image could not be decoded.
    #[serde(skip)]
    pub png_base64: Option<String>,
    /// Why there is no thumbnail.
    pub problem: Option<String>,
}

/// Longest side of a thumbnail, in pixels.
pub const MAX_SIDE: u32 = 192;

pub fn thumbnail(bytes: &[u8]) -> Thumbnail {
    match encode(bytes) {
        Ok((width, height, png)) => Thumbnail {
            width,
            height,
            png_base64: Some(base64::engine::general_purpose::STANDARD.encode(png)),
            problem: None,
        },
        Err(e) => Thumbnail {
            width: 0,
            height: 0,
            png_base64: None,
            problem: Some(format!("the stored image could not be decoded: {e}")),
        },
    }
}

pub fn missing(sha256: &str) -> Thumbnail {
    Thumbnail {
        width: 0,
        height: 0,
        png_base64: None,
        problem: Some(format!(
            "image {} is referenced by the prompt but not in the store",
            &sha256[..sha256.len().min(12)]
        )),
    }
}

fn encode(bytes: &[u8]) -> Result<(u32, u32, Vec<u8>), image::ImageError> {
    let decoded = image::load_from_memory(bytes)?;
    let small = if decoded.width() > MAX_SIDE || decoded.height() > MAX_SIDE {
        decoded.thumbnail(MAX_SIDE, MAX_SIDE)
    } else {
        decoded
    };
    // Grey stays grey (most scans are), anything else becomes plain RGB: no alpha, no metadata chunks.
    let small = if small.color().has_color() {
        image::DynamicImage::ImageRgb8(small.to_rgb8())
    } else {
        image::DynamicImage::ImageLuma8(small.to_luma8())
    };
    let mut out = Cursor::new(Vec::new());
    small.write_to(&mut out, image::ImageFormat::Png)?;
    Ok((small.width(), small.height(), out.into_inner()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reencodes_and_shrinks() {
        let img = image::RgbImage::from_fn(600, 300, |x, y| image::Rgb([x as u8, y as u8, 7]));
        let mut png = Cursor::new(Vec::new());
        img.write_to(&mut png, image::ImageFormat::Png).unwrap();
        let t = thumbnail(png.get_ref());
        assert_eq!((t.width, t.height), (MAX_SIDE, MAX_SIDE / 2));
        let back = base64::engine::general_purpose::STANDARD
            .decode(t.png_base64.unwrap())
            .unwrap();
        assert_ne!(back, png.into_inner());
        assert!(back.starts_with(b"\x89PNG"));
    }

    #[test]
    fn markup_pretending_to_be_an_image_gives_no_thumbnail() {
        let t = thumbnail(b"<svg onload=alert(3)></svg>");
        assert!(t.png_base64.is_none());
        assert!(t.problem.unwrap().contains("could not be decoded"));
    }
}
