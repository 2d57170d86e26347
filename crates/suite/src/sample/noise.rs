//! Deterministic randomness and trigonometry for the image generator.
//!
//! Everything here uses only integer arithmetic and the IEEE-754 basic operations (+, -, *, /, sqrt, floor),
//! which are correctly rounded everywhere. The platform's `sin`/`atan2`/`exp` come from the system maths library
//! and may differ in the last bit between machines, which would change PNG bytes and so the suite hash.

use std::f64::consts::PI;

/// SplitMix64: a small, well-mixed generator with a 64-bit state.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Approximately normal with mean 0 and standard deviation 1 (Irwin–Hall sum of four uniforms).
    pub fn normal(&mut self) -> f64 {
        let s = self.uniform() + self.uniform() + self.uniform() + self.uniform();
        (s - 2.0) * 1.732_050_807_568_877_2
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn lattice(ix: i64, iy: i64, seed: u64) -> f64 {
    let h = mix(seed ^ mix((ix as u64).wrapping_mul(0x9E37_79B9) ^ (iy as u64).wrapping_shl(32)));
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Smooth value noise in [0, 1) at (x, y); features are about one unit across.
pub fn value_noise(x: f64, y: f64, seed: u64) -> f64 {
    let (ix, iy) = (floor(x), floor(y));
    let (tx, ty) = (smooth(x - ix as f64), smooth(y - iy as f64));
    let a = lattice(ix, iy, seed);
    let b = lattice(ix + 1, iy, seed);
    let c = lattice(ix, iy + 1, seed);
    let d = lattice(ix + 1, iy + 1, seed);
    let top = a + (b - a) * tx;
    let bottom = c + (d - c) * tx;
    top + (bottom - top) * ty
}

/// `x.floor()` as an integer, inlined: without SSE4.1 the standard `floor` is a library call, and this is hot.
#[inline]
fn floor(x: f64) -> i64 {
    let i = x as i64;
    if (i as f64) > x {
        i - 1
    } else {
        i
    }
}

fn smooth(t: f64) -> f64 {
    t * t * (3.0 - 2.0 * t)
}

/// Fractal noise: `octaves` layers of value noise, each twice the frequency and half the weight. In [0, 1).
pub fn fbm(x: f64, y: f64, octaves: u32, seed: u64) -> f64 {
    let (mut sum, mut weight, mut total, mut freq) = (0.0, 1.0, 0.0, 1.0);
    for o in 0..octaves {
        sum += weight * value_noise(x * freq, y * freq, seed.wrapping_add(o as u64 * 7919));
        total += weight;
        weight *= 0.5;
        freq *= 2.0;
    }
    sum / total
}

/// Sine by range reduction and a Taylor polynomial; absolute error below 1e-9.
pub fn sin(x: f64) -> f64 {
    let mut r = x - (x / (2.0 * PI)).floor() * 2.0 * PI; // [0, 2π)
    if r > PI {
        r -= 2.0 * PI; // (-π, π]
    }
    if r > PI / 2.0 {
        r = PI - r;
    } else if r < -PI / 2.0 {
        r = -PI - r;
    }
    let r2 = r * r;
    let mut term = r;
    let mut sum = r;
    for k in 1..=8 {
        let k = k as f64;
        term *= -r2 / ((2.0 * k) * (2.0 * k + 1.0));
        sum += term;
    }
    sum
}

pub fn cos(x: f64) -> f64 {
    sin(x + PI / 2.0)
}

/// Angle of (x, y) in (-π, π]; absolute error below 1e-5, plenty for drawing.
pub fn atan2(y: f64, x: f64) -> f64 {
    if x == 0.0 && y == 0.0 {
        return 0.0;
    }
    let (ax, ay) = (x.abs(), y.abs());
    let swap = ay > ax;
    let t = if swap { ax / ay } else { ay / ax };
    let mut a = atan_unit(t);
    if swap {
        a = PI / 2.0 - a;
    }
    if x < 0.0 {
        a = PI - a;
    }
    if y < 0.0 {
        -a
    } else {
        a
    }
}

/// atan(t) for t in [0, 1]: reduce to |t| <= tan(π/12) and sum a short series.
fn atan_unit(t: f64) -> f64 {
    const TAN_PI_12: f64 = 0.267_949_192_431_122_7;
    const SQRT3: f64 = 1.732_050_807_568_877_2;
    if t > TAN_PI_12 {
        // atan(t) = π/6 + atan((√3·t − 1)/(√3 + t))
        return PI / 6.0 + atan_series((SQRT3 * t - 1.0) / (SQRT3 + t));
    }
    atan_series(t)
}

fn atan_series(t: f64) -> f64 {
    let t2 = t * t;
    let mut term = t;
    let mut sum = t;
    for k in 1..=9 {
        term *= -t2;
        sum += term / (2 * k + 1) as f64;
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trig_matches_std_closely() {
        for i in -400..400 {
            let x = i as f64 * 0.037;
            assert!((sin(x) - x.sin()).abs() < 1e-8, "sin({x})");
            assert!((cos(x) - x.cos()).abs() < 1e-8, "cos({x})");
            let (y, z) = (x.sin() * 3.0, (x * 1.3).cos());
            assert!((atan2(y, z) - y.atan2(z)).abs() < 1e-5, "atan2({y},{z})");
        }
    }

    #[test]
    fn noise_is_in_range_and_repeatable() {
        let mut rng = Rng::new(7);
        let first: Vec<u64> = (0..4).map(|_| rng.next_u64()).collect();
        let mut again = Rng::new(7);
        assert_eq!(first, (0..4).map(|_| again.next_u64()).collect::<Vec<_>>());
        for i in 0..500 {
            let v = fbm(i as f64 * 0.173, i as f64 * -0.291, 3, 11);
            assert!((0.0..1.0).contains(&v));
        }
    }
}
