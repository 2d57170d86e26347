//! Broken raster images (PNG, JPEG, GIF, BMP, TIFF, WebP): cut short, or headers declaring bombs.

use std::io::Write;

use super::Corpus;

fn png_chunk(kind: &[u8; 4], data: &[u8]) -> Vec<u8> {
    let mut crc_input = kind.to_vec();
    crc_input.extend(data);
    let mut out = (data.len() as u32).to_be_bytes().to_vec();
    out.extend(&crc_input);
    out.extend(crc32(&crc_input).to_be_bytes());
    out
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A PNG header declaring `w` x `h` 8-bit grey pixels, with `idat` as its only image data.
fn png_declaring(w: u32, h: u32, idat: &[u8]) -> Vec<u8> {
    let mut ihdr = w.to_be_bytes().to_vec();
    ihdr.extend(h.to_be_bytes());
    ihdr.extend([8, 0, 0, 0, 0]);
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    out.extend(png_chunk(b"IHDR", &ihdr));
    out.extend(png_chunk(b"IDAT", idat));
    out.extend(png_chunk(b"IEND", &[]));
    out
}

pub(super) fn images(c: &mut Corpus) {
    let png = crate::images::gray_png(16, 16, 3);
    c.raster(
        "png_header_only",
        "a.png",
        png[..33].to_vec(),
        "cannot decode png image",
    );
    c.raster(
        "png_cut_in_idat",
        "a.png",
        png[..png.len() - 16].to_vec(),
        "cannot decode png image",
    );
    let zlib = {
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(&vec![0; 1 << 20]).unwrap();
        e.finish().unwrap()
    };
    c.raster(
        "png_bomb_100000_square",
        "a.png",
        png_declaring(100_000, 100_000, &zlib),
        "cannot decode png image",
    );
    c.raster(
        "png_zero_width",
        "a.png",
        png_declaring(0, 16, &zlib),
        "cannot decode png image",
    );
    let mut jpeg = std::io::Cursor::new(Vec::new());
    image::GrayImage::from_pixel(32, 32, image::Luma([90]))
        .write_to(&mut jpeg, image::ImageFormat::Jpeg)
        .unwrap();
    let jpeg = jpeg.into_inner();
    c.raster(
        "jpeg_cut_in_half",
        "a.jpg",
        jpeg[..jpeg.len() / 2].to_vec(),
        "cannot decode jpeg image",
    );
    let mut huge_jpeg = vec![
        0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x0B, 8, 0xFF, 0xFF, 0xFF, 0xFF, 1, 1, 0x11, 0,
    ];
    huge_jpeg.extend([0xFF, 0xD9]);
    c.raster(
        "jpeg_65535_square_header_only",
        "a.jpg",
        huge_jpeg,
        "cannot decode jpeg image",
    );
    c.raster(
        "gif_header_only",
        "a.gif",
        b"GIF89a\x10\x00\x10\x00\x80\x00\x00".to_vec(),
        "cannot decode gif image",
    );
    let mut bmp = b"BM".to_vec();
    bmp.extend([0u8; 12]);
    bmp.extend(40u32.to_le_bytes());
    bmp.extend(100_000i32.to_le_bytes());
    bmp.extend(100_000i32.to_le_bytes());
    bmp.extend([1, 0, 24, 0]);
    bmp.extend([0u8; 24]);
    c.raster("bmp_100000_square", "a.bmp", bmp, "cannot decode bmp image");
    c.raster(
        "tiff_magic_then_garbage",
        "a.tif",
        [b"II*\0".to_vec(), vec![0xFF; 60]].concat(),
        "cannot decode tiff image",
    );
    c.raster(
        "webp_riff_cut",
        "a.webp",
        b"RIFF\x10\x00\x00\x00WEBPVP8 ".to_vec(),
        "cannot decode webp image",
    );
    c.raster(
        "random_bytes",
        "a.png",
        (0..256u32).map(|i| (i * 97 % 256) as u8).collect(),
        "unrecognised image bytes",
    );
    c.raster("empty_file", "a.png", Vec::new(), "empty");
}
