//! The one random stream every resampling routine uses.
//!
//! The 32-byte ChaCha key is expanded from the `u64` seed with SplitMix64 here rather than through
//! `SeedableRng::seed_from_u64`, and integers in a range are drawn with Lemire's method here rather than through
//! `rand`'s distributions: both of those are free to change between crate versions, while the ChaCha8 block
//! function is fixed by its specification. So a recorded seed reproduces the same resamples for as long as this
//! file does.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub(crate) struct Draw(ChaCha8Rng);

impl Draw {
    pub(crate) fn new(seed: u64) -> Self {
        let mut state = seed;
        let mut key = [0u8; 32];
        for chunk in key.chunks_exact_mut(8) {
            chunk.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
        }
        Draw(ChaCha8Rng::from_seed(key))
    }

    /// A uniform integer in `0..n`; `n` must be positive.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        let range = n as u64;
        // 2^64 mod range: products whose low half falls below this would over-represent small values.
        let threshold = range.wrapping_neg() % range;
        loop {
            let product = u128::from(self.0.next_u64()) * u128::from(range);
            if (product as u64) >= threshold {
                return (product >> 64) as usize;
            }
        }
    }

    /// Fills `out` with `len` indices drawn uniformly from `0..n`, with replacement.
    pub(crate) fn fill_indices(&mut self, n: usize, len: usize, out: &mut Vec<usize>) {
        out.clear();
        out.extend((0..len).map(|_| self.below(n)));
    }
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_different_seed_differs() {
        let draw = |seed| {
            let mut d = Draw::new(seed);
            (0..32).map(|_| d.below(1000)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn below_is_in_range_and_roughly_uniform() {
        let mut d = Draw::new(1);
        let mut counts = [0usize; 6];
        for _ in 0..60_000 {
            counts[d.below(6)] += 1;
        }
        // Each count is Binomial(60000, 1/6): sd ≈ 91, so ±600 is more than 6 sd.
        for c in counts {
            assert!((9_400..=10_600).contains(&c), "{counts:?}");
        }
    }
}
