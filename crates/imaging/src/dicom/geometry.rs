//! Where a DICOM file's frames lie in space: orientation, positions and spacing, read from the file itself or
//! its functional groups (enhanced multi-frame files), each finite when present.

use dicom_dictionary_std::tags;
use dicom_object::InMemDicomObject;

use super::{first_item, normal};

/// Where a file's frames lie: orientation, positions and spacing, each finite when present.
pub(super) struct Geometry {
    pub iop: Option<[f64; 6]>,
    pub positions: Vec<Option<[f64; 3]>>,
    pub pixel_spacing: Option<[f64; 2]>,
    pub slice_step: Option<f64>,
}

const IOP: &str = "ImageOrientationPatient (0020,0037)";
const IPP: &str = "ImagePositionPatient (0020,0032)";

impl Geometry {
    pub fn of(obj: &InMemDicomObject, n_frames: usize) -> Result<Geometry, String> {
        let shared = first_item(obj, tags::SHARED_FUNCTIONAL_GROUPS_SEQUENCE);
        let per_frame = obj
            .element_opt(tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE)
            .ok()
            .flatten()
            .and_then(|e| e.items())
            .map(|items| items.to_vec());
        let iop = match floats::<6>(obj, tags::IMAGE_ORIENTATION_PATIENT, IOP)? {
            Some(iop) => Some(iop),
            None => match shared
                .as_ref()
                .and_then(|s| first_item(s, tags::PLANE_ORIENTATION_SEQUENCE))
            {
                Some(item) => floats::<6>(&item, tags::IMAGE_ORIENTATION_PATIENT, IOP)?,
                None => None,
            },
        };
        if let Some(iop) = &iop {
            check_orientation(iop)?;
        }
        let measures = shared
            .as_ref()
            .and_then(|s| first_item(s, tags::PIXEL_MEASURES_SEQUENCE));
        let pixel_spacing = match first_found(obj, measures.as_ref(), |o| {
            floats::<2>(o, tags::PIXEL_SPACING, "PixelSpacing (0028,0030)")
        })? {
            Some(found) => Some(found),
            None => floats::<2>(
                obj,
                tags::IMAGER_PIXEL_SPACING,
                "ImagerPixelSpacing (0018,1164)",
            )?,
        };
        let spacing = first_found(obj, measures.as_ref(), |o| {
            floats::<1>(
                o,
                tags::SPACING_BETWEEN_SLICES,
                "SpacingBetweenSlices (0018,0088)",
            )
        })?;
        let slice_step = match spacing {
            Some([v]) => Some(v),
            None => first_found(obj, measures.as_ref(), |o| {
                floats::<1>(o, tags::SLICE_THICKNESS, "SliceThickness (0018,0050)")
            })?
            .map(|[v]| v),
        };
        let positions = frame_positions(obj, per_frame.as_deref(), n_frames)?;
        Ok(Geometry {
            iop,
            positions,
            pixel_spacing,
            slice_step,
        })
    }
}

/// A value from the file itself, else from its shared pixel measures.
fn first_found<T>(
    obj: &InMemDicomObject,
    measures: Option<&InMemDicomObject>,
    read: impl Fn(&InMemDicomObject) -> Result<Option<T>, String>,
) -> Result<Option<T>, String> {
    match read(obj)? {
        Some(found) => Ok(Some(found)),
        None => measures.map_or(Ok(None), read),
    }
}

/// The slice normal is the cross product of the row and column directions: it must be finite (huge direction
/// cosines overflow it) for slices to be placed in space.
fn check_orientation(iop: &[f64; 6]) -> Result<(), String> {
    let n = normal(iop);
    if n.iter().all(|v| v.is_finite()) {
        return Ok(());
    }
    Err(format!(
        "{IOP} is {iop:?}, whose slice normal (the cross product of its directions) is not finite; expected two \
         unit direction cosines"
    ))
}

fn frame_positions(
    obj: &InMemDicomObject,
    per_frame: Option<&[InMemDicomObject]>,
    n_frames: usize,
) -> Result<Vec<Option<[f64; 3]>>, String> {
    if let Some(items) = per_frame.filter(|items| items.len() == n_frames) {
        let found = items
            .iter()
            .map(
                |item| match first_item(item, tags::PLANE_POSITION_SEQUENCE) {
                    Some(plane) => floats::<3>(&plane, tags::IMAGE_POSITION_PATIENT, IPP),
                    None => Ok(None),
                },
            )
            .collect::<Result<Vec<_>, String>>()?;
        if found.iter().all(Option::is_some) {
            return Ok(found);
        }
    }
    let first = floats::<3>(obj, tags::IMAGE_POSITION_PATIENT, IPP)?;
    let mut out = vec![None; n_frames];
    out[0] = first;
    Ok(out)
}

/// The first N values of a geometry tag: `None` when absent, unreadable or short, as if the file did not say;
/// an error naming the tag when a value is NaN or infinite, which no fallback should paper over.
fn floats<const N: usize>(
    obj: &InMemDicomObject,
    tag: dicom_core::Tag,
    name: &str,
) -> Result<Option<[f64; N]>, String> {
    let Some(v) = obj
        .element_opt(tag)
        .ok()
        .flatten()
        .and_then(|e| e.to_multi_float64().ok())
    else {
        return Ok(None);
    };
    if v.len() < N {
        return Ok(None);
    }
    if v.iter().take(N).any(|f| !f.is_finite()) {
        return Err(format!("{name} is {:?}; expected finite numbers", &v[..N]));
    }
    Ok(Some(std::array::from_fn(|i| v[i])))
}
