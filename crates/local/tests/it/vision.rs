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
    let requests: Vec<nmb_test_support::llama::MtmdRequest> = images
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

/// Where the logits after prompts holding one and two images differ from llama.cpp's, one line per prompt. The
/// text runs are llama.cpp's own tokens (this compares the numbers, not the tokenizer); the images our
/// embeddings, which the test above holds equal to llama.cpp's.
fn logits_differences(kind: &str, ty: &str, text_arch: &str) -> Option<Vec<String>> {
    let mmproj = projector(kind, ty)?;
    let model = crate::common::tiny("Q8_0", text_arch)?;
    let p = Projector::load(&mmproj).expect("loads the tiny projector");
    let weights = nmb_local::LocalWeights::load(&model).expect("loads the tiny model");
    let (a, b) = (noise(224, 224, 4), noise(180, 260, 5));
    let requests: Vec<(String, Vec<&RgbImage>)> = vec![
        (
            "<start_of_turn>user\nWhat is this? <__media__><end_of_turn>\n<start_of_turn>model\n"
                .into(),
            vec![&a],
        ),
        (
            "<start_of_turn>user\n<__media__> and <__media__> differ how?<end_of_turn>\n".into(),
            vec![&a, &b],
        ),
        ("<__media__>".into(), vec![&b]),
    ];
    let wire: Vec<nmb_test_support::llama::MtmdRequest> = requests
        .iter()
        .map(|(t, imgs)| {
            (
                t.clone(),
                imgs.iter()
                    .map(|i| (i.width, i.height, i.pixels.clone()))
                    .collect(),
            )
        })
        .collect();
    let theirs = mtmd(&model, &mmproj, &tmp(), &wire)?;
    let mut failures = Vec::new();
    for ((prompt, imgs), answer) in requests.iter().zip(&theirs) {
        let mut images = imgs.iter();
        let parts: Vec<nmb_local::PromptPart> = answer
            .chunks
            .iter()
            .map(|c| match c {
                MtmdChunk::Text(ids) => nmb_local::PromptPart::Tokens(ids.clone()),
                MtmdChunk::Image(_) => {
                    let img = images.next().expect("an image per image chunk");
                    p.image_part(weights.install(|| p.encode(img)))
                }
            })
            .collect();
        let ours = weights.parts_logits(&parts).expect("logits");
        let differ = (0..ours.len())
            .filter(|&i| ours[i].to_bits() != answer.logits[i].to_bits())
            .count();
        if differ > 0 || ours.len() != answer.logits.len() {
            failures.push(format!(
                "{kind} {ty} {prompt:?}: {differ} of {} logits differ",
                ours.len()
            ));
        }
    }
    Some(failures)
}

#[test]
fn gemma3_logits_after_images_equal_llama_cpp() {
    let mut failures = Vec::new();
    for ty in ["F16", "Q8_0"] {
        let Some(f) = logits_differences("gemma3", ty, "gemma3") else {
            return;
        };
        failures.extend(f);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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

mod hostile {
    //! Projector files whose headers lie, written from Rust (`Gguf::tiny_projector`): each is refused at load
    //! with an error naming the file and the key or tensor, never a panic or an allocation sized from the lie.
    use nmb_local::{Projector, RgbImage};
    use nmb_test_support::gguf::{Gguf, Value};

    fn load(g: &Gguf) -> Result<Projector, nmb_local::LocalError> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hostile-mmproj.gguf");
        g.write(&path);
        Projector::load(&path)
    }

    fn refused(change: impl FnOnce(&mut Gguf), says: &[&str]) {
        let mut g = Gguf::tiny_projector();
        change(&mut g);
        let text = load(&g).expect_err("refused").to_string();
        for word in says.iter().chain(&["hostile-mmproj.gguf"]) {
            assert!(text.contains(word), "`{word}` missing from: {text}");
        }
    }

    #[test]
    fn the_tiny_projector_loads_and_encodes() {
        let p = load(&Gguf::tiny_projector()).expect("loads");
        assert_eq!((p.tokens_per_image(), p.output_width()), (1, 64));
        let img = RgbImage::new(5, 3, vec![7; 45]).expect("an image");
        let e = p.encode(&img);
        assert_eq!(e.len(), 64);
        assert!(e.iter().all(|v| v.is_finite()), "{e:?}");
    }

    #[test]
    fn another_projector_type_is_refused_with_the_types_read() {
        refused(
            |g| {
                g.set("clip.projector_type", Value::Str("qwen2vl".into()));
            },
            &["clip.projector_type", "gemma3, idefics3", "qwen2vl"],
        );
    }

    #[test]
    fn hostile_sizes_are_refused_naming_the_key() {
        let cases: [(&str, Value, &str); 8] = [
            (
                "clip.vision.image_size",
                Value::U32(1 << 30),
                "clip.vision.image_size",
            ),
            (
                "clip.vision.image_size",
                Value::U32(30),
                "multiple of the patch size",
            ),
            (
                "clip.vision.patch_size",
                Value::U32(0),
                "clip.vision.patch_size",
            ),
            (
                "clip.vision.embedding_length",
                Value::U32(u32::MAX),
                "clip.vision.embedding_length",
            ),
            (
                "clip.vision.attention.head_count",
                Value::U32(3),
                "head_count",
            ),
            (
                "clip.vision.block_count",
                Value::U32(100_000),
                "clip.vision.block_count",
            ),
            (
                "clip.vision.image_mean",
                Value::F32s(vec![0.5; 2]),
                "clip.vision.image_mean",
            ),
            (
                "clip.vision.image_std",
                Value::F32s(vec![0.0; 3]),
                "clip.vision.image_std",
            ),
        ];
        for (key, value, says) in cases {
            refused(
                |g| {
                    g.set(key, value);
                },
                &[says],
            );
        }
        // Activations past the budget: a grid of 4096 × 4096 patches.
        refused(
            |g| {
                g.set("clip.vision.image_size", Value::U32(4096));
                g.set("clip.vision.patch_size", Value::U32(1));
            },
            &["GiB"],
        );
    }

    #[test]
    fn lying_tensors_and_counts_are_refused() {
        refused(
            |g| g.tensor("v.blk.0.attn_q.weight").dims = vec![32, 128],
            &["v.blk.0.attn_q.weight", "shape"],
        );
        refused(
            |g| g.tensor("v.position_embd.weight").dims = vec![128, 2],
            &["v.position_embd.weight"],
        );
        refused(
            |g| g.tensor("v.patch_embd.weight").ty = 1,
            &["v.patch_embd.weight"],
        );
        refused(
            |g| g.tensor("mm.soft_emb_norm.weight").offset = Some(u64::MAX - 8),
            &["mm.soft_emb_norm.weight"],
        );
        refused(
            |g| {
                g.tensors.retain(|t| t.name != "v.post_ln.bias");
            },
            &["v.post_ln.bias", "missing"],
        );
        refused(|g| g.metadata_count = Some(u64::MAX / 2), &["metadata"]);
    }
}
