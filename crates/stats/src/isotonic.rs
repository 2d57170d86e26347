//! Isotonic regression: the non-decreasing map from one score to another that fits best in weighted least
//! squares (pool adjacent violators). It calibrates a judge's scores to clinicians' verdicts from the items both
//! graded, and is then applied to the items only the judge saw.
//!
//! It computes what scikit-learn's `IsotonicRegression(out_of_bounds="clip")` computes: equal `x` are merged
//! first (their `y` averaged with their weights summed), the fitted values are the pooled weighted means, and a
//! prediction interpolates linearly between the fitted points, clipped to the first and last.

use crate::StatsError;

/// A fitted isotonic map.
#[derive(Debug, Clone, PartialEq)]
pub struct Isotonic {
    /// The distinct `x` seen, increasing.
    pub xs: Vec<f64>,
    /// The fitted value at each of `xs`, non-decreasing.
    pub fitted: Vec<f64>,
}

/// Fits the non-decreasing map of `y` on `x`, each point with its weight (all 1 without `weights`).
pub fn isotonic(x: &[f64], y: &[f64], weights: Option<&[f64]>) -> Result<Isotonic, StatsError> {
    check(x, y, weights)?;
    let w = |i: usize| weights.map_or(1.0, |w| w[i]);
    let mut order: Vec<usize> = (0..x.len()).collect();
    order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    // Equal x merged: (x, weighted mean of y, summed weight).
    let mut points: Vec<(f64, f64, f64)> = Vec::new();
    for i in order {
        match points.last_mut() {
            Some((px, sum, weight)) if *px == x[i] => {
                *sum += y[i] * w(i);
                *weight += w(i);
            }
            _ => points.push((x[i], y[i] * w(i), w(i))),
        }
    }
    let xs = points.iter().map(|p| p.0).collect();
    let fitted = pool_adjacent_violators(points.iter().map(|p| (p.1 / p.2, p.2)).collect());
    Ok(Isotonic { xs, fitted })
}

/// The weighted pool-adjacent-violators algorithm: blocks are merged while a block's mean is below its
/// predecessor's, each merged block taking the weighted mean of what it holds.
fn pool_adjacent_violators(values: Vec<(f64, f64)>) -> Vec<f64> {
    // Each block: (weighted sum, weight, how many points).
    let mut blocks: Vec<(f64, f64, usize)> = Vec::with_capacity(values.len());
    for (value, weight) in values {
        blocks.push((value * weight, weight, 1));
        while blocks.len() > 1 {
            let (s2, w2, n2) = blocks[blocks.len() - 1];
            let (s1, w1, n1) = blocks[blocks.len() - 2];
            if s1 / w1 <= s2 / w2 {
                break;
            }
            blocks.truncate(blocks.len() - 2);
            blocks.push((s1 + s2, w1 + w2, n1 + n2));
        }
    }
    (blocks.iter())
        .flat_map(|&(sum, weight, n)| std::iter::repeat_n(sum / weight, n))
        .collect()
}

impl Isotonic {
    /// The map at `x`: linear between the fitted points, the first or last fitted value beyond them.
    pub fn predict(&self, x: f64) -> f64 {
        let (xs, ys) = (&self.xs, &self.fitted);
        let last = xs.len() - 1;
        if x <= xs[0] {
            return ys[0];
        }
        if x >= xs[last] {
            return ys[last];
        }
        let i = xs.partition_point(|&v| v <= x);
        let (x0, x1, y0, y1) = (xs[i - 1], xs[i], ys[i - 1], ys[i]);
        y0 + (x - x0) * (y1 - y0) / (x1 - x0)
    }
}

fn check(x: &[f64], y: &[f64], weights: Option<&[f64]>) -> Result<(), StatsError> {
    const WHAT: &str = "isotonic";
    if x.len() != y.len() {
        return Err(StatsError::LengthMismatch {
            what: WHAT,
            left: x.len(),
            right: y.len(),
        });
    }
    if x.is_empty() {
        return Err(StatsError::TooFew {
            what: WHAT,
            min: 1,
            got: 0,
        });
    }
    if let Some(w) = weights {
        if w.len() != x.len() {
            return Err(StatsError::LengthMismatch {
                what: "isotonic weights",
                left: x.len(),
                right: w.len(),
            });
        }
        if let Some(i) = w.iter().position(|v| !(v.is_finite() && *v > 0.0)) {
            return Err(StatsError::Invalid {
                what: "isotonic weights",
                expected: format!("finite weights > 0, got {} at index {i}", w[i]),
            });
        }
    }
    for (index, &value) in x.iter().chain(y).enumerate() {
        if !value.is_finite() {
            let what = if index < x.len() {
                "isotonic x"
            } else {
                "isotonic y"
            };
            let index = index % x.len();
            return Err(StatsError::NonFinite { what, index, value });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn violators_are_pooled_and_equal_x_merged() {
        let fit = isotonic(&[1.0, 2.0, 3.0, 3.0, 4.0], &[1.0, 3.0, 2.0, 0.0, 5.0], None).unwrap();
        assert_eq!(fit.xs, [1.0, 2.0, 3.0, 4.0]);
        // x = 3 holds (2 + 0) / 2 = 1 with weight 2; pooled with x = 2: (3 + 2) / 3.
        let pooled = 5.0 / 3.0;
        assert_eq!(fit.fitted, [1.0, pooled, pooled, 5.0]);
        assert_eq!(fit.predict(0.0), 1.0);
        assert_eq!(fit.predict(9.0), 5.0);
        assert!((fit.predict(3.5) - (pooled + 5.0) / 2.0).abs() < 1e-15);
        assert!(isotonic(&[1.0], &[f64::NAN], None).is_err());
        assert!(isotonic(&[1.0, 2.0], &[1.0], None).is_err());
    }
}
