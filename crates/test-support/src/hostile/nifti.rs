//! Hostile NIfTI-1 files, from a hand-written 352-byte header: non-finite orientation fields, sizes of 0 or
//! less, NIfTI-2, gzip bombs and broken streams; and fine volumes with render options that ask too much.

use std::io::Write;

use super::Corpus;

/// A NIfTI-1 header (352 bytes with the extension flag) of `dims` voxels of `datatype`.
struct Nii([u8; 352]);

fn nii(dims: &[i16], datatype: i16, bitpix: i16) -> Nii {
    let mut h = Nii([0; 352]);
    h.i32(0, 348);
    h.i16(40, dims.len() as i16);
    for (i, d) in dims.iter().enumerate() {
        h.i16(42 + 2 * i, *d);
    }
    h.i16(70, datatype);
    h.i16(72, bitpix);
    for i in 0..8 {
        h.f32(76 + 4 * i, 1.0);
    }
    h.f32(108, 352.0);
    h.0[344..348].copy_from_slice(b"n+1\0");
    h
}

impl Nii {
    fn i16(&mut self, at: usize, v: i16) -> &mut Nii {
        self.0[at..at + 2].copy_from_slice(&v.to_le_bytes());
        self
    }
    fn i32(&mut self, at: usize, v: i32) -> &mut Nii {
        self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
        self
    }
    fn f32(&mut self, at: usize, v: f32) -> &mut Nii {
        self.0[at..at + 4].copy_from_slice(&v.to_le_bytes());
        self
    }
    fn with(&self, voxels: usize) -> Vec<u8> {
        [self.0.to_vec(), vec![7; voxels]].concat()
    }
}

const QFORM_CODE: usize = 252;
const SFORM_CODE: usize = 254;
const QUATERN_B: usize = 256;
const QOFFSET_X: usize = 268;
const SROW_X: usize = 280;

fn small() -> Nii {
    nii(&[4, 4, 4], 2, 8)
}

pub(super) fn headers(c: &mut Corpus) {
    let mut q = small();
    q.i16(QFORM_CODE, 1).f32(QUATERN_B, f32::NAN);
    c.file("nifti_nan_qform", "a.nii", q.with(64), "quatern_b is NaN");
    let mut q = small();
    q.i16(QFORM_CODE, 1).f32(QOFFSET_X, f32::INFINITY);
    c.file(
        "nifti_infinite_qoffset",
        "a.nii",
        q.with(64),
        "qoffset_x is inf",
    );
    let mut s = small();
    s.i16(SFORM_CODE, 1).f32(SROW_X, f32::NAN);
    c.file("nifti_nan_sform", "a.nii", s.with(64), "srow_x");
    let mut p = small();
    p.f32(80, f32::NAN);
    c.file("nifti_nan_pixdim", "a.nii", p.with(64), "pixdim[1] is NaN");
    let mut p = small();
    p.i16(QFORM_CODE, 1).f32(84, f32::NEG_INFINITY);
    c.file(
        "nifti_infinite_pixdim_with_qform",
        "a.nii",
        p.with(64),
        "pixdim[2] is -inf",
    );
    c.file(
        "nifti_zero_dimension",
        "a.nii",
        nii(&[4, 0, 4], 2, 8).with(64),
        "dim[2] is 0",
    );
    c.file(
        "nifti_negative_dimension",
        "a.nii",
        nii(&[4, -4, 4], 2, 8).with(64),
        "dim[2] is -4",
    );
    c.file(
        "nifti_rank_nine",
        "a.nii",
        nii(&[4, 4, 4, 1, 1, 1, 1], 2, 8)
            .with(64)
            .iter()
            .enumerate()
            .map(|(i, b)| if i == 40 { 9 } else { *b })
            .collect(),
        "dim[0] is",
    );
    c.file(
        "nifti_negative_volume_count",
        "a.nii",
        nii(&[4, 4, 4, -3], 2, 8).with(64),
        "dim[4] is -3",
    );
    c.file(
        "nifti_complex_datatype",
        "a.nii",
        nii(&[4, 4, 4], 32, 64).with(512),
        "datatype 32",
    );
    c.file(
        "nifti_header_longer_than_file",
        "a.nii",
        nii(&[64, 64, 64], 2, 8).with(100),
        "the file holds",
    );
    let mut offset = small();
    offset.f32(108, 3.0e38);
    c.file(
        "nifti_vox_offset_past_everything",
        "a.nii",
        offset.with(64),
        "a.nii",
    );
    let mut two = vec![0u8; 540];
    two[0..4].copy_from_slice(&540i32.to_le_bytes());
    two[4..8].copy_from_slice(b"n+2\0");
    c.file(
        "nifti2_plain",
        "a.nii",
        two.clone(),
        "NIfTI-2 files are not supported",
    );
    c.file(
        "nifti2_gzipped",
        "a.nii.gz",
        gzip(&two),
        "NIfTI-2 files are not supported",
    );
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

pub(super) fn streams(c: &mut Corpus) {
    // 96 MiB of voxels, compressed to about 100 KB: past the 64 MiB any stream may inflate to.
    let header = nii(&[512, 512, 384], 2, 8);
    let mut raw = header.0.to_vec();
    raw.resize(352 + (96 << 20), 0);
    c.file(
        "nifti_gzip_bomb",
        "a.nii.gz",
        gzip(&raw),
        "inflates to more than",
    );
    let mut cut = gzip(&small().with(64));
    cut.truncate(cut.len() - 12);
    c.file("nifti_gzip_stream_cut", "a.nii.gz", cut, "a.nii.gz");
    let mut garbage = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
    garbage.extend((0..400u32).map(|i| (i * 131 % 256) as u8));
    c.file(
        "nifti_gzip_garbage",
        "a.nii.gz",
        [garbage, gzip(&small().with(64))].concat(),
        "a.nii.gz",
    );
}

/// Files that are fine, with render options that ask too much.
pub(super) fn render_bounds(c: &mut Corpus) {
    let mut far = nii(&[4, 4, 64], 2, 8);
    // 2^57 mm, exact in f32 and f64: the first slice is there, and 1 mm steps vanish in rounding (ulp 32).
    far.i16(QFORM_CODE, 1).f32(QOFFSET_X + 8, 2f32.powi(57));
    let far = far.with(1024);
    c.with_options(
        "mm_range_step_below_precision",
        "a.nii",
        far.clone(),
        &[("slices", "mm:144115188075855872..144115188075855972/1")],
        "below the precision",
    );
    c.with_options(
        "mm_range_of_a_billion_positions",
        "a.nii",
        small().with(64),
        &[("slices", "mm:0..1000000/0.001")],
        "positions; expected 1 to 4096",
    );
    let tall = nii(&[1, 1, 300], 2, 8).with(300);
    c.with_options(
        "even_300_slices",
        "a.nii",
        tall.clone(),
        &[("slices", "even:300")],
        "a render shows at most 256",
    );
    let list = vec!["1"; 300].join(",");
    c.with_options(
        "slice_list_of_300",
        "a.nii",
        tall.clone(),
        &[("slices", list.as_str())],
        "a render shows at most 256",
    );
    c.with_options(
        "slices_past_montage_before_rendering",
        "a.nii",
        tall,
        &[("slices", "0,1,2,3,4"), ("layout", "montage:2x2")],
        "do not fit a 2x2 montage",
    );
    c.with_options(
        "max_side_zero",
        "a.nii",
        small().with(64),
        &[("max_side", "0")],
        "max_side is 0",
    );
    c.with_options(
        "slice_outside_volume",
        "a.nii",
        small().with(64),
        &[("slices", "99")],
        "outside the volume",
    );
}
