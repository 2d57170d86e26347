//! Idefics3 (SmolVLM) images as llama.cpp's `mtmd` reads them: the image sliced into tiles plus a global
//! image (`mtmd_image_preprocessor_idefics3`, a port of Hugging Face's `Idefics3ImageProcessor`), each encoded
//! on its own, and the text `mtmd_tokenize` places around them.
//!
//! - **Sizes.** The image is resized, keeping its aspect ratio, so that its longer side is
//!   `clip.vision.preproc_image_size` (the shorter side `int(long / ratio)` in f64, made even, as Hugging Face's
//!   `_resize_output_size_rescale_to_max_len`), then stretched so that each side is the next multiple of
//!   `clip.vision.image_size` (`resize_for_vision_encoder`). Every resize is Pillow's Lanczos (module
//!   `preprocess`). Images are enlarged as well as shrunk, so a small image still becomes the full grid.
//! - **Tiles.** The stretched image is cut into `image_size` squares, row by row; the global image is the
//!   stretched image resized to one `image_size` square. Even a grid of one tile has its tile and the global
//!   image (llama.cpp always slices Idefics3 images).
//! - **Layout.** Tile by tile, `<fake_token_around_image><row_R_col_C>` (tokenized with special tokens) then the
//!   tile's embeddings; `\n` after each row but the last; then `\n\n`, `<fake_token_around_image>`,
//!   `<global-img>`, the global image's embeddings and `<fake_token_around_image>`. The four fixed pieces are
//!   single tokens of the text model (llama.cpp looks them up by their text); consecutive text is one run, as
//!   `mtmd_tokenize` appends text to the chunk before it.

use super::preprocess::{self, Filter};
use super::{Projector, PromptPart, RgbImage};
use crate::LocalError;

/// An image cut as llama.cpp cuts it for Idefics3: `cols × rows` tiles (row by row) and the global image, each
/// `image_size` pixels square.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Slices {
    pub(super) cols: usize,
    pub(super) rows: usize,
    pub(super) tiles: Vec<RgbImage>,
    pub(super) global: RgbImage,
}

/// The text and image parts of `image` for a prompt, in `mtmd_tokenize`'s order (see the module doc), each image
/// part the embeddings of one tile or of the global image. `tokenize` tokenizes text as it appears inside a
/// prompt, special-token strings becoming their tokens (`Tokenizer::encode`). Runs on the caller's rayon pool.
pub(super) fn idefics3_parts(
    p: &Projector,
    image: &RgbImage,
    tokenize: &dyn Fn(&str) -> Result<Vec<u32>, LocalError>,
) -> Result<Vec<PromptPart>, LocalError> {
    let token = |text: &str| -> Result<u32, LocalError> {
        match tokenize(text)?.as_slice() {
            &[id] => Ok(id),
            _ => Err(LocalError::Inference {
                path: p.path.clone(),
                message: format!(
                    "the text model has no token {text:?}, which llama.cpp's mtmd places around Idefics3 images"
                ),
            }),
        }
    };
    let fake = token("<fake_token_around_image>")?;
    let (newline, two_newlines, global) = (token("\n")?, token("\n\n")?, token("<global-img>")?);
    let slices = slice(image, p.hp.image_size, longest_edge(p))?;
    let mut parts = Vec::with_capacity(2 * slices.tiles.len() + 4);
    for row in 0..slices.rows {
        if row > 0 {
            push_text(&mut parts, &[newline]);
        }
        for col in 0..slices.cols {
            let marker = format!("<fake_token_around_image><row_{}_col_{}>", row + 1, col + 1);
            push_text(&mut parts, &tokenize(&marker)?);
            let tile = &slices.tiles[row * slices.cols + col];
            parts.push(p.image_part(p.encode_square(tile)));
        }
    }
    push_text(&mut parts, &[two_newlines, fake, global]);
    parts.push(p.image_part(p.encode_square(&slices.global)));
    push_text(&mut parts, &[fake]);
    Ok(parts)
}

/// `clip.vision.preproc_image_size`, which the loader checks is there for Idefics3.
fn longest_edge(p: &Projector) -> usize {
    p.hp.longest_edge
}

impl Projector {
    /// The prompt parts of `image` for an Idefics3 projector, as `mtmd_tokenize` lays them out: text runs and
    /// the embeddings of each tile and of the global image (the slicing and layout of the `vision` module's
    /// Idefics3 part). `tokenize` tokenizes text inside a prompt, special-token strings becoming their tokens
    /// ([`crate::Tokenizer::encode`]). Any other projector is refused with [`LocalError::InvalidParams`].
    pub fn idefics3_parts(
        &self,
        image: &RgbImage,
        tokenize: &dyn Fn(&str) -> Result<Vec<u32>, LocalError>,
    ) -> Result<Vec<PromptPart>, LocalError> {
        if self.kind != super::ProjectorKind::Idefics3 {
            return Err(LocalError::InvalidParams {
                field: "mmproj",
                message: format!("a {} projector has no Idefics3 layout", self.kind.name()),
            });
        }
        idefics3_parts(self, image, tokenize)
    }
}

/// Appends `ids` to the text run at the end of `parts`, or starts one.
fn push_text(parts: &mut Vec<PromptPart>, ids: &[u32]) {
    if let Some(PromptPart::Tokens(run)) = parts.last_mut() {
        run.extend_from_slice(ids);
    } else {
        parts.push(PromptPart::Tokens(ids.to_vec()));
    }
}

/// `image` cut into tiles of `size` and the global image (see the module doc); an image so narrow that its
/// shorter side would shrink to nothing is refused, as llama.cpp refuses it.
pub(super) fn slice(image: &RgbImage, size: usize, longest: usize) -> Result<Slices, LocalError> {
    let (w, h) = fit_longest_edge(image.width, image.height, longest);
    if w == 0 || h == 0 {
        return Err(LocalError::InvalidParams {
            field: "image",
            message: format!(
                "a {}×{} image is too narrow for Idefics3: its shorter side would be 0 pixels at a longer side of \
                 {longest}",
                image.width, image.height
            ),
        });
    }
    let fitted = resized(image, w, h);
    let (gw, gh) = grid_size(w, h, size);
    let grid = resized(&fitted, gw, gh);
    let (cols, rows) = (gw / size, gh / size);
    let tiles = (0..rows * cols)
        .map(|i| crop(&grid, (i % cols) * size, (i / cols) * size, size))
        .collect();
    Ok(Slices {
        cols,
        rows,
        tiles,
        global: resized(&grid, size, size),
    })
}

/// Hugging Face's `_resize_output_size_rescale_to_max_len`: the longer side `longest`, the other
/// `int(longest / ratio)` (f64), made even.
fn fit_longest_edge(w: usize, h: usize, longest: usize) -> (usize, usize) {
    let ratio = w as f64 / h as f64;
    let even = |v: usize| v + v % 2;
    if w >= h {
        (longest, even((longest as f64 / ratio) as usize))
    } else {
        (even((longest as f64 * ratio) as usize), longest)
    }
}

/// Hugging Face's `resize_for_vision_encoder`: the longer side up to a multiple of `size`, the other from it at
/// the same ratio (truncated), then up to a multiple of `size`.
fn grid_size(w: usize, h: usize, size: usize) -> (usize, usize) {
    let ratio = w as f64 / h as f64;
    let up = |v: usize| v.div_ceil(size) * size;
    if w >= h {
        let gw = up(w);
        (gw, up((gw as f64 / ratio) as usize))
    } else {
        let gh = up(h);
        (up((gh as f64 * ratio) as usize), gh)
    }
}

fn resized(img: &RgbImage, w: usize, h: usize) -> RgbImage {
    RgbImage {
        width: w,
        height: h,
        pixels: preprocess::resample(img, w, h, Filter::Lanczos),
    }
}

/// The `size × size` square of `img` from `(x, y)`.
fn crop(img: &RgbImage, x: usize, y: usize, size: usize) -> RgbImage {
    let mut pixels = Vec::with_capacity(size * size * 3);
    for row in y..y + size {
        let start = (row * img.width + x) * 3;
        pixels.extend_from_slice(&img.pixels[start..start + size * 3]);
    }
    RgbImage {
        width: size,
        height: size,
        pixels,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_follow_hugging_face() {
        // 300 × 200 at 224: 224 × int(149.33) = 149, made even.
        assert_eq!(fit_longest_edge(300, 200, 224), (224, 150));
        assert_eq!(fit_longest_edge(200, 300, 224), (150, 224));
        // f64, not f32: 224 / (32 / 15) is 104.99999… in f32 but 105 in f64, made even to 106.
        assert_eq!(fit_longest_edge(32, 15, 224), (224, 106));
        assert_eq!(fit_longest_edge(600, 2, 224), (224, 0));
        assert_eq!(grid_size(224, 150, 112), (224, 224));
        assert_eq!(grid_size(224, 76, 112), (224, 112));
        assert_eq!(grid_size(76, 224, 112), (112, 224));
    }

    #[test]
    fn tiles_are_the_grid_row_by_row() {
        let pixels = (0..300 * 100 * 3).map(|i| (i % 251) as u8).collect();
        let img = RgbImage::new(300, 100, pixels).expect("an image");
        let s = slice(&img, 112, 224).expect("sliced");
        assert_eq!((s.cols, s.rows, s.tiles.len()), (2, 1, 2));
        assert!(s.tiles.iter().all(|t| (t.width, t.height) == (112, 112)));
        assert_eq!((s.global.width, s.global.height), (112, 112));
        let narrow = RgbImage::new(600, 2, vec![0; 600 * 2 * 3]).expect("an image");
        let err = slice(&narrow, 112, 224).expect_err("refused").to_string();
        assert!(err.contains("600×2"), "{err}");
    }
}
