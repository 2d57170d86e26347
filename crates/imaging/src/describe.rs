//! What `nmb image info` says about a DICOM file or series, or a NIfTI volume: its headers, and its shape once
//! decoded and reoriented to RAS.

use std::path::Path;

use crate::{RenderOptions, Volume, VolumeError, VolumeMeta};

/// A volume as described by its headers, and as decoded when its pixels can be.
pub struct VolumeInfo {
    /// From the decoded volume when it decodes, else from the headers alone.
    pub meta: VolumeMeta,
    /// The volume reoriented to RAS; `None` when the pixels cannot be decoded.
    pub ras: Option<Volume>,
    /// Why the pixels cannot be decoded (e.g. a transfer syntax without a decoder, such as JPEG-LS).
    pub decode_error: Option<String>,
}

/// Reads the headers first, so that a file whose pixels cannot be decoded (JPEG-LS) is still described, then
/// decodes the volume. `opts.series` and `opts.volume` pick what is described; the other options do not matter.
pub fn volume_info(path: &Path, opts: &RenderOptions) -> Result<VolumeInfo, VolumeError> {
    let headers = crate::describe_volume(path, opts)?;
    Ok(match crate::load_volume(path, opts) {
        Ok((volume, meta)) => VolumeInfo {
            meta,
            ras: Some(volume.to_ras()),
            decode_error: None,
        },
        Err(e) => VolumeInfo {
            meta: headers,
            ras: None,
            decode_error: Some(e.to_string()),
        },
    })
}

impl VolumeInfo {
    /// The text of `nmb image info PATH`: series, dimensions, spacing, orientation, transfer syntax, and the
    /// guessed modality, sequence and plane, one aligned line each.
    pub fn text(&self, path: &Path) -> String {
        let mut out = info_text(path, &self.meta, self.ras.as_ref());
        if let Some(e) = &self.decode_error {
            out += &format!("  pixels:       cannot be decoded: {e}\n");
        }
        out
    }
}

/// The header lines of `nmb image info`; `ras` adds the dimensions and spacing after reorientation.
pub fn info_text(path: &Path, meta: &VolumeMeta, ras: Option<&Volume>) -> String {
    let mut out = format!("{}: {}\n", path.display(), meta.format);
    if meta.series.len() > 1 || meta.skipped_files > 0 {
        for (i, s) in meta.series.iter().enumerate() {
            let mark = if i == meta.chosen_series { "*" } else { " " };
            out += &format!("  {mark} series {}: {}\n", i + 1, s.short());
        }
        if meta.skipped_files > 0 {
            out += &format!(
                "  ({} files skipped: not DICOM images)\n",
                meta.skipped_files
            );
        }
    }
    let [c, r, s] = meta.source_dims;
    out += &format!("  stored:       {c} x {r} x {s} ({})\n", meta.orientation);
    if let Some(ras) = ras {
        let [x, y, z] = ras.dims;
        let [sx, sy, sz] = ras.spacing;
        out +=
            &format!("  as RAS:       {x} x {y} x {z} voxels of {sx:.3} x {sy:.3} x {sz:.3} mm\n");
    }
    if let Some([row, col]) = meta.pixel_spacing {
        out += &format!("  pixel spacing {row:.3} x {col:.3} mm (row x column)\n");
    }
    if let Some(t) = meta.slice_thickness {
        out += &format!("  thickness:    {t:.3} mm\n");
    }
    if let Some(step) = meta.slice_spacing {
        let note = if meta.uneven_spacing {
            " (uneven; median used)"
        } else {
            ""
        };
        out += &format!("  slice step:   {step:.3} mm{note}\n");
    }
    if let Some((uid, name)) = &meta.transfer_syntax {
        out += &format!("  transfer:     {uid} ({name})\n");
    }
    if meta.volumes > 1 {
        out += &format!(
            "  volumes:      {} (showing {})\n",
            meta.volumes, meta.volume_index
        );
    }
    let guess = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    out += &format!("  modality:     {}\n", guess(&meta.modality));
    out += &format!("  sequence:     {}\n", guess(&meta.sequence));
    out += &format!("  plane:        {}\n", guess(&meta.plane));
    if let Some((c, w)) = meta.window {
        out += &format!("  file window:  {c}/{w}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ImageFormat;

    #[test]
    fn info_text_lists_what_the_headers_say_and_unknown_guesses() {
        let mut meta = VolumeMeta::new(ImageFormat::Nifti);
        meta.source_dims = [8, 8, 4];
        meta.orientation = "RAS".into();
        meta.slice_spacing = Some(2.5);
        meta.uneven_spacing = true;
        meta.plane = Some("axial".into());
        let text = info_text(Path::new("t1.nii"), &meta, None);
        assert_eq!(
            text,
            "t1.nii: nifti\n  stored:       8 x 8 x 4 (RAS)\n  slice step:   2.500 mm (uneven; median used)\n  \
             modality:     unknown\n  sequence:     unknown\n  plane:        axial\n"
        );
        let info = VolumeInfo {
            meta,
            ras: None,
            decode_error: Some("no decoder".into()),
        };
        assert!(info
            .text(Path::new("t1.nii"))
            .ends_with("  plane:        axial\n  pixels:       cannot be decoded: no decoder\n"));
    }
}
