//! Vision projectors against llama.cpp's `mtmd` (PyPI xllamacpp, `scripts/llama-mtmd.py`) on the tiny random
//! projectors `scripts/tiny-gguf.py --projector` writes: the image embeddings equal llama.cpp's to the bit.

use std::path::PathBuf;

use nmb_local::{Projector, RgbImage};
use nmb_test_support::llama::{mtmd, MtmdChunk};

/// The tiny projector of `kind` with its tower's matrices in `ty`.
fn projector(kind: &str, ty: &str) -> Option<PathBuf> {
    crate::common::tiny_gguf(ty, &format!("mmproj-{kind}-{ty}"), &["--projector", kind])
}

/// A `w × h` image of deterministic noise.
fn noise(w: usize, h: usize, seed: u64) -> RgbImage {
    let mut s = seed;
    let pixels = (0..w * h * 3)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 56) as u8
        })
        .collect();
    RgbImage::new(w, h, pixels).expect("w × h × 3 bytes")
}

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

/// Where the embeddings of each image differ from llama.cpp's, one line per image.
fn embedding_differences(
    kind: &str,
    ty: &str,
    text_arch: &str,
    images: &[RgbImage],
) -> Option<Vec<String>> {
    let mmproj = projector(kind, ty)?;
    let model = crate::common::tiny("Q8_0", text_arch)?;
    let p = Projector::load(&mmproj).expect("loads the tiny projector");
    let requests: Vec<(String, Vec<(usize, usize, Vec<u8>)>)> = images
        .iter()
        .map(|img| {
            (
                "<start_of_turn>user\nLook: <__media__> what?<end_of_turn>\n".to_string(),
                vec![(img.width, img.height, img.pixels.clone())],
            )
        })
        .collect();
    let theirs = mtmd(&model, &mmproj, &tmp(), &requests)?;
    let mut failures = Vec::new();
    for (img, answer) in images.iter().zip(&theirs) {
        let theirs: Vec<&Vec<f32>> = answer
            .chunks
            .iter()
            .filter_map(|c| match c {
                MtmdChunk::Image(e) => Some(e),
                MtmdChunk::Text(_) => None,
            })
            .collect();
        assert_eq!(theirs.len(), 1, "one image chunk");
        let ours = p.encode(img);
        let label = format!("{kind} {ty} {}x{}", img.width, img.height);
        assert_eq!(ours.len(), theirs[0].len(), "{label}: embedding sizes");
        let differ: Vec<usize> = (0..ours.len())
            .filter(|&i| ours[i].to_bits() != theirs[0][i].to_bits())
            .collect();
        if let Some(&i) = differ.first() {
            failures.push(format!(
                "{label}: {} of {} values differ; value {i}: nmb {:e}, llama.cpp {:e}",
                differ.len(),
                ours.len(),
                ours[i],
                theirs[0][i]
            ));
        }
    }
    Some(failures)
}

#[test]
fn gemma3_embeddings_equal_llama_cpp() {
    let images = [noise(224, 224, 1), noise(300, 200, 2), noise(97, 151, 3)];
    let mut failures = Vec::new();
    for ty in ["F16", "Q8_0"] {
        let Some(f) = embedding_differences("gemma3", ty, "gemma3", &images) else {
            return;
        };
        failures.extend(f);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
