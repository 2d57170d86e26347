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

    /// A uniform integer in `0..n`; `n` must be positive. Lemire's multiply-and-reject method, on 32-bit words
    /// when `n` fits (every resample in practice: half the ChaCha output per draw) and on 64-bit words otherwise.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        match u32::try_from(n) {
            Ok(range) => self.below_u32(range) as usize,
            Err(_) => self.below_u64(n as u64) as usize,
        }
    }

    fn below_u32(&mut self, range: u32) -> u32 {
        let mut product = u64::from(self.0.next_u32()) * u64::from(range);
        // Products whose low half falls below 2^32 mod range would over-represent small values. That threshold
        // is below `range`, so the division that computes it is only needed in the rare case checked here.
        if (product as u32) < range {
            let threshold = range.wrapping_neg() % range;
            while (product as u32) < threshold {
                product = u64::from(self.0.next_u32()) * u64::from(range);
            }
        }
        (product >> 32) as u32
    }

    fn below_u64(&mut self, range: u64) -> u64 {
        let mut product = u128::from(self.0.next_u64()) * u128::from(range);
        if (product as u64) < range {
            let threshold = range.wrapping_neg() % range;
            while (product as u64) < threshold {
                product = u128::from(self.0.next_u64()) * u128::from(range);
            }
        }
        (product >> 64) as u64
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

    #[test]
    fn wide_ranges_use_the_64_bit_path_and_stay_in_range() {
        let mut d = Draw::new(2);
        let n = (u32::MAX as u64 + 12_345) as usize;
        let draws: Vec<usize> = (0..1_000).map(|_| d.below(n)).collect();
        assert!(draws.iter().all(|&x| x < n));
        // Half of them should land above 2^31 (u32 arithmetic would never get near n).
        let high = draws.iter().filter(|&&x| x > u32::MAX as usize).count();
        assert!(
            high < 10,
            "{high} draws beyond u32::MAX; expected about 0.003"
        );
        assert!(draws.iter().filter(|&&x| x > (1usize << 31)).count() > 400);
    }
}
