//! pass@k in the two readings the domain brief asks for.

use crate::{Result, StatsError};

/// Reading (a): the unbiased estimator of Chen et al. (2021) from `n` samples of which `c` are correct,
/// `1 - C(n-c, k) / C(n, k)`: the probability that a random `k`-subset of the samples holds at least one correct
/// one.
///
/// Computed as `1 - prod_{i=n-c+1..=n} (1 - k/i)`, which never forms a binomial coefficient and so neither
/// overflows nor loses precision for large `n`. Returns 1.0 when fewer than `k` samples are wrong and 0.0 when
/// none is correct. Errors when `n == 0`, `k == 0`, `k > n` or `c > n`.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> Result<f64> {
    const WHAT: &str = "pass_at_k";
    if n == 0 || k == 0 {
        return Err(StatsError::Invalid {
            what: WHAT,
            expected: format!("n >= 1 and k >= 1, got n={n}, k={k}"),
        });
    }
    if k > n {
        return Err(StatsError::Invalid {
            what: WHAT,
            expected: format!("k <= n samples, got k={k}, n={n}"),
        });
    }
    if c > n {
        return Err(StatsError::Invalid {
            what: WHAT,
            expected: format!("c <= n, got c={c}, n={n}"),
        });
    }
    if c == 0 {
        return Ok(0.0);
    }
    if n - c < k {
        return Ok(1.0);
    }
    let k = k as f64;
    let miss: f64 = (n - c + 1..=n).map(|i| 1.0 - k / i as f64).product();
    Ok(1.0 - miss)
}

/// Reading (b): whether the correct diagnosis is among the first `k` entries of one answer's ranked list.
/// `first_correct` is the 0-based position of the first correct entry (`None` when no entry is correct).
pub fn top_k_hit(first_correct: Option<usize>, k: usize) -> bool {
    matches!(first_correct, Some(position) if position < k)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts k-subsets of `n` items (the first `c` correct) that contain a correct item, by enumerating every
    /// subset as a bitmask.
    fn brute_force(n: usize, c: usize, k: usize) -> (u64, u64) {
        let correct_mask: u32 = (1u32 << c) - 1;
        let (mut hit, mut total) = (0u64, 0u64);
        for subset in 0u32..(1u32 << n) {
            if subset.count_ones() as usize == k {
                total += 1;
                if subset & correct_mask != 0 {
                    hit += 1;
                }
            }
        }
        (hit, total)
    }

    #[test]
    fn matches_enumeration_of_all_k_subsets_for_n_up_to_10() {
        let mut checked = 0;
        for n in 1..=10 {
            for c in 0..=n {
                for k in 1..=n {
                    let (hit, total) = brute_force(n, c, k);
                    let expected = hit as f64 / total as f64;
                    let got = pass_at_k(n, c, k).unwrap();
                    assert!(
                        (got - expected).abs() < 1e-12,
                        "n={n} c={c} k={k}: got {got}, expected {hit}/{total}"
                    );
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, (1..=10).map(|n| (n + 1) * n).sum::<usize>());
    }

    #[test]
    fn edge_cases() {
        assert_eq!(pass_at_k(5, 0, 1).unwrap(), 0.0);
        assert_eq!(pass_at_k(5, 5, 5).unwrap(), 1.0);
        assert_eq!(pass_at_k(5, 1, 5).unwrap(), 1.0);
        assert!((pass_at_k(5, 2, 1).unwrap() - 0.4).abs() < 1e-15);
        assert!(pass_at_k(5, 1, 6).is_err());
        assert!(pass_at_k(5, 6, 1).is_err());
        assert!(pass_at_k(0, 0, 1).is_err());
        assert!(pass_at_k(5, 1, 0).is_err());
    }

    #[test]
    fn large_n_stays_in_unit_interval() {
        let p = pass_at_k(100_000, 3, 10).unwrap();
        // 1 - (1 - 10/n)^3 to first order ≈ 3e-4.
        assert!(p > 2.9e-4 && p < 3.1e-4, "{p}");
    }

    #[test]
    fn top_k_reading() {
        assert!(top_k_hit(Some(0), 1));
        assert!(!top_k_hit(Some(1), 1));
        assert!(top_k_hit(Some(4), 5));
        assert!(!top_k_hit(Some(5), 5));
        assert!(!top_k_hit(None, 5));
        assert!(!top_k_hit(Some(0), 0));
    }
}
