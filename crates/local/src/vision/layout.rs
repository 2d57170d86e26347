//! Where an image's embeddings go in a prompt, as llama.cpp's `mtmd_tokenize` places them for each projector
//! type: the server writes a marker into the text for each image part, applies the chat template, and
//! `mtmd_tokenize` splits the text at the markers, tokenises each piece on its own (special tokens parsed, no
//! BOS) and puts the projector's image chunk where each marker stood; BOS goes in front of the first piece.

use super::{Projector, ProjectorKind, PromptPart, RgbImage};
use crate::LocalError;

/// The text `mtmd` puts before and after a Gemma 3 image (`img_beg`, `img_end`), tokenised as text with its
/// special tokens parsed.
pub const GEMMA3_IMAGE_START: &str = "<start_of_image>";
pub const GEMMA3_IMAGE_END: &str = "<end_of_image>";

impl Projector {
    /// The prompt parts one image becomes for this projector's type, its embeddings encoded here (run it on
    /// the model's thread pool); `tokenize` turns text into token ids as the prompt's other text is tokenised
    /// (special-token strings become their tokens, no BOS).
    /// - `gemma3`: the text `<start_of_image>`, the image's embeddings (read non-causally), `<end_of_image>`.
    /// - `idefics3`: each tile after `<fake_token_around_image><row_R_col_C>`, rows split by newlines, then the
    ///   global image between `\n\n<fake_token_around_image><global-img>` and `<fake_token_around_image>`.
    pub fn image_parts(
        &self,
        image: &RgbImage,
        tokenize: &dyn Fn(&str) -> Result<Vec<u32>, LocalError>,
    ) -> Result<Vec<PromptPart>, LocalError> {
        match self.kind() {
            ProjectorKind::Gemma3 => Ok(vec![
                PromptPart::Tokens(tokenize(GEMMA3_IMAGE_START)?),
                self.image_part(self.encode(image)),
                PromptPart::Tokens(tokenize(GEMMA3_IMAGE_END)?),
            ]),
            ProjectorKind::Idefics3 => super::idefics3::idefics3_parts(self, image, tokenize),
        }
    }
}

/// A rendered prompt holding one `marker` per image, as `mtmd_tokenize` splits it: each piece of text between
/// markers tokenised on its own, each image replaced by `image(i)` (the parts [`Projector::image_parts`] gives),
/// neighbouring token runs merged into one, and `bos` put in front unless the prompt starts with it. Fails
/// when the text does not hold exactly one marker per image (a chat template that drops or repeats content).
pub(crate) fn split_prompt(
    text: &str,
    marker: &str,
    images: usize,
    bos: Option<u32>,
    tokenize: &dyn Fn(&str) -> Result<Vec<u32>, LocalError>,
    mut image: impl FnMut(usize) -> Result<Vec<PromptPart>, LocalError>,
) -> Result<Vec<PromptPart>, LocalError> {
    let pieces: Vec<&str> = text.split(marker).collect();
    if pieces.len() != images + 1 {
        return Err(LocalError::InvalidParams {
            field: "images",
            message: format!(
                "the chat template wrote {} image markers for the request's {images} images; it must keep every \
                 message's content once",
                pieces.len() - 1
            ),
        });
    }
    let mut parts = Vec::new();
    for (i, piece) in pieces.iter().enumerate() {
        if i > 0 {
            parts.extend(image(i - 1)?);
        }
        parts.push(PromptPart::Tokens(tokenize(piece)?));
    }
    let mut merged: Vec<PromptPart> = Vec::with_capacity(parts.len());
    for part in parts {
        match (merged.last_mut(), part) {
            (_, PromptPart::Tokens(ids)) if ids.is_empty() => {}
            (Some(PromptPart::Tokens(run)), PromptPart::Tokens(ids)) => run.extend(ids),
            (_, part) => merged.push(part),
        }
    }
    if let Some(bos) = bos {
        match merged.first_mut() {
            Some(PromptPart::Tokens(run)) if run.first() == Some(&bos) => {}
            Some(PromptPart::Tokens(run)) => run.insert(0, bos),
            _ => merged.insert(0, PromptPart::Tokens(vec![bos])),
        }
    }
    Ok(merged)
}

/// An image's bytes (PNG or JPEG) decoded to RGB as llama.cpp's server loads them (three channels: grey is
/// repeated, alpha dropped), or why they cannot be: never a panic, and no allocation past the imaging budget.
pub(crate) fn decode(bytes: &[u8]) -> Result<RgbImage, String> {
    // A third-party decoder that panics on hostile bytes fails this image, not the engine.
    let decoded = std::panic::catch_unwind(|| nmb_imaging::decode(bytes))
        .map_err(|_| "the image decoder failed on these bytes".to_string())?;
    let img = decoded.map_err(|e| e.to_string())?;
    let rgb = img.to_rgb8();
    let (w, h) = (rgb.width() as usize, rgb.height() as usize);
    if w == 0 || h == 0 {
        return Err("the image has no pixels".into());
    }
    RgbImage::new(w, h, rgb.into_raw())
        .ok_or_else(|| "the decoded pixels do not fill the image".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token per character, for checking where pieces go.
    fn chars(s: &str) -> Result<Vec<u32>, LocalError> {
        Ok(s.chars().map(|c| c as u32).collect())
    }

    fn image(i: usize) -> Result<Vec<PromptPart>, LocalError> {
        Ok(vec![
            PromptPart::Tokens(vec![1000]),
            PromptPart::Image {
                embd: vec![i as f32],
                non_causal: true,
            },
            PromptPart::Tokens(vec![1001]),
        ])
    }

    #[test]
    fn pieces_are_tokenised_apart_and_images_go_where_their_markers_stood() {
        let parts = split_prompt("ab<M>c<M>", "<M>", 2, Some(7), &chars, image).expect("splits");
        let img = |i: usize| PromptPart::Image {
            embd: vec![i as f32],
            non_causal: true,
        };
        assert_eq!(
            parts,
            vec![
                PromptPart::Tokens(vec![7, 'a' as u32, 'b' as u32, 1000]),
                img(0),
                PromptPart::Tokens(vec![1001, 'c' as u32, 1000]),
                img(1),
                PromptPart::Tokens(vec![1001]),
            ]
        );
    }

    #[test]
    fn an_image_first_gets_bos_in_a_run_of_its_own_and_markers_must_match_the_images() {
        let bare = |_: usize| -> Result<Vec<PromptPart>, LocalError> {
            Ok(vec![PromptPart::Image {
                embd: vec![0.0],
                non_causal: false,
            }])
        };
        let parts = split_prompt("<M>", "<M>", 1, Some(7), &chars, bare).expect("splits");
        assert_eq!(parts[0], PromptPart::Tokens(vec![7]));
        assert_eq!(parts.len(), 2);
        let err = split_prompt("a<M><M>", "<M>", 1, None, &chars, image).expect_err("refused");
        assert!(err.to_string().contains("2 image markers"), "{err}");
    }
}
