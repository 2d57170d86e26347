//! DICOM on pydicom's and pydicom-data's real test files.

use std::path::{Path, PathBuf};

use dicom_core::{DataElement, PrimitiveValue, VR};
use dicom_dictionary_std::tags;
use nmb_imaging::{describe_volume, load_volume, render_path, RenderOptions, VolumeError};
use nmb_test_support::assets;

use crate::common::*;

fn files() -> Option<(PathBuf, PathBuf)> {
    Some((assets::pydicom_files()?, assets::pydicom_data_files()?))
}

#[test]
fn renders_match_pydicom_and_numpy_to_one_grey_level() {
    let Some((files, data)) = files() else { return };
    let cases = [
        (files.join("MR_small.dcm"), "{}", "MR_small_file_window.pgm"),
        (
            files.join("CT_small.dcm"),
            r#"{"window":"brain"}"#,
            "CT_small_brain.pgm",
        ),
        (
            data.join("emri_small.dcm"),
            r#"{"slices":"5","window":"200/400"}"#,
            "emri_small_frame5.pgm",
        ),
        (
            files.join("dicomdirtests/77654033/CT2"),
            r#"{"slices":"2"}"#,
            "CT2_series_slice2.pgm",
        ),
    ];
    for (path, options, reference) in cases {
        let views = render_grey(&path, &opts(options));
        assert_eq!(views.len(), 1, "{}", path.display());
        let (w, h, pixels) = &views[0];
        let (rw, rh, expected) = read_pgm(reference);
        assert_eq!((*w, *h), (rw, rh), "{reference}: size");
        let diff = max_diff(pixels, &expected);
        assert!(diff <= 1, "{reference}: grey levels differ by up to {diff}");
        // The series' 16x16 thumbnails are too small for a contrast check to mean anything.
        assert!(
            has_contrast(pixels) || *w == 16,
            "{reference}: a flat image"
        );
    }
}

/// Lossless encodings of one image must decode to the same pixels; others decode to a real image or are refused
/// with their transfer syntax UID named.
#[test]
fn every_transfer_syntax_is_decoded_or_refused_by_uid() {
    let Some((files, data)) = files() else { return };
    let same_as = [
        (
            "MR_small.dcm",
            &files,
            &[
                "MR_small_implicit.dcm",
                "MR_small_bigendian.dcm",
                "MR_small_RLE.dcm",
                "MR_small_jp2klossless.dcm",
            ][..],
        ),
        (
            "emri_small.dcm",
            &data,
            &[
                "emri_small_RLE.dcm",
                "emri_small_big_endian.dcm",
                "emri_small_jpeg_2k_lossless.dcm",
            ][..],
        ),
    ];
    for (base, dir, variants) in same_as {
        let expected = render_grey(&dir.join(base), &RenderOptions::default());
        assert!(has_contrast(&expected[0].2), "{base}");
        for v in variants {
            let got = render_grey(&dir.join(v), &RenderOptions::default());
            assert_eq!(got, expected, "{v} decodes to other pixels than {base}");
        }
    }
    let decoded = [
        files.join("image_dfl.dcm"), // deflated explicit VR little endian
        files.join("SC_jpeg_no_color_transform.dcm"), // JPEG baseline, RGB
        data.join("color3d_jpeg_baseline.dcm"), // JPEG baseline, YBR, 120 frames
        data.join("JPEG-LL.dcm"),    // JPEG lossless, 16 bit
        data.join("JPGLosslessP14SV1_1s_1f_8b.dcm"), // JPEG lossless, 8 bit
        files.join("JPEG2000.dcm"),  // JPEG 2000 (lossy)
    ];
    for path in decoded {
        let views = render_grey(&path, &RenderOptions::default());
        assert!(
            has_contrast(&views[0].2),
            "{}: a flat image",
            path.display()
        );
    }
    let refused = [
        (
            files.join("MR_small_jpeg_ls_lossless.dcm"),
            "1.2.840.10008.1.2.4.80",
        ),
        (
            data.join("emri_small_jpeg_ls_lossless.dcm"),
            "1.2.840.10008.1.2.4.80",
        ),
        (files.join("JPEG-lossy.dcm"), "1.2.840.10008.1.2.4.51"),
    ];
    for (path, uid) in refused {
        let err = render_path(&path, &RenderOptions::default()).expect_err("refused");
        assert!(matches!(err, VolumeError::TransferSyntax { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains(uid) && msg.contains(&*path.to_string_lossy()),
            "{msg}"
        );
    }
}

#[test]
fn broken_files_give_errors_naming_the_file_not_panics() {
    let Some((files, data)) = files() else { return };
    for path in [
        files.join("MR_truncated.dcm"),
        data.join("emri_small_jpeg_2k_lossless_too_short.dcm"),
        files.join("rtplan.dcm"),
    ] {
        match render_path(&path, &RenderOptions::default()) {
            Err(e) => assert!(e.to_string().contains(&*path.to_string_lossy()), "{e}"),
            Ok((views, _)) => {
                let grey = render_grey(&path, &RenderOptions::default());
                assert!(
                    has_contrast(&grey[0].2),
                    "{}: decoded to a flat image",
                    path.display()
                );
                assert!(!views.is_empty());
            }
        }
    }
}

/// Copies the CT "Routine Brain" series under names that sort in reverse order, optionally without positions.
fn shuffled_series(src: &Path, dst: &Path, drop_positions: bool) {
    std::fs::create_dir_all(dst).unwrap();
    let mut names: Vec<PathBuf> = std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    for (i, file) in names.iter().rev().enumerate() {
        let mut obj = dicom_object::open_file(file).unwrap();
        if drop_positions {
            obj.remove_element(tags::IMAGE_POSITION_PATIENT);
        }
        obj.write_to_file(dst.join(format!("slice{i}.dcm")))
            .unwrap();
    }
}

#[test]
fn a_series_is_ordered_by_position_then_instance_number_not_by_file_name() {
    let Some((files, _)) = files() else { return };
    let src = files.join("dicomdirtests/77654033/CT2");
    let tmp = tempfile::tempdir().unwrap();
    let (placed, numbered) = (tmp.path().join("placed"), tmp.path().join("numbered"));
    shuffled_series(&src, &placed, false);
    shuffled_series(&src, &numbered, true);
    let all = opts(r#"{"slices":"0,1,2,3"}"#);
    let expected = render_grey(&src, &all);
    assert_eq!(render_grey(&placed, &all), expected);
    assert_eq!(
        render_grey(&numbered, &all),
        expected,
        "InstanceNumber order"
    );
    let (views, meta) = render_path(&placed, &all).unwrap();
    assert!(meta.uneven_spacing, "one slice lies far from the others");
    let labels: Vec<&str> = views.iter().map(|v| v.label.as_str()).collect();
    for (label, mm) in labels.iter().zip(["-99.5", "+103.0", "+104.3", "+105.5"]) {
        assert!(
            label.contains(mm),
            "{labels:?}: real positions, not the median step"
        );
    }
}

#[test]
fn multi_frame_volumes_reformat_with_their_spacing() {
    let Some((_, data)) = files() else { return };
    let path = data.join("emri_small.dcm");
    let (volume, meta) = load_volume(&path, &RenderOptions::default()).unwrap();
    assert_eq!((volume.dims, meta.frames), ([64, 64, 10], 10));
    let step = meta.slice_spacing.unwrap();
    let sagittal = render_grey(&path, &opts(r#"{"view":"sagittal"}"#));
    let (w, h, _) = &sagittal[0];
    assert_eq!(*w, 64);
    assert_eq!(
        *h,
        (10.0 * step / volume.spacing[1]).round() as u32,
        "square pixels"
    );
    let montage = render_grey(&path, &opts(r#"{"layout":"montage:2x3"}"#));
    assert_eq!(montage.len(), 1);
    assert_eq!(
        (montage[0].0, montage[0].1),
        (3 * 128, 2 * 128),
        "cells enlarged to 128 px"
    );
}

#[test]
fn monochrome1_is_shown_inverted() {
    let Some((files, _)) = files() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut obj = dicom_object::open_file(files.join("MR_small.dcm")).unwrap();
    obj.put(DataElement::new(
        tags::PHOTOMETRIC_INTERPRETATION,
        VR::CS,
        PrimitiveValue::from("MONOCHROME1"),
    ));
    let inverted = tmp.path().join("mono1.dcm");
    obj.write_to_file(&inverted).unwrap();
    let normal = render_grey(&files.join("MR_small.dcm"), &RenderOptions::default());
    let flipped = render_grey(&inverted, &RenderOptions::default());
    let complement: Vec<u8> = normal[0].2.iter().map(|v| 255 - v).collect();
    assert!(max_diff(&flipped[0].2, &complement) <= 1);
}

#[test]
fn a_directory_of_several_series_asks_which_one() {
    let Some((files, _)) = files() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let study = files.join("dicomdirtests/98892003");
    for series in ["MR1", "MR2"] {
        for entry in std::fs::read_dir(study.join(series)).unwrap() {
            let file = entry.unwrap().path();
            let name = format!("{series}_{}", file.file_name().unwrap().to_string_lossy());
            std::fs::copy(&file, tmp.path().join(name)).unwrap();
        }
    }
    std::fs::write(tmp.path().join("README.txt"), "not DICOM").unwrap();
    let err = describe_volume(tmp.path(), &RenderOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("series") && err.contains("1: ") && err.contains("2: "),
        "{err}"
    );
    let meta = describe_volume(tmp.path(), &opts(r#"{"series":"2"}"#)).unwrap();
    assert_eq!((meta.chosen_series, meta.skipped_files), (1, 1));
    assert!(render_path(tmp.path(), &opts(r#"{"series":"2"}"#)).is_ok());
}

#[test]
fn headers_give_modality_plane_and_spacing_but_nothing_identifying() {
    let Some((files, _)) = files() else { return };
    let path = files.join("CT_small.dcm");
    let obj = dicom_object::open_file(&path).unwrap();
    let mut identifying: Vec<String> = [
        tags::PATIENT_NAME,
        tags::PATIENT_ID,
        tags::STUDY_DATE,
        tags::INSTITUTION_NAME,
        tags::SERIES_INSTANCE_UID,
    ]
    .iter()
    .filter_map(|t| {
        obj.element_opt(*t)
            .ok()
            .flatten()?
            .to_str()
            .ok()
            .map(|s| s.trim().to_string())
    })
    .collect();
    identifying.retain(|s| s.len() > 3);
    assert!(
        identifying.len() >= 4,
        "the file carries identifying tags: {identifying:?}"
    );
    let meta = describe_volume(&path, &RenderOptions::default()).unwrap();
    assert_eq!(meta.modality.as_deref(), Some("CT"));
    assert_eq!(meta.plane.as_deref(), Some("axial"));
    assert!(meta.pixel_spacing.is_some() && meta.slice_thickness.is_some());
    let (views, full) = render_path(&path, &RenderOptions::default()).unwrap();
    let text = format!(
        "{} {}",
        serde_json::to_string(&full).unwrap(),
        views[0].label
    );
    for value in &identifying {
        assert!(
            !text.contains(value.as_str()),
            "{value:?} leaked into {text}"
        );
    }
}

#[test]
fn a_dicom_file_cut_anywhere_is_an_error_or_an_image_never_a_panic() {
    let Some((files, data)) = files() else { return };
    let tmp = tempfile::tempdir().unwrap();
    for src in [
        files.join("MR_small.dcm"),
        data.join("emri_small_RLE.dcm"),
        files.join("MR_small_jp2klossless.dcm"),
    ] {
        let bytes = std::fs::read(&src).unwrap();
        for cut in (1..20).map(|k| bytes.len() * k / 20) {
            let path = tmp.path().join(format!("cut{cut}.dcm"));
            std::fs::write(&path, &bytes[..cut]).unwrap();
            if let Err(e) = render_path(&path, &RenderOptions::default()) {
                assert!(e.to_string().contains(&format!("cut{cut}.dcm")), "{e}");
            }
        }
    }
}
