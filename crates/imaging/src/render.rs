//! Volumes into the 8-bit greyscale PNGs a model receives: slice selection, windowing, square pixels from the
//! voxel spacing, montages with burned-in labels, and a bound on the longest side.
//!
//! Slices are shown in radiological convention: the patient's right on the image's left, anterior up in axial
//! views, superior up in coronal and sagittal views (anterior on the left in sagittal ones).

use image::{GrayImage, Luma};

use crate::meta::VolumeMeta;
use crate::options::{Layout, RenderOptions, Slices, Window};
use crate::volume::Volume;
use crate::{limits, VolumeError};

/// Bumped whenever the same options would give different pixels, so cached renders are not reused.
pub const RENDERER_VERSION: u32 = 3;

/// One image a model receives.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedView {
    pub png: Vec<u8>,
    pub width: u32,
    pub height: u32,
    /// What the image shows, for captions: "axial slice 45 (S +12.0 mm)".
    pub label: String,
}

/// Renders a volume already in RAS order (see [`Volume::to_ras`]). The slices and the grid are checked against
/// [`limits`] before any slice is rendered.
pub fn render(
    volume: &Volume,
    meta: &VolumeMeta,
    opts: &RenderOptions,
) -> Result<Vec<RenderedView>, String> {
    if volume.is_empty() {
        return Err(format!("the volume is empty ({:?} voxels)", volume.dims));
    }
    if opts.max_side == Some(0) {
        return Err("max_side is 0; expected a positive number of pixels".into());
    }
    let view = opts.view_for(meta);
    let axis = view.axis();
    let slices = pick_slices(volume, axis, &opts.slices_or_default())?;
    check_slice_size(volume, axis)?;
    let (lo, hi) = window_range(volume, meta, &opts.window);
    let positions: Vec<String> = slices
        .iter()
        .map(|&n| position_text(volume, axis, n))
        .collect();
    let view = view.to_string();
    let voxels = voxel_text(volume, meta);
    let Layout::Montage { rows, cols } = opts.layout else {
        // One image at a time, so that only one slice's pixels are held.
        return slices
            .iter()
            .zip(&positions)
            .map(|(&n, pos)| {
                let img = slice_image(volume, axis, n, lo, hi)?;
                let label = format!("{view} slice {n} ({pos}); {voxels}");
                encode(fit(img, opts.max_side), label)
            })
            .collect();
    };
    if slices.len() > rows * cols {
        return Err(format!(
            "{} slices do not fit a {rows}x{cols} montage; ask for at most {} slices or a larger grid",
            slices.len(),
            rows * cols
        ));
    }
    // Each cell is shrunk as it is made, so the grid never holds more than MAX_SIDE x MAX_SIDE pixels.
    let cell_side = limits::MAX_SIDE / rows.max(cols) as u32;
    let images: Vec<GrayImage> = slices
        .iter()
        .map(|&n| Ok(fit(slice_image(volume, axis, n, lo, hi)?, Some(cell_side))))
        .collect::<Result<_, String>>()?;
    let labels: Vec<String> = slices
        .iter()
        .zip(&positions)
        .map(|(n, pos)| format!("{n} {pos}"))
        .collect();
    let grid = montage(&images, &labels, rows, cols, cell_side);
    let first = positions.first().cloned().unwrap_or_default();
    let last = positions.last().cloned().unwrap_or_default();
    let label = format!(
        "{view} montage {rows}x{cols}, slices {} to {} ({first} to {last}); {voxels}",
        slices.first().copied().unwrap_or(0),
        slices.last().copied().unwrap_or(0)
    );
    Ok(vec![encode(fit(grid, opts.max_side), label)?])
}

/// A slice image is allocated whole before it is shrunk, so its size is bounded before any is made.
fn check_slice_size(volume: &Volume, axis: usize) -> Result<(), String> {
    let [nx, ny, nz] = volume.dims;
    let (w, h) = match axis {
        2 => (nx, ny),
        1 => (nx, nz),
        _ => (ny, nz),
    };
    let max = limits::MAX_SIDE as usize;
    if w.saturating_mul(h) > max * max {
        return Err(format!(
            "a slice of this view is {w} x {h} pixels, more than the {max} x {max} a slice may have"
        ));
    }
    Ok(())
}

fn pick_slices(volume: &Volume, axis: usize, slices: &Slices) -> Result<Vec<usize>, String> {
    let count = volume.dims[axis];
    let name = ["sagittal (x)", "coronal (y)", "axial (z)"][axis];
    let picked = match slices {
        Slices::Mid => vec![count / 2],
        Slices::Even(n) => {
            let n = (*n).min(count);
            if n > limits::MAX_SLICES {
                return Err(format!(
                    "even:{n} asks for {n} slices; a render shows at most {}",
                    limits::MAX_SLICES
                ));
            }
            let mut picked: Vec<usize> = (0..n)
                .map(|t| ((t + 1) * count / (n + 1)).min(count - 1))
                .collect();
            picked.dedup();
            picked
        }
        Slices::Indices(list) => {
            if let Some(bad) = list.iter().find(|&&i| i >= count) {
                return Err(format!(
                    "slice {bad} is outside the volume: it has {count} {name} slices (0 to {})",
                    count - 1
                ));
            }
            list.clone()
        }
        Slices::Mm { from, to, step } => mm_slices(volume, axis, *from, *to, *step, name)?,
    };
    if picked.len() > limits::MAX_SLICES {
        return Err(format!(
            "{} slices asked for; a render shows at most {}",
            picked.len(),
            limits::MAX_SLICES
        ));
    }
    Ok(picked)
}

/// Each position is computed from the start (`from + k * step`), never by adding steps, so a step below the
/// precision of a large position cannot stall the walk; the number of positions is bounded before the walk.
fn mm_slices(
    volume: &Volume,
    axis: usize,
    from: f64,
    to: f64,
    step: Option<f64>,
    name: &str,
) -> Result<Vec<usize>, String> {
    let step = step.unwrap_or(volume.spacing[axis]).max(1e-3);
    let count = ((to - from) / step + 1e-9).floor() + 1.0;
    if !(count >= 1.0 && count <= limits::MAX_MM_POSITIONS as f64) {
        return Err(format!(
            "mm:{from}..{to} every {step} mm is {count} positions; expected 1 to {} (a larger step or a shorter \
             range)",
            limits::MAX_MM_POSITIONS
        ));
    }
    if count > 1.0 && (from + step == from || to - step == to) {
        return Err(format!(
            "a step of {step} mm is below the precision of positions near {from} mm; expected a larger step"
        ));
    }
    let span = |n| volume.position_mm(axis, n);
    let (first, last) = (span(0), span(volume.dims[axis] - 1));
    let mut picked = Vec::new();
    for k in 0..count as usize {
        let mm = from + k as f64 * step;
        let n = volume.index_at_mm(axis, mm).ok_or_else(|| {
            format!("{mm} mm is outside the volume: its {name} slices run from {first:.1} to {last:.1} mm")
        })?;
        if picked.last() != Some(&n) {
            picked.push(n);
        }
    }
    Ok(picked)
}

/// The grey-level range: values at or below `lo` are black, at or above `hi` white.
fn window_range(volume: &Volume, meta: &VolumeMeta, window: &Window) -> (f32, f32) {
    let explicit = match window {
        Window::File => meta.window.or_else(|| {
            let ct = meta.modality.as_deref() == Some("CT");
            ct.then(|| Window::Preset("brain").center_width()).flatten()
        }),
        other => other.center_width(),
    };
    let (lo, hi) = match explicit {
        Some((center, width)) => {
            // MONOCHROME1 values were negated when loaded, so the window moves with them.
            let center = if meta.monochrome1 { -center } else { center };
            (center - width / 2.0, center + width / 2.0)
        }
        None => {
            let p = volume.percentiles(&[1.0, 99.0]);
            (f64::from(p[0]), f64::from(p[1]))
        }
    };
    if hi > lo {
        (lo as f32, hi as f32)
    } else {
        // A constant volume: mid grey, so it cannot be mistaken for a failed (black) render.
        ((lo - 1.0) as f32, (lo + 1.0) as f32)
    }
}

fn grey(v: f32, lo: f32, hi: f32) -> u8 {
    let t = ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
    (t * 255.0).round() as u8
}

/// One slice as displayed (radiological convention), windowed to grey levels.
fn slice_image(
    volume: &Volume,
    axis: usize,
    n: usize,
    lo: f32,
    hi: f32,
) -> Result<GrayImage, String> {
    let [nx, ny, nz] = volume.dims;
    let sp = volume.spacing;
    let (w, h, col_sp, row_sp) = match axis {
        2 => (nx, ny, sp[0], sp[1]),
        1 => (nx, nz, sp[0], sp[2]),
        _ => (ny, nz, sp[1], sp[2]),
    };
    let mut img = GrayImage::new(w as u32, h as u32);
    let mut line = vec![0.0f32; w];
    for (r, out) in img.chunks_exact_mut(w).enumerate() {
        // Each image row is one line of voxels walked backwards: right to left, or anterior to posterior.
        let (from, along) = match axis {
            2 => ([nx - 1, ny - 1 - r, n], 0),
            1 => ([nx - 1, n, nz - 1 - r], 0),
            _ => ([n, ny - 1, nz - 1 - r], 1),
        };
        volume.line(from, along, true, &mut line);
        if line.iter().any(|v| !v.is_finite()) {
            // Windowing would turn it into black or white with nothing said.
            return Err(format!("slice {n} holds NaN or infinite values"));
        }
        for (px, v) in out.iter_mut().zip(&line) {
            *px = grey(*v, lo, hi);
        }
    }
    Ok(square_pixels(img, col_sp, row_sp))
}

/// Stretches the finer-sampled direction's partner so that one pixel is the same distance both ways.
fn square_pixels(img: GrayImage, col_sp: f64, row_sp: f64) -> GrayImage {
    let ratio = col_sp / row_sp;
    if (ratio - 1.0).abs() < 0.01 || !ratio.is_finite() || ratio <= 0.0 {
        return img;
    }
    let (w, h) = img.dimensions();
    let (w, h) = if ratio > 1.0 {
        (f64::from(w) * ratio, f64::from(h))
    } else {
        (f64::from(w), f64::from(h) / ratio)
    };
    // Absurd spacings in a header must not ask for a gigapixel image.
    let shrink = (f64::from(limits::MAX_SIDE) / w.max(h)).min(1.0);
    let (w, h) = ((w * shrink).round() as u32, (h * shrink).round() as u32);
    let filter = image::imageops::FilterType::Triangle;
    image::imageops::resize(&img, w.max(1), h.max(1), filter)
}

/// Voxel size, and the slice thickness where the file gives one that differs from the slice spacing.
fn voxel_text(volume: &Volume, meta: &VolumeMeta) -> String {
    let [x, y, z] = volume.spacing;
    let mut text = format!("voxels {x:.2} x {y:.2} x {z:.2} mm");
    if let Some(t) = meta.slice_thickness.filter(|t| (t - z).abs() > 0.01) {
        text += &format!(", slices {t:.2} mm thick");
    }
    text
}

fn position_text(volume: &Volume, axis: usize, n: usize) -> String {
    let mm = volume.position_mm(axis, n);
    let letter = ['R', 'A', 'S'][axis];
    format!("{letter} {mm:+.1} mm")
}

/// Cells narrower than this are enlarged (nearest neighbour) so that their labels do not hide them.
const MIN_CELL: u32 = 128;

/// Lays the cells out in a grid. A narrow cell is enlarged to [`MIN_CELL`] at most, and never past `cell_side`
/// on its longest side: a 1 x 8192 slice would otherwise be zoomed 128 times.
fn montage(
    images: &[GrayImage],
    labels: &[String],
    rows: usize,
    cols: usize,
    cell_side: u32,
) -> GrayImage {
    let (w, h) = images.first().map(|i| i.dimensions()).unwrap_or((1, 1));
    let zoom = MIN_CELL
        .div_ceil(w.max(1))
        .min(cell_side / w.max(h).max(1))
        .max(1);
    let (cw, ch) = (w * zoom, h * zoom);
    let zoomed: Vec<GrayImage>;
    let images = if zoom > 1 {
        let filter = image::imageops::FilterType::Nearest;
        zoomed = images
            .iter()
            .map(|i| image::imageops::resize(i, cw, ch, filter))
            .collect();
        &zoomed
    } else {
        images
    };
    let mut out = GrayImage::new(cw * cols as u32, ch * rows as u32);
    let scale = (cw / 160).clamp(1, 4);
    for (k, (img, label)) in images.iter().zip(labels).enumerate() {
        let (x0, y0) = ((k % cols) as u32 * cw, (k / cols) as u32 * ch);
        image::imageops::replace(&mut out, img, i64::from(x0), i64::from(y0));
        draw_text(&mut out, x0 + 2, y0 + 2, label, scale);
    }
    out
}

/// White 8x8 bitmap text on a black box, so labels read on any anatomy.
fn draw_text(img: &mut GrayImage, x: u32, y: u32, text: &str, scale: u32) {
    let glyph = 8 * scale;
    let width = glyph * text.chars().count() as u32 + 2;
    for yy in y..(y + glyph + 2).min(img.height()) {
        for xx in x..(x + width).min(img.width()) {
            img.put_pixel(xx, yy, Luma([0]));
        }
    }
    for (i, ch) in text.chars().enumerate() {
        let bitmap = font8x8::legacy::BASIC_LEGACY
            .get(ch as usize)
            .copied()
            .unwrap_or([0; 8]);
        for (row, bits) in bitmap.iter().enumerate() {
            for col in 0..8u32 {
                if bits & (1 << col) == 0 {
                    continue;
                }
                for dy in 0..scale {
                    for dx in 0..scale {
                        let px = x + 1 + i as u32 * glyph + col * scale + dx;
                        let py = y + 1 + row as u32 * scale + dy;
                        if px < img.width() && py < img.height() {
                            img.put_pixel(px, py, Luma([255]));
                        }
                    }
                }
            }
        }
    }
}

/// Shrinks (never enlarges) so that the longest side is at most `max_side`.
pub fn fit(img: GrayImage, max_side: Option<u32>) -> GrayImage {
    let Some(max) = max_side.filter(|m| *m > 0) else {
        return img;
    };
    let (w, h) = img.dimensions();
    if w.max(h) <= max {
        return img;
    }
    let scale = f64::from(max) / f64::from(w.max(h));
    let (nw, nh) = (
        ((f64::from(w) * scale).round() as u32).max(1),
        ((f64::from(h) * scale).round() as u32).max(1),
    );
    image::imageops::resize(&img, nw, nh, image::imageops::FilterType::Triangle)
}

fn encode(img: GrayImage, label: String) -> Result<RenderedView, String> {
    let (width, height) = img.dimensions();
    let mut png = Vec::new();
    let encoder = image::codecs::png::PngEncoder::new_with_quality(
        &mut png,
        image::codecs::png::CompressionType::Fast,
        image::codecs::png::FilterType::Adaptive,
    );
    image::ImageEncoder::write_image(
        encoder,
        img.as_raw(),
        width,
        height,
        image::ExtendedColorType::L8,
    )
    .map_err(|e| format!("cannot encode the PNG: {e}"))?;
    Ok(RenderedView {
        png,
        width,
        height,
        label,
    })
}

/// Loads, reorients and renders in one step; errors name the path.
pub fn render_path(
    path: &std::path::Path,
    opts: &RenderOptions,
) -> Result<(Vec<RenderedView>, VolumeMeta), VolumeError> {
    let (volume, meta) = crate::load_volume(path, opts)?;
    let ras = volume.to_ras();
    let views = render(&ras, &meta, opts).map_err(|message| VolumeError::Render {
        path: path.to_path_buf(),
        message,
    })?;
    Ok((views, meta))
}
