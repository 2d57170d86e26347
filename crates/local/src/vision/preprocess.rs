//! llama.cpp's image preprocessing (`mtmd-image.cpp`): the resize to the projector's size (bilinear as Pillow
//! resamples, keeping the aspect ratio and padding with black, centred), Pillow's Lanczos resampling (which
//! Idefics3's slicing uses, module `idefics3`) and the normalisation to `(v / 255 - mean) / std`.

/// An 8-bit RGB image, rows top to bottom, three bytes a pixel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RgbImage {
    pub width: usize,
    pub height: usize,
    pub pixels: Vec<u8>,
}

impl RgbImage {
    /// `pixels` must hold `width * height * 3` bytes.
    pub fn new(width: usize, height: usize, pixels: Vec<u8>) -> Option<RgbImage> {
        (width.checked_mul(height)?.checked_mul(3)? == pixels.len()).then_some(RgbImage {
            width,
            height,
            pixels,
        })
    }
}

/// `img` resized into a `side × side` square as `img_tool::resize` does with padding: scaled by the smaller of
/// the two ratios (each side rounded up, at most `side`), bilinearly, then drawn centred on black.
pub(crate) fn resize_pad(img: &RgbImage, side: usize) -> RgbImage {
    if img.width == side && img.height == side {
        return img.clone();
    }
    let scale = (side as f32 / img.width as f32).min(side as f32 / img.height as f32);
    let w = ((img.width as f32 * scale).ceil() as usize).min(side);
    let h = ((img.height as f32 * scale).ceil() as usize).min(side);
    let resized = resample(img, w, h, Filter::Bilinear);
    let mut out = vec![0u8; side * side * 3];
    let (ox, oy) = ((side - w) / 2, (side - h) / 2);
    for y in 0..h {
        let dst = ((y + oy) * side + ox) * 3;
        out[dst..dst + w * 3].copy_from_slice(&resized[y * w * 3..(y + 1) * w * 3]);
    }
    RgbImage {
        width: side,
        height: side,
        pixels: out,
    }
}

/// Bits of the fixed-point filter weights, as Pillow's `ImagingResample` (which llama.cpp's resize follows).
const PRECISION_BITS: u32 = 22;

/// A resampling filter of Pillow's `ImagingResample`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Filter {
    /// The triangle filter (support 1).
    Bilinear,
    /// Lanczos-3: `sinc(x) · sinc(x / 3)` over `[-3, 3)`.
    Lanczos,
}

impl Filter {
    fn support(self) -> f64 {
        match self {
            Filter::Bilinear => 1.0,
            Filter::Lanczos => 3.0,
        }
    }

    fn weight(self, x: f64) -> f64 {
        match self {
            Filter::Bilinear if x.abs() < 1.0 => 1.0 - x.abs(),
            Filter::Bilinear => 0.0,
            Filter::Lanczos if (-3.0..3.0).contains(&x) => sinc(x) * sinc(x / 3.0),
            Filter::Lanczos => 0.0,
        }
    }
}

fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        return 1.0;
    }
    let v = x * std::f64::consts::PI;
    v.sin() / v
}

/// `img` resized to `tw × th` as Pillow computes it and llama.cpp's resize reproduces it: the filter widened
/// by the scale when shrinking, weights normalised in f64 then fixed to 22 bits, a horizontal pass into bytes
/// (rounded, clamped) and then a vertical one, each pass only where that side changes.
pub(crate) fn resample(img: &RgbImage, tw: usize, th: usize, filter: Filter) -> Vec<u8> {
    let (sw, sh) = (img.width, img.height);
    let mut tmp = img.pixels.clone();
    if tw != sw {
        let horizontal = coefficients(sw, tw, filter);
        tmp = vec![0u8; sh * tw * 3];
        for y in 0..sh {
            for (x, (start, weights)) in horizontal.iter().enumerate() {
                for c in 0..3 {
                    let taps = weights.iter().enumerate();
                    let sum = taps.fold(1i64 << (PRECISION_BITS - 1), |acc, (i, &w)| {
                        acc + i64::from(img.pixels[(y * sw + start + i) * 3 + c]) * w
                    });
                    tmp[(y * tw + x) * 3 + c] = clip8(sum);
                }
            }
        }
    }
    if th == sh {
        return tmp;
    }
    let vertical = coefficients(sh, th, filter);
    let mut out = vec![0u8; tw * th * 3];
    for (y, (start, weights)) in vertical.iter().enumerate() {
        for x in 0..tw {
            for c in 0..3 {
                let taps = weights.iter().enumerate();
                let sum = taps.fold(1i64 << (PRECISION_BITS - 1), |acc, (i, &w)| {
                    acc + i64::from(tmp[((start + i) * tw + x) * 3 + c]) * w
                });
                out[(y * tw + x) * 3 + c] = clip8(sum);
            }
        }
    }
    out
}

/// Pillow's `precompute_coeffs`: per output position, the first input position and the fixed-point weights of
/// the inputs from there.
fn coefficients(in_size: usize, out_size: usize, filter: Filter) -> Vec<(usize, Vec<i64>)> {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = filter.support() * filterscale;
    let ss = 1.0 / filterscale;
    (0..out_size)
        .map(|xx| {
            let center = (xx as f64 + 0.5) * scale;
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let raw: Vec<f64> = (xmin..xmax)
                .map(|x| filter.weight((x as f64 - center + 0.5) * ss))
                .collect();
            let total: f64 = raw.iter().sum();
            let fixed = raw
                .iter()
                .map(|&w| {
                    let w = if total != 0.0 { w / total } else { w };
                    let scaled = w * f64::from(1u32 << PRECISION_BITS);
                    if w < 0.0 {
                        (scaled - 0.5) as i64
                    } else {
                        (scaled + 0.5) as i64
                    }
                })
                .collect();
            (xmin, fixed)
        })
        .collect()
}

fn clip8(v: i64) -> u8 {
    (v >> PRECISION_BITS).clamp(0, 255) as u8
}

/// The image as f32 planes (all red values, then green, then blue, rows top to bottom), each value
/// `(v / 255 - mean[c]) / std[c]`.
pub(crate) fn normalize(img: &RgbImage, mean: [f32; 3], std: [f32; 3]) -> Vec<f32> {
    let n = img.width * img.height;
    let mut out = vec![0f32; 3 * n];
    for (i, px) in img.pixels.chunks_exact(3).enumerate() {
        for c in 0..3 {
            out[c * n + i] = (f32::from(px[c]) / 255.0 - mean[c]) / std[c];
        }
    }
    out
}
