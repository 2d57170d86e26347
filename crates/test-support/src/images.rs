//! Small PNGs made on the fly, one maker per kind of image the tests and benches need.

use image::{GrayImage, ImageFormat, Luma, Rgb, RgbImage};

/// A `side` x `side` RGB PNG whose pixels depend on `seed`, so different seeds give different bytes.
pub fn png(side: u32, seed: u64) -> Vec<u8> {
    let img = RgbImage::from_fn(side, side, |x, y| {
        let v = (u64::from(x) * 31 + u64::from(y) * 17 + seed * 101) % 251;
        Rgb([v as u8, (v * 3 % 251) as u8, (255 - v) as u8])
    });
    encode(|out| img.write_to(out, ImageFormat::Png))
}

/// A grey `width` x `height` PNG with the pattern `x ^ y ^ seed`: distinct bytes per seed, compresses well.
pub fn gray_png(width: u32, height: u32, seed: u8) -> Vec<u8> {
    let img = GrayImage::from_fn(width, height, |x, y| Luma([(x as u8) ^ (y as u8) ^ seed]));
    encode(|out| img.write_to(out, ImageFormat::Png))
}

/// A `width` x `height` PNG of one grey `shade`.
pub fn flat_png(width: u32, height: u32, shade: u8) -> Vec<u8> {
    let img = GrayImage::from_pixel(width, height, Luma([shade]));
    encode(|out| img.write_to(out, ImageFormat::Png))
}

/// A `side` x `side` PNG of RGB noise from `seed`. Noise does not compress, so the file is about `3 * side^2`
/// bytes (side 124 gives ~46 KB): the size of a real image on the wire, for throughput tests and benches.
pub fn noise_png(side: u32, seed: u64) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, side, side);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut w = enc.write_header().expect("png header");
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let data: Vec<u8> = (0..side * side * 3)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 24) as u8
            })
            .collect();
        w.write_image_data(&data).expect("png data");
    }
    out
}

fn encode(write: impl FnOnce(&mut std::io::Cursor<Vec<u8>>) -> image::ImageResult<()>) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    write(&mut out).expect("encoding a PNG in memory");
    out.into_inner()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_maker_gives_a_decodable_png_and_seeds_differ() {
        for (a, b, w, h) in [
            (png(8, 1), png(8, 2), 8, 8),
            (gray_png(6, 4, 1), gray_png(6, 4, 2), 6, 4),
            (flat_png(4, 3, 10), flat_png(4, 3, 11), 4, 3),
            (noise_png(16, 1), noise_png(16, 2), 16, 16),
        ] {
            assert_ne!(a, b);
            let img = image::load_from_memory(&a).unwrap();
            assert_eq!((img.width(), img.height()), (w, h));
        }
        assert!(noise_png(124, 7).len() > 40_000, "noise does not compress");
    }
}
