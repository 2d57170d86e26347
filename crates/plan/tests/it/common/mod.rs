//! Small in-memory suites with generated PNG images.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_imaging::ImageSource;
use nmb_suite::{Case, Family, Image, Level, Modality, Plane, Sequence, Suite, Task, Turn};

/// A distinct tiny PNG per `shade`.
pub fn png(shade: u8) -> Vec<u8> {
    nmb_test_support::images::flat_png(4, 3, shade)
}

pub fn inline_image(id: &str, shade: u8) -> Image {
    Image::new(id, ImageSource::Bytes(Arc::from(png(shade))))
}

pub fn mri(id: &str, shade: u8, seq: Sequence, plane: Plane) -> Image {
    let mut i = inline_image(id, shade);
    i.modality = Some(Modality::Mri);
    i.sequence = Some(seq);
    i.plane = Some(plane);
    i
}

pub fn task(id: &str, family: Family, question: &str) -> Task {
    Task {
        id: id.into(),
        family,
        level: Level::Direct,
        question: question.into(),
        options: Vec::new(),
        turns: Vec::new(),
        reference: None,
        metadata: BTreeMap::new(),
    }
}

pub fn case(id: &str, images: Vec<Image>, tasks: Vec<Task>) -> Case {
    Case {
        id: id.into(),
        language: Some("en".into()),
        images,
        ehr: vec![
            ("Age".into(), "77".into()),
            ("Sex".into(), "female".into()),
            ("Chief complaint".into(), "progressive memory loss".into()),
        ],
        notes: "Neurological examination showed impaired recall.".into(),
        metadata: BTreeMap::new(),
        tasks,
    }
}

pub fn suite(cases: Vec<Case>) -> Suite {
    Suite {
        id: "test".into(),
        version: "1".into(),
        description: "in-memory test suite".into(),
        format: "test".into(),
        defaults: BTreeMap::new(),
        cases,
        empty_cases: Vec::new(),
    }
}

/// One depth case: three MRI images (the second FLAIR axial), a differential task.
pub fn depth_suite() -> Suite {
    let images = vec![
        mri("a", 10, Sequence::T1, Plane::Sagittal),
        mri("b", 20, Sequence::Flair, Plane::Axial),
        mri("c", 30, Sequence::Dwi, Plane::Coronal),
    ];
    let t = task(
        "case_1/dx",
        Family::Differential,
        "What is the most likely diagnosis?",
    );
    suite(vec![case("case_1", images, vec![t])])
}

/// A multi-turn consult: opening question, then two turns of new evidence.
pub fn multi_turn_suite() -> Suite {
    let mut t = task(
        "case_2/consult",
        Family::Differential,
        "Initial assessment?",
    );
    t.level = Level::MultiTurn;
    t.turns = vec![
        Turn {
            text: "EEG shows periodic sharp waves.".into(),
            images: vec![mri("d", 40, Sequence::Dwi, Plane::Axial)],
            question: "Revise your differential.".into(),
        },
        Turn {
            text: "CSF 14-3-3 protein is positive.".into(),
            images: Vec::new(),
            question: "Final diagnosis?".into(),
        },
    ];
    let images = vec![mri("a", 50, Sequence::Flair, Plane::Axial)];
    suite(vec![case("case_2", images, vec![t])])
}

pub fn text_of(m: &nmb_plan::Message) -> String {
    m.joined_text()
}
