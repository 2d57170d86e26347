//! What is checked before dicom-rs reads a file or decodes its pixels, so that lengths a header declares can
//! never size an allocation the file cannot back (see [`crate::limits`]).
//!
//! dicom-rs 0.10 has no element size limit: it allocates and zero-fills each value's declared length before
//! reading it, so a 418-byte file declaring a 4 GB element would take 4 GB. [`check_lengths`] walks the element
//! headers with dicom-rs's own decoder, seeking past every value, and refuses one longer than what is left.

use std::cell::Cell;
use std::fs::File;
use std::io::{BufReader, Read, Seek};
use std::path::Path;
use std::rc::Rc;

use dicom_core::header::DataElementHeader;
use dicom_core::{Tag, VR};
use dicom_dictionary_std::tags;
use dicom_encoding::transfer_syntax::Codec;
use dicom_encoding::{TransferSyntax, TransferSyntaxIndex};
use dicom_object::meta::FileMetaTable;
use dicom_object::InMemDicomObject;
use dicom_parser::{StatefulDecode, StatefulDecoder};
use dicom_transfer_syntax_registry::TransferSyntaxRegistry;

use crate::limits;

const ITEM: Tag = Tag(0xFFFE, 0xE000);
const ITEM_END: Tag = Tag(0xFFFE, 0xE00D);
const SEQUENCE_END: Tag = Tag(0xFFFE, 0xE0DD);

/// Refuses a file whose element lengths exceed what the file (or its inflated data set) holds, whose sequences
/// nest deeper than [`limits::MAX_DICOM_DEPTH`], or whose deflated data set inflates past
/// [`limits::inflate_cap`]. Anything else malformed is left for dicom-rs to report when it opens the file.
pub(super) fn check_lengths(path: &Path) -> Result<(), String> {
    let file = File::open(path).map_err(|e| format!("cannot read the file: {e}"))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = BufReader::new(file);
    // The 128-byte preamble: files without one are not sniffed as DICOM.
    if reader.seek_relative(128).is_err() {
        return Ok(());
    }
    // dicom-rs allocates the file meta group's values by their declared lengths too.
    check_meta_lengths(&mut reader, size)?;
    let Ok(meta) = FileMetaTable::from_reader(&mut reader) else {
        return Ok(());
    };
    let Some(ts) = TransferSyntaxRegistry.get(meta.transfer_syntax()) else {
        return Ok(());
    };
    let start = reader.stream_position().unwrap_or(size);
    if matches!(ts.codec(), Codec::Dataset(_)) {
        return check_deflated(reader, ts, size.saturating_sub(start));
    }
    let Ok(mut decoder) = StatefulDecoder::new_with_ts(reader, ts, start) else {
        return Ok(());
    };
    walk(&mut decoder, Some(size), |decoder, at, len| {
        decoder.seek(at + u64::from(len)).map_err(|e| e.to_string())
    })
}

/// Walks the file meta group (explicit VR little endian after `DICM`, group 0002) from where `reader` stands,
/// refusing a value longer than what the file holds, and leaves `reader` where it was.
fn check_meta_lengths(reader: &mut BufReader<File>, size: u64) -> Result<(), String> {
    let start = reader.stream_position().map_err(|e| e.to_string())?;
    let mut magic = [0u8; 4];
    if reader.read_exact(&mut magic).is_err() || &magic != b"DICM" {
        return reader
            .seek(std::io::SeekFrom::Start(start))
            .map(|_| ())
            .map_err(|e| e.to_string());
    }
    let mut at = start + 4;
    loop {
        let mut head = [0u8; 8];
        if reader.read_exact(&mut head).is_err() || u16::from_le_bytes([head[0], head[1]]) != 0x0002
        {
            break;
        }
        // The VRs whose length takes 2 bytes (PS3.5 7.1.2); every other, and a VR dicom-rs does not know (which it
        // reads as UN), takes 4 bytes after 2 reserved ones.
        let long = !matches!(
            &head[4..6],
            b"AE"
                | b"AS"
                | b"AT"
                | b"CS"
                | b"DA"
                | b"DS"
                | b"DT"
                | b"FL"
                | b"FD"
                | b"IS"
                | b"LO"
                | b"LT"
                | b"PN"
                | b"SH"
                | b"SL"
                | b"SS"
                | b"ST"
                | b"TM"
                | b"UI"
                | b"UL"
                | b"US"
        );
        let (header, len) = if long {
            let mut l = [0u8; 4];
            if reader.read_exact(&mut l).is_err() {
                break;
            }
            (12, u64::from(u32::from_le_bytes(l)))
        } else {
            (8, u64::from(u16::from_le_bytes([head[6], head[7]])))
        };
        let end = at + header + len;
        if end > size {
            let tag = (
                u16::from_le_bytes([head[0], head[1]]),
                u16::from_le_bytes([head[2], head[3]]),
            );
            return Err(format!(
                "file meta element ({:04X},{:04X}) declares {len} bytes, more than the {} the file has left",
                tag.0,
                tag.1,
                size.saturating_sub(at + header)
            ));
        }
        reader
            .seek(std::io::SeekFrom::Start(end))
            .map_err(|e| e.to_string())?;
        at = end;
    }
    reader
        .seek(std::io::SeekFrom::Start(start))
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Walks a deflated data set as it inflates, counting bytes, and stops one byte past the cap.
fn check_deflated(
    reader: BufReader<File>,
    ts: &TransferSyntax,
    compressed: u64,
) -> Result<(), String> {
    let cap = limits::inflate_cap(compressed);
    let inflated = Rc::new(Cell::new(0));
    let stream = Counted {
        inner: flate2::read::DeflateDecoder::new(reader).take(cap + 1),
        count: inflated.clone(),
    };
    let Ok(mut decoder) = StatefulDecoder::new_with_ts(stream, ts, 0) else {
        return Ok(());
    };
    let walked = walk(&mut decoder, None, |decoder, _, len| {
        let mut sink = CountingSink(0);
        decoder.read_to(len, &mut sink).map_err(|e| e.to_string())?;
        if sink.0 < u64::from(len) {
            return Err(format!(
                "the inflated data set ends after {}",
                inflated.get()
            ));
        }
        Ok(())
    });
    if inflated.get() > cap {
        return Err(format!(
            "the deflated data set of {compressed} bytes inflates to more than {cap} bytes; the limit is {} times \
             the compressed size, at least {} MiB and at most {} GiB",
            limits::MAX_INFLATE_RATIO,
            limits::INFLATE_FLOOR >> 20,
            limits::max_inflated() >> 30
        ));
    }
    walked
}

/// A reader that counts the bytes read through it.
struct Counted<R> {
    inner: R,
    count: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.set(self.count.get() + n as u64);
        Ok(n)
    }
}

/// A writer that drops what it is given and counts it: skipping a value of a stream that cannot seek.
struct CountingSink(u64);

impl std::io::Write for CountingSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A sequence or item being walked: where it ends (`None`: at its delimiter), and whether its items are pixel
/// data fragments (raw bytes) rather than nested elements.
struct Open {
    end: Option<u64>,
    fragments: bool,
}

/// Visits every element header; `skip(decoder, at, len)` moves past the value of `len` bytes that starts at
/// byte `at`, or fails. `size` is the file's length where it is known (a file read in place), so that a length
/// is refused before seeking. Positions are counted here: dicom-rs's `seek` does not update its own.
fn walk<D: StatefulDecode>(
    decoder: &mut D,
    size: Option<u64>,
    mut skip: impl FnMut(&mut D, u64, u32) -> Result<(), String>,
) -> Result<(), String> {
    let mut open: Vec<Open> = Vec::new();
    let mut at = decoder.position();
    loop {
        while open
            .last()
            .is_some_and(|o| o.end.is_some_and(|end| at >= end))
        {
            open.pop();
        }
        let before = decoder.position();
        // A header that does not decode is the end of the data set, or damage dicom-rs reports itself.
        let Ok(header) = decoder.decode_header() else {
            return Ok(());
        };
        at += decoder.position() - before;
        let fits = |len: u32| match size {
            Some(size) if at + u64::from(len) > size => Err(too_long(&header, at, size)),
            _ => Ok(()),
        };
        let in_fragments = open.last().is_some_and(|o| o.fragments);
        match header.tag {
            ITEM if in_fragments => {
                let len = header.len.get().unwrap_or(0);
                fits(len)?;
                skip(decoder, at, len).map_err(|e| format!("{}: {e}", name(&header)))?;
                at += u64::from(len);
            }
            ITEM_END | SEQUENCE_END => {
                open.pop();
            }
            _ if header.tag == ITEM || header.vr == VR::SQ || header.len.is_undefined() => {
                if let Some(len) = header.len.get() {
                    fits(len)?;
                }
                open.push(Open {
                    end: header.len.get().map(|len| at + u64::from(len)),
                    fragments: header.tag == tags::PIXEL_DATA,
                });
            }
            _ => {
                let len = header.len.get().unwrap_or(0);
                fits(len)?;
                skip(decoder, at, len).map_err(|e| format!("{}: {e}", name(&header)))?;
                at += u64::from(len);
            }
        }
        if open.len() > limits::MAX_DICOM_DEPTH {
            return Err(format!(
                "sequences nest more than {} levels deep at byte {at}; expected a shallower data set",
                limits::MAX_DICOM_DEPTH
            ));
        }
    }
}

fn name(header: &DataElementHeader) -> String {
    format!(
        "element ({:04X},{:04X})",
        header.tag.group(),
        header.tag.element()
    )
}

fn too_long(header: &DataElementHeader, at: u64, size: u64) -> String {
    format!(
        "{} declares {} bytes at byte {at}, but the file holds {size} bytes ({} left); expected a length that \
         fits the file",
        name(header),
        header.len.get().unwrap_or(0),
        size.saturating_sub(at)
    )
}

/// What a file's image attributes say its pixel data decodes to.
pub(super) struct PixelShape {
    pub rows: usize,
    pub cols: usize,
    pub frames: usize,
    pub samples: usize,
    pub bits: usize,
}

impl PixelShape {
    /// Rows x Columns x NumberOfFrames x SamplesPerPixel, refused above [`limits::max_voxels`].
    pub fn values(&self) -> Result<usize, String> {
        [self.cols, self.frames, self.samples]
            .iter()
            .try_fold(self.rows, |n, &d| n.checked_mul(d))
            .filter(|&n| n <= limits::max_voxels())
            .ok_or_else(|| {
                format!(
                    "Rows x Columns x NumberOfFrames x SamplesPerPixel is {} x {} x {} x {}, more than the {} \
                     values one file may decode to",
                    self.rows,
                    self.cols,
                    self.frames,
                    self.samples,
                    limits::max_voxels()
                )
            })
    }

    /// The bytes the native pixel data must hold.
    fn native_bytes(&self) -> Result<u64, String> {
        let values = self.values()? as u64;
        Ok((values * self.bits as u64).div_ceil(8))
    }
}

/// Checks PixelData against the image attributes before anything is decoded: native data must hold what Rows,
/// Columns, NumberOfFrames, SamplesPerPixel and BitsAllocated describe; encapsulated frames may not decode to
/// more than [`limits::codec_cap`] of their size, and a JPEG or JPEG 2000 frame may not be larger than Rows x
/// Columns.
pub(super) fn check_pixel_data(obj: &InMemDicomObject, shape: &PixelShape) -> Result<(), String> {
    let expected = shape.native_bytes()?;
    let Some(value) = obj
        .element_opt(tags::PIXEL_DATA)
        .ok()
        .flatten()
        .map(|e| e.value())
    else {
        return Err("the file has no PixelData (7FE0,0010); expected an image".into());
    };
    if let Some(fragments) = value.fragments() {
        return check_fragments(fragments, shape, expected);
    }
    let held = value
        .primitive()
        .map(|p| p.calculate_byte_len() as u64)
        .unwrap_or(0);
    // One byte of padding makes an odd length even; more than half as much again is not padding.
    if held < expected || held > expected + expected / 2 + 1 {
        return Err(format!(
            "PixelData (7FE0,0010) holds {held} bytes, but Rows x Columns x NumberOfFrames x SamplesPerPixel x \
             BitsAllocated/8 is {} x {} x {} x {} x {}/8 = {expected} bytes",
            shape.rows, shape.cols, shape.frames, shape.samples, shape.bits
        ));
    }
    Ok(())
}

fn check_fragments(fragments: &[Vec<u8>], shape: &PixelShape, expected: u64) -> Result<(), String> {
    let encoded: u64 = fragments.iter().map(|f| f.len() as u64).sum();
    let cap = limits::codec_cap(encoded);
    if expected > cap {
        return Err(format!(
            "the encapsulated PixelData (7FE0,0010) holds {encoded} bytes but Rows x Columns x NumberOfFrames \
             x SamplesPerPixel x BitsAllocated/8 says it decodes to {expected}; the limit is {} times the \
             encoded size (at least {} MiB)",
            limits::MAX_CODEC_RATIO,
            limits::INFLATE_FLOOR >> 20
        ));
    }
    for (n, fragment) in fragments.iter().enumerate() {
        if let Some((what, w, h)) = frame_size(fragment) {
            if w > shape.cols || h > shape.rows {
                return Err(format!(
                    "{what} fragment {} is {w} x {h} pixels, larger than Columns x Rows ({} x {}); expected \
                     frames of the image's size",
                    n + 1,
                    shape.cols,
                    shape.rows
                ));
            }
        }
    }
    Ok(())
}

/// The width and height a JPEG (SOF marker) or JPEG 2000 (SIZ marker) codestream declares, from its header.
fn frame_size(bytes: &[u8]) -> Option<(&'static str, usize, usize)> {
    let be16 =
        |at: usize| Some(u16::from_be_bytes(bytes.get(at..at + 2)?.try_into().ok()?) as usize);
    let be32 =
        |at: usize| Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize);
    if bytes.starts_with(&[0xFF, 0x4F, 0xFF, 0x51]) {
        // SIZ: Lsiz, Rsiz, then Xsiz, Ysiz, XOsiz, YOsiz.
        let (w, h) = (
            be32(8)?.checked_sub(be32(16)?)?,
            be32(12)?.checked_sub(be32(20)?)?,
        );
        return Some(("JPEG 2000", w, h));
    }
    if !bytes.starts_with(&[0xFF, 0xD8]) {
        return None;
    }
    let mut at = 2;
    while at + 4 <= bytes.len() {
        if bytes[at] != 0xFF {
            return None;
        }
        let marker = bytes[at + 1];
        let is_sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if is_sof {
            // SOF: length, precision, then height and width.
            return Some(("JPEG", be16(at + 7)?, be16(at + 5)?));
        }
        at += 2 + be16(at + 2)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_sizes_come_from_the_codestream_headers() {
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0, 0];
        jpeg.extend([0xFF, 0xC0, 0x00, 0x0B, 8, 0x10, 0x00, 0x20, 0x00, 1]);
        assert_eq!(frame_size(&jpeg), Some(("JPEG", 0x2000, 0x1000)));
        let mut j2k = vec![0xFF, 0x4F, 0xFF, 0x51, 0, 41, 0, 0];
        for v in [640u32, 480, 0, 0] {
            j2k.extend(v.to_be_bytes());
        }
        assert_eq!(frame_size(&j2k), Some(("JPEG 2000", 640, 480)));
        assert_eq!(frame_size(&[0xFF, 0xD8, 0xFF]), None);
    }
}
