//! The bundled `sample-structured` suite: NeuroVLM-Bench's protocol (one image, one JSON answer) on the sample
//! suite's phantoms. Every class (multiple sclerosis, stroke, tumor, other abnormality, normal), both modalities,
//! the four MRI sequences (FLAIR, T1, T2, T1C+) and the three planes appear. The images are synthetic and say so in
//! their captions and metadata.

use std::sync::Arc;

use nmb_imaging::ImageSource;

use super::cases::{self, CaseDef};
use super::phantom::{self, Anatomy, Scene, Template};
use super::{fnv, plane, render};
use crate::{Case, Family, Image, Level, Metadata, Modality, Reference, Sequence, Suite, Task};

pub const SUITE_ID: &str = "sample-structured";
pub const VERSION: &str = "1.0.0";

const DESCRIPTION: &str = "NeuroVLM-Bench-style structured tasks (one image, one JSON answer) on the nmb sample \
suite's procedurally generated phantoms. For smoke tests of the protocol only: not real patients, not for \
clinical use.";

/// One image to ask about: a scene of a sample case (or a lesion-free scene), a sequence, and the answer key.
struct Item {
    /// The sample case whose scene is shown, or `None` for a normal scene on `template`.
    source: Option<(&'static str, usize)>,
    template: Template,
    class: &'static str,
    detail: Option<&'static str>,
    icd10: Option<&'static str>,
    severity: &'static str,
    seqs: &'static [Sequence],
}

const fn item(
    source: &'static str,
    scene: usize,
    class: &'static str,
    detail: Option<&'static str>,
    icd10: Option<&'static str>,
    severity: &'static str,
    seqs: &'static [Sequence],
) -> Item {
    Item {
        source: Some((source, scene)),
        template: Template::AxialGanglionic,
        class,
        detail,
        icd10,
        severity,
        seqs,
    }
}

const fn normal(template: Template, seqs: &'static [Sequence]) -> Item {
    Item {
        source: None,
        template,
        class: "normal",
        detail: None,
        icd10: None,
        severity: "0",
        seqs,
    }
}

use Sequence::{Ct, Flair, T1c, T1, T2};

const ITEMS: &[Item] = &[
    item(
        "ms_relapsing",
        0,
        "multiple sclerosis",
        Some("relapsing_remitting"),
        Some("G35"),
        "0.4",
        &[Flair, T2, T1],
    ),
    item(
        "ms_relapsing",
        1,
        "multiple sclerosis",
        Some("relapsing_remitting"),
        Some("G35"),
        "0.4",
        &[Flair],
    ),
    item(
        "stroke_left_mca",
        0,
        "stroke",
        Some("ischemic"),
        Some("I63.9"),
        "0.7",
        &[Flair, T2, Ct],
    ),
    item(
        "ich_hypertensive",
        0,
        "stroke",
        Some("hemorrhagic"),
        Some("I61.0"),
        "0.8",
        &[Ct, T2],
    ),
    item(
        "glioblastoma",
        0,
        "tumor",
        Some("glioma"),
        Some("C71.9"),
        "0.9",
        &[T1c, Flair, T1],
    ),
    item(
        "brain_abscess",
        0,
        "other abnormality",
        None,
        Some("G06.0"),
        "0.6",
        &[T1c, Flair],
    ),
    item(
        "hsv_encephalitis",
        0,
        "other abnormality",
        None,
        Some("B00.4"),
        "0.6",
        &[Flair, T2],
    ),
    normal(Template::AxialGanglionic, &[Flair, T1, T2, T1c, Ct]),
    normal(Template::CoronalHippocampal, &[T1, Flair]),
    normal(Template::SagittalParamedian, &[T1, T2]),
];

/// Builds the suite in memory; deterministic, like `sample`.
pub fn build() -> Suite {
    let defs = cases::all();
    let cases = ITEMS
        .iter()
        .enumerate()
        .flat_map(|(n, it)| it.seqs.iter().map(move |seq| (n, it, *seq)))
        .map(|(n, it, seq)| build_case(&defs, n, it, seq))
        .collect();
    Suite {
        id: SUITE_ID.into(),
        version: VERSION.into(),
        description: DESCRIPTION.into(),
        format: "sample".into(),
        defaults: Default::default(),
        cases,
        empty_cases: Vec::new(),
    }
}

fn scene_of(defs: &[CaseDef], it: &Item, n: usize) -> Scene {
    let found = it.source.and_then(|(id, k)| {
        let def = defs.iter().find(|d| d.id == id)?;
        def.scenes.get(k).cloned()
    });
    // A source that is missing would be a bug in ITEMS (a unit test builds every case); fall back to normal.
    found.unwrap_or(Scene {
        template: it.template,
        anatomy: Anatomy {
            atrophy: 0.05,
            hippocampal_atrophy: 0.0,
            seed: 900 + n as u64,
        },
        lesions: Vec::new(),
    })
}

fn build_case(defs: &[CaseDef], n: usize, it: &Item, seq: Sequence) -> Case {
    let scene = scene_of(defs, it, n);
    let pl = plane(scene.template);
    let seq_name = match seq {
        T1c => "t1c".to_string(),
        other => other.as_str().to_ascii_lowercase(),
    };
    let id = format!(
        "s{:02}_{}_{seq_name}_{}",
        n + 1,
        it.class.replace(' ', "_"),
        pl.as_str()
    );
    let map = phantom::draw(&scene);
    let pixels = render::render(&map, seq, scene.anatomy.seed ^ fnv(&id));
    // Encoding a well-formed in-memory 8-bit buffer into a Vec cannot fail; no input data is involved.
    let bytes = render::png(&pixels).expect("PNG encoding of an in-memory grayscale buffer");
    let mut img = Image::new(
        format!("{id}.png"),
        ImageSource::Bytes(Arc::from(bytes.as_slice())),
    );
    img.sha256 = Some(nmb_imaging::content_hash(&bytes));
    let modality = if seq == Ct {
        Modality::Ct
    } else {
        Modality::Mri
    };
    img.modality = Some(modality);
    img.sequence = Some(seq);
    img.plane = Some(pl);
    img.caption = Some("Synthetic image, procedurally generated; not patient data.".into());
    let reference = Reference {
        diagnosis: Some(it.class.into()),
        modality: Some(if seq == Ct { "CT" } else { "MRI" }.into()),
        specialized_sequence: (seq != Ct).then(|| seq.as_str().to_string()),
        plane: Some(pl.as_str().into()),
        diagnosis_detailed: it.detail.map(str::to_string),
        icd10_code: it.icd10.map(str::to_string),
        severity: Some(it.severity.into()),
        ..Reference::default()
    };
    let mut metadata = Metadata::new();
    for (k, v) in [
        ("synthetic", "true"),
        ("source", "synthetic"),
        ("disease_group", it.class),
    ] {
        metadata.insert(k.into(), v.into());
    }
    Case {
        id: id.clone(),
        language: Some("en".into()),
        images: vec![img],
        ehr: Vec::new(),
        notes: String::new(),
        metadata: metadata.clone(),
        tasks: vec![Task {
            id: format!("{id}/neurovlm"),
            family: Family::Structured,
            level: Level::Direct,
            question: "Read this brain image.".into(),
            options: Vec::new(),
            turns: Vec::new(),
            reference: Some(reference),
            metadata,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_modality_sequence_and_plane_appears() {
        let suite = build();
        let refs: Vec<&Reference> = suite
            .cases
            .iter()
            .map(|c| c.tasks[0].reference.as_ref().unwrap())
            .collect();
        let has = |f: &dyn Fn(&Reference) -> Option<String>, want: &str| {
            refs.iter().any(|r| f(r).as_deref() == Some(want))
        };
        for class in [
            "multiple sclerosis",
            "stroke",
            "tumor",
            "other abnormality",
            "normal",
        ] {
            assert!(has(&|r| r.diagnosis.clone(), class), "{class}");
        }
        for m in ["MRI", "CT"] {
            assert!(has(&|r| r.modality.clone(), m), "{m}");
        }
        for s in ["FLAIR", "T1", "T2", "T1C+"] {
            assert!(has(&|r| r.specialized_sequence.clone(), s), "{s}");
        }
        for p in ["axial", "coronal", "sagittal"] {
            assert!(has(&|r| r.plane.clone(), p), "{p}");
        }
        for it in ITEMS {
            if let Some((id, k)) = it.source {
                let defs = cases::all();
                let def = defs.iter().find(|d| d.id == id).expect(id);
                assert!(def.scenes.len() > k, "{id} scene {k}");
            }
        }
        assert!(suite
            .cases
            .iter()
            .all(|c| c.metadata.get("synthetic").map(String::as_str) == Some("true")));
    }
}
