//! The element- and row-wise pieces of the encoder's forward pass on plain f32 slices: LayerNorm,
//! GELU, and one sequence's multi-head attention.
//!
//! The loops are compiled twice, for baseline x86-64 and for AVX2+FMA, and the CPU picks at run
//! time (`multiversion`): builds target baseline x86-64, and its 4-wide SSE2 without FMA made
//! GELU take about twice as long on MiniLM. exp and erf are branch-free polynomials so those
//! loops vectorise too.

use gemm::Parallelism;
use multiversion::multiversion;

/// LayerNorm of one row in place: `(x - mean) / sqrt(var + eps) * weight + bias`, with the biased
/// variance, as `torch.nn.LayerNorm`.
#[multiversion(targets("x86_64+avx2+fma"))]
pub fn layer_norm(row: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
    let n = row.len() as f32;
    let mean = lane_sum(row, |x| x) / n;
    let var = lane_sum(row, |x| (x - mean) * (x - mean)) / n;
    let inv = 1.0 / (var + eps).sqrt();
    for ((x, w), b) in row.iter_mut().zip(weight).zip(bias) {
        *x = (*x - mean) * inv * w + b;
    }
}

/// `sum(f(x))`, kept in eight interleaved partial sums that the compiler can hold in one vector
/// register (a single running f32 sum cannot be reordered, so it would not vectorise).
#[inline(always)]
fn lane_sum(xs: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut lanes = [0f32; 8];
    let chunks = xs.chunks_exact(8);
    let tail: f32 = chunks.remainder().iter().map(|&x| f(x)).sum();
    for c in chunks {
        for (lane, &x) in lanes.iter_mut().zip(c) {
            *lane += f(x);
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The dot product of two equal-length slices, in eight partial sums like [`lane_sum`] (for the
/// greedy matching's cosines, inlined into its AVX2 build).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for (lane, (x, y)) in lanes.iter_mut().zip(x.iter().zip(y)) {
            *lane += x * y;
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// The exact GELU, `0.5 x (1 + erf(x / sqrt 2))` (Hugging Face's `gelu`), of every element.
#[multiversion(targets("x86_64+avx2+fma"))]
pub fn gelu_erf(xs: &mut [f32]) {
    for x in xs {
        *x = 0.5 * *x * (1.0 + erf(*x * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// The tanh approximation of GELU (`gelu_new`, `gelu_pytorch_tanh`) of every element.
pub fn gelu_tanh(xs: &mut [f32]) {
    const C: f32 = 0.797_884_6; // sqrt(2 / pi)
    for x in xs {
        *x = 0.5 * *x * (1.0 + (C * (*x + 0.044_715 * *x * *x * *x)).tanh());
    }
}

/// erf(x) = x P(x²) / Q(x²) on [-4, 4], where f32's erf is already ±1 outside: the rational
/// minimax approximation Eigen and XLA use for f32 (error within a few ulps, far inside the 1e-4
/// parity target). No branches or calls, so loops over it vectorise; libm's erf does not.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_4e-10 + 2.770_681_5e-8;
    p = x2 * p - 2.101_024e-6;
    p = x2 * p - 5.692_506_2e-5;
    p = x2 * p - 7.349_906_4e-4;
    p = x2 * p - 2.954_6e-3;
    p = x2 * p - 1.609_603_3e-2;
    let mut q = x2 * -1.456_607_15e-5 - 2.133_740_5e-4;
    q = x2 * q - 1.682_827e-3;
    q = x2 * q - 7.373_329_3e-3;
    q = x2 * q - 1.426_473_9e-2;
    x * p / q
}

/// Attention heads: how many, and the width of each.
#[derive(Debug, Clone, Copy)]
pub struct Heads {
    pub count: usize,
    pub dim: usize,
}

/// Self-attention of one sequence of `len` tokens: `qkv` holds its `[len, 3 hidden]` query, key
/// and value rows, `out` receives `[len, hidden]`, head by head `softmax(q k^T / sqrt(d)) v`.
pub fn attend(qkv: &[f32], len: usize, heads: Heads, out: &mut [f32]) {
    let h = heads.count * heads.dim;
    assert!(qkv.len() >= len * 3 * h && out.len() >= len * h);
    if len == 0 {
        return;
    }
    let scale = 1.0 / (heads.dim as f32).sqrt();
    let mut scores = vec![0f32; len * len];
    let stride = (3 * h) as isize;
    for head in 0..heads.count {
        let q = qkv[head * heads.dim..].as_ptr();
        let k = qkv[h + head * heads.dim..].as_ptr();
        let v = qkv[2 * h + head * heads.dim..].as_ptr();
        // SAFETY: rows of q, k and v lie `stride` apart within `qkv` (asserted to hold `len`
        // rows), each head reads `dim` columns inside its row, `scores` is `len x len`, and `out`
        // (asserted to hold `len` rows of `h`) receives `dim` columns per row; no buffer overlaps.
        unsafe {
            // scores = scale * q k^T, [len, len]
            gemm::gemm(
                len,
                len,
                heads.dim,
                scores.as_mut_ptr(),
                1,
                len as isize,
                false,
                q,
                1,
                stride,
                k,
                stride,
                1,
                0.0,
                scale,
                false,
                false,
                false,
                Parallelism::None,
            );
        }
        softmax_rows(&mut scores, len);
        // SAFETY: as above.
        unsafe {
            gemm::gemm(
                len,
                heads.dim,
                len,
                out[head * heads.dim..].as_mut_ptr(),
                1,
                h as isize,
                false,
                scores.as_ptr(),
                1,
                len as isize,
                v,
                1,
                stride,
                0.0,
                1.0,
                false,
                false,
                false,
                Parallelism::None,
            );
        }
    }
}

/// Softmax of each `len`-wide row of `scores`, in place.
#[multiversion(targets("x86_64+avx2+fma"))]
fn softmax_rows(scores: &mut [f32], len: usize) {
    for row in scores.chunks_exact_mut(len) {
        let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        row.iter_mut().for_each(|x| *x = exp(*x - max));
        let inv = 1.0 / lane_sum(row, |x| x);
        row.iter_mut().for_each(|x| *x *= inv);
    }
}

/// e^x for x <= 88 (the softmax only passes x <= 0): Cephes' `expf`, 2^n e^r with |r| <= ln2/2
/// and a degree-6 polynomial for e^r, within 2 ulps; x below -87 gives ~1e-38 instead of 0,
/// which no softmax sum notices.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const ROUND: f32 = 12_582_912.0; // 1.5 * 2^23: adding and subtracting it rounds to an integer
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + ROUND) - ROUND;
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let mut p = 1.987_569_2e-4;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let e = p * r * r + r + 1.0;
    e * f32::from_bits(((n as i32 + 127) << 23) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_the_exact_function() {
        let mut worst = 0f64;
        for i in -60_000..=60_000 {
            let x = i as f64 / 10_000.0;
            let d = (f64::from(erf(x as f32)) - exact_erf(x)).abs();
            worst = worst.max(d);
        }
        assert!(worst < 1e-6, "max |erf error| {worst}");
    }

    #[test]
    fn exp_matches_the_exact_function() {
        for i in 0..=200_000 {
            let x = -87.0 + 88.0 * i as f32 / 200_000.0;
            let want = f64::from(x).exp();
            let rel = (f64::from(exp(x)) - want).abs() / want;
            assert!(rel < 3e-7, "exp({x}): relative error {rel}");
        }
    }

    #[test]
    fn gelu_matches_the_definition() {
        let mut xs: Vec<f32> = (-4000..4000).map(|i| i as f32 / 500.0).collect();
        let want: Vec<f64> = xs
            .iter()
            .map(|&x| 0.5 * f64::from(x) * (1.0 + exact_erf(f64::from(x) / 2f64.sqrt())))
            .collect();
        gelu_erf(&mut xs);
        for (g, w) in xs.iter().zip(&want) {
            assert!((f64::from(*g) - w).abs() < 2e-6, "{g} vs {w}");
        }
    }

    #[test]
    fn layer_norm_matches_the_definition() {
        let mut row: Vec<f32> = (0..37)
            .map(|i| (i as f32 * 0.37).sin() * 3.0 + 1.0)
            .collect();
        let x: Vec<f64> = row.iter().map(|&v| f64::from(v)).collect();
        let w: Vec<f32> = (0..37).map(|i| 0.5 + i as f32 / 37.0).collect();
        let b: Vec<f32> = (0..37).map(|i| i as f32 / 100.0).collect();
        layer_norm(&mut row, &w, &b, 1e-12);
        let mean = x.iter().sum::<f64>() / 37.0;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 37.0;
        for i in 0..37 {
            let want = (x[i] - mean) / var.sqrt() * f64::from(w[i]) + f64::from(b[i]);
            assert!(
                (f64::from(row[i]) - want).abs() < 1e-5,
                "{i}: {} vs {want}",
                row[i]
            );
        }
    }

    #[test]
    fn attention_matches_a_direct_computation() {
        let heads = Heads { count: 3, dim: 4 };
        let (h, len) = (12, 5);
        let qkv: Vec<f32> = (0..len * 3 * h)
            .map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0)
            .collect();
        let mut out = vec![0f32; len * h];
        attend(&qkv, len, heads, &mut out);
        let at = |t: usize, part: usize, head: usize, c: usize| {
            f64::from(qkv[t * 3 * h + part * h + head * heads.dim + c])
        };
        for head in 0..heads.count {
            for i in 0..len {
                let logits: Vec<f64> = (0..len)
                    .map(|j| {
                        (0..heads.dim)
                            .map(|c| at(i, 0, head, c) * at(j, 1, head, c))
                            .sum::<f64>()
                            / 2.0
                    })
                    .collect();
                let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
                let z: f64 = e.iter().sum();
                for c in 0..heads.dim {
                    let want: f64 = (0..len).map(|j| e[j] / z * at(j, 2, head, c)).sum();
                    let got = f64::from(out[i * h + head * heads.dim + c]);
                    assert!(
                        (got - want).abs() < 1e-5,
                        "head {head} row {i} col {c}: {got} vs {want}"
                    );
                }
            }
        }
    }

    /// erf by its Taylor series (small x) or continued fraction of erfc (large x), in f64.
    fn exact_erf(x: f64) -> f64 {
        let a = x.abs();
        let v = if a < 2.5 {
            let (mut term, mut sum, mut n) = (a, a, 0.0);
            while term.abs() > 1e-17 * sum.abs() {
                n += 1.0;
                term *= -a * a / n;
                sum += term / (2.0 * n + 1.0);
            }
            2.0 / std::f64::consts::PI.sqrt() * sum
        } else {
            // erfc(a) = exp(-a²)/sqrt(pi) * 1/(a + 1/2/(a + 1/(a + 3/2/(a + ...))))
            let mut f = 0.0;
            for k in (1..60).rev() {
                f = (k as f64 / 2.0) / (a + f);
            }
            1.0 - (-a * a).exp() / std::f64::consts::PI.sqrt() / (a + f)
        };
        v.copysign(x)
    }
}
