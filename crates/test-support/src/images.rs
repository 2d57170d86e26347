//! Small PNGs made on the fly.

use image::{ImageFormat, Rgb, RgbImage};

/// A `side` x `side` RGB PNG whose pixels depend on `seed`, so different seeds give different bytes.
pub fn png(side: u32, seed: u64) -> Vec<u8> {
    let img = RgbImage::from_fn(side, side, |x, y| {
        let v = (u64::from(x) * 31 + u64::from(y) * 17 + seed * 101) % 251;
        Rgb([v as u8, (v * 3 % 251) as u8, (255 - v) as u8])
    });
    let mut out = std::io::Cursor::new(Vec::new());
    img.write_to(&mut out, ImageFormat::Png)
        .expect("encoding a PNG in memory");
    out.into_inner()
}

#[cfg(test)]
mod tests {
    #[test]
    fn pngs_decode_and_differ_by_seed() {
        let (a, b) = (super::png(8, 1), super::png(8, 2));
        assert_ne!(a, b);
        let img = image::load_from_memory(&a).unwrap();
        assert_eq!((img.width(), img.height()), (8, 8));
    }
}
