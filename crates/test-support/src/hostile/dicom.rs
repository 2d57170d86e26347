//! Hostile DICOM files, written element by element: lengths past the end, deep nesting, non-finite geometry,
//! sizes that lie, codec frames larger than the image, bombs, and series members that lead out of their folder.

use std::collections::BTreeMap;
use std::io::Write;

use super::Corpus;

const EXPLICIT_LE: &str = "1.2.840.10008.1.2.1";
const IMPLICIT_LE: &str = "1.2.840.10008.1.2";
const DEFLATED: &str = "1.2.840.10008.1.2.1.99";
const JPEG_BASELINE: &str = "1.2.840.10008.1.2.4.50";
const JPEG_2000: &str = "1.2.840.10008.1.2.4.90";
const RLE: &str = "1.2.840.10008.1.2.5";
const JPEG_LS: &str = "1.2.840.10008.1.2.4.80";

type Tag = (u16, u16);
const ROWS: Tag = (0x0028, 0x0010);
const COLUMNS: Tag = (0x0028, 0x0011);
const FRAMES: Tag = (0x0028, 0x0008);
const IOP: Tag = (0x0020, 0x0037);
const IPP: Tag = (0x0020, 0x0032);
const PIXEL_SPACING: Tag = (0x0028, 0x0030);
const SPACING_BETWEEN: Tag = (0x0018, 0x0088);
const SAMPLES: Tag = (0x0028, 0x0002);
const BITS: Tag = (0x0028, 0x0100);
const PIXEL_DATA: Tag = (0x7FE0, 0x0010);

/// A DICOM file: its elements by tag (written in tag order), and raw bytes appended after them.
struct Dicom {
    ts: &'static str,
    elements: BTreeMap<Tag, ([u8; 2], Vec<u8>)>,
    tail: Vec<u8>,
}

/// A valid 4 x 4 16-bit MR slice.
fn mr(ts: &'static str) -> Dicom {
    Dicom {
        ts,
        elements: BTreeMap::new(),
        tail: Vec::new(),
    }
    .text((0x0008, 0x0060), b"CS", "MR")
    .text((0x0020, 0x000E), b"UI", "1.2.3.4.5")
    .text(IPP, b"DS", "0\\0\\0")
    .text(IOP, b"DS", "1\\0\\0\\0\\1\\0")
    .us(SAMPLES, 1)
    .text((0x0028, 0x0004), b"CS", "MONOCHROME2")
    .us(ROWS, 4)
    .us(COLUMNS, 4)
    .text(PIXEL_SPACING, b"DS", "1\\1")
    .us(BITS, 16)
    .us((0x0028, 0x0101), 16)
    .us((0x0028, 0x0102), 15)
    .us((0x0028, 0x0103), 0)
    .set(PIXEL_DATA, b"OW", (0..32u8).collect::<Vec<u8>>())
}

impl Dicom {
    fn set(mut self, tag: Tag, vr: &[u8; 2], value: Vec<u8>) -> Dicom {
        self.elements.insert(tag, (*vr, value));
        self
    }

    fn text(self, tag: Tag, vr: &[u8; 2], s: &str) -> Dicom {
        let mut v = s.as_bytes().to_vec();
        if v.len() % 2 == 1 {
            v.push(if vr == b"UI" { 0 } else { b' ' });
        }
        self.set(tag, vr, v)
    }

    fn us(self, tag: Tag, v: u16) -> Dicom {
        self.set(tag, b"US", v.to_le_bytes().to_vec())
    }

    fn without(mut self, tag: Tag) -> Dicom {
        self.elements.remove(&tag);
        self
    }

    /// Encapsulated pixel data: an empty offset table, then one item per fragment.
    fn fragments(self, fragments: &[Vec<u8>]) -> Dicom {
        let mut tail = header(PIXEL_DATA, Some(b"OB"), u32::MAX);
        tail.extend(item(&[]));
        for f in fragments {
            tail.extend(item(f));
        }
        tail.extend(header((0xFFFE, 0xE0DD), None, 0));
        let mut d = self.without(PIXEL_DATA);
        d.tail = tail;
        d
    }

    fn with_tail(mut self, tail: Vec<u8>) -> Dicom {
        self.tail = tail;
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let explicit = self.ts != IMPLICIT_LE;
        let mut data = Vec::new();
        for (&tag, (vr, value)) in &self.elements {
            data.extend(element(tag, explicit.then_some(vr), value));
        }
        data.extend(&self.tail);
        if self.ts == DEFLATED {
            data = deflate(&data);
        }
        let mut out = vec![0u8; 128];
        out.extend(b"DICM");
        out.extend(meta(self.ts));
        out.extend(data);
        out
    }
}

fn meta(ts: &str) -> Vec<u8> {
    let uid = |s: &str| {
        let mut v = s.as_bytes().to_vec();
        if v.len() % 2 == 1 {
            v.push(0);
        }
        v
    };
    let mut group = element((0x0002, 0x0001), Some(b"OB"), &[0, 1]);
    group.extend(element(
        (0x0002, 0x0002),
        Some(b"UI"),
        &uid("1.2.840.10008.5.1.4.1.1.4"),
    ));
    group.extend(element((0x0002, 0x0003), Some(b"UI"), &uid("1.2.3.4.5.6")));
    group.extend(element((0x0002, 0x0010), Some(b"UI"), &uid(ts)));
    let mut out = element(
        (0x0002, 0x0000),
        Some(b"UL"),
        &(group.len() as u32).to_le_bytes(),
    );
    out.extend(group);
    out
}

fn long_vr(vr: &[u8; 2]) -> bool {
    matches!(
        vr,
        b"OB" | b"OW" | b"OF" | b"OD" | b"OL" | b"OV" | b"SQ" | b"UT" | b"UN" | b"UC" | b"UR"
    )
}

/// A header declaring `len` bytes (explicit VR when `vr` is given), without the value.
fn header(tag: Tag, vr: Option<&[u8; 2]>, len: u32) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(tag.0.to_le_bytes());
    out.extend(tag.1.to_le_bytes());
    match vr {
        Some(vr) if long_vr(vr) => {
            out.extend(vr);
            out.extend([0, 0]);
            out.extend(len.to_le_bytes());
        }
        Some(vr) => {
            out.extend(vr);
            out.extend((len as u16).to_le_bytes());
        }
        None => out.extend(len.to_le_bytes()),
    }
    out
}

fn element(tag: Tag, vr: Option<&[u8; 2]>, value: &[u8]) -> Vec<u8> {
    let mut out = header(tag, vr, value.len() as u32);
    out.extend(value);
    out
}

fn item(value: &[u8]) -> Vec<u8> {
    element((0xFFFE, 0xE000), None, value)
}

fn deflate(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}

fn ds(values: &str) -> Vec<u8> {
    let mut v = values.as_bytes().to_vec();
    if v.len() % 2 == 1 {
        v.push(b' ');
    }
    v
}

/// Declared lengths and nesting that the file cannot back.
pub(super) fn lengths(c: &mut Corpus) {
    let huge = mr(EXPLICIT_LE).with_tail(header((0x0009, 0x1001), Some(b"OB"), 0xF000_0000));
    c.file(
        "dicom_4gb_private_element",
        "a.dcm",
        huge.bytes(),
        "declares 4026531840 bytes",
    );
    let huge_pixels = mr(EXPLICIT_LE)
        .without(PIXEL_DATA)
        .with_tail([header(PIXEL_DATA, Some(b"OW"), 0xFFFF_FFF0), vec![0; 16]].concat());
    c.file(
        "dicom_4gb_pixel_data",
        "a.dcm",
        huge_pixels.bytes(),
        "declares 4294967280 bytes",
    );
    let implicit = mr(IMPLICIT_LE).with_tail(header((0x0009, 0x1001), None, 0xF000_0000));
    c.file(
        "dicom_4gb_implicit_vr",
        "a.dcm",
        implicit.bytes(),
        "declares 4026531840 bytes",
    );
    let in_sequence = mr(EXPLICIT_LE).with_tail(
        [
            header((0x0008, 0x1140), Some(b"SQ"), u32::MAX),
            header((0xFFFE, 0xE000), None, u32::MAX),
            header((0x0008, 0x1150), Some(b"UT"), 0xF000_0000),
        ]
        .concat(),
    );
    c.file(
        "dicom_4gb_inside_sequence",
        "a.dcm",
        in_sequence.bytes(),
        "declares 4026531840 bytes",
    );
    let sequence_len =
        mr(EXPLICIT_LE).with_tail(header((0x0008, 0x1140), Some(b"SQ"), 0x7000_0000));
    c.file(
        "dicom_sequence_longer_than_file",
        "a.dcm",
        sequence_len.bytes(),
        "declares 1879048192 bytes",
    );
    let mut deep = Vec::new();
    for _ in 0..2000 {
        deep.extend(header((0x0008, 0x1140), Some(b"SQ"), u32::MAX));
        deep.extend(header((0xFFFE, 0xE000), None, u32::MAX));
    }
    c.file(
        "dicom_sequences_nested_2000_deep",
        "a.dcm",
        mr(EXPLICIT_LE).with_tail(deep).bytes(),
        "nest more than",
    );
    let mut full = mr(EXPLICIT_LE).bytes();
    full.truncate(full.len() - 20);
    c.file("dicom_truncated_pixel_data", "a.dcm", full, "a.dcm");
    let mut cut = mr(EXPLICIT_LE).bytes();
    cut.truncate(150);
    c.file("dicom_cut_in_meta_group", "a.dcm", cut, "a.dcm");
    let mut garbage = vec![0u8; 128];
    garbage.extend(b"DICM");
    garbage.extend((0..300u32).map(|i| (i * 7919 % 251) as u8));
    c.file("dicom_magic_then_garbage", "a.dcm", garbage, "a.dcm");
}

/// Orientation, positions and spacing that are not finite.
pub(super) fn geometry(c: &mut Corpus) {
    let cases: [(&'static str, Tag, &str, &'static str); 7] = [
        (
            "dicom_nan_orientation",
            IOP,
            "NaN\\0\\0\\0\\1\\0",
            "ImageOrientationPatient",
        ),
        (
            "dicom_infinite_orientation",
            IOP,
            "1e999\\0\\0\\0\\1\\0",
            "ImageOrientationPatient",
        ),
        (
            "dicom_orientation_cross_product_overflows",
            IOP,
            "1e200\\0\\0\\0\\1e200\\0",
            "cross product",
        ),
        (
            "dicom_nan_position",
            IPP,
            "0\\NaN\\0",
            "ImagePositionPatient",
        ),
        (
            "dicom_infinite_position",
            IPP,
            "0\\0\\-1e999",
            "ImagePositionPatient",
        ),
        (
            "dicom_nan_pixel_spacing",
            PIXEL_SPACING,
            "NaN\\1",
            "PixelSpacing",
        ),
        (
            "dicom_nan_slice_spacing",
            SPACING_BETWEEN,
            "NaN",
            "SpacingBetweenSlices",
        ),
    ];
    for (name, tag, value, expect) in cases {
        let file = mr(EXPLICIT_LE).set(tag, b"DS", ds(value));
        c.file(name, "a.dcm", file.bytes(), expect);
    }
    // Finite tags whose product is not: direction cosines of 10 times a spacing of 1e308 mm.
    let huge = mr(EXPLICIT_LE)
        .set(PIXEL_SPACING, b"DS", ds("1e308\\1e308"))
        .set(IOP, b"DS", ds("10\\0\\0\\0\\10\\0"));
    c.file(
        "dicom_spacing_times_position_overflows",
        "a.dcm",
        huge.bytes(),
        "non-finite",
    );
}

/// Sizes that are zero, negative or larger than the pixel data, and codecs whose frames lie.
pub(super) fn pixels(c: &mut Corpus) {
    c.file(
        "dicom_zero_rows",
        "a.dcm",
        mr(EXPLICIT_LE).us(ROWS, 0).bytes(),
        "Rows (0028,0010) is 0",
    );
    c.file(
        "dicom_zero_columns",
        "a.dcm",
        mr(EXPLICIT_LE).us(COLUMNS, 0).bytes(),
        "Columns (0028,0011) is 0",
    );
    let zero_frames = mr(EXPLICIT_LE).set(FRAMES, b"IS", ds("0"));
    c.file(
        "dicom_zero_frames",
        "a.dcm",
        zero_frames.bytes(),
        "NumberOfFrames (0028,0008) is 0",
    );
    let negative = mr(EXPLICIT_LE).set(FRAMES, b"IS", ds("-4"));
    c.file(
        "dicom_negative_frames",
        "a.dcm",
        negative.bytes(),
        "NumberOfFrames (0028,0008) is -4",
    );
    let many = mr(EXPLICIT_LE)
        .us(ROWS, 65535)
        .us(COLUMNS, 65535)
        .set(FRAMES, b"IS", ds("1000"));
    c.file(
        "dicom_frames_past_voxel_budget",
        "a.dcm",
        many.bytes(),
        "values one file may decode to",
    );
    c.file(
        "dicom_zero_samples",
        "a.dcm",
        mr(EXPLICIT_LE).us(SAMPLES, 0).bytes(),
        "SamplesPerPixel",
    );
    c.file(
        "dicom_zero_bits",
        "a.dcm",
        mr(EXPLICIT_LE).us(BITS, 0).bytes(),
        "BitsAllocated",
    );
    let short = mr(EXPLICIT_LE).us(ROWS, 64).us(COLUMNS, 64);
    c.file(
        "dicom_pixel_data_shorter_than_rows_x_columns",
        "a.dcm",
        short.bytes(),
        "PixelData (7FE0,0010) holds 32 bytes",
    );
    let long = mr(EXPLICIT_LE).set(PIXEL_DATA, b"OW", vec![0; 4096]);
    c.file(
        "dicom_pixel_data_far_longer_than_rows_x_columns",
        "a.dcm",
        long.bytes(),
        "PixelData (7FE0,0010) holds 4096 bytes",
    );
    c.file(
        "dicom_no_pixel_data",
        "a.dcm",
        mr(EXPLICIT_LE).without(PIXEL_DATA).bytes(),
        "PixelData",
    );
    // A deflated data set whose pixel data is 96 MiB of zeros: about 100 KB on disk.
    let bomb =
        mr(DEFLATED)
            .us(ROWS, 4096)
            .us(COLUMNS, 6144)
            .set(PIXEL_DATA, b"OW", vec![0; 96 << 20]);
    c.file(
        "dicom_deflate_bomb",
        "a.dcm",
        bomb.bytes(),
        "inflates to more than",
    );
    let mut cut = mr(DEFLATED).bytes();
    cut.truncate(cut.len() - 30);
    c.file("dicom_deflate_stream_cut", "a.dcm", cut, "a.dcm");
    c.file(
        "dicom_jpeg_frame_larger_than_rows_x_columns",
        "a.dcm",
        jpeg_dicom(8, 8, 8192, 8192),
        "larger than Columns x Rows",
    );
    c.file(
        "dicom_jpeg_past_codec_ratio",
        "a.dcm",
        jpeg_dicom(16384, 16384, 16384, 16384),
        "times the encoded size",
    );
    let j2k = mr(JPEG_2000)
        .us(BITS, 8)
        .fragments(&[j2k_header(9000, 9000)]);
    c.file(
        "dicom_jpeg2000_frame_larger_than_rows_x_columns",
        "a.dcm",
        j2k.bytes(),
        "larger than Columns x Rows",
    );
    let rle = mr(RLE).fragments(&[rle_header_past_end()]);
    c.file(
        "dicom_rle_segments_past_fragment",
        "a.dcm",
        rle.bytes(),
        "a.dcm",
    );
    let jpeg_ls = mr(JPEG_LS).fragments(&[vec![0xFF, 0xD8, 0xFF, 0xF7, 0, 4, 0, 0]]);
    c.file(
        "dicom_jpeg_ls_unsupported",
        "a.dcm",
        jpeg_ls.bytes(),
        "1.2.840.10008.1.2.4.80",
    );
}

/// An 8-bit JPEG baseline DICOM of `rows` x `cols` whose one fragment's SOF says `h` x `w`.
fn jpeg_dicom(rows: u16, cols: u16, h: u16, w: u16) -> Vec<u8> {
    let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x0B, 8];
    jpeg.extend(h.to_be_bytes());
    jpeg.extend(w.to_be_bytes());
    jpeg.extend([1, 1, 0x11, 0, 0xFF, 0xD9]);
    mr(JPEG_BASELINE)
        .us(ROWS, rows)
        .us(COLUMNS, cols)
        .us(BITS, 8)
        .us((0x0028, 0x0101), 8)
        .us((0x0028, 0x0102), 7)
        .fragments(&[jpeg])
        .bytes()
}

fn j2k_header(w: u32, h: u32) -> Vec<u8> {
    let mut out = vec![0xFF, 0x4F, 0xFF, 0x51, 0, 41, 0, 0];
    for v in [w, h, 0, 0, w, h, 0, 0] {
        out.extend(v.to_be_bytes());
    }
    out.extend([0, 1, 7, 1, 1, 0xFF, 0xD9]);
    out
}

/// An RLE header of two segments whose offsets point far past the fragment's end.
fn rle_header_past_end() -> Vec<u8> {
    let mut out = vec![0u8; 64];
    out[0..4].copy_from_slice(&2u32.to_le_bytes());
    out[4..8].copy_from_slice(&64u32.to_le_bytes());
    out[8..12].copy_from_slice(&60_000u32.to_le_bytes());
    out.extend([0x81, 0x00, 0x02]);
    out
}

/// Series members that lead out of their directory.
pub(super) fn escapes(c: &mut Corpus) {
    let outside = c.dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let target = outside.join("secret.dcm");
    std::fs::write(&target, mr(EXPLICIT_LE).bytes()).unwrap();
    let suite = c.suite_dir("series_member_symlinked_outside");
    std::fs::create_dir_all(suite.join("series")).unwrap();
    std::fs::write(suite.join("series/1.dcm"), mr(EXPLICIT_LE).bytes()).unwrap();
    std::os::unix::fs::symlink(&target, suite.join("series/2.dcm")).unwrap();
    c.push(
        "series_member_symlinked_outside",
        suite,
        "series",
        "outside its directory",
        &[],
    );
    let suite = c.suite_dir("series_symlink_loop");
    std::fs::create_dir_all(suite.join("series")).unwrap();
    std::fs::write(suite.join("series/1.dcm"), mr(EXPLICIT_LE).bytes()).unwrap();
    std::os::unix::fs::symlink("loop_b", suite.join("series/loop_a")).unwrap();
    std::os::unix::fs::symlink("loop_a", suite.join("series/loop_b")).unwrap();
    c.push(
        "series_symlink_loop",
        suite,
        "series",
        "cannot resolve this series member",
        &[],
    );
    let suite = c.suite_dir("series_of_nothing");
    std::fs::create_dir_all(suite.join("series")).unwrap();
    std::fs::write(suite.join("series/notes.txt"), "not an image").unwrap();
    c.push(
        "series_of_nothing",
        suite,
        "series",
        "no DICOM image files",
        &[],
    );
}
