//! `nmb image info|render`: look at a DICOM file or series, or a NIfTI volume, as nmb reads it, and write exactly
//! the PNGs a model would receive.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use nmb_imaging::{Layout, RenderOptions, Slices, View, Window};

pub const EXAMPLES: &str = "\
Examples:
  nmb image info scan/series_t2/ --json
  nmb image render brain.nii.gz --view axial --slices even:9 --layout montage:3x3 --out views/
  nmb image render ct_head/ --window subdural --slices mm:-20..40/10 --out views/

A PATH is one DICOM file, a directory holding a DICOM series, or a .nii / .nii.gz volume.";

#[derive(Subcommand)]
pub enum ImageCommand {
    /// Series, dimensions, spacing, orientation, transfer syntax, and the guessed modality, sequence and plane
    /// (exit 1 when the pixels cannot be decoded, after describing the headers)
    Info(InfoArgs),
    /// Write the PNGs a model would receive for these render options
    Render(RenderArgs),
}

#[derive(Args)]
pub struct InfoArgs {
    /// A DICOM file, a DICOM series directory, or a NIfTI volume
    path: PathBuf,
    #[command(flatten)]
    pick: PickArgs,
    /// Print one JSON object
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct PickArgs {
    /// Which series of a directory holding several (its number in `nmb image info`, or its description)
    #[arg(long)]
    series: Option<String>,
    /// Which volume of a 4-D NIfTI file (0-based)
    #[arg(long)]
    volume: Option<usize>,
}

#[derive(Args)]
pub struct RenderArgs {
    /// A DICOM file, a DICOM series directory, or a NIfTI volume
    path: PathBuf,
    #[command(flatten)]
    pick: PickArgs,
    /// axial, coronal or sagittal (default: the plane the scan was acquired in)
    #[arg(long)]
    view: Option<View>,
    /// mid, even:N, slice numbers (10,20,30) or a range in mm (mm:-20..40/5)
    #[arg(long)]
    slices: Option<Slices>,
    /// file, auto, brain, subdural, stroke, bone, or CENTRE/WIDTH
    #[arg(long, default_value = "file")]
    window: Window,
    /// single (one image per slice) or montage:RxC
    #[arg(long, default_value = "single")]
    layout: Layout,
    /// Longest side of each image, in pixels
    #[arg(long)]
    max_side: Option<u32>,
    /// Directory to write the PNGs into (created if missing)
    #[arg(long)]
    out: PathBuf,
}

pub fn run(cmd: ImageCommand) -> Result<ExitCode> {
    match cmd {
        ImageCommand::Info(a) => info(a),
        ImageCommand::Render(a) => render(a),
    }
}

fn info(args: InfoArgs) -> Result<ExitCode> {
    let opts = RenderOptions {
        series: args.pick.series,
        volume: args.pick.volume,
        ..RenderOptions::default()
    };
    let info = nmb_imaging::volume_info(&args.path, &opts)?;
    if args.json {
        let value = serde_json::json!({
            "path": args.path.display().to_string(),
            "meta": info.meta,
            "decodable": info.decode_error.is_none(),
            "decode_error": info.decode_error,
            "dims_ras": info.ras.as_ref().map(|r| r.dims),
            "spacing_ras_mm": info.ras.as_ref().map(|r| r.spacing),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", info.text(&args.path));
    }
    // Described but not renderable (JPEG-LS, a lying PixelData): the description stands, and the exit code says
    // that this volume cannot be shown to a model.
    if let Some(e) = &info.decode_error {
        eprintln!("error: the pixels cannot be decoded: {e}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

fn render(args: RenderArgs) -> Result<ExitCode> {
    let opts = RenderOptions {
        view: args.view,
        slices: args.slices,
        window: args.window,
        layout: args.layout,
        max_side: args.max_side,
        volume: args.pick.volume,
        series: args.pick.series,
    };
    let (views, _) = nmb_imaging::render_path(&args.path, &opts)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    for (i, view) in views.iter().enumerate() {
        let file = args.out.join(format!("view-{:02}.png", i + 1));
        std::fs::write(&file, &view.png)
            .with_context(|| format!("cannot write {}", file.display()))?;
        println!(
            "{}\t{}x{}\t{}",
            file.display(),
            view.width,
            view.height,
            view.label
        );
    }
    Ok(ExitCode::SUCCESS)
}
