//! Choosing the next token from logits: greedy at temperature 0, otherwise temperature and nucleus (top-p)
//! sampling from a seeded random stream of its own.
//!
//! The nucleus is found by partial selection (the top 64 tokens, then 256, ... until their probability reaches
//! `top_p`), not by sorting the whole vocabulary at every step, which would cost more than the model's step
//! for five samples of a 49k-token vocabulary.

/// How to pick tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Sampling {
    Greedy,
    /// Temperature above 0; `top_p` in (0, 1], where 1 keeps every token.
    Nucleus {
        temperature: f32,
        top_p: f32,
    },
}

/// One sequence's sampler: the rule and its random stream.
pub(crate) struct Sampler {
    rule: Sampling,
    rng: SplitMix64,
}

impl Sampler {
    pub(crate) fn new(rule: Sampling, seed: u64) -> Sampler {
        Sampler {
            rule,
            rng: SplitMix64(seed),
        }
    }

    pub(crate) fn sample(&mut self, logits: &[f32]) -> u32 {
        match self.rule {
            Sampling::Greedy => argmax(logits),
            Sampling::Nucleus { temperature, top_p } => {
                nucleus(logits, temperature, top_p, self.rng.next_f64())
            }
        }
    }
}

/// The index of the largest logit (the first, on a tie).
fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// Samples from the smallest set of most likely tokens whose probability reaches `top_p`, `u` uniform in [0, 1).
fn nucleus(logits: &[f32], temperature: f32, top_p: f32, u: f64) -> u32 {
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &l| m.max(l));
    let mut probs: Vec<(f32, u32)> = logits
        .iter()
        .enumerate()
        .map(|(i, &l)| (((l - max) / temperature).exp(), i as u32))
        .collect();
    let total: f64 = probs.iter().map(|&(p, _)| f64::from(p)).sum();
    let by_prob = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    let mut k = 64.min(probs.len());
    loop {
        if k < probs.len() {
            probs.select_nth_unstable_by(k - 1, by_prob);
        }
        probs[..k].sort_unstable_by(by_prob);
        let mut mass = 0f64;
        for (j, &(p, _)) in probs[..k].iter().enumerate() {
            mass += f64::from(p);
            if mass >= f64::from(top_p) * total {
                return pick(&probs[..=j], mass * u);
            }
        }
        if k == probs.len() {
            return pick(&probs, mass * u);
        }
        k = (k * 4).min(probs.len());
    }
}

/// The token where the running sum of `probs` passes `target`.
fn pick(probs: &[(f32, u32)], target: f64) -> u32 {
    let mut acc = 0f64;
    for &(p, id) in probs {
        acc += f64::from(p);
        if acc > target {
            return id;
        }
    }
    probs.last().map_or(0, |&(_, id)| id)
}

/// Steele, Lea and Flood's SplitMix64: small, fast, and fully determined by its seed.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greedy_takes_the_first_largest() {
        assert_eq!(argmax(&[0.0, 3.0, 1.0, 3.0]), 1);
    }

    #[test]
    fn the_nucleus_excludes_the_tail() {
        // Token 2 holds ~0.88 of the mass after temperature 1; with top_p 0.5 it is the whole nucleus.
        let logits = [0.0f32, 1.0, 3.0, -1.0];
        for u in [0.0, 0.5, 0.999] {
            assert_eq!(nucleus(&logits, 1.0, 0.5, u), 2);
        }
        // With top_p 1 every token can come out, in proportion to its probability.
        let mut s = Sampler::new(
            Sampling::Nucleus {
                temperature: 1.0,
                top_p: 1.0,
            },
            7,
        );
        let mut counts = [0usize; 4];
        for _ in 0..20_000 {
            counts[s.sample(&logits) as usize] += 1;
        }
        let total: f32 = logits.iter().map(|l| l.exp()).sum();
        for (i, &c) in counts.iter().enumerate() {
            let expected = logits[i].exp() / total;
            let got = c as f32 / 20_000.0;
            assert!(
                (got - expected).abs() < 0.02,
                "token {i}: {got} vs {expected}"
            );
        }
    }

    #[test]
    fn a_wide_nucleus_grows_past_the_first_guess() {
        // 1000 equal logits: the nucleus at 0.9 needs 900 of them, far past the first 64.
        let logits = vec![0.5f32; 1000];
        let mut seen = std::collections::HashSet::new();
        let mut s = SplitMix64(3);
        for _ in 0..5000 {
            seen.insert(nucleus(&logits, 1.0, 0.9, s.next_f64()));
        }
        assert!(seen.len() > 800, "only {} distinct tokens", seen.len());
        assert!(seen.iter().all(|&t| t < 1000));
    }

    #[test]
    fn a_seed_fixes_the_stream() {
        let logits: Vec<f32> = (0..500).map(|i| (i % 17) as f32 * 0.1).collect();
        let rule = Sampling::Nucleus {
            temperature: 0.8,
            top_p: 0.95,
        };
        let run = |seed| {
            let mut s = Sampler::new(rule, seed);
            (0..50).map(|_| s.sample(&logits)).collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }
}
