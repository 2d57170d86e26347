//! The feed-forward activations, computed as llama.cpp's AVX2 build computes them.
//! - SwiGLU (`silu(gate) * up`): eight values at a time with ggml's vectorised exp ([`ggml_v_expf`]), and the
//!   values past the last multiple of eight with libm's `expf`, as ggml's tail loop does. The scalar fallback
//!   gives the same bits.
//! - GeGLU (`gelu(gate) * up`, Gemma's): ggml's CPU build reads the tanh GELU from a table of 65536 f16 values
//!   indexed by the gate rounded to f16 (`GGML_GELU_FP16`, on by default), 0 at or below -10 and the gate itself
//!   at or above 10. [`gelu_table`] builds the same table.

use std::sync::OnceLock;

use half::f16;

use crate::attention::ggml_v_expf;
use crate::quant::Kernel;
use crate::scratch::{self, Buf};

/// `silu(gate) * up` per column; `gu` holds each column's `ffn` gate values then its `ffn` up values.
pub(crate) fn swiglu(gu: &[f32], ffn: usize) -> Buf<f32> {
    let mut out = scratch::overwritten(gu.len() / 2);
    for (col, dst) in gu.chunks_exact(2 * ffn).zip(out.chunks_exact_mut(ffn)) {
        let (gate, up) = col.split_at(ffn);
        let simd = ffn - ffn % 8;
        lanes(&gate[..simd], &up[..simd], &mut dst[..simd]);
        for ((d, &g), &u) in dst[simd..].iter_mut().zip(&gate[simd..]).zip(&up[simd..]) {
            *d = g / (1.0 + (-g).exp()) * u;
        }
    }
    out
}

/// `gelu(gate) * up` per column, as ggml's `ggml_vec_geglu_f32`; `gu` is laid out as for [`swiglu`].
pub(crate) fn geglu(gu: &[f32], ffn: usize) -> Buf<f32> {
    let table = gelu_table();
    let mut out = scratch::overwritten(gu.len() / 2);
    for (col, dst) in gu.chunks_exact(2 * ffn).zip(out.chunks_exact_mut(ffn)) {
        let (gate, up) = col.split_at(ffn);
        for ((d, &g), &u) in dst.iter_mut().zip(gate).zip(up) {
            *d = if g <= -10.0 {
                0.0
            } else if g >= 10.0 {
                g * u
            } else {
                f16::from_bits(table[usize::from(f16::from_f32(g).to_bits())]).to_f32() * u
            };
        }
    }
    out
}

/// ggml's `ggml_table_gelu_f16`: for every f16 bit pattern, the tanh GELU of its value rounded to f16.
pub(crate) fn gelu_table() -> &'static [u16] {
    static TABLE: OnceLock<Vec<u16>> = OnceLock::new();
    TABLE.get_or_init(|| {
        (0..=u16::MAX)
            .map(|bits| f16::from_f32(gelu(f16::from_bits(bits).to_f32())).to_bits())
            .collect()
    })
}

/// ggml's `ggml_gelu_f32`, `0.5x(1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2)))`, with the multiply-add GCC
/// contracts `1 + 0.044715 x x` to.
fn gelu(x: f32) -> f32 {
    const GELU_COEF_A: f32 = 0.044715;
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let inner = (GELU_COEF_A * x).mul_add(x, 1.0);
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * inner).tanh())
}

/// The part in whole vectors of eight: AVX2 where the CPU has it, else the same operations one at a time.
fn lanes(gate: &[f32], up: &[f32], dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if Kernel::detect() == Kernel::Avx2 {
        // SAFETY: `Kernel::Avx2` is only chosen on CPUs with AVX2 and FMA; the slices have the caller's common
        // length, a multiple of 8.
        return unsafe { avx2::swiglu(gate, up, dst) };
    }
    scalar(gate, up, dst);
}

fn scalar(gate: &[f32], up: &[f32], dst: &mut [f32]) {
    for ((d, &g), &u) in dst.iter_mut().zip(gate).zip(up) {
        *d = g / (1.0 + ggml_v_expf(0.0 - g)) * u;
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// # Safety
    /// The CPU must have AVX2 and FMA; `gate`, `up` and `dst` have the same length, a multiple of 8.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn swiglu(gate: &[f32], up: &[f32], dst: &mut [f32]) {
        for i in (0..dst.len()).step_by(8) {
            // SAFETY: `i + 8` is within all three slices (the caller's contract).
            unsafe {
                let x = _mm256_loadu_ps(gate.as_ptr().add(i));
                let e = exp(_mm256_sub_ps(_mm256_setzero_ps(), x));
                let silu = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0), e));
                let y = _mm256_mul_ps(silu, _mm256_loadu_ps(up.as_ptr().add(i)));
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), y);
            }
        }
    }

    /// [`crate::attention::ggml_v_expf`] in eight lanes: the same operations, with the far-range handling
    /// only when some lane needs it.
    #[target_feature(enable = "avx2,fma")]
    fn exp(x: __m256) -> __m256 {
        let f = |bits: u32| _mm256_set1_ps(f32::from_bits(bits));
        let r = f(0x4b40_0000);
        let z = _mm256_fmadd_ps(x, f(0x3fb8_aa3b), r);
        let n = _mm256_sub_ps(z, r);
        let b = _mm256_fnmadd_ps(n, f(0x35bf_be8e), _mm256_fnmadd_ps(n, f(0x3f31_7200), x));
        let e = _mm256_slli_epi32::<23>(_mm256_castps_si256(z));
        let k = _mm256_castsi256_ps(_mm256_add_epi32(e, _mm256_castps_si256(f(0x3f80_0000))));
        let abs_n = _mm256_andnot_ps(f(0x8000_0000), n);
        let c = _mm256_cmp_ps::<_CMP_GT_OQ>(abs_n, _mm256_set1_ps(126.0));
        let u = _mm256_mul_ps(b, b);
        let j = _mm256_fmadd_ps(
            _mm256_fmadd_ps(
                _mm256_fmadd_ps(f(0x3c07_2010), b, f(0x3d2b_9f17)),
                u,
                _mm256_fmadd_ps(f(0x3e2a_af33), b, f(0x3eff_fedb)),
            ),
            u,
            _mm256_mul_ps(f(0x3f7f_fff6), b),
        );
        let normal = _mm256_fmadd_ps(j, k, k);
        if _mm256_movemask_ps(c) == 0 {
            return normal;
        }
        let g = _mm256_and_si256(
            _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(n, _mm256_setzero_ps())),
            _mm256_set1_epi32(0x8200_0000u32 as i32),
        );
        let s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f00_0000)));
        let s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
        let d = _mm256_cmp_ps::<_CMP_GT_OQ>(abs_n, _mm256_set1_ps(192.0));
        let far = _mm256_blendv_ps(
            _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1),
            _mm256_mul_ps(s1, s1),
            d,
        );
        _mm256_blendv_ps(normal, far, c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The GELU table equals the one llama.cpp's CPU build fills (`scripts/ggml-gelu-table.py`), every entry
    /// (for a NaN input both are NaN; the payloads differ and nothing reads them).
    #[test]
    fn gelu_table_equals_ggml() {
        let Some(theirs) = nmb_test_support::llama::ggml_gelu_table() else {
            return;
        };
        let ours = gelu_table();
        assert_eq!(theirs.len(), ours.len());
        let nan = |bits: u16| f16::from_bits(bits).is_nan();
        let differ: Vec<usize> = (0..ours.len())
            .filter(|&i| match nan(i as u16) {
                true => !(nan(ours[i]) && nan(theirs[i])),
                false => ours[i] != theirs[i],
            })
            .collect();
        assert!(
            differ.is_empty(),
            "{} of 65536 entries differ, first at f16 {:#06x}: ours {:#06x}, ggml {:#06x}",
            differ.len(),
            differ[0],
            ours[differ[0]],
            theirs[differ[0]]
        );
    }

    /// The table's ends: GELU leaves large inputs as they are and takes large negative ones to zero, and
    /// geglu's cut-offs at ±10 multiply or zero without the table.
    #[test]
    fn geglu_follows_ggml_cut_offs() {
        let gu = [-12.0, -1.0, 0.0, 3.0, 12.0, 2.0, 2.0, 2.0, 2.0, 0.5];
        let out = geglu(&gu, 5);
        assert_eq!(out[0], 0.0);
        assert_eq!(out[2], 0.0);
        assert_eq!(out[4], 12.0 * 0.5);
        assert!((out[1] - -0.158_8 * 2.0).abs() < 1e-3, "{}", out[1]);
        assert!((out[3] - 2.996 * 2.0).abs() < 1e-2, "{}", out[3]);
    }

    /// The AVX2 lanes give the scalar function's bits, across the normal range, the far ends (where the exp
    /// leaves the normal exponents) and a tail past the last multiple of eight.
    #[test]
    fn avx2_and_scalar_agree_bit_for_bit() {
        let ffn = 8 * 600 + 5;
        let gu: Vec<f32> = (0..2 * ffn)
            .map(|i| ((i * 7919 % 4001) as f32 - 2000.0) * 0.1)
            .collect();
        let fast = swiglu(&gu, ffn);
        let (gate, up) = gu.split_at(ffn);
        let simd = ffn - ffn % 8;
        let mut slow = vec![0f32; ffn];
        scalar(&gate[..simd], &up[..simd], &mut slow[..simd]);
        for i in simd..ffn {
            slow[i] = gate[i] / (1.0 + (-gate[i]).exp()) * up[i];
        }
        for i in 0..ffn {
            assert_eq!(fast[i].to_bits(), slow[i].to_bits(), "gate {}", gate[i]);
        }
        // Past ±133 the exp's exponent leaves the normal range (|n| > 192), from ±88 it needs the far branch.
        assert!(gate.iter().any(|&g| g < -140.0) && gate.iter().any(|&g| g > 140.0));
    }
}
