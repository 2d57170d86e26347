//! Render options for volumes, as written in suite files and on the command line: `view`, `slices`, `window`,
//! `layout`, `max_side`, plus `volume` (4-D NIfTI) and `series` (a DICOM directory with several series).
//!
//! Each option has one text form, which both parses and prints, so a suite file, the CLI and the render cache key
//! all agree on what an option means.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How one volume becomes the images a model sees.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RenderOptions {
    /// The plane to cut; by default the plane the scan was acquired in (axial when unknown).
    pub view: Option<View>,
    /// Which slices; by default the middle one, or as many as the montage has cells.
    pub slices: Option<Slices>,
    pub window: Window,
    pub layout: Layout,
    /// Longest side of each image sent, in pixels (smaller images are not enlarged); 0 is refused.
    #[serde(deserialize_with = "positive_side")]
    pub max_side: Option<u32>,
    /// Which volume of a 4-D NIfTI file (0-based; default 0).
    pub volume: Option<usize>,
    /// Which series of a DICOM directory holding several: its number in `nmb image info`, or its description.
    pub series: Option<String>,
}

impl RenderOptions {
    /// A stable text form of every option, for cache keys and hashes.
    pub fn key(&self) -> String {
        format!(
            "view={};slices={};window={};layout={};max_side={};volume={};series={}",
            self.view.map(|v| v.to_string()).unwrap_or_default(),
            self.slices
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default(),
            self.window,
            self.layout,
            self.max_side.map(|m| m.to_string()).unwrap_or_default(),
            self.volume.map(|v| v.to_string()).unwrap_or_default(),
            self.series.as_deref().unwrap_or_default(),
        )
    }

    /// The view to render: the one asked for, else the acquisition plane, else axial.
    pub fn view_for(&self, meta: &crate::VolumeMeta) -> View {
        self.view
            .or_else(|| meta.plane.as_deref().and_then(|p| p.parse().ok()))
            .unwrap_or_default()
    }

    /// The slices to show when none were named.
    pub fn slices_or_default(&self) -> Slices {
        self.slices.clone().unwrap_or(match self.layout {
            Layout::Single => Slices::Mid,
            Layout::Montage { rows, cols } => Slices::Even(rows * cols),
        })
    }
}

/// `max_side` must be at least 1: a 0 once meant "no limit" by accident, which is what leaving it out says.
fn positive_side<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match Option::<u32>::deserialize(d)? {
        Some(0) => Err(serde::de::Error::custom(
            "max_side is 0; expected a positive number of pixels (leave it out for the backend's limit)",
        )),
        side => Ok(side),
    }
}

macro_rules! text_serde {
    ($t:ty) => {
        impl Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

/// The plane the slices are cut in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum View {
    #[default]
    Axial,
    Coronal,
    Sagittal,
}

impl View {
    /// The RAS axis the slices are taken across.
    pub fn axis(self) -> usize {
        match self {
            View::Sagittal => 0,
            View::Coronal => 1,
            View::Axial => 2,
        }
    }
}

impl fmt::Display for View {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            View::Axial => "axial",
            View::Coronal => "coronal",
            View::Sagittal => "sagittal",
        })
    }
}

impl FromStr for View {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "axial" | "ax" | "transverse" => Ok(View::Axial),
            "coronal" | "cor" => Ok(View::Coronal),
            "sagittal" | "sag" => Ok(View::Sagittal),
            other => Err(format!(
                "unknown view {other:?}; expected axial, coronal or sagittal"
            )),
        }
    }
}

/// Which slices to show.
#[derive(Debug, Clone, PartialEq)]
pub enum Slices {
    /// The middle slice.
    Mid,
    /// N slices evenly spread over the volume, ends excluded.
    Even(usize),
    /// Slice numbers, 0-based along the view's axis after reorientation to RAS.
    Indices(Vec<usize>),
    /// Positions in mm along the view's axis, from `from` to `to` every `step` mm (default: every slice).
    Mm {
        from: f64,
        to: f64,
        step: Option<f64>,
    },
}

impl fmt::Display for Slices {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Slices::Mid => f.write_str("mid"),
            Slices::Even(n) => write!(f, "even:{n}"),
            Slices::Indices(list) => {
                let parts: Vec<String> = list.iter().map(ToString::to_string).collect();
                f.write_str(&parts.join(","))
            }
            Slices::Mm { from, to, step } => {
                write!(f, "mm:{from}..{to}")?;
                match step {
                    Some(s) => write!(f, "/{s}"),
                    None => Ok(()),
                }
            }
        }
    }
}

const SLICES_EXPECTED: &str =
    "expected mid, even:N, slice numbers such as 10,20,30, or a range in mm such as mm:-20..40/5";

impl FromStr for Slices {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        let bad = || format!("bad slices {s:?}; {SLICES_EXPECTED}");
        if t == "mid" {
            return Ok(Slices::Mid);
        }
        if let Some(n) = t.strip_prefix("even:") {
            let n: usize = n.trim().parse().map_err(|_| bad())?;
            return if n == 0 {
                Err(bad())
            } else {
                Ok(Slices::Even(n))
            };
        }
        if let Some(range) = t.strip_prefix("mm:") {
            return parse_mm(range).ok_or_else(bad);
        }
        let list: Result<Vec<usize>, _> = t.split(',').map(|p| p.trim().parse()).collect();
        match list {
            Ok(list) if !list.is_empty() => Ok(Slices::Indices(list)),
            _ => Err(bad()),
        }
    }
}

fn parse_mm(range: &str) -> Option<Slices> {
    let (span, step) = match range.split_once('/') {
        Some((span, step)) => (span, Some(step.trim().parse::<f64>().ok()?)),
        None => (range, None),
    };
    let (from, to) = span.split_once("..")?;
    let (from, to): (f64, f64) = (from.trim().parse().ok()?, to.trim().parse().ok()?);
    let finite =
        from.is_finite() && to.is_finite() && step.is_none_or(|s| s.is_finite() && s > 0.0);
    (finite && from <= to).then_some(Slices::Mm { from, to, step })
}

/// How voxel values map to grey levels.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Window {
    /// The file's own window when it has one; else `brain` for CT and `auto` for anything else.
    #[default]
    File,
    /// The 1st to 99th percentile of the volume's values (for MR, whose values have no fixed scale).
    Auto,
    /// A named preset (centre/width in Hounsfield units).
    Preset(&'static str),
    /// An explicit centre and width.
    Explicit { center: f64, width: f64 },
}

/// CT window presets: name, centre, width.
pub const PRESETS: &[(&str, f64, f64)] = &[
    ("brain", 40.0, 80.0),
    ("subdural", 80.0, 200.0),
    ("stroke", 35.0, 40.0),
    ("bone", 600.0, 2800.0),
];

impl Window {
    /// Centre and width of a preset or explicit window.
    pub fn center_width(&self) -> Option<(f64, f64)> {
        match self {
            Window::Preset(name) => PRESETS.iter().find(|p| p.0 == *name).map(|p| (p.1, p.2)),
            Window::Explicit { center, width } => Some((*center, *width)),
            Window::File | Window::Auto => None,
        }
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Window::File => f.write_str("file"),
            Window::Auto => f.write_str("auto"),
            Window::Preset(name) => f.write_str(name),
            Window::Explicit { center, width } => write!(f, "{center}/{width}"),
        }
    }
}

impl FromStr for Window {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        if t == "file" || t == "default" {
            return Ok(Window::File);
        }
        if t == "auto" {
            return Ok(Window::Auto);
        }
        if let Some(p) = PRESETS.iter().find(|p| p.0 == t) {
            return Ok(Window::Preset(p.0));
        }
        let explicit = t.split_once(['/', ',']).and_then(|(c, w)| {
            Some((c.trim().parse::<f64>().ok()?, w.trim().parse::<f64>().ok()?))
        });
        match explicit {
            Some((center, width)) if center.is_finite() && width.is_finite() && width > 0.0 => {
                Ok(Window::Explicit { center, width })
            }
            _ => Err(format!(
                "bad window {s:?}; expected file, auto, brain (40/80), subdural (80/200), stroke (35/40), \
                 bone (600/2800), or CENTRE/WIDTH with a positive width"
            )),
        }
    }
}

/// How slices are arranged into images.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// One image per slice.
    #[default]
    Single,
    /// One image with the slices in a grid, each labelled with its number and position.
    Montage { rows: usize, cols: usize },
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layout::Single => f.write_str("single"),
            Layout::Montage { rows, cols } => write!(f, "montage:{rows}x{cols}"),
        }
    }
}

impl FromStr for Layout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase();
        if t == "single" {
            return Ok(Layout::Single);
        }
        let grid = t
            .strip_prefix("montage:")
            .and_then(|g| g.split_once('x'))
            .and_then(|(r, c)| {
                Some((
                    r.trim().parse::<usize>().ok()?,
                    c.trim().parse::<usize>().ok()?,
                ))
            });
        match grid {
            Some((rows, cols)) if (1..=16).contains(&rows) && (1..=16).contains(&cols) => {
                Ok(Layout::Montage { rows, cols })
            }
            _ => Err(format!(
                "bad layout {s:?}; expected single, or montage:RxC with 1 to 16 rows and columns"
            )),
        }
    }
}

text_serde!(View);
text_serde!(Slices);
text_serde!(Window);
text_serde!(Layout);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_prints_as_it_parses() {
        for s in ["mid", "even:9", "3,10,42", "mm:-20..40/5", "mm:0..10"] {
            assert_eq!(s.parse::<Slices>().unwrap().to_string(), s);
        }
        for s in [
            "file",
            "auto",
            "brain",
            "subdural",
            "stroke",
            "bone",
            "40/80",
            "-600/1500",
        ] {
            assert_eq!(s.parse::<Window>().unwrap().to_string(), s);
        }
        for s in ["single", "montage:3x3", "montage:2x4"] {
            assert_eq!(s.parse::<Layout>().unwrap().to_string(), s);
        }
        assert_eq!(Window::Preset("stroke").center_width(), Some((35.0, 40.0)));
    }

    #[test]
    fn bad_options_say_what_is_expected() {
        assert!("even:0".parse::<Slices>().unwrap_err().contains("even:N"));
        assert!("mm:40..-20".parse::<Slices>().is_err());
        assert!("40/0"
            .parse::<Window>()
            .unwrap_err()
            .contains("positive width"));
        assert!("montage:0x3".parse::<Layout>().is_err());
        assert!("oblique".parse::<View>().unwrap_err().contains("axial"));
        let err = serde_json::from_str::<RenderOptions>(r#"{"max_side":0}"#).unwrap_err();
        assert!(err.to_string().contains("max_side is 0"), "{err}");
        let err =
            serde_json::from_str::<RenderOptions>(r#"{"view":"axial","zoom":2}"#).unwrap_err();
        assert!(err.to_string().contains("zoom"), "{err}");
    }

    #[test]
    fn options_round_trip_through_json() {
        let json = r#"{"view":"sagittal","slices":"even:4","window":"brain","layout":"montage:2x2","max_side":512}"#;
        let opts: RenderOptions = serde_json::from_str(json).unwrap();
        assert_eq!(opts.layout, Layout::Montage { rows: 2, cols: 2 });
        let back: RenderOptions =
            serde_json::from_str(&serde_json::to_string(&opts).unwrap()).unwrap();
        assert_eq!(back, opts);
        assert_eq!(RenderOptions::default().slices_or_default(), Slices::Mid);
    }
}
