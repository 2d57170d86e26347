//! NIfTI on real brains: Debian's ch2 T1 template and nibabel's test volumes.

use std::path::Path;

use ndarray::{s, Array3, Axis, ShapeBuilder};
use nifti::writer::WriterOptions;
use nifti::{IntoNdArray, NiftiObject, ReaderOptions};
use nmb_imaging::{load_volume, render_path, RenderOptions};
use nmb_test_support::assets;

use crate::common::*;

#[test]
fn the_mid_axial_slice_of_ch2_is_a_brain_and_roughly_symmetric() {
    let Some(dir) = assets::mricron_templates() else {
        return;
    };
    let views = render_grey(&dir.join("ch2.nii.gz"), &opts(r#"{"view":"axial"}"#));
    let (w, h, px) = &views[0];
    assert_eq!((*w, *h), (181, 217), "x by y of a 1 mm MNI grid");
    let fg: Vec<bool> = px.iter().map(|v| *v > 40).collect();
    let share = fg.iter().filter(|f| **f).count() as f64 / fg.len() as f64;
    assert!(
        (0.3..0.8).contains(&share),
        "head covers {share:.2} of the slice"
    );
    let at = |x: u32, y: u32| fg[(y * w + x) as usize];
    assert!(at(w / 2, h / 2), "the centre is tissue");
    for (x, y) in [(0, 0), (w - 1, 0), (0, h - 1), (w - 1, h - 1)] {
        assert!(!at(x, y), "corner ({x},{y}) is background");
    }
    // Mirrored about the head's midline, the outline nearly coincides left to right, much less front to back.
    let (cx, cy) = centroid(&fg, *w);
    let lr = overlap(&fg, *w, *h, |x, y| (2.0 * cx - f64::from(x), f64::from(y)));
    let ap = overlap(&fg, *w, *h, |x, y| (f64::from(x), 2.0 * cy - f64::from(y)));
    assert!(
        lr > 0.9 && lr > ap,
        "mirror overlap left-right {lr:.3}, front-back {ap:.3}"
    );
}

fn centroid(fg: &[bool], w: u32) -> (f64, f64) {
    let pts: Vec<(f64, f64)> = (0..fg.len())
        .filter(|&i| fg[i])
        .map(|i| ((i as u32 % w) as f64, (i as u32 / w) as f64))
        .collect();
    let n = pts.len() as f64;
    (
        pts.iter().map(|p| p.0).sum::<f64>() / n,
        pts.iter().map(|p| p.1).sum::<f64>() / n,
    )
}

/// Intersection over union of the foreground and its image under `mirror`.
fn overlap(fg: &[bool], w: u32, h: u32, mirror: impl Fn(u32, u32) -> (f64, f64)) -> f64 {
    let (mut both, mut either) = (0u32, 0u32);
    for y in 0..h {
        for x in 0..w {
            let (mx, my) = mirror(x, y);
            let (mx, my) = (mx.round(), my.round());
            let inside = mx >= 0.0 && my >= 0.0 && mx < f64::from(w) && my < f64::from(h);
            let m = inside && fg[(my as u32 * w + mx as u32) as usize];
            let a = fg[(y * w + x) as usize];
            both += u32::from(a && m);
            either += u32::from(a || m);
        }
    }
    f64::from(both) / f64::from(either.max(1))
}

/// A copy in NIfTI's memory order (x fastest), which the writer needs.
fn fortran(view: ndarray::ArrayView3<'_, f32>) -> Array3<f32> {
    let mut out = Array3::zeros(view.raw_dim().f());
    out.assign(&view);
    out
}

/// Writes `data` with `header`'s fields but the given sform (and no qform).
fn write_with_sform(
    path: &Path,
    header: &nifti::NiftiHeader,
    data: &Array3<f32>,
    rows: [[f32; 4]; 3],
) {
    let mut header = header.clone();
    header.sform_code = 1;
    header.qform_code = 0;
    header.srow_x = rows[0];
    header.srow_y = rows[1];
    header.srow_z = rows[2];
    header.endianness = nifti::Endianness::Little;
    WriterOptions::new(path)
        .reference_header(&header)
        .write_nifti(data)
        .unwrap();
}

#[test]
fn the_same_brain_stored_with_flipped_or_swapped_axes_renders_identically() {
    let Some(dir) = assets::nibabel_files() else {
        return;
    };
    let src = dir.join("anatomical.nii");
    let obj = ReaderOptions::new().read_file(&src).unwrap();
    let header = obj.header().clone();
    let data: Array3<f32> = obj
        .into_volume()
        .into_ndarray::<f32>()
        .unwrap()
        .into_dimensionality()
        .unwrap();
    let (volume, _) = load_volume(&src, &RenderOptions::default()).unwrap();
    let a = volume.affine.map(|r| r.map(|v| v as f32));
    let (nx, nz) = (data.len_of(Axis(0)) as f32, data.len_of(Axis(2)) as f32);
    let tmp = tempfile::tempdir().unwrap();

    let plain = tmp.path().join("plain.nii");
    write_with_sform(&plain, &header, &data, a);
    // x and z reversed: column 0 and 2 change sign and the origin moves to the old far corner.
    let flipped_data = fortran(data.slice(s![..;-1, .., ..;-1]));
    let flip = |r: [f32; 4]| {
        [
            -r[0],
            r[1],
            -r[2],
            r[3] + r[0] * (nx - 1.0) + r[2] * (nz - 1.0),
        ]
    };
    let flipped = tmp.path().join("flipped.nii.gz");
    write_with_sform(&flipped, &header, &flipped_data, a.map(flip));
    // x and y swapped: so are the first two columns.
    let swapped_data = fortran(data.view().permuted_axes([1, 0, 2]));
    let swap = |r: [f32; 4]| [r[1], r[0], r[2], r[3]];
    let swapped = tmp.path().join("swapped.nii");
    write_with_sform(&swapped, &header, &swapped_data, a.map(swap));

    for view in ["axial", "coronal", "sagittal"] {
        let o = opts(&format!(
            r#"{{"view":"{view}","slices":"even:3","window":"0/400"}}"#
        ));
        let expected = render_grey(&src, &o);
        assert!(has_contrast(&expected[1].2), "{view}");
        assert_eq!(render_grey(&plain, &o), expected, "{view}: plain copy");
        assert_eq!(
            render_grey(&flipped, &o),
            expected,
            "{view}: flipped x and z"
        );
        assert_eq!(
            render_grey(&swapped, &o),
            expected,
            "{view}: swapped x and y"
        );
    }
}

#[test]
fn scl_slope_and_inter_are_applied() {
    let Some(dir) = assets::nibabel_files() else {
        return;
    };
    let src = dir.join("anatomical.nii");
    let obj = ReaderOptions::new().read_file(&src).unwrap();
    let header = obj.header().clone();
    let data: Array3<f32> = obj
        .into_volume()
        .into_ndarray::<f32>()
        .unwrap()
        .into_dimensionality()
        .unwrap();
    let (volume, _) = load_volume(&src, &RenderOptions::default()).unwrap();
    let a = volume.affine.map(|r| r.map(|v| v as f32));
    let tmp = tempfile::tempdir().unwrap();
    let scaled = tmp.path().join("scaled.nii");
    // Stored = (value - 10) / 2, with scl_slope 2 and scl_inter 10 patched into the header afterwards.
    write_with_sform(&scaled, &header, &data.mapv(|v| (v - 10.0) / 2.0), a);
    let mut bytes = std::fs::read(&scaled).unwrap();
    bytes[112..116].copy_from_slice(&2.0f32.to_le_bytes());
    bytes[116..120].copy_from_slice(&10.0f32.to_le_bytes());
    std::fs::write(&scaled, bytes).unwrap();
    let o = opts(r#"{"window":"0/400"}"#);
    assert_eq!(render_grey(&scaled, &o), render_grey(&src, &o));
}

#[test]
fn a_4d_volume_renders_the_one_chosen() {
    let Some(dir) = assets::nibabel_files() else {
        return;
    };
    let path = dir.join("example4d.nii.gz");
    let first = render_grey(&path, &opts(r#"{"window":"auto"}"#));
    let second = render_grey(&path, &opts(r#"{"window":"auto","volume":1}"#));
    assert!(has_contrast(&first[0].2));
    assert_ne!(first, second, "volume 1 is another time point");
    let err = render_path(&path, &opts(r#"{"volume":2}"#))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("volume 2") && err.contains("example4d"),
        "{err}"
    );
}

#[test]
fn bad_options_and_files_name_the_file_and_what_was_expected() {
    let Some(dir) = assets::nibabel_files() else {
        return;
    };
    let path = dir.join("anatomical.nii");
    let err = render_path(&path, &opts(r#"{"slices":"99"}"#))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("anatomical.nii") && err.contains("0 to 24"),
        "{err}"
    );
    let err = render_path(&path, &opts(r#"{"slices":"mm:500..600"}"#))
        .unwrap_err()
        .to_string();
    assert!(err.contains("outside the volume"), "{err}");
    let err = render_path(
        &path,
        &opts(r#"{"slices":"even:5","layout":"montage:2x2"}"#),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("do not fit"), "{err}");
    let tmp = tempfile::tempdir().unwrap();
    let cut = tmp.path().join("cut.nii");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let err = render_path(&cut, &RenderOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("cut.nii"), "{err}");
    let err = render_path(
        &dir.join("example_nifti2.nii.gz"),
        &RenderOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("NIfTI-2"), "{err}");
}

#[test]
fn a_nifti_header_that_lies_is_an_error_not_a_panic() {
    let Some(dir) = assets::nibabel_files() else {
        return;
    };
    let src = std::fs::read(dir.join("anatomical.nii")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // anatomical.nii is big-endian: dim[] at byte 40, vox_offset at 108, pixdim at 76.
    let patches: [(usize, &[u8]); 5] = [
        (42, &i16::MAX.to_be_bytes()),   // dim[1]
        (48, &i16::MAX.to_be_bytes()),   // dim[4]: many volumes
        (40, &9i16.to_be_bytes()),       // dim[0] out of range
        (108, &1.0e30f32.to_be_bytes()), // vox_offset far past the end
        (80, &f32::NAN.to_be_bytes()),   // pixdim[1]
    ];
    for (i, (at, value)) in patches.iter().enumerate() {
        let mut bytes = src.clone();
        bytes[*at..*at + value.len()].copy_from_slice(value);
        let path = tmp.path().join(format!("lie{i}.nii"));
        std::fs::write(&path, bytes).unwrap();
        if let Err(e) = render_path(&path, &RenderOptions::default()) {
            assert!(e.to_string().contains(&format!("lie{i}.nii")), "{e}");
        }
    }
}
