//! The bundled sample suite: coverage, references, image validity, determinism and visible lesions.

use std::collections::HashSet;

use nmb_imaging::ImageFormat;
use nmb_suite::{sample, Case, Family, Image, Level, Suite};

fn all_images(case: &Case) -> Vec<&Image> {
    let turn_images = case
        .tasks
        .iter()
        .flat_map(|t| t.turns.iter().flat_map(|u| u.images.iter()));
    case.images.iter().chain(turn_images).collect()
}

/// One build shared by the tests (generation is slow in unoptimised test builds).
fn suite() -> &'static Suite {
    static SUITE: std::sync::OnceLock<Suite> = std::sync::OnceLock::new();
    SUITE.get_or_init(sample::build)
}

#[test]
fn identity_and_description() {
    let s = suite();
    assert_eq!(s.id, "sample");
    assert_eq!(s.format, "sample");
    assert!(!s.version.is_empty());
    let d = s.description.to_lowercase();
    assert!(d.contains("synthetic") && d.contains("smoke") && d.contains("not for clinical use"));
    assert!(s.empty_cases.is_empty());
    assert!(s.has_answers());
}

#[test]
fn covers_every_depth_family_and_level() {
    let s = suite();
    assert!(s.cases.len() >= 10, "{} cases", s.cases.len());
    let families: HashSet<Family> = s.tasks().map(|(_, t)| t.family).collect();
    let levels: HashSet<Level> = s.tasks().map(|(_, t)| t.level).collect();
    for f in [Family::Differential, Family::Lesion, Family::Rationale] {
        assert!(families.contains(&f), "no {f} task");
    }
    for l in Level::ALL {
        assert!(levels.contains(l), "no {l} task");
    }
    let multi_task_cases = s.cases.iter().filter(|c| c.tasks.len() > 1).count();
    assert!(
        multi_task_cases >= 3,
        "only {multi_task_cases} cases with several tasks"
    );
}

#[test]
fn multi_turn_tasks_reveal_evidence_turn_by_turn() {
    let s = suite();
    let multi: Vec<_> = s
        .tasks()
        .filter(|(_, t)| t.level == Level::MultiTurn)
        .collect();
    assert!(multi.len() >= 3, "only {} multi-turn tasks", multi.len());
    for (_, t) in &multi {
        assert!(t.turns.len() >= 2, "{}: {} turns", t.id, t.turns.len());
        for (k, turn) in t.turns.iter().enumerate() {
            assert!(
                !turn.question.trim().is_empty(),
                "{} turn {k}: no question",
                t.id
            );
            assert!(
                !turn.text.trim().is_empty() || !turn.images.is_empty(),
                "{} turn {k}: no new evidence",
                t.id
            );
        }
    }
    let with_new_images = multi
        .iter()
        .filter(|(_, t)| t.turns.iter().any(|u| !u.images.is_empty()))
        .count();
    assert!(
        with_new_images >= 2,
        "only {with_new_images} dialogues reveal images"
    );
    // Single-turn tasks must not carry turns.
    for (_, t) in s.tasks().filter(|(_, t)| t.level != Level::MultiTurn) {
        assert!(t.turns.is_empty(), "{} has turns", t.id);
    }
}

fn sentences(text: &str) -> usize {
    // A sentence ends with ". " before a capital letter, or at the end; "e.g." and "i.e." do not split.
    let bytes = text.as_bytes();
    let inner = (0..bytes.len().saturating_sub(2))
        .filter(|&i| bytes[i] == b'.' && bytes[i + 1] == b' ' && bytes[i + 2].is_ascii_uppercase())
        .count();
    inner + usize::from(text.trim_end().ends_with('.'))
}

#[test]
fn every_task_has_a_full_reference_for_its_family() {
    let s = suite();
    let mut ids = HashSet::new();
    for (case, t) in s.tasks() {
        assert!(ids.insert(t.id.clone()), "duplicate task id {}", t.id);
        assert!(t.id.starts_with(&format!("{}/", case.id)), "{}", t.id);
        assert!(!t.question.trim().is_empty(), "{}: empty question", t.id);
        let r = t
            .reference
            .as_ref()
            .unwrap_or_else(|| panic!("{}: no reference", t.id));
        match t.family {
            Family::Differential => {
                assert!(t.id.ends_with("/dx"), "{}", t.id);
                assert!(r.diagnosis.is_some(), "{}: no diagnosis", t.id);
                assert!(!r.synonyms.is_empty(), "{}: no synonyms", t.id);
                assert!(
                    (2..=5).contains(&r.differential.len()),
                    "{}: differential",
                    t.id
                );
            }
            Family::Lesion => {
                assert!(t.id.ends_with("/lesion"), "{}", t.id);
                assert!(
                    r.lesion_type.is_some() && r.lesion_location.is_some(),
                    "{}",
                    t.id
                );
            }
            Family::Rationale => {
                assert!(t.id.ends_with("/rationale"), "{}", t.id);
                let text = r.rationale.as_deref().unwrap_or_default();
                let n = sentences(text);
                assert!(
                    (2..=4).contains(&n),
                    "{}: rationale has {n} sentences",
                    t.id
                );
            }
            other => panic!("{}: unexpected family {other}", t.id),
        }
    }
}

#[test]
fn some_reference_diagnoses_are_abbreviations() {
    let abbreviations = ["MS", "PRES", "CJD", "SIVD", "ADEM"];
    let s = suite();
    let hits: HashSet<&str> = s
        .tasks()
        .filter_map(|(_, t)| t.reference.as_ref()?.diagnosis.as_deref())
        .flat_map(|d| d.split(|c: char| !c.is_ascii_alphanumeric()))
        .filter(|w| abbreviations.contains(w))
        .collect();
    assert!(hits.len() >= 2, "abbreviated diagnoses: {hits:?}");
}

#[test]
fn cases_have_ordered_ehr_notes_language_and_synthetic_metadata() {
    let s = suite();
    let mut ids = HashSet::new();
    for c in &s.cases {
        assert!(ids.insert(&c.id), "duplicate case {}", c.id);
        assert_eq!(c.language.as_deref(), Some("en"), "{}", c.id);
        let keys: Vec<&str> = c.ehr.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            &keys[..3],
            ["Age", "Sex", "Presenting complaint"],
            "{}",
            c.id
        );
        assert!(keys.len() >= 6, "{}: {} EHR fields", c.id, keys.len());
        assert!(c.ehr.iter().all(|(_, v)| !v.trim().is_empty()), "{}", c.id);
        assert!(!c.notes.trim().is_empty(), "{}: no notes", c.id);
        let m = &c.metadata;
        assert_eq!(
            m.get("synthetic").map(String::as_str),
            Some("true"),
            "{}",
            c.id
        );
        assert_eq!(
            m.get("source").map(String::as_str),
            Some("synthetic"),
            "{}",
            c.id
        );
        assert_eq!(
            m.get("organ").map(String::as_str),
            Some("brain"),
            "{}",
            c.id
        );
        assert!(
            m.contains_key("disease_group") && m.contains_key("disease"),
            "{}",
            c.id
        );
        assert!(
            !c.images.is_empty(),
            "{}: no images at the first turn",
            c.id
        );
    }
    let groups: HashSet<&str> = s
        .cases
        .iter()
        .filter_map(|c| c.metadata.get("disease_group").map(String::as_str))
        .collect();
    assert!(groups.len() >= 5, "disease groups: {groups:?}");
}

#[test]
fn every_image_is_a_decodable_png_with_its_hash_and_labels() {
    let s = suite();
    let mut total = 0u64;
    let mut sequences = HashSet::new();
    let mut planes = HashSet::new();
    for c in &s.cases {
        let mut ids = HashSet::new();
        for img in all_images(c) {
            assert!(
                ids.insert(&img.id),
                "{}: duplicate image id {}",
                c.id,
                img.id
            );
            assert!(
                img.id.starts_with("img") && img.id.ends_with(".png"),
                "{}",
                img.id
            );
            let bytes = img.source.read().unwrap();
            let info = nmb_imaging::inspect(&bytes).unwrap();
            assert_eq!(info.format, ImageFormat::Png, "{}/{}", c.id, img.id);
            let (w, h) = (info.width.unwrap(), info.height.unwrap());
            assert!(
                (192..=256).contains(&w) && (192..=256).contains(&h),
                "{w}x{h}"
            );
            assert_eq!(
                img.sha256.as_deref(),
                Some(info.sha256.as_str()),
                "{}",
                img.id
            );
            let decoded = nmb_imaging::decode(&bytes).unwrap();
            assert_eq!((decoded.width(), decoded.height()), (w, h));
            assert!(img.modality.is_some() && img.sequence.is_some() && img.plane.is_some());
            let caption = img.caption.as_deref().unwrap_or_default();
            assert!(
                caption.contains("Synthetic"),
                "{}: caption {caption:?}",
                img.id
            );
            sequences.insert(img.sequence.unwrap());
            planes.insert(img.plane.unwrap());
            total += info.bytes;
        }
    }
    assert!(sequences.len() >= 7, "sequences: {sequences:?}");
    assert_eq!(planes.len(), 3, "planes: {planes:?}");
    assert!(total < 2_000_000, "PNG bytes in all: {total}");
}

#[test]
fn building_twice_gives_the_same_suite_hash_and_bytes() {
    let (a, b) = (suite(), &sample::build());
    assert_eq!(
        nmb_suite::suite_hash(a).unwrap(),
        nmb_suite::suite_hash(b).unwrap()
    );
    for (ca, cb) in a.cases.iter().zip(&b.cases) {
        for (ia, ib) in all_images(ca).into_iter().zip(all_images(cb)) {
            assert_eq!(
                ia.source.read().unwrap(),
                ib.source.read().unwrap(),
                "{}",
                ia.id
            );
        }
    }
}

/// Mean gray value of `pixels` where `mask` is set.
fn mean(pixels: &[u8], mask: impl Iterator<Item = bool>) -> f64 {
    let (sum, n) = pixels
        .iter()
        .zip(mask)
        .filter(|(_, m)| *m)
        .fold((0.0, 0usize), |(s, n), (&p, _)| (s + p as f64, n + 1));
    assert!(n > 20, "region too small ({n} px)");
    sum / n as f64
}

fn gray(case: &str, image: &str) -> (Vec<u8>, sample::Regions) {
    let s = suite();
    let img = all_images(s.case(case).unwrap())
        .into_iter()
        .find(|i| i.id == image)
        .unwrap_or_else(|| panic!("{case}: no image {image}"))
        .clone();
    let pixels = nmb_imaging::decode(&img.source.read().unwrap())
        .unwrap()
        .into_luma8()
        .into_raw();
    (pixels, sample::regions(case, image).unwrap())
}

/// Lesion mean and the mean of the mirror-image region in the other hemisphere (brain, not lesion).
fn lesion_vs_contralateral(case: &str, image: &str) -> (f64, f64) {
    let (px, r) = gray(case, image);
    let w = r.width as usize;
    let mirrored = |i: usize| (i / w) * w + (w - 1 - i % w);
    let contra: Vec<bool> = (0..px.len())
        .map(|i| r.lesion[mirrored(i)] && r.brain[i] && !r.lesion[i])
        .collect();
    (
        mean(&px, r.lesion.iter().copied()),
        mean(&px, contra.into_iter()),
    )
}

#[test]
fn stroke_is_bright_on_dwi_and_dark_on_adc_against_the_other_hemisphere() {
    let (lesion, contra) = lesion_vs_contralateral("stroke_left_mca", "img1_dwi_axial.png");
    assert!(
        lesion - contra >= 60.0,
        "DWI lesion {lesion:.1} vs contralateral {contra:.1}"
    );
    let (lesion, contra) = lesion_vs_contralateral("stroke_left_mca", "img2_adc_axial.png");
    assert!(
        contra - lesion >= 30.0,
        "ADC lesion {lesion:.1} vs contralateral {contra:.1}"
    );
}

#[test]
fn abscess_core_restricts_diffusion_and_rim_enhances() {
    let (lesion, contra) = lesion_vs_contralateral("brain_abscess", "img3_dwi_axial.png");
    assert!(
        lesion > contra,
        "DWI lesion {lesion:.1} vs contralateral {contra:.1}"
    );
    let (lesion, contra) = lesion_vs_contralateral("brain_abscess", "img1_t1c_axial.png");
    assert!(
        (lesion - contra).abs() >= 20.0,
        "T1C+ lesion {lesion:.1} vs {contra:.1}"
    );
}

#[test]
fn every_case_with_lesions_shows_them_clearly_on_some_image() {
    let s = suite();
    for c in &s.cases {
        let best = all_images(c)
            .iter()
            .filter_map(|img| {
                let r = sample::regions(&c.id, &img.id)?;
                if r.lesion.iter().filter(|&&l| l).count() < 20 {
                    return None;
                }
                let px = nmb_imaging::decode(&img.source.read().unwrap())
                    .unwrap()
                    .into_luma8()
                    .into_raw();
                let inside = mean(&px, r.lesion.iter().copied());
                let normal = r.brain.iter().zip(&r.lesion).map(|(&b, &l)| b && !l);
                Some((inside - mean(&px, normal)).abs())
            })
            .fold(None, |acc: Option<f64>, d| {
                Some(acc.map_or(d, |a| a.max(d)))
            });
        let best = best.unwrap_or_else(|| panic!("{}: no image with a lesion region", c.id));
        assert!(best >= 40.0, "{}: best lesion contrast {best:.1}", c.id);
    }
}

#[test]
fn regions_of_unknown_images_are_none() {
    assert!(sample::regions("no_such_case", "img1_dwi_axial.png").is_none());
    assert!(sample::regions("stroke_left_mca", "img99_dwi_axial.png").is_none());
}

/// Writes every generated image to `$NMB_SAMPLE_DUMP/<case>/<image>` for looking at; skipped when unset.
#[test]
fn dump_images_when_asked() {
    let Ok(dir) = std::env::var("NMB_SAMPLE_DUMP") else {
        eprintln!("NMB_SAMPLE_DUMP not set; not writing sample images");
        return;
    };
    for case in &suite().cases {
        let case_dir = std::path::Path::new(&dir).join(&case.id);
        std::fs::create_dir_all(&case_dir).unwrap();
        for img in all_images(case) {
            std::fs::write(case_dir.join(&img.id), img.source.read().unwrap()).unwrap();
        }
    }
}
