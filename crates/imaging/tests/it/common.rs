use std::path::Path;

use nmb_imaging::{render_path, RenderOptions};

/// Renders and decodes the views back to grey levels: (width, height, pixels) per view.
pub fn render_grey(path: &Path, opts: &RenderOptions) -> Vec<(u32, u32, Vec<u8>)> {
    let (views, _) = render_path(path, opts).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    views
        .iter()
        .map(|v| {
            let img = image::load_from_memory(&v.png).expect("a PNG").to_luma8();
            assert_eq!(img.dimensions(), (v.width, v.height));
            (v.width, v.height, img.into_raw())
        })
        .collect()
}

pub fn opts(text: &str) -> RenderOptions {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("options {text}: {e}"))
}

/// Reads a binary PGM (P5) written by tests/fixtures/make_reference.py.
pub fn read_pgm(name: &str) -> (u32, u32, Vec<u8>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reference")
        .join(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let text = String::from_utf8_lossy(&bytes[..32.min(bytes.len())]).to_string();
    let mut fields = text.split_ascii_whitespace();
    assert_eq!(fields.next(), Some("P5"));
    let w: u32 = fields.next().unwrap().parse().unwrap();
    let h: u32 = fields.next().unwrap().parse().unwrap();
    let pixels = bytes[bytes.len() - (w * h) as usize..].to_vec();
    (w, h, pixels)
}

/// Largest per-pixel difference between two grey images of the same size.
pub fn max_diff(a: &[u8], b: &[u8]) -> u8 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| x.abs_diff(*y))
        .max()
        .unwrap_or(0)
}

/// Whether an image has any contrast at all (a failed decode tends to give one flat grey).
pub fn has_contrast(pixels: &[u8]) -> bool {
    let (min, max) = pixels
        .iter()
        .fold((255, 0), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    max - min > 20
}
