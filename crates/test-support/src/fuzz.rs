//! A seeded mutator for fuzz tests: a valid seed mutated a few times (byte flips, interesting values, JSON and
//! text tokens, cut and duplicated ranges, truncation), so that mutations reach past the first check of a reader.

use crate::rng::SplitMix;

/// Tokens inserted at random places: JSON punctuation, numbers at the limits, escapes, bytes that are not UTF-8.
pub const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"null",
    b"-1",
    b"1e308",
    b"1e400",
    b"1.5",
    b"NaN",
    b"\0",
    b"\n",
    b"\r\n",
    b"\xff\xfe",
    b"99999999999999999999",
    b"9223372036854775808",
    b"18446744073709551615",
    b"\\u0000",
    b"\\ud800",
    b"[[[[[[[[",
    b"\xe4\xb8\xad",
];

/// Numbers a run of digits is replaced with: the limits of the integer types, negative, fractional, past f64.
pub const NUMBERS: &[&[u8]] = &[
    b"0",
    b"-1",
    b"1.5",
    b"1e400",
    b"-0",
    b"2147483648",
    b"4294967296",
    b"9223372036854775807",
    b"9223372036854775808",
    b"18446744073709551615",
    b"18446744073709551616",
];

const INTERESTING: &[u32] = &[
    0,
    1,
    0x7f,
    0x80,
    0xff,
    0x7fff,
    0x8000,
    0xffff,
    0x7fff_ffff,
    0xffff_ffff,
];

/// A mutator from a seed: the same seed gives the same cases.
pub struct Mutator(pub SplitMix);

impl Mutator {
    pub fn new(seed: u64) -> Mutator {
        Mutator(SplitMix(seed))
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.0.next_u64() % n.max(1) as u64) as usize
    }

    /// `seed` mutated 1 to 4 times.
    pub fn mutate(&mut self, seed: &[u8]) -> Vec<u8> {
        let mut b = seed.to_vec();
        for _ in 0..1 + self.below(4) {
            let at = self.below(b.len() + 1);
            match self.below(8) {
                0 if !b.is_empty() => {
                    let i = at.min(b.len() - 1);
                    b[i] ^= 1 << self.below(8);
                }
                1 => {
                    let v = INTERESTING[self.below(INTERESTING.len())].to_le_bytes();
                    let width = [1, 2, 4][self.below(3)];
                    for (i, byte) in v.iter().take(width).enumerate() {
                        if let Some(slot) = b.get_mut(at + i) {
                            *slot = *byte;
                        }
                    }
                }
                2 => {
                    let token = TOKENS[self.below(TOKENS.len())];
                    b.splice(at..at, token.iter().copied());
                }
                3 => {
                    let end = (at + 1 + self.below(64)).min(b.len());
                    b.drain(at.min(end)..end);
                }
                4 => {
                    let end = (at + 1 + self.below(256)).min(b.len());
                    let copy = b[at.min(end)..end].to_vec();
                    b.splice(at..at, copy);
                }
                5 => b.truncate(at),
                6 => {
                    // The run of digits at or after `at`, replaced with a number at a limit.
                    let Some(start) = (at..b.len()).find(|&i| b[i].is_ascii_digit()) else {
                        continue;
                    };
                    let end = (start..b.len())
                        .find(|&i| !b[i].is_ascii_digit())
                        .unwrap_or(b.len());
                    let number = NUMBERS[self.below(NUMBERS.len())];
                    b.splice(start..end, number.iter().copied());
                }
                _ => {
                    let n = 1 + self.below(8);
                    let fill: Vec<u8> = (0..n).map(|_| self.0.next_u64() as u8).collect();
                    b.splice(at..at, fill);
                }
            }
        }
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_cases() {
        let seed = br#"{"a": [1, 2, "x"]}"#;
        let (mut a, mut b) = (Mutator::new(7), Mutator::new(7));
        for _ in 0..50 {
            assert_eq!(a.mutate(seed), b.mutate(seed));
        }
        let differ = (0..50).filter(|_| a.mutate(seed) != seed.to_vec()).count();
        assert!(differ > 40);
    }
}
