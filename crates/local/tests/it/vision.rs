//! Vision projectors against llama.cpp's `mtmd` (PyPI xllamacpp, `scripts/llama-mtmd.py`) on the tiny random
//! projectors `scripts/tiny-gguf.py --projector` writes: the image embeddings, the chunks a prompt becomes and
//! the logits after prompts with images equal llama.cpp's to the bit. Idefics3 runs with the tiny SmolVLM-like
//! text model (`--arch smolvlm`), whose vocabulary holds the tokens mtmd places around its tiles.

use std::path::PathBuf;

use nmb_local::{Projector, PromptPart, RgbImage};
use nmb_test_support::llama::{mtmd, mtmd_with, MtmdAnswer, MtmdChunk, MtmdRequest};

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
    embedding_differences_of(projector(kind, ty)?, text_arch, images)
}

/// As [`embedding_differences`], for the projector at `mmproj`.
fn embedding_differences_of(
    mmproj: PathBuf,
    text_arch: &str,
    images: &[RgbImage],
) -> Option<Vec<String>> {
    let model = crate::common::tiny("Q8_0", text_arch)?;
    let p = Projector::load(&mmproj).expect("loads the tiny projector");
    let requests: Vec<MtmdRequest> = images
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
        let label = format!("{} {}x{}", mmproj.display(), img.width, img.height);
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
    let wire: Vec<MtmdRequest> = requests
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
        let parts: Vec<PromptPart> = answer
            .chunks
            .iter()
            .map(|c| match c {
                MtmdChunk::Text(ids) => PromptPart::Tokens(ids.clone()),
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

/// MedGemma's projector shapes (width 1152, 16 heads of 72, MLP 4304) in small: width 144, 2 heads of 72, MLP
/// 136, so the tower's matrices are 144 and 136 wide, multiples of 8 but not of 32 (llama.cpp multiplies
/// the patches with tinyBLAS, and the pooled tokens' input projection too).
#[test]
fn gemma3_embeddings_of_widths_off_32_equal_llama_cpp() {
    let args = [
        "--projector",
        "gemma3",
        "--projector-width",
        "144",
        "--projector-heads",
        "2",
        "--projector-ffn",
        "136",
    ];
    let Some(mmproj) = crate::common::tiny_gguf("F16", "mmproj-gemma3-w144-F16", &args) else {
        return;
    };
    let images = [noise(224, 224, 1), noise(97, 151, 3)];
    let Some(failures) = embedding_differences_of(mmproj, "gemma3", &images) else {
        return;
    };
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The tiny Idefics3 projector with its tower in `ty`, slicing images at a longest edge of 224 (2 × 2 tiles of
/// 112 at most), or of 112 where `one_tile` (one tile and the global image).
fn idefics3_projector(ty: &str, one_tile: bool) -> Option<PathBuf> {
    if one_tile {
        crate::common::tiny_gguf(
            ty,
            &format!("mmproj-idefics3-one-{ty}"),
            &["--projector", "idefics3", "--preproc-image-size", "112"],
        )
    } else {
        projector("idefics3", ty)
    }
}

/// Our parts for `prompt`, whose `<__media__>` markers stand for `images` in order: the text between markers
/// tokenized as `mtmd_tokenize` does (the first piece with BOS as the model asks), each marker replaced by the
/// image's parts, consecutive text joined into one run.
fn idefics3_prompt(
    p: &Projector,
    tok: &nmb_local::Tokenizer,
    prompt: &str,
    images: &[&RgbImage],
) -> Vec<PromptPart> {
    let tokenize = |t: &str| tok.encode(t);
    let mut parts: Vec<PromptPart> = Vec::new();
    let mut push = |part: PromptPart| match (parts.last_mut(), part) {
        (Some(PromptPart::Tokens(run)), PromptPart::Tokens(ids)) => run.extend(ids),
        (_, PromptPart::Tokens(ids)) if ids.is_empty() => {}
        (_, part) => parts.push(part),
    };
    for (i, piece) in prompt.split("<__media__>").enumerate() {
        if i > 0 {
            let img = images[i - 1];
            for part in p.idefics3_parts(img, &tokenize).expect("the image's parts") {
                push(part);
            }
        }
        let ids = if i == 0 {
            tok.encode_prompt(piece)
        } else {
            tok.encode(piece)
        };
        push(PromptPart::Tokens(ids.expect("tokenizes")));
    }
    parts
}

/// The chunks of `parts` as llama-mtmd.py reports them.
fn as_chunks(parts: &[PromptPart]) -> Vec<MtmdChunk> {
    parts
        .iter()
        .map(|part| match part {
            PromptPart::Tokens(ids) => MtmdChunk::Text(ids.clone()),
            PromptPart::Image { embd, .. } => MtmdChunk::Image(embd.clone()),
        })
        .collect()
}

/// A chunk's shape: its tokens, or how many values an image chunk holds.
fn shape(c: &MtmdChunk) -> String {
    match c {
        MtmdChunk::Text(ids) => format!("{ids:?}"),
        MtmdChunk::Image(e) => format!("image of {} values", e.len()),
    }
}

/// llama.cpp's answers and ours for each `(prompt, images)` on the tiny SmolVLM-like text model and the tiny
/// Idefics3 projector in `ty`: `(label, theirs, ours)`.
#[allow(clippy::type_complexity)]
fn idefics3_runs(
    ty: &str,
    one_tile: bool,
    requests: &[(&str, Vec<&RgbImage>)],
    with_logits: bool,
) -> Option<Vec<(String, MtmdAnswer, Vec<PromptPart>)>> {
    let mmproj = idefics3_projector(ty, one_tile)?;
    let model = crate::common::tiny("Q8_0", "smolvlm")?;
    let p = Projector::load(&mmproj).expect("loads the tiny projector");
    let tok = nmb_local::Tokenizer::open(&model).expect("the tiny model's tokenizer");
    let wire: Vec<MtmdRequest> = requests
        .iter()
        .map(|(t, imgs)| {
            (
                t.to_string(),
                imgs.iter()
                    .map(|i| (i.width, i.height, i.pixels.clone()))
                    .collect(),
            )
        })
        .collect();
    let theirs = mtmd_with(&model, &mmproj, &tmp(), &wire, with_logits)?;
    Some(
        requests
            .iter()
            .zip(theirs)
            .map(|((prompt, imgs), answer)| {
                let sizes: Vec<String> = imgs
                    .iter()
                    .map(|i| format!("{}x{}", i.width, i.height))
                    .collect();
                let label = format!(
                    "idefics3 {ty}{} {prompt:?} {sizes:?}",
                    if one_tile { " (one tile)" } else { "" }
                );
                (label, answer, idefics3_prompt(&p, &tok, prompt, imgs))
            })
            .collect(),
    )
}

/// Images that slice into 2 × 2 (landscape, and portrait enlarged from a small image), 2 × 1 and 1 × 2 tiles.
fn idefics3_images() -> Vec<RgbImage> {
    vec![
        noise(300, 200, 11),
        noise(97, 151, 12),
        noise(300, 100, 13),
        noise(60, 170, 14),
        // Already at the size the longest edge gives (224 × int(149.3) made even): that resize is skipped.
        noise(224, 150, 15),
    ]
}

#[test]
fn idefics3_parts_refuse_a_text_model_without_its_tokens_and_other_projectors() {
    let (Some(mmproj), Some(gemma3), Some(model)) = (
        idefics3_projector("F16", false),
        projector("gemma3", "F16"),
        crate::common::tiny("Q8_0", "llama"),
    ) else {
        return;
    };
    let tok = nmb_local::Tokenizer::open(&model).expect("the tiny model's tokenizer");
    let img = noise(40, 30, 1);
    let text = Projector::load(&mmproj)
        .expect("loads")
        .idefics3_parts(&img, &|t| tok.encode(t))
        .expect_err("SmolLM2's vocabulary has no <fake_token_around_image>")
        .to_string();
    assert!(text.contains("<fake_token_around_image>"), "{text}");
    let text = Projector::load(&gemma3)
        .expect("loads")
        .idefics3_parts(&img, &|t| tok.encode(t))
        .expect_err("a gemma3 projector")
        .to_string();
    assert!(text.contains("gemma3"), "{text}");
}

#[test]
fn idefics3_chunks_equal_mtmd_tokenize() {
    let images = idefics3_images();
    let mut failures = Vec::new();
    for one_tile in [false, true] {
        let requests: Vec<(&str, Vec<&RgbImage>)> = images
            .iter()
            .map(|img| ("User: Look <__media__> what?", vec![img]))
            .chain([
                ("<__media__>", vec![&images[2]]),
                (
                    "<|im_start|>User:<__media__>\n<__media__>Same?<end_of_utterance>\nAssistant:",
                    vec![&images[0], &images[3]],
                ),
            ])
            .collect();
        let Some(runs) = idefics3_runs("F16", one_tile, &requests, false) else {
            return;
        };
        for (label, theirs, ours) in runs {
            let theirs: Vec<String> = theirs.chunks.iter().map(shape).collect();
            let ours: Vec<String> = as_chunks(&ours).iter().map(shape).collect();
            if theirs != ours {
                failures.push(format!(
                    "{label}:\n  llama.cpp {theirs:?}\n  nmb       {ours:?}"
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn idefics3_embeddings_equal_llama_cpp() {
    let images = idefics3_images();
    let mut failures = Vec::new();
    for ty in ["F16", "Q8_0"] {
        for one_tile in [false, true] {
            let requests: Vec<(&str, Vec<&RgbImage>)> = images
                .iter()
                .map(|img| ("<__media__>", vec![img]))
                .collect();
            let Some(runs) = idefics3_runs(ty, one_tile, &requests, false) else {
                return;
            };
            for (label, theirs, ours) in runs {
                let image_chunks = |chunks: &[MtmdChunk]| -> Vec<Vec<f32>> {
                    chunks
                        .iter()
                        .filter_map(|c| match c {
                            MtmdChunk::Image(e) => Some(e.clone()),
                            MtmdChunk::Text(_) => None,
                        })
                        .collect()
                };
                let (theirs, ours) = (
                    image_chunks(&theirs.chunks),
                    image_chunks(&as_chunks(&ours)),
                );
                if theirs.len() != ours.len() {
                    failures.push(format!(
                        "{label}: llama.cpp has {} image chunks, nmb {}",
                        theirs.len(),
                        ours.len()
                    ));
                    continue;
                }
                for (n, (t, o)) in theirs.iter().zip(&ours).enumerate() {
                    let differ = (0..o.len().min(t.len()))
                        .filter(|&i| o[i].to_bits() != t[i].to_bits())
                        .count();
                    if differ > 0 || o.len() != t.len() {
                        failures.push(format!(
                            "{label}: image chunk {n} ({} of {} values): {differ} differ",
                            o.len(),
                            t.len()
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn idefics3_logits_after_images_equal_llama_cpp() {
    let (a, b) = (noise(300, 200, 21), noise(90, 140, 22));
    let mut failures = Vec::new();
    for ty in ["F16", "Q8_0"] {
        let requests: Vec<(&str, Vec<&RgbImage>)> = vec![
            (
                "<|im_start|>User:<__media__>What is this?<end_of_utterance>\nAssistant:",
                vec![&a],
            ),
            (
                "<|im_start|>User: <__media__> and <__media__> differ how?<end_of_utterance>\nAssistant:",
                vec![&a, &b],
            ),
            ("<__media__>", vec![&b]),
        ];
        let Some(runs) = idefics3_runs(ty, false, &requests, true) else {
            return;
        };
        let model = crate::common::tiny("Q8_0", "smolvlm").expect("written above");
        let weights = nmb_local::LocalWeights::load(&model).expect("loads the tiny model");
        for (label, theirs, ours) in runs {
            let ours = weights.parts_logits(&ours).expect("logits");
            let differ = (0..ours.len().min(theirs.logits.len()))
                .filter(|&i| ours[i].to_bits() != theirs.logits[i].to_bits())
                .count();
            if differ > 0 || ours.len() != theirs.logits.len() {
                failures.push(format!("{label}: {differ} of {} logits differ", ours.len()));
            }
        }
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
