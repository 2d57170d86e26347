//! DICOM files and series into a [`Volume`]: grouping by series, ordering slices in space, rescaling, and the
//! few technical tags a prompt caption may use.
//!
//! Only geometry, pixel and acquisition tags are read. Names, IDs, dates, institutions and UIDs are never copied
//! out of the file: a series is told apart by its position in the listing, not by its UID.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use dicom_dictionary_std::tags;
use dicom_encoding::TransferSyntaxIndex;
use dicom_object::{DefaultDicomObject, InMemDicomObject, OpenFileOptions};
use dicom_pixeldata::PixelDecoder;
use dicom_transfer_syntax_registry::TransferSyntaxRegistry;
use rayon::prelude::*;

use crate::meta::{guess_sequence, plane_of_normal, SeriesSummary, VolumeMeta};
use crate::volume::Volume;
use crate::{limits, VolumeError};

mod budget;
mod geometry;

use budget::PixelShape;
use geometry::Geometry;

/// One file's worth of frames, with what is needed to place them in space.
struct Frames {
    path: PathBuf,
    obj: DefaultDicomObject,
    series_uid: String,
    instance: i64,
    rows: usize,
    cols: usize,
    iop: Option<[f64; 6]>,
    /// Position of each frame's first voxel (LPS mm), when the file says.
    positions: Vec<Option<[f64; 3]>>,
    pixel_spacing: Option<[f64; 2]>,
    slice_step: Option<f64>,
}

/// Loads one DICOM file, or the series in a directory (`series` picks one when the directory holds several: a
/// 1-based number from the listing, or a series description).
pub fn load(path: &Path, series: Option<&str>) -> Result<(Volume, VolumeMeta), VolumeError> {
    let (group, mut meta) = chosen_series(path, series, false)?;
    let volume = assemble(path, group, &mut meta)?;
    Ok((volume, meta))
}

/// What the headers say, without decoding any pixels.
pub fn describe(path: &Path, series: Option<&str>) -> Result<VolumeMeta, VolumeError> {
    let (group, mut meta) = chosen_series(path, series, true)?;
    meta.frames = group.iter().map(|f| f.positions.len()).sum();
    meta.source_dims = [group[0].cols, group[0].rows, meta.frames];
    Ok(meta)
}

fn chosen_series(
    path: &Path,
    series: Option<&str>,
    headers_only: bool,
) -> Result<(Vec<Frames>, VolumeMeta), VolumeError> {
    let (files, skipped) = open_all(path, headers_only)?;
    let groups = group_series(files);
    let summaries: Vec<SeriesSummary> = groups.iter().map(|g| summary(g)).collect();
    let chosen = choose_series(path, &summaries, series)?;
    let group = groups
        .into_iter()
        .nth(chosen)
        .expect("chosen index is in range");
    let mut meta = series_meta(&group);
    meta.series = summaries;
    meta.chosen_series = chosen;
    meta.skipped_files = skipped;
    Ok((group, meta))
}

fn open_all(path: &Path, headers_only: bool) -> Result<(Vec<Frames>, usize), VolumeError> {
    if !path.is_dir() {
        let obj = open(path, headers_only)?;
        let frames = frames_of(path.to_path_buf(), obj)?.ok_or_else(|| VolumeError::Dicom {
            path: path.to_path_buf(),
            message:
                "the file holds no image (Rows and Columns are missing); expected a DICOM image"
                    .into(),
        })?;
        return Ok((vec![frames], 0));
    }
    let entries = list_files(path)?;
    let opened: Vec<Option<Frames>> = entries
        .par_iter()
        .map(|p| {
            let bytes_look_like_dicom = crate::sniff_file(p) == Some(crate::ImageFormat::Dicom);
            if !bytes_look_like_dicom {
                return Ok(None);
            }
            frames_of(p.clone(), open(p, headers_only)?)
        })
        .collect::<Result<_, VolumeError>>()?;
    let skipped = opened.iter().filter(|f| f.is_none()).count();
    let files: Vec<Frames> = opened.into_iter().flatten().collect();
    if files.is_empty() {
        return Err(VolumeError::Dicom {
            path: path.to_path_buf(),
            message: format!(
                "no DICOM image files in this directory ({} files looked at); expected a series of .dcm files",
                entries.len()
            ),
        });
    }
    Ok((files, skipped))
}

fn list_files(dir: &Path) -> Result<Vec<PathBuf>, VolumeError> {
    Ok(crate::series_files(dir)?
        .into_iter()
        .map(|(_, path)| path)
        .collect())
}

fn open(path: &Path, headers_only: bool) -> Result<DefaultDicomObject, VolumeError> {
    let options = OpenFileOptions::new();
    let options = if headers_only {
        options.read_until(tags::PIXEL_DATA)
    } else {
        options
    };
    let error = |message: String| VolumeError::Dicom {
        path: path.to_path_buf(),
        message: format!("cannot parse the DICOM file: {message}"),
    };
    guard(|| budget::check_lengths(path))
        .map_err(error)?
        .map_err(error)?;
    guard(|| options.open_file(path))
        .map_err(error)?
        .map_err(|e| error(e.to_string()))
}

thread_local! {
    /// Set while [`guard`] runs third-party code on this thread: a panic there is caught and reported as an
    /// error, so the panic hook stays quiet for it.
    static CAUGHT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Installs, once, a panic hook that is silent for panics [`guard`] catches and hands every other panic to the
/// hook that was there before, so a real bug elsewhere still prints its message and backtrace.
fn quiet_hook_for_caught_panics() {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !CAUGHT.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
}

/// Runs third-party parsing or decoding, turning a panic inside it into an error message.
fn guard<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    quiet_hook_for_caught_panics();
    let was = CAUGHT.with(|c| c.replace(true));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    CAUGHT.with(|c| c.set(was));
    result.map_err(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "no message".into());
        format!("the decoder failed on malformed data ({what})")
    })
}

/// The file's image attributes and geometry; `Ok(None)` when it holds no image (no Rows or Columns). A size of
/// zero or less, or geometry that is not finite, is an error naming the tag.
fn frames_of(path: PathBuf, obj: DefaultDicomObject) -> Result<Option<Frames>, VolumeError> {
    let error = |message: String| VolumeError::Dicom {
        path: path.clone(),
        message,
    };
    let (Some(rows), Some(cols)) = (int(&obj, tags::ROWS), int(&obj, tags::COLUMNS)) else {
        return Ok(None);
    };
    let shape = image_size(&obj, rows, cols).map_err(error)?;
    let geometry = Geometry::of(&obj, shape.frames).map_err(error)?;
    Ok(Some(Frames {
        series_uid: text(&obj, tags::SERIES_INSTANCE_UID).unwrap_or_default(),
        instance: int(&obj, tags::INSTANCE_NUMBER).unwrap_or(0),
        rows: shape.rows,
        cols: shape.cols,
        iop: geometry.iop,
        positions: geometry.positions,
        pixel_spacing: geometry.pixel_spacing,
        slice_step: geometry.slice_step,
        path,
        obj,
    }))
}

/// Rows, Columns and NumberOfFrames, each at least 1, within [`limits::max_voxels`] together; SamplesPerPixel
/// and BitsAllocated are checked when the pixels are decoded.
fn image_size(obj: &InMemDicomObject, rows: i64, cols: i64) -> Result<PixelShape, String> {
    let frames = int(obj, tags::NUMBER_OF_FRAMES).unwrap_or(1);
    for (name, value) in [
        ("Rows (0028,0010)", rows),
        ("Columns (0028,0011)", cols),
        ("NumberOfFrames (0028,0008)", frames),
    ] {
        if value < 1 {
            return Err(format!("{name} is {value}; expected at least 1"));
        }
    }
    let size = |v: i64| usize::try_from(v).unwrap_or(usize::MAX);
    let shape = PixelShape {
        rows: size(rows),
        cols: size(cols),
        frames: size(frames),
        samples: 1,
        bits: 8,
    };
    shape.values()?;
    Ok(shape)
}

fn first_item(obj: &InMemDicomObject, tag: dicom_core::Tag) -> Option<InMemDicomObject> {
    let elem = obj.element_opt(tag).ok().flatten()?;
    elem.items()?.first().cloned()
}

fn text(obj: &InMemDicomObject, tag: dicom_core::Tag) -> Option<String> {
    let elem = obj.element_opt(tag).ok().flatten()?;
    let s = elem.to_str().ok()?;
    let s = s.trim_matches(|c: char| c.is_whitespace() || c == '\0');
    (!s.is_empty()).then(|| s.to_string())
}

fn int(obj: &InMemDicomObject, tag: dicom_core::Tag) -> Option<i64> {
    obj.element_opt(tag).ok().flatten()?.to_int::<i64>().ok()
}

/// The first value of a tag when it is a finite number (window and display values, not geometry).
fn float(obj: &InMemDicomObject, tag: dicom_core::Tag) -> Option<f64> {
    let v = obj
        .element_opt(tag)
        .ok()
        .flatten()?
        .to_multi_float64()
        .ok()?;
    v.first().copied().filter(|f| f.is_finite())
}

/// Groups files by series, in the order of each series' first file name.
fn group_series(files: Vec<Frames>) -> Vec<Vec<Frames>> {
    let mut by_uid: BTreeMap<String, Vec<Frames>> = BTreeMap::new();
    for f in files {
        by_uid.entry(f.series_uid.clone()).or_default().push(f);
    }
    let mut groups: Vec<Vec<Frames>> = by_uid.into_values().collect();
    groups.sort_by(|a, b| a[0].path.cmp(&b[0].path));
    groups
}

fn summary(group: &[Frames]) -> SeriesSummary {
    let first = &group[0].obj;
    SeriesSummary {
        description: text(first, tags::SERIES_DESCRIPTION),
        modality: text(first, tags::MODALITY),
        files: group.len(),
        frames: group.iter().map(|f| f.positions.len()).sum(),
        rows: group[0].rows,
        columns: group[0].cols,
    }
}

fn choose_series(
    path: &Path,
    series: &[SeriesSummary],
    wanted: Option<&str>,
) -> Result<usize, VolumeError> {
    let listing = || {
        series
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{}: {}", i + 1, s.short()))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let Some(wanted) = wanted else {
        if series.len() == 1 {
            return Ok(0);
        }
        return Err(VolumeError::Dicom {
            path: path.to_path_buf(),
            message: format!(
                "the directory holds {} series ({}); choose one with the render option `series` (its number or \
                 description)",
                series.len(),
                listing()
            ),
        });
    };
    if let Ok(n) = wanted.trim().parse::<usize>() {
        if (1..=series.len()).contains(&n) {
            return Ok(n - 1);
        }
    }
    let lower = wanted.trim().to_ascii_lowercase();
    series
        .iter()
        .position(|s| s.description.as_deref().map(str::to_ascii_lowercase) == Some(lower.clone()))
        .ok_or_else(|| VolumeError::Dicom {
            path: path.to_path_buf(),
            message: format!(
                "no series {wanted:?} here; expected a number or description from: {}",
                listing()
            ),
        })
}

fn series_meta(group: &[Frames]) -> VolumeMeta {
    let first = &group[0];
    let obj = &first.obj;
    let description = [
        text(obj, tags::SERIES_DESCRIPTION),
        text(obj, tags::PROTOCOL_NAME),
        text(obj, tags::SCANNING_SEQUENCE),
        text(obj, tags::SEQUENCE_NAME),
    ];
    let modality = text(obj, tags::MODALITY);
    let contrast = text(obj, tags::CONTRAST_BOLUS_AGENT).is_some();
    let uid = obj.meta().transfer_syntax().to_string();
    let ts_name = TransferSyntaxRegistry
        .get(&uid)
        .map(|ts| ts.name().to_string())
        .unwrap_or_else(|| "unknown transfer syntax".into());
    VolumeMeta {
        modality: modality.as_deref().map(crate::meta::modality_name),
        sequence: if modality.as_deref() == Some("MR") {
            guess_sequence(&description, contrast)
        } else {
            None
        },
        plane: first.iop.and_then(|iop| plane_of_normal(normal(&iop))),
        pixel_spacing: first.pixel_spacing,
        slice_thickness: float(obj, tags::SLICE_THICKNESS),
        transfer_syntax: Some((uid, ts_name)),
        window: float(obj, tags::WINDOW_CENTER).zip(float(obj, tags::WINDOW_WIDTH)),
        monochrome1: text(obj, tags::PHOTOMETRIC_INTERPRETATION).as_deref() == Some("MONOCHROME1"),
        ..VolumeMeta::new(crate::ImageFormat::Dicom)
    }
}

fn normal(iop: &[f64; 6]) -> [f64; 3] {
    let (r, c) = ([iop[0], iop[1], iop[2]], [iop[3], iop[4], iop[5]]);
    [
        r[1] * c[2] - r[2] * c[1],
        r[2] * c[0] - r[0] * c[2],
        r[0] * c[1] - r[1] * c[0],
    ]
}

/// One decoded frame, with where it lies along the slice normal.
struct Plane {
    depth: Option<f64>,
    instance: i64,
    frame: usize,
    origin: Option<[f64; 3]>,
    pixels: Vec<f32>,
}

fn assemble(path: &Path, group: Vec<Frames>, meta: &mut VolumeMeta) -> Result<Volume, VolumeError> {
    let (rows, cols) = (group[0].rows, group[0].cols);
    if rows == 0 || cols == 0 {
        return Err(VolumeError::Dicom {
            path: group[0].path.clone(),
            message: format!(
                "Rows x Columns is {rows} x {cols}; expected an image of at least 1 x 1"
            ),
        });
    }
    if let Some(odd) = group.iter().find(|f| (f.rows, f.cols) != (rows, cols)) {
        return Err(VolumeError::Dicom {
            path: odd.path.clone(),
            message: format!(
                "slice is {}x{} but the series' first slice ({}) is {}x{}; a series must have one matrix size",
                odd.cols,
                odd.rows,
                group[0].path.display(),
                cols,
                rows
            ),
        });
    }
    check_series_size(path, &group)?;
    let iop = group[0].iop.unwrap_or([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
    let n = normal(&iop);
    let spacing_xy = group[0].pixel_spacing.unwrap_or([1.0, 1.0]);
    let default_step = group[0].slice_step.unwrap_or(1.0).abs().max(1e-6);
    let decoded: Vec<Vec<Plane>> = group
        .par_iter()
        .map(|f| decode(f, &n, meta.monochrome1))
        .collect::<Result<_, _>>()?;
    let mut planes: Vec<Plane> = decoded.into_iter().flatten().collect();
    let all_placed = planes.iter().all(|p| p.depth.is_some());
    if all_placed {
        planes.sort_by(|a, b| a.depth.unwrap_or(0.0).total_cmp(&b.depth.unwrap_or(0.0)));
    } else {
        planes.sort_by_key(|p| (p.instance, p.frame));
    }
    let step = if all_placed {
        median_step(&planes).unwrap_or(default_step)
    } else {
        default_step
    };
    meta.slice_spacing = Some(step);
    meta.uneven_spacing = all_placed && uneven(&planes, step);
    meta.frames = planes.len();
    let origin = planes[0].origin.unwrap_or([0.0; 3]);
    let mut data = Vec::with_capacity(rows * cols * planes.len());
    for p in &planes {
        data.extend_from_slice(&p.pixels);
    }
    let lps = [
        [
            iop[0] * spacing_xy[1],
            iop[3] * spacing_xy[0],
            n[0] * step,
            origin[0],
        ],
        [
            iop[1] * spacing_xy[1],
            iop[4] * spacing_xy[0],
            n[1] * step,
            origin[1],
        ],
        [
            iop[2] * spacing_xy[1],
            iop[5] * spacing_xy[0],
            n[2] * step,
            origin[2],
        ],
    ];
    // DICOM patient space is LPS; the volume's world is RAS, so x and y change sign.
    let affine = [lps[0].map(|v| -v), lps[1].map(|v| -v), lps[2]];
    meta.source_dims = [cols, rows, planes.len()];
    let stack = meta.uneven_spacing.then(|| stack_positions(&planes, &n));
    let mut volume = Volume::from_f32(
        [cols, rows, planes.len()],
        [spacing_xy[1], spacing_xy[0], step],
        affine,
        data,
    );
    volume.stack = stack;
    Ok(volume)
}

/// The whole series is held to the same voxel budget as one file, before any file is decoded.
fn check_series_size(path: &Path, group: &[Frames]) -> Result<(), VolumeError> {
    let frames: usize = group.iter().map(|f| f.positions.len()).sum();
    let voxels = group[0]
        .rows
        .checked_mul(group[0].cols)
        .and_then(|n| n.checked_mul(frames));
    if voxels.is_some_and(|n| n <= limits::max_voxels()) {
        return Ok(());
    }
    Err(VolumeError::Dicom {
        path: path.to_path_buf(),
        message: format!(
            "the series has {frames} frames of {} x {} pixels, more than the {} voxels one volume may hold",
            group[0].cols,
            group[0].rows,
            limits::max_voxels()
        ),
    })
}

/// Each slice's real RAS position along the world axis the slice normal runs along.
fn stack_positions(planes: &[Plane], n: &[f64; 3]) -> (usize, Vec<f64>) {
    let w = (0..3)
        .max_by(|&a, &b| n[a].abs().total_cmp(&n[b].abs()))
        .unwrap_or(2);
    let sign = if w < 2 { -1.0 } else { 1.0 };
    let mm = planes
        .iter()
        .map(|p| p.origin.map(|o| o[w] * sign).unwrap_or(0.0))
        .collect();
    (2, mm)
}

fn decode(f: &Frames, n: &[f64; 3], monochrome1: bool) -> Result<Vec<Plane>, VolumeError> {
    let uid = f.obj.meta().transfer_syntax().to_string();
    let ts_error = |message: String| VolumeError::TransferSyntax {
        path: f.path.clone(),
        name: TransferSyntaxRegistry
            .get(&uid)
            .map(|ts| ts.name().to_string())
            .unwrap_or_else(|| "unknown".into()),
        uid: uid.clone(),
        message,
    };
    let shape = pixel_shape(f).map_err(|message| VolumeError::Dicom {
        path: f.path.clone(),
        message,
    })?;
    budget::check_pixel_data(&f.obj, &shape).map_err(|message| VolumeError::Dicom {
        path: f.path.clone(),
        message,
    })?;
    // dicom-rs's decoders can index out of bounds on truncated fragments (RLE in 0.10.1): bad data must be an
    // error naming the file, not a crash.
    let decoded = guard(|| f.obj.decode_pixel_data())
        .map_err(ts_error)?
        .map_err(|e| ts_error(e.to_string()))?;
    let values: Vec<f32> = guard(|| decoded.to_vec::<f32>())
        .map_err(ts_error)?
        .map_err(|e| ts_error(e.to_string()))?;
    let samples = decoded.samples_per_pixel() as usize;
    let interleaved =
        decoded.planar_configuration() == dicom_pixeldata::PlanarConfiguration::Standard;
    let frame_len = f.rows * f.cols;
    let n_frames = decoded.number_of_frames() as usize;
    if values.len() < frame_len * samples * n_frames {
        return Err(ts_error(format!(
            "decoded {} values, expected {} ({} frames of {}x{}x{})",
            values.len(),
            frame_len * samples * n_frames,
            n_frames,
            f.cols,
            f.rows,
            samples
        )));
    }
    let origin0 = f.positions.first().copied().flatten();
    let step = f.slice_step.unwrap_or(1.0);
    Ok((0..n_frames)
        .map(|frame| {
            let raw = &values[frame * frame_len * samples..(frame + 1) * frame_len * samples];
            let mut pixels = grey(raw, samples, interleaved, frame_len);
            if monochrome1 {
                // MONOCHROME1 means high values are dark; invert so that one window fits every file.
                pixels.iter_mut().for_each(|v| *v = -*v);
            }
            let origin = f.positions.get(frame).copied().flatten().or_else(|| {
                origin0.map(|o| std::array::from_fn(|a| o[a] + n[a] * step * frame as f64))
            });
            Plane {
                depth: origin.map(|o| o[0] * n[0] + o[1] * n[1] + o[2] * n[2]),
                instance: f.instance,
                frame,
                origin,
                pixels,
            }
        })
        .collect())
}

/// What the image attributes say the pixel data decodes to; SamplesPerPixel and BitsAllocated must be sane.
fn pixel_shape(f: &Frames) -> Result<PixelShape, String> {
    let samples = int(&f.obj, tags::SAMPLES_PER_PIXEL).unwrap_or(1);
    let bits = int(&f.obj, tags::BITS_ALLOCATED).unwrap_or(0);
    if !(1..=4).contains(&samples) {
        return Err(format!(
            "SamplesPerPixel (0028,0002) is {samples}; expected 1 (greyscale) or 3 (colour)"
        ));
    }
    if !(1..=64).contains(&bits) {
        return Err(format!(
            "BitsAllocated (0028,0100) is {bits}; expected 1 to 64 (usually 8 or 16)"
        ));
    }
    Ok(PixelShape {
        rows: f.rows,
        cols: f.cols,
        frames: f.positions.len(),
        samples: samples as usize,
        bits: bits as usize,
    })
}

fn grey(raw: &[f32], samples: usize, interleaved: bool, frame_len: usize) -> Vec<f32> {
    if samples < 3 {
        return raw.to_vec();
    }
    let weights = [0.299f32, 0.587, 0.114];
    (0..frame_len)
        .map(|p| {
            (0..3)
                .map(|c| {
                    let v = if interleaved {
                        raw[p * samples + c]
                    } else {
                        raw[c * frame_len + p]
                    };
                    v * weights[c]
                })
                .sum()
        })
        .collect()
}

fn median_step(planes: &[Plane]) -> Option<f64> {
    let mut diffs: Vec<f64> = planes
        .windows(2)
        .filter_map(|w| Some(w[1].depth? - w[0].depth?))
        .filter(|d| *d > 1e-6)
        .collect();
    if diffs.is_empty() {
        return None;
    }
    diffs.sort_by(f64::total_cmp);
    Some(diffs[diffs.len() / 2])
}

fn uneven(planes: &[Plane], step: f64) -> bool {
    planes.windows(2).any(|w| match (w[0].depth, w[1].depth) {
        (Some(a), Some(b)) => ((b - a) - step).abs() > 0.1 * step.max(0.01),
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::guard;

    /// The only test in this binary that calls `guard`, so the hook it records through is the one the quiet hook
    /// wraps when it is installed on the first call.
    #[test]
    fn a_caught_decoder_panic_is_silent_and_any_other_panic_still_reaches_the_hook() {
        static SEEN: AtomicUsize = AtomicUsize::new(0);
        std::panic::set_hook(Box::new(|_| {
            SEEN.fetch_add(1, Ordering::SeqCst);
        }));
        let caught = guard(|| -> u8 { panic!("index out of bounds in a fragment") });
        assert!(caught
            .unwrap_err()
            .contains("index out of bounds in a fragment"));
        assert_eq!(SEEN.load(Ordering::SeqCst), 0, "the hook stayed quiet");
        let elsewhere = std::panic::catch_unwind(|| -> u8 { panic!("a real bug") });
        assert!(elsewhere.is_err());
        assert_eq!(
            SEEN.load(Ordering::SeqCst),
            1,
            "a panic outside guard is still reported"
        );
        let _ = std::panic::take_hook();
    }
}
