//! A judge that can tell a visual hallucination from a reasoning failure only when it is shown the image, for
//! tests of judges that see what the model saw (`nmb score --judge-images same`).
//!
//! The rule it follows (a simulator, not a model of any real judge):
//!
//! - Each test image carries a **marker** in its pixels: the top-left pixel's grey level (ITU-R 601 luma, as
//!   the `image` crate computes it) is at least 128 ([`MARKER_THRESHOLD`]) when the finding the wrong answer
//!   claims is really in the image, and below when it is not. The test designs which images carry it.
//! - Asked for the error class of a wrong answer, with an image it can read attached, it answers from the marker:
//!   the claimed finding is there → `reasoning_failure` (the answer read the image right and concluded wrongly);
//!   it is not → `visual_hallucination` (the answer describes what the image does not show).
//! - Without an image it can read, it cannot check the claim and picks one of those two classes at chance, from
//!   a hash of its seed, the model name and the conversation (so the same question gets the same label, as the
//!   response cache would give, and another question an independent one).
//! - Every other question (equivalence, rubric, criterion directions) gets the answer [`SimJudge`] gives.
//!
//! [`marked_reply`] is the same judge for the images of the simulated vision model ([`crate::vision`]), whose
//! marker names a diagnosis: it labels the errors that perturbed images cause (`nmb eval --perturb`).
//!
//! The server keeps the SHA-256 of each image it receives, not its bytes; so the simulator decodes the pixels
//! of the images it may be shown beforehand ([`VisualJudge::reading`]) and recognises each received image by
//! that hash. An image that is not sent cannot be read.
//!
//! [`SimJudge`]: crate::judge::SimJudge

use std::collections::HashMap;
use std::sync::Arc;

use crate::judge::SimJudge;
use crate::wire::ReceivedPart;
use crate::{ReceivedRequest, Reply, Responder};

/// Top-left grey levels from this up mark an image that shows the claimed finding.
pub const MARKER_THRESHOLD: u8 = 128;

/// What marks nmb's taxonomy question (the start of its rules).
const TAXONOMY_MARKER: &str = "was graded WRONG. Classify its main error";

/// The simulated image-reading judge.
#[derive(Debug, Clone, Default)]
pub struct VisualJudge {
    /// Whether each readable image (by SHA-256 of its bytes) shows the claimed finding.
    markers: HashMap<String, bool>,
    /// Seeds the chance labels of questions without a readable image.
    pub seed: u64,
}

/// Whether `png` shows the claimed finding: its top-left pixel's grey level is at least [`MARKER_THRESHOLD`].
/// `None` when the bytes do not decode.
pub fn marker(png: &[u8]) -> Option<bool> {
    let grey = nmb_imaging::decode(png).ok()?.to_luma8();
    grey.as_raw().first().map(|&v| v >= MARKER_THRESHOLD)
}

impl VisualJudge {
    /// A judge that can read the markers of `images` (undecodable ones are left out) when it is sent them.
    pub fn reading<'a>(images: impl IntoIterator<Item = &'a [u8]>, seed: u64) -> Self {
        let markers = images
            .into_iter()
            .filter_map(|png| Some((nmb_imaging::content_hash(png), marker(png)?)))
            .collect();
        VisualJudge { markers, seed }
    }

    /// This judge as a fake server's responder.
    pub fn responder(self) -> Responder {
        let judge = Arc::new(self);
        Arc::new(move |req: &ReceivedRequest| judge.reply(req))
    }

    pub fn reply(&self, req: &ReceivedRequest) -> Reply {
        if !req.all_text().contains(TAXONOMY_MARKER) {
            return SimJudge::default().reply(req);
        }
        let seen = self.seen(req);
        let shows_finding = match seen {
            Some(shown) => shown,
            None => self.coin(req),
        };
        let category = match shows_finding {
            true => "reasoning_failure",
            false => "visual_hallucination",
        };
        let how = match seen {
            Some(_) => "read from the image",
            None => "no image: chance",
        };
        Reply::Texts(vec![format!(
            r#"{{"category": "{category}", "justification": "simulated, {how}"}}"#
        )])
    }

    /// The marker of the first readable image the request carries.
    fn seen(&self, req: &ReceivedRequest) -> Option<bool> {
        req.messages
            .iter()
            .flat_map(|m| m.parts.iter())
            .find_map(|p| match p {
                ReceivedPart::Image { sha256, .. } => self.markers.get(sha256).copied(),
                _ => None,
            })
    }

    /// A fair coin from the seed, the model and the conversation.
    fn coin(&self, req: &ReceivedRequest) -> bool {
        self.draw(req) & 1 == 1
    }

    /// A number from the seed, the model and the conversation.
    fn draw(&self, req: &ReceivedRequest) -> u64 {
        let key = format!("{} {} {}", self.seed, req.model, req.conversation_sha256);
        // FNV-1a, high bits (its low bits mix poorly for short inputs).
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in key.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        h >> 40
    }
}

/// The taxonomy judge of answers about [`crate::vision::marker_png`] images (the rule of a simulator, chosen so
/// that each perturbation causes its own kind of error):
///
/// - the image it is shown is one flat grey (`blank`): whatever finding the wrong answer names is not there,
///   `visual_hallucination`;
/// - its marker names the diagnosis the answer gives (the model read the image right, but it was another
///   case's: `mismatch`): `reasoning_failure`;
/// - its marker names another diagnosis (the model ignored or misread the image it was shown: the
///   unperturbed run's text-only samples, `noise`): `perceptual_failure`;
/// - without an image it can read it cannot tell, and picks one of those three at chance, from a hash of the
///   model name and the conversation.
///
/// Every other question gets the answer [`SimJudge`] gives.
pub fn marked_reply(req: &ReceivedRequest) -> Reply {
    if !req.all_text().contains(TAXONOMY_MARKER) {
        return SimJudge::default().reply(req);
    }
    let image = req
        .messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .find_map(|p| match p {
            ReceivedPart::Image { data: Some(d), .. } => Some(d.clone()),
            _ => None,
        });
    let answered = answered_diagnosis(&req.all_text());
    let (category, how) = match image.as_deref().and_then(read_image) {
        Some(Seen::Flat) => ("visual_hallucination", "read from the image"),
        Some(Seen::Marker(k)) if Some(k) == answered => {
            ("reasoning_failure", "read from the image")
        }
        Some(Seen::Marker(_)) => ("perceptual_failure", "read from the image"),
        None => {
            let classes = [
                "perceptual_failure",
                "reasoning_failure",
                "visual_hallucination",
            ];
            let coin = VisualJudge::default().draw(req) % 3;
            (classes[coin as usize], "no image: chance")
        }
    };
    Reply::Texts(vec![format!(
        r#"{{"category": "{category}", "justification": "simulated, {how}"}}"#
    )])
}

/// What the judge makes of an image: one flat grey, or the diagnosis its marker names.
enum Seen {
    Flat,
    Marker(usize),
}

fn read_image(bytes: &[u8]) -> Option<Seen> {
    let grey = nmb_imaging::decode(bytes).ok()?.to_luma8();
    let first = *grey.as_raw().first()?;
    if grey.as_raw().iter().all(|&v| v == first) {
        return Some(Seen::Flat);
    }
    crate::vision::read_marker(bytes).map(Seen::Marker)
}

/// The first of [`crate::vision::DIAGNOSES`] the graded answer names: the last text between `<<<ANSWER` and
/// `ANSWER>>>` (the system prompt names the markers before any answer, and the final answer comes last).
fn answered_diagnosis(text: &str) -> Option<usize> {
    let answer = text.rsplit_once("<<<ANSWER")?.1.split_once("ANSWER>>>")?.0;
    let answer = answer.to_lowercase();
    (crate::vision::DIAGNOSES.iter()).position(|d| answer.contains(&d.to_lowercase()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marker_is_the_top_left_grey_level() {
        let found: Vec<Option<bool>> = (0..40u64)
            .map(|s| marker(&crate::support::noise_png(8, s)))
            .collect();
        assert!(found.iter().all(Option::is_some));
        // Noise puts the marker on some images and not others.
        assert!(found.contains(&Some(true)) && found.contains(&Some(false)));
        assert_eq!(marker(b"not an image"), None);
    }

    #[test]
    fn a_marked_image_is_read_as_its_diagnosis_and_a_flat_one_as_nothing() {
        let png = crate::vision::marker_png(3, 32, 3);
        assert!(matches!(read_image(&png), Some(Seen::Marker(3))));
        let flat = image::GrayImage::from_pixel(8, 8, image::Luma([128]));
        let mut out = std::io::Cursor::new(Vec::new());
        flat.write_to(&mut out, image::ImageFormat::Png).unwrap();
        assert!(matches!(read_image(&out.into_inner()), Some(Seen::Flat)));
        let text =
            "Between <<<ANSWER and ANSWER>>>: data.\nDiagnosis: Glioblastoma\n<<<ANSWER\nFinal \
                    diagnosis: Meningioma\nANSWER>>>";
        assert_eq!(answered_diagnosis(text), Some(8));
    }
}
