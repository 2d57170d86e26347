//! What a volume's header says about it, limited to technical facts: modality, a sequence guess, the plane,
//! spacing, transfer syntax. Nothing that identifies a patient, a visit or a site is kept here.

use serde::Serialize;

use crate::ImageFormat;

/// Technical facts about a loaded volume, for captions, `nmb image info` and the suite's empty fields.
#[derive(Debug, Clone, Serialize)]
pub struct VolumeMeta {
    pub format: ImageFormat,
    /// "MRI", "CT", ... in the suite's spelling.
    pub modality: Option<String>,
    /// T1, T2, FLAIR, DWI, ADC, SWI or T1C+, guessed from the series' descriptive tags.
    pub sequence: Option<String>,
    /// The acquisition plane (axial, sagittal, coronal), from the slice orientation.
    pub plane: Option<String>,
    /// Row and column spacing in mm, as the file gives it.
    pub pixel_spacing: Option<[f64; 2]>,
    pub slice_thickness: Option<f64>,
    /// Distance between slice centres actually used to stack the volume.
    pub slice_spacing: Option<f64>,
    /// Slices are not equally spaced (the median spacing was used).
    pub uneven_spacing: bool,
    /// (UID, name) of a DICOM file's transfer syntax.
    pub transfer_syntax: Option<(String, String)>,
    /// The file's own window (centre, width), when it has one.
    pub window: Option<(f64, f64)>,
    /// Values were negated because the file is MONOCHROME1 (high = dark).
    pub monochrome1: bool,
    /// Dimensions as stored (columns, rows, slices), before reorientation.
    pub source_dims: [usize; 3],
    /// Orientation codes of the stored axes, e.g. "LPS" or "RAS".
    pub orientation: String,
    pub frames: usize,
    /// Series found in a DICOM directory, in listing order; `chosen_series` indexes it.
    pub series: Vec<SeriesSummary>,
    pub chosen_series: usize,
    /// Files in a DICOM directory that are not DICOM images (DICOMDIR, reports, other files).
    pub skipped_files: usize,
    /// Volumes in a 4-D NIfTI file, and the one used.
    pub volumes: usize,
    pub volume_index: usize,
}

impl VolumeMeta {
    pub fn new(format: ImageFormat) -> Self {
        VolumeMeta {
            format,
            modality: None,
            sequence: None,
            plane: None,
            pixel_spacing: None,
            slice_thickness: None,
            slice_spacing: None,
            uneven_spacing: false,
            transfer_syntax: None,
            window: None,
            monochrome1: false,
            source_dims: [0; 3],
            orientation: String::new(),
            frames: 0,
            series: Vec::new(),
            chosen_series: 0,
            skipped_files: 0,
            volumes: 1,
            volume_index: 0,
        }
    }
}

/// One series of a DICOM directory, described without identifiers.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesSummary {
    pub description: Option<String>,
    pub modality: Option<String>,
    pub files: usize,
    pub frames: usize,
    pub rows: usize,
    pub columns: usize,
}

impl SeriesSummary {
    pub fn short(&self) -> String {
        format!(
            "{} {} ({} files, {}x{})",
            self.modality.as_deref().unwrap_or("?"),
            self.description.as_deref().unwrap_or("no description"),
            self.files,
            self.columns,
            self.rows
        )
    }
}

/// DICOM modality codes in the suite's spelling.
pub fn modality_name(code: &str) -> String {
    match code {
        "MR" => "MRI",
        "CT" => "CT",
        "PT" => "PET",
        "US" => "US",
        "CR" | "DX" => "X-ray",
        _ => "other",
    }
    .to_string()
}

/// Guesses the MR sequence from free-text tags (SeriesDescription, ProtocolName, ScanningSequence,
/// SequenceName). Returns `None` rather than a weak guess.
pub fn guess_sequence(texts: &[Option<String>], contrast_agent: bool) -> Option<String> {
    let text = texts
        .iter()
        .flatten()
        .map(|t| t.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join(" | ");
    let has = |words: &[&str]| words.iter().any(|w| text.contains(w));
    let sequence = if has(&["flair", "dark fluid", "darkfluid"]) {
        "FLAIR"
    } else if has(&["adc", "apparent diff"]) {
        "ADC"
    } else if has(&["dwi", "diffusion", "ep2d_diff", "trace", "b1000"]) {
        "DWI"
    } else if has(&["swi", "swan", "susceptib", "venobold"]) {
        "SWI"
    } else if is_t1(&text) {
        let enhanced = contrast_agent
            || has(&[
                "+c", "c+", "post", "gad", " gd", "_gd", "contrast", "ce-", "t1ce",
            ]);
        if enhanced {
            "T1C+"
        } else {
            "T1"
        }
    } else if has(&["t2", "tse", "fse"]) {
        "T2"
    } else {
        return None;
    };
    Some(sequence.to_string())
}

fn is_t1(text: &str) -> bool {
    ["t1", "mprage", "spgr", "tfl3d", "bravo", "mp-rage"]
        .iter()
        .any(|w| text.contains(w))
}

/// The plane whose normal a slice normal runs most nearly along (any coordinate system whose axes are
/// left-right, front-back, foot-head).
pub fn plane_of_normal(n: [f64; 3]) -> Option<String> {
    let abs = n.map(f64::abs);
    let max = abs.iter().copied().fold(0.0, f64::max);
    if max < 1e-6 {
        return None;
    }
    let plane = if abs[2] == max {
        "axial"
    } else if abs[1] == max {
        "coronal"
    } else {
        "sagittal"
    };
    Some(plane.to_string())
}

/// Orientation codes of an affine's voxel axes in RAS world space, e.g. "RAS", "LPS", "PIR".
pub fn axis_codes(affine: &[[f64; 4]; 3]) -> String {
    (0..3)
        .map(|a| {
            let col = [affine[0][a], affine[1][a], affine[2][a]];
            let w = (0..3)
                .max_by(|&x, &y| col[x].abs().total_cmp(&col[y].abs()))
                .unwrap_or(0);
            let pos = col[w] >= 0.0;
            match (w, pos) {
                (0, true) => 'R',
                (0, false) => 'L',
                (1, true) => 'A',
                (1, false) => 'P',
                (_, true) => 'S',
                (_, false) => 'I',
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guess(desc: &str) -> Option<String> {
        guess_sequence(&[Some(desc.to_string())], false)
    }

    #[test]
    fn sequences_are_guessed_from_descriptions() {
        assert_eq!(guess("AX T2 FLAIR").as_deref(), Some("FLAIR"));
        assert_eq!(guess("ep2d_diff_trace").as_deref(), Some("DWI"));
        assert_eq!(guess("ep2d_diff_ADC").as_deref(), Some("ADC"));
        assert_eq!(guess("t1_mprage_sag POST GAD").as_deref(), Some("T1C+"));
        assert_eq!(guess("T1 SE AX").as_deref(), Some("T1"));
        assert_eq!(guess("AX T2 TSE").as_deref(), Some("T2"));
        assert_eq!(guess("SWI_Images").as_deref(), Some("SWI"));
        assert_eq!(guess("FAST LOCALIZER"), None);
        assert_eq!(
            guess_sequence(&[Some("T1 AX".into())], true).as_deref(),
            Some("T1C+")
        );
    }

    #[test]
    fn planes_follow_the_slice_normal() {
        assert_eq!(plane_of_normal([0.0, 0.0, 1.0]).as_deref(), Some("axial"));
        assert_eq!(
            plane_of_normal([0.9, 0.1, 0.0]).as_deref(),
            Some("sagittal")
        );
        assert_eq!(
            plane_of_normal([0.0, -1.0, 0.2]).as_deref(),
            Some("coronal")
        );
        assert_eq!(plane_of_normal([0.0; 3]), None);
    }
}
