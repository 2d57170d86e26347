//! Turns a label map into an 8-bit grayscale PNG for one MRI sequence or CT, with plausible contrasts,
//! partial-volume blur, a smooth bias field, tissue texture and seeded noise.

use super::noise::{fbm, Rng};
use super::phantom::{Label, LabelMap, SIZE};
use crate::Sequence;

/// Signal of a tissue on a sequence, 0 (black) to 1 (white).
///
/// Relative orders follow textbook appearances: T1 WM > GM > CSF; T2 CSF brightest; FLAIR CSF dark and most
/// lesions bright; acute infarct and pus bright on DWI and dark on ADC; blood products dark on SWI; on CT (brain
/// window) bone and fresh blood bright, oedema and infarct hypodense.
pub fn signal(label: Label, seq: Sequence) -> f64 {
    use Label::*;
    //               T1    T2    FLAIR DWI   ADC   T1C+  SWI   CT
    let row: [f64; 8] = match label {
        Background => [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
        Scalp => [0.82, 0.62, 0.55, 0.12, 0.18, 0.8, 0.42, 0.36],
        Bone => [0.07, 0.05, 0.05, 0.03, 0.03, 0.07, 0.05, 1.0],
        Csf | Ventricle => [0.12, 0.95, 0.07, 0.06, 0.93, 0.12, 0.72, 0.17],
        Gm => [0.47, 0.58, 0.52, 0.44, 0.42, 0.5, 0.46, 0.53],
        Wm => [0.68, 0.38, 0.38, 0.36, 0.36, 0.68, 0.56, 0.44],
        DeepGm => [0.52, 0.5, 0.46, 0.41, 0.4, 0.54, 0.36, 0.5],
        Hippocampus => [0.48, 0.6, 0.54, 0.44, 0.44, 0.5, 0.48, 0.52],
        Infarct => [0.36, 0.8, 0.82, 0.96, 0.12, 0.38, 0.55, 0.4],
        Plaque => [0.3, 0.86, 0.86, 0.5, 0.62, 0.32, 0.6, 0.38],
        ActivePlaque => [0.34, 0.88, 0.88, 0.58, 0.58, 0.92, 0.6, 0.38],
        Edema => [0.4, 0.84, 0.8, 0.48, 0.7, 0.42, 0.62, 0.33],
        Necrosis => [0.2, 0.9, 0.58, 0.22, 0.8, 0.2, 0.7, 0.3],
        Rim => [0.46, 0.56, 0.62, 0.5, 0.44, 0.97, 0.4, 0.46],
        Pus => [0.24, 0.88, 0.7, 0.97, 0.1, 0.22, 0.68, 0.3],
        Hematoma => [0.5, 0.22, 0.3, 0.26, 0.22, 0.5, 0.03, 0.88],
        SubarachnoidBlood => [0.3, 0.55, 0.72, 0.4, 0.5, 0.32, 0.12, 0.8],
        Ribbon => [0.46, 0.66, 0.66, 0.88, 0.24, 0.48, 0.46, 0.53],
        Inflammation => [0.38, 0.85, 0.84, 0.66, 0.55, 0.42, 0.55, 0.4],
        Gliosis => [0.42, 0.8, 0.8, 0.44, 0.6, 0.44, 0.58, 0.36],
        Lacune => [0.14, 0.93, 0.1, 0.08, 0.9, 0.14, 0.7, 0.2],
        Microbleed => [0.66, 0.28, 0.36, 0.34, 0.36, 0.66, 0.02, 0.46],
    };
    row[column(seq)]
}

fn column(seq: Sequence) -> usize {
    match seq {
        Sequence::T1 => 0,
        Sequence::T2 => 1,
        Sequence::Flair => 2,
        Sequence::Dwi => 3,
        Sequence::Adc => 4,
        Sequence::T1c => 5,
        Sequence::Swi => 6,
        Sequence::Ct | Sequence::Cta => 7,
        Sequence::Other => 1,
    }
}

/// How a sequence looks apart from tissue signal.
struct Style {
    blur_passes: usize,
    noise: f64,
    background_noise: f64,
    bias: f64,
    texture: f64,
}

fn style(seq: Sequence) -> Style {
    match seq {
        // Echo-planar diffusion is low resolution and noisy.
        Sequence::Dwi | Sequence::Adc => Style {
            blur_passes: 3,
            noise: 0.03,
            background_noise: 0.02,
            bias: 0.06,
            texture: 0.04,
        },
        Sequence::Ct | Sequence::Cta => Style {
            blur_passes: 1,
            noise: 0.02,
            background_noise: 0.0,
            bias: 0.0,
            texture: 0.03,
        },
        _ => Style {
            blur_passes: 1,
            noise: 0.014,
            background_noise: 0.012,
            bias: 0.08,
            texture: 0.05,
        },
    }
}

/// Renders grayscale pixels (row-major, `SIZE` × `SIZE`).
pub fn render(map: &LabelMap, seq: Sequence, seed: u64) -> Vec<u8> {
    let st = style(seq);
    let bias = BiasField::new(seed ^ 0xB1A5);
    let mut img: Vec<f64> = map.labels.iter().map(|&l| signal(l, seq)).collect();
    for y in 0..SIZE {
        for x in 0..SIZE {
            let i = y * SIZE + x;
            if map.labels[i] != Label::Background {
                let coil = 1.0 + st.bias * bias.at(x, y);
                img[i] *= coil * (1.0 + st.texture * map.texture[i]);
            }
        }
    }
    for _ in 0..st.blur_passes {
        blur(&mut img);
    }
    let mut rng = Rng::new(seed ^ 0xA5A5_5A5A);
    img.iter()
        .zip(&map.labels)
        .map(|(&v, &l)| {
            let sigma = if l == Label::Background {
                st.background_noise
            } else {
                st.noise
            };
            // Magnitude images: noise never makes the signal negative (Rician-like floor).
            let n = (v + sigma * rng.normal()).abs();
            // Non-negative, so adding one half and truncating rounds to nearest (and avoids a libm call).
            (n.min(1.0) * 255.0 + 0.5) as u8
        })
        .collect()
}

/// A smooth coil-sensitivity field in [-1, 1), sampled on a coarse grid and interpolated: it varies over
/// the whole head, so evaluating noise at every pixel would be wasted work.
struct BiasField {
    grid: Vec<f64>,
}

const BIAS_GRID: usize = 29;

impl BiasField {
    fn new(seed: u64) -> Self {
        let at = |j: usize| -1.0 + 2.0 * j as f64 / (BIAS_GRID - 1) as f64;
        let grid = (0..BIAS_GRID * BIAS_GRID)
            .map(|k| {
                let (u, v) = (at(k % BIAS_GRID), at(k / BIAS_GRID));
                2.0 * fbm(u * 1.2 + 5.0, v * 1.2 - 3.0, 2, seed) - 1.0
            })
            .collect();
        BiasField { grid }
    }

    fn at(&self, x: usize, y: usize) -> f64 {
        let scale = (BIAS_GRID - 1) as f64 / (SIZE - 1) as f64;
        let (tx, ty) = (x as f64 * scale, y as f64 * scale);
        let (jx, jy) = (
            (tx as usize).min(BIAS_GRID - 2),
            (ty as usize).min(BIAS_GRID - 2),
        );
        let (fx, fy) = (tx - jx as f64, ty - jy as f64);
        let g = |i: usize, j: usize| self.grid[j * BIAS_GRID + i];
        let top = g(jx, jy) + (g(jx + 1, jy) - g(jx, jy)) * fx;
        let bottom = g(jx, jy + 1) + (g(jx + 1, jy + 1) - g(jx, jy + 1)) * fx;
        top + (bottom - top) * fy
    }
}

/// One pass of a separable [1, 2, 1] / 4 blur (edges clamp).
fn blur(img: &mut [f64]) {
    let n = SIZE;
    let mut tmp = vec![0.0; img.len()];
    for y in 0..n {
        for x in 0..n {
            let l = img[y * n + x.saturating_sub(1)];
            let r = img[y * n + (x + 1).min(n - 1)];
            tmp[y * n + x] = (l + 2.0 * img[y * n + x] + r) * 0.25;
        }
    }
    for y in 0..n {
        for x in 0..n {
            let t = tmp[y.saturating_sub(1) * n + x];
            let b = tmp[(y + 1).min(n - 1) * n + x];
            img[y * n + x] = (t + 2.0 * tmp[y * n + x] + b) * 0.25;
        }
    }
}

/// Encodes 8-bit grayscale pixels as PNG with fixed settings, so the bytes do not depend on encoder defaults.
pub fn png(pixels: &[u8]) -> Result<Vec<u8>, image::ImageError> {
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};
    use image::ImageEncoder;
    let mut out = Vec::new();
    let enc = PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Paeth);
    enc.write_image(
        pixels,
        SIZE as u32,
        SIZE as u32,
        image::ExtendedColorType::L8,
    )?;
    Ok(out)
}
