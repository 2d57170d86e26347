//! `nmb image info|render`: look at a DICOM file or series, or a NIfTI volume, as nmb reads it, and write exactly
//! the PNGs a model would receive.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use nmb_imaging::{Layout, RenderOptions, Slices, View, VolumeMeta, Window};

pub const EXAMPLES: &str = "\
Examples:
  nmb image info scan/series_t2/ --json
  nmb image render brain.nii.gz --view axial --slices even:9 --layout montage:3x3 --out views/
  nmb image render ct_head/ --window subdural --slices mm:-20..40/10 --out views/

A PATH is one DICOM file, a directory holding a DICOM series, or a .nii / .nii.gz volume.";

#[derive(Subcommand)]
pub enum ImageCommand {
    /// Series, dimensions, spacing, orientation, transfer syntax, and the guessed modality, sequence and plane
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
    // Headers first, so that a file whose pixels cannot be decoded (JPEG-LS) is still described.
    let headers = nmb_imaging::describe_volume(&args.path, &opts)?;
    let (meta, ras, decode_error) = match nmb_imaging::load_volume(&args.path, &opts) {
        Ok((volume, meta)) => (meta, Some(volume.to_ras()), None),
        Err(e) => (headers, None, Some(e.to_string())),
    };
    if args.json {
        let value = serde_json::json!({
            "path": args.path.display().to_string(),
            "meta": meta,
            "decodable": decode_error.is_none(),
            "decode_error": decode_error,
            "dims_ras": ras.as_ref().map(|r| r.dims),
            "spacing_ras_mm": ras.as_ref().map(|r| r.spacing),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print_info(&args.path, &meta, ras.as_ref());
        if let Some(e) = decode_error {
            println!("  pixels:       cannot be decoded: {e}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_info(path: &std::path::Path, meta: &VolumeMeta, ras: Option<&nmb_imaging::Volume>) {
    println!("{}: {}", path.display(), meta.format);
    if meta.series.len() > 1 || meta.skipped_files > 0 {
        for (i, s) in meta.series.iter().enumerate() {
            let mark = if i == meta.chosen_series { "*" } else { " " };
            println!("  {mark} series {}: {}", i + 1, s.short());
        }
        if meta.skipped_files > 0 {
            println!("  ({} files skipped: not DICOM images)", meta.skipped_files);
        }
    }
    let [c, r, s] = meta.source_dims;
    println!("  stored:       {c} x {r} x {s} ({})", meta.orientation);
    if let Some(ras) = ras {
        let [x, y, z] = ras.dims;
        let [sx, sy, sz] = ras.spacing;
        println!("  as RAS:       {x} x {y} x {z} voxels of {sx:.3} x {sy:.3} x {sz:.3} mm");
    }
    if let Some([row, col]) = meta.pixel_spacing {
        println!("  pixel spacing {row:.3} x {col:.3} mm (row x column)");
    }
    if let Some(t) = meta.slice_thickness {
        println!("  thickness:    {t:.3} mm");
    }
    if let Some(step) = meta.slice_spacing {
        let note = if meta.uneven_spacing {
            " (uneven; median used)"
        } else {
            ""
        };
        println!("  slice step:   {step:.3} mm{note}");
    }
    if let Some((uid, name)) = &meta.transfer_syntax {
        println!("  transfer:     {uid} ({name})");
    }
    if meta.volumes > 1 {
        println!(
            "  volumes:      {} (showing {})",
            meta.volumes, meta.volume_index
        );
    }
    let guess = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    println!("  modality:     {}", guess(&meta.modality));
    println!("  sequence:     {}", guess(&meta.sequence));
    println!("  plane:        {}", guess(&meta.plane));
    if let Some((c, w)) = meta.window {
        println!("  file window:  {c}/{w}");
    }
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
