//! Standard normal draws for `noise:SIGMA`: SplitMix64 uniforms through Box–Muller (the cosine branch,
//! `sqrt(-2 ln u1) cos(2 pi u2)`), as `tests/fixtures/make_perturb_reference.py` computes them with the
//! library's `log` and `cos`.
//!
//! The draws are made in batches: the integer work (the generator, and the turn `u2` split exactly into a
//! quarter and a remainder) one value at a time, then the floating-point work over the whole batch in plain
//! arithmetic, which the compiler runs four lanes at a time on CPUs with AVX2. The logarithm and the cosine
//! and sine of the remainder are fdlibm's (Sun Microsystems' freely distributable libm, the algorithms most
//! C libraries descend from), each within an ulp or two of the library's; multiplications and additions are
//! never fused, so every CPU gives the same bytes.

// The polynomial and ln 2 constants are written digit for digit as fdlibm publishes them.
#![allow(clippy::excessive_precision)]

/// SplitMix64 (Steele, Lea and Flood 2014), the generator NumPy's reference re-implements. Its state after `k`
/// draws is `seed + k x GAMMA`, so any draw is computed directly ([`SplitMix::at`]) and rows of noise are drawn
/// in parallel with the same values as one sequential stream.
pub(crate) struct SplitMix(u64);

/// 2^-53: a 53-bit integer times this is a double in [0, 1).
const SCALE: f64 = 1.0 / (1u64 << 53) as f64;

impl SplitMix {
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

    /// The stream positioned after `draws` draws.
    pub(crate) fn at(seed: u64, draws: u64) -> SplitMix {
        SplitMix(seed.wrapping_add(draws.wrapping_mul(Self::GAMMA)))
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(Self::GAMMA);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fills `out` with standard normal draws, two uniforms each, in order.
    pub(crate) fn fill_normals(&mut self, out: &mut [f64]) {
        let n = out.len();
        let (mut u1, mut angle, mut sine, mut sign) =
            (vec![0.0; n], vec![0.0; n], vec![0u64; n], vec![0u64; n]);
        for i in 0..n {
            u1[i] = ((self.next() >> 11) + 1) as f64 * SCALE;
            (angle[i], sine[i], sign[i]) = split_turn(self.next() >> 11);
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            unsafe { box_muller_avx2(&u1, &angle, &sine, &sign, out) };
            return;
        }
        box_muller(&u1, &angle, &sine, &sign, out);
    }
}

/// The turn `u = m / 2^53` (`m` below 2^53) as `q/4 + r` with `q` a whole number of quarters and `r` within an
/// eighth of a turn either side, split exactly in integers: the angle `2 pi r`, and the bit masks that turn
/// `cos(2 pi r)` into `cos(2 pi u)`: take the sine (odd quarters), flip the sign (quarters 1 and 2).
fn split_turn(m: u64) -> (f64, u64, u64) {
    const QUARTER: i64 = 1 << 51;
    let m = m as i64;
    let q = (m + QUARTER / 2) >> 51;
    let angle = std::f64::consts::TAU * ((m - q * QUARTER) as f64 * SCALE);
    let sine = if q & 1 == 1 { u64::MAX } else { 0 };
    let sign = if matches!(q & 3, 1 | 2) { 1 << 63 } else { 0 };
    (angle, sine, sign)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn box_muller_avx2(u1: &[f64], angle: &[f64], sine: &[u64], sign: &[u64], out: &mut [f64]) {
    box_muller(u1, angle, sine, sign, out)
}

#[inline(always)]
fn box_muller(u1: &[f64], angle: &[f64], sine: &[u64], sign: &[u64], out: &mut [f64]) {
    for i in 0..out
        .len()
        .min(u1.len())
        .min(angle.len())
        .min(sine.len())
        .min(sign.len())
    {
        let (cos, sin) = cos_sin(angle[i]);
        let turned = (cos.to_bits() & !sine[i]) | (sin.to_bits() & sine[i]);
        out[i] = (-2.0 * ln(u1[i])).sqrt() * f64::from_bits(turned ^ sign[i]);
    }
}

/// fdlibm's `__kernel_cos` and `__kernel_sin` of `x` in [-pi/4, pi/4] (no tail).
#[inline(always)]
fn cos_sin(x: f64) -> (f64, f64) {
    const C: [f64; 6] = [
        4.166_666_666_666_660_19e-2,
        -1.388_888_888_887_410_96e-3,
        2.480_158_728_947_672_94e-5,
        -2.755_731_435_139_066_33e-7,
        2.087_572_321_298_174_83e-9,
        -1.135_964_755_778_819_48e-11,
    ];
    const S: [f64; 6] = [
        -1.666_666_666_666_663_24e-1,
        8.333_333_333_322_489_46e-3,
        -1.984_126_982_985_794_93e-4,
        2.755_731_370_707_006_77e-6,
        -2.505_076_025_340_686_34e-8,
        1.589_690_995_211_550_10e-10,
    ];
    let z = x * x;
    let r = z * (C[0] + z * (C[1] + z * (C[2] + z * (C[3] + z * (C[4] + z * C[5])))));
    let hz = 0.5 * z;
    let w = 1.0 - hz;
    let cos = w + (((1.0 - w) - hz) + z * r);
    let r = S[1] + z * (S[2] + z * (S[3] + z * (S[4] + z * S[5])));
    let sin = x + z * x * (S[0] + z * r);
    (cos, sin)
}

/// fdlibm's `__ieee754_log` for a normal positive `x` (the uniforms here are in (0, 1]): `x = 2^k (1 + f)` with
/// `1 + f` in [sqrt(2)/2, sqrt(2)), then `ln(1 + f)` from `s = f / (2 + f)` and a polynomial in `s^2`.
#[inline(always)]
fn ln(x: f64) -> f64 {
    const LG: [f64; 7] = [
        6.666_666_666_666_735_13e-1,
        3.999_999_999_940_941_91e-1,
        2.857_142_874_366_239_15e-1,
        2.222_219_843_214_978_40e-1,
        1.818_357_216_161_805_01e-1,
        1.531_383_769_920_937_33e-1,
        1.479_819_860_511_658_59e-1,
    ];
    const LN2_HI: f64 = 6.931_471_803_691_238_16e-1;
    const LN2_LO: f64 = 1.908_214_929_270_587_70e-10;
    let bits = x.to_bits();
    let high = (bits >> 32) & 0x000f_ffff;
    // 0x100000 where the mantissa is at least sqrt(2): that half of the binade moves down one exponent.
    let up = (high + 0x95f64) & 0x10_0000;
    let m = f64::from_bits(((high | (up ^ 0x3ff0_0000)) << 32) | (bits & 0xffff_ffff));
    // k = exponent + (up ? 1 : 0) (-53..=0 here), made a double exactly without an integer conversion.
    let k = (bits >> 52) + (up >> 20);
    let k = f64::from_bits(0x4330_0000_0000_0000 | k) - (4_503_599_627_370_496.0 + 1023.0);
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let z = s * s;
    let w = z * z;
    let t1 = w * (LG[1] + w * (LG[3] + w * LG[5]));
    let t2 = z * (LG[0] + w * (LG[2] + w * (LG[4] + w * LG[6])));
    let r = t2 + t1;
    let hfsq = 0.5 * f * f;
    k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_agree_with_the_library_log_and_cos() {
        let n = 200_000;
        let mut batch = vec![0.0; n];
        SplitMix(7).fill_normals(&mut batch);
        let mut rng = SplitMix(7);
        let mut worst = 0f64;
        for got in batch {
            let u1 = ((rng.next() >> 11) + 1) as f64 * SCALE;
            let u2 = (rng.next() >> 11) as f64 * SCALE;
            let want = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            worst = worst.max((got - want).abs() / want.abs().max(1.0));
        }
        // Each rounds the angle once, differently, and the two logarithms differ by an ulp at most.
        assert!(worst < 1e-14, "worst difference {worst:e}");
    }

    #[test]
    fn the_logarithm_and_turn_agree_at_their_edges() {
        for x in [
            1.0,
            SCALE,
            0.5,
            0.75,
            std::f64::consts::FRAC_1_SQRT_2,
            0.999_999_999,
        ] {
            assert!(
                (ln(x) - x.ln()).abs() <= 2.0 * f64::EPSILON * x.ln().abs().max(1.0),
                "{x}"
            );
        }
        for m in [
            0,
            1,
            (1 << 53) - 1,
            1 << 50,
            3 << 50,
            5 << 50,
            7 << 50,
            1 << 52,
        ] {
            let (angle, sine, sign) = split_turn(m);
            let (c, s) = cos_sin(angle);
            let got = f64::from_bits(((c.to_bits() & !sine) | (s.to_bits() & sine)) ^ sign);
            let want = (std::f64::consts::TAU * (m as f64 * SCALE)).cos();
            assert!((got - want).abs() < 1e-15, "{m}: {got} against {want}");
        }
    }
}
