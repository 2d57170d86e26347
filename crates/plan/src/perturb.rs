//! A perturbation applied while planning (`PlanOptions::perturbation`): the images a model is sent instead of a
//! case's own, changed after rendering and before encoding into a request.
//!
//! Pixel perturbations ([`nmb_imaging::Perturbation::apply`]) change each image, once per image and seed (the
//! [`ImageCache`] keeps the result). `drop:SEQUENCE` leaves out the images of one sequence. `mismatch` sends the
//! images of another case of the same modality (the modality of the case's first image; cases without one form
//! their own group) that has images of its own, never the case itself, picked from the seed and the case id:
//! the first message gets the other case's images, and a later turn's images are replaced one for one by them,
//! in order, cycling.

use std::collections::HashMap;

use nmb_imaging::Perturbation;
use nmb_suite::{Case, Image, Sequence, Suite};
use sha2::{Digest, Sha256};

use crate::error::PlanError;
use crate::images::ImageCache;
use crate::loaded::LoadedImage;

/// A perturbation resolved against a suite: the dropped sequence parsed, every case's donor picked.
pub(crate) struct Resolved<'a> {
    pub perturbation: Perturbation,
    pub seed: u64,
    drop: Option<Sequence>,
    donors: HashMap<&'a str, &'a Case>,
}

fn refuse(message: String) -> PlanError {
    PlanError::Perturbation { message }
}

impl<'a> Resolved<'a> {
    /// Checks the perturbation against the suite before anything is planned: a sequence no image has, or a case
    /// with images and no other case of its modality to take images from, is refused.
    pub fn new(
        suite: &'a Suite,
        perturbation: &Perturbation,
        seed: u64,
    ) -> Result<Self, PlanError> {
        let mut resolved = Resolved {
            perturbation: perturbation.clone(),
            seed,
            drop: None,
            donors: HashMap::new(),
        };
        match perturbation {
            Perturbation::Drop(name) => {
                let sequence: Sequence = name
                    .parse()
                    .map_err(|e| refuse(format!("drop:{name}: {e}")))?;
                let any = suite
                    .cases
                    .iter()
                    .flat_map(all_images)
                    .any(|i| i.sequence == Some(sequence));
                if !any {
                    return Err(refuse(format!(
                        "drop:{name}: no image of the suite has sequence {sequence}; nothing would be left out"
                    )));
                }
                resolved.drop = Some(sequence);
            }
            Perturbation::Mismatch => resolved.donors = donors(suite, seed)?,
            _ => {}
        }
        Ok(resolved)
    }

    /// The images a message of `case` shows in place of `images` (the case's own, or a later turn's).
    pub fn images<'c>(&self, case: &'c Case, images: &'c [Image], first: bool) -> Vec<&'c Image>
    where
        'a: 'c,
    {
        if let Some(sequence) = self.drop {
            return images
                .iter()
                .filter(|i| i.sequence != Some(sequence))
                .collect();
        }
        let Some(donor) = self.donors.get(case.id.as_str()) else {
            return images.iter().collect();
        };
        if first {
            return donor.images.iter().collect();
        }
        donor.images.iter().cycle().take(images.len()).collect()
    }

    /// The image as sent: changed once per image by a pixel perturbation, else as it is.
    pub fn pixels(
        &self,
        cache: &ImageCache,
        case_id: &str,
        image: &Image,
        loaded: LoadedImage,
    ) -> Result<LoadedImage, PlanError> {
        if !self.perturbation.is_pixelwise() {
            return Ok(loaded);
        }
        cache
            .perturbed(loaded, &self.perturbation, self.seed)
            .map_err(|source| PlanError::Image {
                case: case_id.to_string(),
                image: image.id.clone(),
                source_desc: format!("{} under {}", image.source.describe(), self.perturbation),
                source,
            })
    }
}

fn all_images(case: &Case) -> impl Iterator<Item = &Image> {
    case.images.iter().chain(
        case.tasks
            .iter()
            .flat_map(|t| t.turns.iter().flat_map(|turn| turn.images.iter())),
    )
}

fn modality(case: &Case) -> Option<String> {
    all_images(case).find_map(|i| i.modality.map(|m| m.to_string()))
}

/// Each case with images gets another case of its modality with images, picked from the seed and its id.
fn donors(suite: &Suite, seed: u64) -> Result<HashMap<&str, &Case>, PlanError> {
    let mut groups: HashMap<Option<String>, Vec<&Case>> = HashMap::new();
    for case in suite.cases.iter().filter(|c| !c.images.is_empty()) {
        groups.entry(modality(case)).or_default().push(case);
    }
    let mut out = HashMap::new();
    for case in suite
        .cases
        .iter()
        .filter(|c| all_images(c).next().is_some())
    {
        let others: Vec<&Case> = groups
            .get(&modality(case))
            .map(|g| g.iter().copied().filter(|c| c.id != case.id).collect())
            .unwrap_or_default();
        if others.is_empty() {
            return Err(refuse(format!(
                "mismatch: case {} has no other case of modality {} with images to take images from",
                case.id,
                modality(case).unwrap_or_else(|| "(none given)".into())
            )));
        }
        let h = Sha256::digest(format!("nmb-mismatch\n{seed}\n{}", case.id).as_bytes());
        let pick = u64::from_be_bytes(h[..8].try_into().unwrap_or([0; 8])) % others.len() as u64;
        out.insert(case.id.as_str(), others[pick as usize]);
    }
    Ok(out)
}
