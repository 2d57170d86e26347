//! Volume entries of a native suite: their render options, and the modality, sequence and plane their headers
//! give when the suite leaves those empty.

use std::path::Path;

use nmb_imaging::RenderOptions;
use serde_json::Value;

use super::Loc;
use crate::{Image, Problem};

/// `Some(options)` for a volume (render options given, a directory, or DICOM/NIfTI bytes), `Some(None)` for an
/// ordinary image, `None` when the options are bad (a problem was recorded).
pub(super) fn render_options(
    loc: &Loc,
    field: &str,
    path: &Path,
    raw: Option<Value>,
    problems: &mut Vec<Problem>,
) -> Option<Option<RenderOptions>> {
    let is_volume = nmb_imaging::is_volume_path(path);
    match raw {
        None if is_volume => Some(Some(RenderOptions::default())),
        None => Some(None),
        Some(_) if !is_volume => {
            let msg = format!(
                "render options are only for volumes, but {} is an ordinary image; expected a DICOM file, a \
                 DICOM series directory or a .nii/.nii.gz file",
                path.display()
            );
            problems.push(loc.error(format!("{field}.render"), msg));
            None
        }
        Some(value) => match serde_json::from_value::<RenderOptions>(value) {
            Ok(opts) => Some(Some(opts)),
            Err(e) => {
                let msg = format!(
                    "{e}; expected an object with view, slices, window, layout, max_side, volume, series"
                );
                problems.push(loc.error(format!("{field}.render"), msg));
                None
            }
        },
    }
}

/// Reads the volume's headers (no pixels) and fills what the suite left empty. A header that cannot be read is
/// an error here, at load time, rather than when the model is about to be asked.
pub(super) fn fill_from_headers(
    loc: &Loc,
    field: &str,
    image: &mut Image,
    problems: &mut Vec<Problem>,
) {
    let (Some(path), Some(opts)) = (image.source.path(), image.render.as_ref()) else {
        return;
    };
    let meta = match nmb_imaging::describe_volume(path, opts) {
        Ok(meta) => meta,
        Err(e) => {
            problems.push(loc.error(format!("{field}.path"), e.to_string()));
            return;
        }
    };
    if image.modality.is_none() {
        image.modality = meta.modality.as_deref().and_then(|m| m.parse().ok());
    }
    if image.sequence.is_none() {
        image.sequence = meta.sequence.as_deref().and_then(|s| s.parse().ok());
    }
    if image.plane.is_none() {
        // The plane shown: the render's view, which defaults to the plane the scan was acquired in.
        image.plane = opts.view_for(&meta).to_string().parse().ok();
    }
}
