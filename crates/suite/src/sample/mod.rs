//! The bundled `sample` suite: synthetic neurology cases with procedurally generated images and answer keys.
//!
//! Everything is generated in memory from code: the clinical text lives in `cases`, the images are drawn from
//! tissue-label phantoms (`phantom`) rendered per MRI sequence or CT (`render`). No file is read, so the suite
//! works on a fresh machine, and the same bytes come out everywhere (the generator avoids platform maths
//! functions; see `noise`). The cases are written for smoke tests of the harness, not for clinical use.

mod cases;
mod noise;
mod phantom;
mod render;
pub mod structured;

use std::sync::Arc;

use nmb_imaging::ImageSource;

use crate::{Case, Image, Metadata, Modality, Plane, Sequence, Suite, Task, Turn};
use cases::{CaseDef, Shot, TaskDef};
use phantom::{LabelMap, Template, SIZE};

pub const SUITE_ID: &str = "sample";
pub const VERSION: &str = "1.0.0";

const DESCRIPTION: &str = "Synthetic neurology cases written by the nmb project, with procedurally generated \
MRI/CT-like images and answer keys. For smoke tests of the harness only: not real patients, not for clinical use.";

/// Builds the sample suite in memory. Deterministic: the same bytes on every machine.
pub fn build() -> Suite {
    Suite {
        id: SUITE_ID.into(),
        version: VERSION.into(),
        description: DESCRIPTION.into(),
        format: "sample".into(),
        defaults: Default::default(),
        cases: build_cases(&cases::all()),
        empty_cases: Vec::new(),
    }
}

/// Builds the cases on a few threads (each case is independent, so the result does not depend on scheduling).
fn build_cases(defs: &[CaseDef]) -> Vec<Case> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let per_thread = defs.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = defs
            .chunks(per_thread)
            .map(|chunk| scope.spawn(move || chunk.iter().map(build_case).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            // A worker can only fail by panicking inside `build_case`; pass that panic on unchanged.
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

/// Where the abnormal and the brain pixels are in one generated image, for tests and visual checks.
#[derive(Debug, Clone)]
pub struct Regions {
    pub width: u32,
    pub height: u32,
    /// Row-major: pixels a lesion (of any kind, oedema included) was painted on.
    pub lesion: Vec<bool>,
    /// Row-major: brain parenchyma (grey and white matter, deep nuclei, lesions), no CSF, bone or scalp.
    pub brain: Vec<bool>,
}

/// The ground-truth regions of image `image_id` of case `case_id`, or `None` if there is no such image.
pub fn regions(case_id: &str, image_id: &str) -> Option<Regions> {
    let defs = cases::all();
    let def = defs.iter().find(|d| d.id == case_id)?;
    let shot = shots(def).find(|(id, _)| id == image_id)?.1;
    let map = phantom::draw(&def.scenes[shot.scene]);
    Some(Regions {
        width: SIZE as u32,
        height: SIZE as u32,
        lesion: map.lesion_source.iter().map(Option::is_some).collect(),
        brain: map.labels.iter().map(|l| l.is_parenchyma()).collect(),
    })
}

/// Every image of a case in order (case images, then each task's turn images), with its id.
fn shots(def: &CaseDef) -> impl Iterator<Item = (String, &Shot)> {
    let turn_shots = def
        .tasks
        .iter()
        .flat_map(|t| t.turns.iter().flat_map(|turn| turn.shots.iter()));
    def.images
        .iter()
        .chain(turn_shots)
        .enumerate()
        .map(|(n, s)| (image_id(n + 1, def, s), s))
}

fn image_id(n: usize, def: &CaseDef, shot: &Shot) -> String {
    let seq = match shot.seq {
        Sequence::T1c => "t1c".to_string(),
        other => other.as_str().to_ascii_lowercase(),
    };
    let plane = plane(def.scenes[shot.scene].template);
    format!("img{n}_{seq}_{plane}.png")
}

fn plane(t: Template) -> Plane {
    match t {
        Template::AxialGanglionic => Plane::Axial,
        Template::CoronalHippocampal => Plane::Coronal,
        Template::SagittalParamedian => Plane::Sagittal,
    }
}

/// Generates a case's images once each, sharing one label map per scene.
struct Painter<'a> {
    def: &'a CaseDef,
    maps: Vec<Option<LabelMap>>,
    next: usize,
}

impl<'a> Painter<'a> {
    fn new(def: &'a CaseDef) -> Self {
        Painter {
            def,
            maps: def.scenes.iter().map(|_| None).collect(),
            next: 0,
        }
    }

    fn image(&mut self, shot: &Shot) -> Image {
        self.next += 1;
        let id = image_id(self.next, self.def, shot);
        let scene = &self.def.scenes[shot.scene];
        let map = self.maps[shot.scene].get_or_insert_with(|| phantom::draw(scene));
        let seed = scene.anatomy.seed ^ fnv(&id);
        let pixels = render::render(map, shot.seq, seed);
        // Encoding a well-formed in-memory 8-bit buffer into a Vec cannot fail; no input data is involved.
        let bytes = render::png(&pixels).expect("PNG encoding of an in-memory grayscale buffer");
        let mut img = Image::new(id, ImageSource::Bytes(Arc::from(bytes.as_slice())));
        img.sha256 = Some(nmb_imaging::content_hash(&bytes));
        img.modality = Some(if shot.seq == Sequence::Ct {
            Modality::Ct
        } else {
            Modality::Mri
        });
        img.sequence = Some(shot.seq);
        img.plane = Some(plane(scene.template));
        img.caption = Some(caption(shot, scene.template));
        img
    }
}

/// A neutral caption: what the image is, never what it shows.
fn caption(shot: &Shot, t: Template) -> String {
    let what = match shot.seq {
        Sequence::Ct => "non-contrast CT (brain window)".to_string(),
        Sequence::Dwi => "MRI DWI (b=1000)".to_string(),
        Sequence::Adc => "MRI ADC map".to_string(),
        Sequence::T1c => "MRI T1 post-gadolinium (T1C+)".to_string(),
        other => format!("MRI {other}"),
    };
    let level = match t {
        Template::AxialGanglionic => "axial, level of the basal ganglia",
        Template::CoronalHippocampal => "coronal, level of the hippocampal bodies",
        Template::SagittalParamedian => "sagittal, paramedian",
    };
    format!(
        "Synthetic {what}, {level}; radiological convention (patient's left on image right where applicable). \
         Procedurally generated, not patient data."
    )
}

fn build_case(def: &CaseDef) -> Case {
    let mut painter = Painter::new(def);
    let images = def.images.iter().map(|s| painter.image(s)).collect();
    let tasks = def
        .tasks
        .iter()
        .map(|t| build_task(def, t, &mut painter))
        .collect();
    Case {
        id: def.id.into(),
        language: Some("en".into()),
        images,
        ehr: def
            .ehr
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        notes: def.notes.into(),
        metadata: case_metadata(def),
        tasks,
    }
}

fn case_metadata(def: &CaseDef) -> Metadata {
    let pairs = [
        ("disease", def.disease),
        ("disease_group", def.group),
        ("organ", "brain"),
        ("source", "synthetic"),
        ("synthetic", "true"),
        (
            "synthetic_note",
            "Fictional case written by the nmb project; images are procedurally generated phantoms, not patient \
             data. For smoke tests only, not for clinical use.",
        ),
    ];
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn build_task(def: &CaseDef, t: &TaskDef, painter: &mut Painter) -> Task {
    let turns = t
        .turns
        .iter()
        .map(|turn| Turn {
            text: turn.text.into(),
            images: turn.shots.iter().map(|s| painter.image(s)).collect(),
            question: turn.question.into(),
        })
        .collect();
    let mut metadata = Metadata::new();
    metadata.insert("disease_group".into(), def.group.into());
    Task {
        id: format!("{}/{}", def.id, t.suffix),
        family: t.family,
        level: t.level,
        question: t.question.into(),
        options: Vec::new(),
        turns,
        reference: Some(t.reference.clone()),
        metadata,
    }
}

/// FNV-1a, to derive stable per-image seeds from ids.
fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
