//! Every pixel perturbation against the NumPy/Pillow reference of `tests/fixtures/make_perturb_reference.py`
//! (within one grey level per pixel; JPEG round trips too: Pillow's libjpeg-turbo encoder at the same quality,
//! compared after decoding), and the same bytes, seed and perturbation giving the same bytes.

use std::path::{Path, PathBuf};

use nmb_imaging::Perturbation;

const SEED: u64 = 42;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/perturb")
}

/// A binary PGM (P5) or PPM (P6): (width, height, channels, samples).
fn read_pnm(path: &Path) -> (u32, u32, usize, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let head = String::from_utf8_lossy(&bytes[..32.min(bytes.len())]).to_string();
    let mut fields = head.split_ascii_whitespace();
    let channels = match fields.next() {
        Some("P5") => 1,
        Some("P6") => 3,
        other => panic!("{}: not a PGM or PPM: {other:?}", path.display()),
    };
    let w: u32 = fields.next().unwrap().parse().unwrap();
    let h: u32 = fields.next().unwrap().parse().unwrap();
    let n = w as usize * h as usize * channels;
    (w, h, channels, bytes[bytes.len() - n..].to_vec())
}

/// The reference cases: file stem and the perturbation nmb parses from the same text.
const CASES: [(&str, &str); 16] = [
    ("blank", "blank"),
    ("noise-0.2", "noise:0.2"),
    ("blur-1.5", "blur:1.5"),
    ("blur-6", "blur:6"),
    ("contrast-0.5", "contrast:0.5"),
    ("contrast-2.2", "contrast:2.2"),
    ("jpeg-10", "jpeg:10"),
    ("jpeg-30", "jpeg:30"),
    ("jpeg-50", "jpeg:50"),
    ("jpeg-90", "jpeg:90"),
    ("downsample-4", "downsample:4"),
    ("rotate-90", "rotate:90"),
    ("rotate--17.5", "rotate:-17.5"),
    ("flip-h", "flip:h"),
    ("flip-v", "flip:v"),
    ("crop-0.5", "crop:0.5"),
];

#[test]
fn every_perturbation_matches_numpy_and_pillow_within_one_grey_level() {
    let mut failures = Vec::new();
    for (kind, ext) in [("grey", "pgm"), ("rgb", "ppm")] {
        let input = std::fs::read(dir().join(format!("{kind}.png"))).unwrap();
        for (stem, text) in CASES {
            let p: Perturbation = text.parse().unwrap();
            let out = p.apply(&input, SEED).unwrap();
            assert_eq!(
                nmb_imaging::sniff(&out),
                Some(nmb_imaging::ImageFormat::Png)
            );
            let img = nmb_imaging::decode(&out).unwrap();
            let (w, h, channels, want) = read_pnm(&dir().join(format!("{kind}-{stem}.{ext}")));
            let got = match channels {
                1 => img.to_luma8().into_raw(),
                _ => img.to_rgb8().into_raw(),
            };
            assert_eq!((img.width(), img.height()), (w, h), "{kind} {text}: size");
            assert_eq!(
                img.color().has_color(),
                channels == 3,
                "{kind} {text}: colour kept"
            );
            let worst = got
                .iter()
                .zip(&want)
                .map(|(a, b)| a.abs_diff(*b))
                .max()
                .unwrap_or(0);
            eprintln!("{kind} {text}: max {worst}");
            if worst > 1 {
                failures.push(format!("{kind} {text}: off by up to {worst} grey levels"));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn the_same_bytes_and_seed_give_the_same_bytes() {
    let input = std::fs::read(dir().join("grey.png")).unwrap();
    for (_, text) in CASES {
        let p: Perturbation = text.parse().unwrap();
        let a = p.apply(&input, SEED).unwrap();
        let b = p.apply(&input, SEED).unwrap();
        assert_eq!(
            nmb_imaging::content_hash(&a),
            nmb_imaging::content_hash(&b),
            "{text}"
        );
    }
    let noise: Perturbation = "noise:0.2".parse().unwrap();
    assert_ne!(
        noise.apply(&input, SEED).unwrap(),
        noise.apply(&input, SEED + 1).unwrap(),
        "another seed draws other noise"
    );
    let other = std::fs::read(dir().join("rgb.png")).unwrap();
    assert_ne!(
        nmb_imaging::decode(&noise.apply(&other, SEED).unwrap())
            .unwrap()
            .to_luma8()
            .into_raw()[..16],
        nmb_imaging::decode(&noise.apply(&input, SEED).unwrap())
            .unwrap()
            .to_luma8()
            .into_raw()[..16],
        "each image draws its own noise"
    );
}

#[test]
fn a_corrupt_image_is_an_error_not_a_panic() {
    let input = std::fs::read(dir().join("grey.png")).unwrap();
    let p: Perturbation = "blur:2".parse().unwrap();
    assert!(p.apply(&input[..input.len() / 2], SEED).is_err());
}
