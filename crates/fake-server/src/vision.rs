//! Simulated models with a known reliance on images, for image-reliance tests (`nmb eval --perturb`).
//!
//! Each image made by [`marker_png`] carries a marker: its top-left [`MARKER_SIDE`] x [`MARKER_SIDE`] block is
//! one grey level that names a diagnosis (level `16 k + 8` for [`DIAGNOSES`]`[k]`); the rest is texture. The
//! vision model ([`vision_reply`]) reads the marker as a reader would, from the block's mean, so noise makes it
//! misread: at `noise:0.2` (a standard deviation of 51 grey levels) the mean of 16 pixels is off by more than
//! half a level's width about half the time. On a share [`IGNORES_IMAGE`] of its samples (chosen from the
//! conversation's text and the sample index, never from the images) it answers from the text alone, as the
//! text-only model ([`text_only_reply`]) always does: a diagnosis picked from a hash of the text. So on a suite
//! whose cases each have their own diagnosis, the vision model's reliance (accuracy with the true images minus
//! accuracy with another case's) is [`designed_reliance`] in expectation, and the text-only model's is 0.

use sha2::{Digest, Sha256};

use crate::{ReceivedPart, ReceivedRequest, Reply};

/// The diagnoses the markers name, one per grey level band of width 16.
pub const DIAGNOSES: [&str; 16] = [
    "Multiple sclerosis",
    "Glioblastoma",
    "Ischemic stroke",
    "Autoimmune encephalitis",
    "Creutzfeldt-Jakob disease",
    "Cerebral venous thrombosis",
    "Progressive multifocal leukoencephalopathy",
    "Neurosarcoidosis",
    "Meningioma",
    "Brain abscess",
    "Primary CNS lymphoma",
    "Herpes simplex encephalitis",
    "Neuromyelitis optica",
    "Subarachnoid hemorrhage",
    "Wilson disease",
    "Normal pressure hydrocephalus",
];

/// The side of the marker block, in pixels.
pub const MARKER_SIDE: u32 = 4;

/// The share of the vision model's samples answered from the text alone.
pub const IGNORES_IMAGE: f64 = 0.25;

/// The vision model's reliance on a suite whose cases each have their own diagnosis: the share of samples
/// that read the image.
pub fn designed_reliance() -> f64 {
    1.0 - IGNORES_IMAGE
}

/// A grey `side` x `side` PNG whose marker names `DIAGNOSES[index]`, over a texture drawn from `seed`.
pub fn marker_png(index: usize, side: u32, seed: u64) -> Vec<u8> {
    let level = (16 * (index % DIAGNOSES.len()) + 8) as u8;
    let mut pixels = Vec::with_capacity((side * side) as usize);
    for y in 0..side {
        for x in 0..side {
            let v = if x < MARKER_SIDE && y < MARKER_SIDE {
                level
            } else {
                (u64::from(x * 31 + y * 17).wrapping_mul(seed | 1) % 200 + 30) as u8
            };
            pixels.push(v);
        }
    }
    let img = image::GrayImage::from_raw(side, side, pixels).unwrap_or_default();
    let mut out = std::io::Cursor::new(Vec::new());
    // Writing a PNG into memory fails only on an empty image, which gives empty bytes (read_marker: None).
    let _ = img.write_to(&mut out, image::ImageFormat::Png);
    out.into_inner()
}

/// The diagnosis index an image's marker names, read from the block's mean; `None` for bytes that do not
/// decode or an image smaller than the block.
pub fn read_marker(bytes: &[u8]) -> Option<usize> {
    let img = nmb_imaging::decode(bytes).ok()?.to_luma8();
    if img.width() < MARKER_SIDE || img.height() < MARKER_SIDE {
        return None;
    }
    let mut sum = 0.0;
    for y in 0..MARKER_SIDE {
        for x in 0..MARKER_SIDE {
            sum += f64::from(img.get_pixel(x, y).0[0]);
        }
    }
    let mean = sum / f64::from(MARKER_SIDE * MARKER_SIDE);
    Some(((mean / 16.0).floor() as usize).min(DIAGNOSES.len() - 1))
}

/// A number in [0, 1) from a text, a sample index and a salt.
fn draw(text: &str, sample: usize, salt: &str) -> f64 {
    let h = Sha256::digest(format!("{salt}\n{sample}\n{text}").as_bytes());
    let v = u64::from_be_bytes(h[..8].try_into().unwrap_or([0; 8]));
    (v >> 11) as f64 / (1u64 << 53) as f64
}

/// Whether the vision model reads the image on this sample (drawn from the text, so the same samples read it
/// whatever the images are).
pub fn reads_image(text: &str, sample: usize) -> bool {
    draw(text, sample, "reads-image") >= IGNORES_IMAGE
}

/// The diagnosis a model answering from the text alone gives.
pub fn text_guess(text: &str, sample: usize) -> usize {
    (draw(text, sample, "text-guess") * DIAGNOSES.len() as f64) as usize % DIAGNOSES.len()
}

fn text_of(req: &ReceivedRequest) -> String {
    let texts: Vec<&str> = req
        .messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter_map(|p| match p {
            ReceivedPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    texts.join("\n")
}

fn first_image(req: &ReceivedRequest) -> Option<&[u8]> {
    req.messages
        .iter()
        .flat_map(|m| &m.parts)
        .find_map(|p| match p {
            ReceivedPart::Image { data: Some(d), .. } => Some(&d[..]),
            _ => None,
        })
}

fn answer(req: &ReceivedRequest, pick: impl Fn(&str, usize) -> usize) -> Reply {
    let text = text_of(req);
    let texts = (0..req.samples() as usize)
        .map(|i| {
            let dx = DIAGNOSES[pick(&text, i)];
            match req.params.json {
                true => serde_json::json!({"differential": [{"rank": 1, "diagnosis": dx, "evidence": "imaging"}]})
                    .to_string(),
                false => format!("Final diagnosis: {dx}"),
            }
        })
        .collect();
    Reply::Texts(texts)
}

/// The vision model: the diagnosis its first image's marker names, except on the samples it answers from the
/// text ([`reads_image`]) or when it has no readable image.
pub fn vision_reply(req: &ReceivedRequest) -> Reply {
    let marker = first_image(req).and_then(read_marker);
    answer(req, |text, i| match marker {
        Some(k) if reads_image(text, i) => k,
        _ => text_guess(text, i),
    })
}

/// The text-only model: ignores every image.
pub fn text_only_reply(req: &ReceivedRequest) -> Reply {
    answer(req, text_guess)
}
