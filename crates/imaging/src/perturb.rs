//! Image perturbations for robustness and image-reliance runs: what a model is sent instead of an image.
//!
//! A [`Perturbation`] is parsed from text (`noise:0.2`, `flip:h`, `blank`...), with every parameter checked
//! against its range. Two kinds act on more than one image and are carried out by the planner, which knows the
//! cases: `mismatch` (the images of another case of the same modality) and `drop:SEQUENCE` (one sequence left
//! out). The others change pixels ([`Perturbation::apply`]): they decode the image, change it as 8-bit grey or
//! RGB, and encode the result as PNG. Every one is deterministic: the same bytes, seed and perturbation give the
//! same output bytes, so the same hash. Noise is drawn from a SplitMix64 stream seeded by the seed and the
//! image's content hash, through Box–Muller, so each image gets its own noise (see `normal.rs`). `blank` reads
//! only the image's header.
//!
//! Pixel rules (every value rounded half up and clipped to 0..=255; `tests/fixtures/make_perturb_reference.py`
//! computes the same with NumPy and Pillow):
//! - `blank`: every pixel mid-grey (128), same size.
//! - `noise:SIGMA`: adds Gaussian noise of standard deviation SIGMA x 255 to every channel, 0 < SIGMA <= 1.
//! - `blur:SIGMA`: a Gaussian blur of SIGMA pixels (kernel radius ceil(3 SIGMA), edges mirrored), 0 < SIGMA <= 20.
//! - `contrast:GAMMA`: 255 x (v / 255)^GAMMA, 0.1 <= GAMMA <= 10.
//! - `jpeg:QUALITY`: JPEG-encoded at QUALITY (1..=100) and decoded again, as Pillow does with libjpeg-turbo
//!   (baseline, standard tables scaled by quality, 4:2:0 chroma for RGB, grey as one component; see `jpeg.rs`).
//! - `downsample:FACTOR`: each FACTOR x FACTOR block averaged into one pixel (edge blocks over the pixels they
//!   have), 2 <= FACTOR <= 16; the image gets smaller.
//! - `rotate:DEGREES`: turned counter-clockwise about its centre, same size, bilinear, black outside,
//!   -360 <= DEGREES <= 360.
//! - `flip:h|v`: mirrored left to right (`h`) or top to bottom (`v`).
//! - `crop:FRACTION`: the central floor(FRACTION x side) pixels of each side kept, 0.1 <= FRACTION < 1.

use std::fmt;
use std::str::FromStr;

use image::{DynamicImage, GrayImage, ImageBuffer, Luma, Pixel, Rgb, RgbImage};

use crate::normal::SplitMix;
use crate::{content_hash, decode, ImageError};

/// Bumped whenever the same perturbation could give different bytes.
pub const PERTURB_VERSION: u32 = 3;

/// What is accepted, for error messages and help texts.
pub const ACCEPTED: &str = "blank, mismatch, drop:SEQUENCE, noise:SIGMA (0 < SIGMA <= 1), \
blur:SIGMA (0 < SIGMA <= 20 pixels), contrast:GAMMA (0.1 <= GAMMA <= 10), jpeg:QUALITY (1 to 100), \
downsample:FACTOR (2 to 16), rotate:DEGREES (-360 to 360), flip:h|v, crop:FRACTION (0.1 <= FRACTION < 1)";

/// One way of changing what a model sees.
#[derive(Debug, Clone, PartialEq)]
pub enum Perturbation {
    Blank,
    Mismatch,
    Drop(String),
    Noise(f64),
    Blur(f64),
    Contrast(f64),
    Jpeg(u8),
    Downsample(u32),
    Rotate(f64),
    Flip(Axis),
    Crop(f64),
}

/// The direction of a flip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    /// Left to right.
    H,
    /// Top to bottom.
    V,
}

/// A perturbation that cannot be parsed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}; accepted: {ACCEPTED}")]
pub struct PerturbError {
    pub message: String,
}

fn refuse(message: String) -> PerturbError {
    PerturbError { message }
}

fn number(
    name: &str,
    text: &str,
    ok: impl Fn(f64) -> bool,
    range: &str,
) -> Result<f64, PerturbError> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && ok(v) => Ok(v),
        _ => Err(refuse(format!(
            "{name}:{text}: expected {range}, got {text:?}"
        ))),
    }
}

impl FromStr for Perturbation {
    type Err = PerturbError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let (name, arg) = match s.split_once(':') {
            Some((n, a)) => (n.trim().to_ascii_lowercase(), Some(a.trim())),
            None => (s.to_ascii_lowercase(), None),
        };
        let need = |what: &str| {
            arg.filter(|a| !a.is_empty())
                .ok_or_else(|| refuse(format!("{name} needs a value: {name}:{what}")))
        };
        let none = |p: Perturbation| match arg {
            Some(a) => Err(refuse(format!("{name} takes no value, got {name}:{a}"))),
            None => Ok(p),
        };
        match name.as_str() {
            "blank" => none(Perturbation::Blank),
            "mismatch" => none(Perturbation::Mismatch),
            "drop" => Ok(Perturbation::Drop(need("SEQUENCE")?.to_ascii_lowercase())),
            "noise" => number(
                "noise",
                need("SIGMA")?,
                |v| v > 0.0 && v <= 1.0,
                "0 < SIGMA <= 1",
            )
            .map(Perturbation::Noise),
            "blur" => number(
                "blur",
                need("SIGMA")?,
                |v| v > 0.0 && v <= 20.0,
                "0 < SIGMA <= 20",
            )
            .map(Perturbation::Blur),
            "contrast" => number(
                "contrast",
                need("GAMMA")?,
                |v| (0.1..=10.0).contains(&v),
                "0.1 <= GAMMA <= 10",
            )
            .map(Perturbation::Contrast),
            "jpeg" => {
                let q = number(
                    "jpeg",
                    need("QUALITY")?,
                    |v| v.fract() == 0.0 && (1.0..=100.0).contains(&v),
                    "a whole QUALITY from 1 to 100",
                )?;
                Ok(Perturbation::Jpeg(q as u8))
            }
            "downsample" => {
                let f = number(
                    "downsample",
                    need("FACTOR")?,
                    |v| v.fract() == 0.0 && (2.0..=16.0).contains(&v),
                    "a whole FACTOR from 2 to 16",
                )?;
                Ok(Perturbation::Downsample(f as u32))
            }
            "rotate" => number(
                "rotate",
                need("DEGREES")?,
                |v| (-360.0..=360.0).contains(&v),
                "-360 <= DEGREES <= 360",
            )
            .map(Perturbation::Rotate),
            "flip" => match need("h|v")?.to_ascii_lowercase().as_str() {
                "h" => Ok(Perturbation::Flip(Axis::H)),
                "v" => Ok(Perturbation::Flip(Axis::V)),
                other => Err(refuse(format!("flip:{other}: expected flip:h or flip:v"))),
            },
            "crop" => number(
                "crop",
                need("FRACTION")?,
                |v| (0.1..1.0).contains(&v),
                "0.1 <= FRACTION < 1",
            )
            .map(Perturbation::Crop),
            other => Err(refuse(format!("unknown perturbation {other:?}"))),
        }
    }
}

impl fmt::Display for Perturbation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Perturbation::Blank => f.write_str("blank"),
            Perturbation::Mismatch => f.write_str("mismatch"),
            Perturbation::Drop(s) => write!(f, "drop:{s}"),
            Perturbation::Noise(v) => write!(f, "noise:{v}"),
            Perturbation::Blur(v) => write!(f, "blur:{v}"),
            Perturbation::Contrast(v) => write!(f, "contrast:{v}"),
            Perturbation::Jpeg(q) => write!(f, "jpeg:{q}"),
            Perturbation::Downsample(n) => write!(f, "downsample:{n}"),
            Perturbation::Rotate(v) => write!(f, "rotate:{v}"),
            Perturbation::Flip(Axis::H) => f.write_str("flip:h"),
            Perturbation::Flip(Axis::V) => f.write_str("flip:v"),
            Perturbation::Crop(v) => write!(f, "crop:{v}"),
        }
    }
}

/// A comma-separated list (`mismatch,blank,noise:0.2`), each parsed; an empty or repeated entry is refused.
pub fn parse_list(text: &str) -> Result<Vec<Perturbation>, PerturbError> {
    let mut out: Vec<Perturbation> = Vec::new();
    for item in text.split(',') {
        if item.trim().is_empty() {
            return Err(refuse(format!("empty entry in the list {text:?}")));
        }
        let p: Perturbation = item.parse()?;
        if out.contains(&p) {
            return Err(refuse(format!("{p} is listed twice")));
        }
        out.push(p);
    }
    Ok(out)
}

impl Perturbation {
    /// Whether this changes the pixels of each image on its own ([`Perturbation::apply`]); `mismatch` and `drop`
    /// choose which images are sent instead.
    pub fn is_pixelwise(&self) -> bool {
        !matches!(self, Perturbation::Mismatch | Perturbation::Drop(_))
    }

    /// The perturbed image as PNG bytes. `seed` only matters for noise.
    pub fn apply(&self, bytes: &[u8], seed: u64) -> Result<Vec<u8>, ImageError> {
        // Only noise reads the content hash; hashing the bytes is skipped for the others.
        let hash = match self {
            Perturbation::Noise(_) => content_hash(bytes),
            _ => String::new(),
        };
        self.apply_hashed(bytes, &hash, seed)
    }

    /// [`Perturbation::apply`] to bytes whose [`content_hash`] the caller has already computed.
    pub fn apply_hashed(&self, bytes: &[u8], hash: &str, seed: u64) -> Result<Vec<u8>, ImageError> {
        if *self == Perturbation::Blank {
            return blank(bytes);
        }
        let img = decode(bytes)?;
        let noise_seed = match self {
            Perturbation::Noise(_) => seed ^ hash_seed(hash),
            _ => seed,
        };
        let out = if img.color().has_color() {
            DynamicImage::ImageRgb8(self.pixels(img.into_rgb8(), noise_seed)?)
        } else {
            DynamicImage::ImageLuma8(self.pixels(img.into_luma8(), noise_seed)?)
        };
        png(&out, matches!(self, Perturbation::Noise(_)))
    }

    fn pixels<P>(
        &self,
        img: ImageBuffer<P, Vec<u8>>,
        seed: u64,
    ) -> Result<ImageBuffer<P, Vec<u8>>, ImageError>
    where
        P: Pixel<Subpixel = u8> + Encodable,
    {
        Ok(match self {
            Perturbation::Blank => ImageBuffer::from_pixel(img.width(), img.height(), P::grey(128)),
            Perturbation::Noise(sigma) => noise(img, sigma * 255.0, seed),
            Perturbation::Blur(sigma) => blur(&img, *sigma),
            Perturbation::Contrast(gamma) => map(img, |v| 255.0 * (v / 255.0).powf(*gamma)),
            Perturbation::Jpeg(q) => P::jpeg(&img, *q)?,
            Perturbation::Downsample(f) => downsample(&img, *f),
            Perturbation::Rotate(deg) => rotate(&img, *deg),
            Perturbation::Flip(Axis::H) => image::imageops::flip_horizontal(&img),
            Perturbation::Flip(Axis::V) => image::imageops::flip_vertical(&img),
            Perturbation::Crop(f) => crop(&img, *f),
            Perturbation::Mismatch | Perturbation::Drop(_) => img,
        })
    }
}

/// The two pixel types perturbations keep: 8-bit grey and 8-bit RGB.
pub trait Encodable: Pixel<Subpixel = u8> + 'static {
    fn grey(v: u8) -> Self;
    fn jpeg(
        img: &ImageBuffer<Self, Vec<u8>>,
        quality: u8,
    ) -> Result<ImageBuffer<Self, Vec<u8>>, ImageError>;
}

impl Encodable for Luma<u8> {
    fn grey(v: u8) -> Self {
        Luma([v])
    }
    fn jpeg(img: &GrayImage, quality: u8) -> Result<GrayImage, ImageError> {
        jpeg_round_trip(img, quality)
    }
}

impl Encodable for Rgb<u8> {
    fn grey(v: u8) -> Self {
        Rgb([v, v, v])
    }
    fn jpeg(img: &RgbImage, quality: u8) -> Result<RgbImage, ImageError> {
        jpeg_round_trip(img, quality)
    }
}

fn encode_error(format: crate::ImageFormat, e: impl fmt::Display) -> ImageError {
    ImageError::Decode {
        format,
        message: format!("cannot encode the perturbed image: {e}"),
    }
}

/// PNG at the encoder's fast setting (each row filtered against the one above): a perturbed image is made once
/// per run and its size matters less than the time planning takes. `stored`: deflate's stored blocks, no
/// compression, for pixels that do not compress (noise: the fast setting gave the same size at five times the
/// time).
fn png(img: &DynamicImage, stored: bool) -> Result<Vec<u8>, ImageError> {
    use image::codecs::png::{CompressionType, FilterType, PngEncoder};
    let mut out = Vec::new();
    let encoder = match stored {
        true => PngEncoder::new_with_quality(
            &mut out,
            CompressionType::Uncompressed,
            FilterType::NoFilter,
        ),
        false => PngEncoder::new_with_quality(&mut out, CompressionType::Fast, FilterType::Up),
    };
    img.write_with_encoder(encoder)
        .map_err(|e| encode_error(crate::ImageFormat::Png, e))?;
    Ok(out)
}

/// Encoded and decoded again by libjpeg-turbo's codec as Pillow calls it ([`crate::jpeg`]).
fn jpeg_round_trip<P: Pixel<Subpixel = u8>>(
    img: &ImageBuffer<P, Vec<u8>>,
    quality: u8,
) -> Result<ImageBuffer<P, Vec<u8>>, ImageError> {
    let (w, h) = img.dimensions();
    let back = crate::jpeg::round_trip(img.as_raw(), w, h, P::CHANNEL_COUNT as usize, quality)
        .map_err(|e| encode_error(crate::ImageFormat::Jpeg, e))?;
    ImageBuffer::from_raw(w, h, back).ok_or_else(|| {
        encode_error(
            crate::ImageFormat::Jpeg,
            "the decoded JPEG has another size",
        )
    })
}

/// Mid-grey at the image's size and colour, read from its header: no pixel is decoded.
fn blank(bytes: &[u8]) -> Result<Vec<u8>, ImageError> {
    use image::ImageDecoder;
    let format = crate::sniff(bytes);
    let header = image::ImageReader::new(std::io::Cursor::new(bytes))
        .with_guessed_format()
        .map_err(image::ImageError::IoError)
        .and_then(|r| r.into_decoder())
        .map(|d| (d.dimensions(), d.color_type().has_color()));
    let ((w, h), colour) = header.map_err(|e| ImageError::Decode {
        format: format.unwrap_or(crate::ImageFormat::Png),
        message: e.to_string(),
    })?;
    // The header's size is checked against the limit decoding has before anything that size is allocated.
    let samples = u64::from(w) * u64::from(h) * if colour { 3 } else { 1 };
    if samples > crate::limits::max_raster_bytes() {
        return Err(ImageError::Decode {
            format: format.unwrap_or(crate::ImageFormat::Png),
            message: format!("{w} x {h} pixels exceed the raster limit"),
        });
    }
    let grey = match colour {
        true => DynamicImage::ImageRgb8(RgbImage::from_pixel(w, h, Rgb([128; 3]))),
        false => DynamicImage::ImageLuma8(GrayImage::from_pixel(w, h, Luma([128]))),
    };
    png(&grey, false)
}

/// The first 8 bytes of the content hash (hex), so every image draws its own noise.
fn hash_seed(hash: &str) -> u64 {
    hash.get(..16)
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or(0)
}

fn to_u8(v: f64) -> u8 {
    // `as` truncates, which is the floor on 0..=255; below that the clamp gives 0 either way (NaN too). Not
    // `floor()`, which is a library call on CPUs targeted without SSE4.1.
    (v + 0.5).clamp(0.0, 255.0) as u8
}

/// Applies `f` to every sample through a table of its 256 values (the same bytes as calling it each time).
fn map<P: Pixel<Subpixel = u8>>(
    mut img: ImageBuffer<P, Vec<u8>>,
    f: impl Fn(f64) -> f64,
) -> ImageBuffer<P, Vec<u8>> {
    let table: Vec<u8> = (0..=255u8).map(|v| to_u8(f(f64::from(v)))).collect();
    for v in img.iter_mut() {
        *v = table[usize::from(*v)];
    }
    img
}

/// Rows of samples handed to one rayon job: enough work to be worth a thread.
const ROWS_PER_JOB: usize = 16;

fn noise<P: Pixel<Subpixel = u8>>(
    mut img: ImageBuffer<P, Vec<u8>>,
    sd: f64,
    seed: u64,
) -> ImageBuffer<P, Vec<u8>> {
    use rayon::prelude::*;
    let chunk = (img.width() as usize * P::CHANNEL_COUNT as usize * ROWS_PER_JOB).max(1);
    img.par_chunks_mut(chunk).enumerate().for_each(|(i, part)| {
        // Two draws per sample, in sample order.
        let mut rng = SplitMix::at(seed, 2 * (i * chunk) as u64);
        let mut z = vec![0.0; part.len()];
        rng.fill_normals(&mut z);
        for (v, z) in part.iter_mut().zip(&z) {
            *v = to_u8(f64::from(*v) + sd * z);
        }
    });
    img
}

fn gaussian_kernel(sigma: f64) -> Vec<f64> {
    let radius = (3.0 * sigma).ceil() as i64;
    let raw: Vec<f64> = (-radius..=radius)
        .map(|x| (-(x * x) as f64 / (2.0 * sigma * sigma)).exp())
        .collect();
    let sum: f64 = raw.iter().sum();
    raw.into_iter().map(|w| w / sum).collect()
}

/// Mirrors an index into 0..n (`d c b a | a b c d | d c b a`), repeatedly for kernels wider than the image.
fn mirror(i: i64, n: i64) -> usize {
    let period = 2 * n;
    let m = i.rem_euclid(period);
    (if m < n { m } else { period - 1 - m }) as usize
}

fn blur<P: Pixel<Subpixel = u8>>(
    img: &ImageBuffer<P, Vec<u8>>,
    sigma: f64,
) -> ImageBuffer<P, Vec<u8>> {
    use rayon::prelude::*;
    let (w, h) = (img.width() as usize, img.height() as usize);
    let c = P::CHANNEL_COUNT as usize;
    let kernel = gaussian_kernel(sigma);
    let r = (kernel.len() / 2) as i64;
    let row = (w * c).max(1);
    // Rows first, then columns, in f64; rounded once at the end. Each output value is the sum of its taps in
    // kernel order, added one after another; the loops run over whole rows so that they vectorise (across
    // outputs, never within one sum).
    let mut rows = vec![0.0; w * h * c];
    rows.par_chunks_mut(row * ROWS_PER_JOB)
        .zip(img.par_chunks(row * ROWS_PER_JOB))
        .for_each(|(out, lines)| {
            let mut padded = vec![0.0; (w + kernel.len() - 1) * c];
            for (out, line) in out.chunks_exact_mut(row).zip(lines.chunks_exact(row)) {
                // The row with its mirrored edges: tap `k` of output `x` is `padded[x + k]`.
                for (p, px) in padded.chunks_exact_mut(c).enumerate() {
                    let sx = mirror(p as i64 - r, w as i64);
                    for (v, s) in px.iter_mut().zip(&line[sx * c..(sx + 1) * c]) {
                        *v = f64::from(*s);
                    }
                }
                for (k, wt) in kernel.iter().enumerate() {
                    add_scaled(out, *wt, &padded[k * c..k * c + row]);
                }
            }
        });
    let mut out = img.clone();
    out.par_chunks_mut(row * ROWS_PER_JOB)
        .enumerate()
        .for_each(|(job, lines)| {
            let mut sum = vec![0.0; row];
            for (i, line) in lines.chunks_exact_mut(row).enumerate() {
                let y = (job * ROWS_PER_JOB + i) as i64;
                sum.fill(0.0);
                for (k, wt) in kernel.iter().enumerate() {
                    let sy = mirror(y + k as i64 - r, h as i64);
                    add_scaled(&mut sum, *wt, &rows[sy * row..(sy + 1) * row]);
                }
                for (o, s) in line.iter_mut().zip(&sum) {
                    *o = to_u8(*s);
                }
            }
        });
    out
}

/// `acc += weight x values`, elementwise (a multiplication, then an addition: never fused, so every CPU gives
/// the same sums), four lanes at a time where the CPU has AVX2.
fn add_scaled(acc: &mut [f64], weight: f64, values: &[f64]) {
    #[inline(always)]
    fn body(acc: &mut [f64], weight: f64, values: &[f64]) {
        for (a, v) in acc.iter_mut().zip(values) {
            *a += weight * v;
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn avx2(acc: &mut [f64], weight: f64, values: &[f64]) {
        body(acc, weight, values)
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2.
        unsafe { avx2(acc, weight, values) };
        return;
    }
    body(acc, weight, values)
}

fn downsample<P: Pixel<Subpixel = u8>>(
    img: &ImageBuffer<P, Vec<u8>>,
    f: u32,
) -> ImageBuffer<P, Vec<u8>> {
    let (w, h) = img.dimensions();
    let c = P::CHANNEL_COUNT as usize;
    let mut out = ImageBuffer::<P, Vec<u8>>::new(w.div_ceil(f), h.div_ceil(f));
    for (ox, oy, px) in out.enumerate_pixels_mut() {
        let mut sums = vec![0.0; c];
        let mut n = 0.0;
        for y in oy * f..((oy + 1) * f).min(h) {
            for x in ox * f..((ox + 1) * f).min(w) {
                for (s, v) in sums.iter_mut().zip(img.get_pixel(x, y).channels()) {
                    *s += f64::from(*v);
                }
                n += 1.0;
            }
        }
        for (v, s) in px.channels_mut().iter_mut().zip(&sums) {
            *v = to_u8(s / n);
        }
    }
    out
}

fn rotate<P: Pixel<Subpixel = u8>>(
    img: &ImageBuffer<P, Vec<u8>>,
    degrees: f64,
) -> ImageBuffer<P, Vec<u8>> {
    let (w, h) = img.dimensions();
    let (cx, cy) = (f64::from(w) / 2.0, f64::from(h) / 2.0);
    let (sin, cos) = degrees.to_radians().sin_cos();
    let c = P::CHANNEL_COUNT as usize;
    let at = |x: i64, y: i64, ch: usize| -> f64 {
        if x < 0 || y < 0 || x >= i64::from(w) || y >= i64::from(h) {
            return 0.0;
        }
        f64::from(img.get_pixel(x as u32, y as u32).channels()[ch])
    };
    let mut out = ImageBuffer::<P, Vec<u8>>::new(w, h);
    for (x, y, px) in out.enumerate_pixels_mut() {
        // The output pixel's centre, turned back clockwise (y grows downwards) onto the source.
        let (dx, dy) = (f64::from(x) + 0.5 - cx, f64::from(y) + 0.5 - cy);
        let sx = cos * dx - sin * dy + cx - 0.5;
        let sy = sin * dx + cos * dy + cy - 0.5;
        let (x0, y0) = (sx.floor(), sy.floor());
        let (fx, fy) = (sx - x0, sy - y0);
        let (x0, y0) = (x0 as i64, y0 as i64);
        for (ch, v) in px.channels_mut().iter_mut().enumerate().take(c) {
            let top = at(x0, y0, ch) * (1.0 - fx) + at(x0 + 1, y0, ch) * fx;
            let bottom = at(x0, y0 + 1, ch) * (1.0 - fx) + at(x0 + 1, y0 + 1, ch) * fx;
            *v = to_u8(top * (1.0 - fy) + bottom * fy);
        }
    }
    out
}

fn crop<P: Pixel<Subpixel = u8> + 'static>(
    img: &ImageBuffer<P, Vec<u8>>,
    fraction: f64,
) -> ImageBuffer<P, Vec<u8>> {
    let (w, h) = img.dimensions();
    let side = |n: u32| ((f64::from(n) * fraction).floor() as u32).max(1);
    let (cw, ch) = (side(w), side(h));
    image::imageops::crop_imm(img, (w - cw) / 2, (h - ch) / 2, cw, ch).to_image()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_parses_and_prints_back() {
        for text in [
            "blank",
            "mismatch",
            "drop:flair",
            "noise:0.2",
            "blur:1.5",
            "contrast:0.5",
            "jpeg:30",
            "downsample:4",
            "rotate:-15",
            "flip:h",
            "flip:v",
            "crop:0.5",
        ] {
            let p: Perturbation = text.parse().unwrap();
            assert_eq!(p.to_string(), text);
        }
    }

    #[test]
    fn out_of_range_and_unknown_are_refused_with_what_is_accepted() {
        for bad in [
            "noise:0",
            "noise:1.5",
            "noise:x",
            "noise",
            "blur:0",
            "blur:21",
            "contrast:0.05",
            "jpeg:0",
            "jpeg:101",
            "jpeg:50.5",
            "downsample:1",
            "downsample:17",
            "rotate:400",
            "flip:d",
            "crop:1",
            "crop:0.05",
            "blank:1",
            "sharpen",
            "drop:",
            "noise:NaN",
        ] {
            let err = bad.parse::<Perturbation>().unwrap_err().to_string();
            assert!(err.contains("accepted: blank, mismatch"), "{bad}: {err}");
        }
        assert!(parse_list("blank,,noise:0.1").is_err());
        assert!(parse_list("blank,blank").is_err());
        assert_eq!(parse_list("mismatch, blank ,noise:0.2").unwrap().len(), 3);
    }

    #[test]
    fn mirror_reflects_at_both_edges() {
        let got: Vec<usize> = (-3..7).map(|i| mirror(i, 4)).collect();
        assert_eq!(got, [2, 1, 0, 0, 1, 2, 3, 3, 2, 1]);
    }
}
