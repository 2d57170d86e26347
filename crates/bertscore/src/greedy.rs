//! Greedy cosine matching and weighting, as bert-score's `greedy_cos_idf` computes it.

use std::collections::{HashMap, HashSet};

use multiversion::multiversion;

use crate::ops::dot;
use crate::Prf;

/// One embedded sentence: unit-length token vectors (row-major `len x dim`) and a weight per
/// token (idf or 1, with 0 for the start/end special tokens).
pub struct Embedded<'a> {
    pub vectors: &'a [f32],
    pub weights: &'a [f64],
}

impl Embedded<'_> {
    fn len(&self) -> usize {
        self.weights.len()
    }
}

/// Whether the pair's counterpart was shorter than the longest one in its bert-score matching
/// batch. bert-score multiplies padded similarities by 0 instead of excluding them, so a token
/// whose best real cosine is negative then scores 0 instead.
#[derive(Debug, Clone, Copy, Default)]
pub struct PadFloor {
    /// The reference was padded: each candidate token's maximum is at least 0.
    pub precision: bool,
    /// The candidate was padded: each reference token's maximum is at least 0.
    pub recall: bool,
}

/// P, R and F for one candidate/reference pair.
///
/// Follows bert-score 0.3.12 exactly: weighted means of best cosines; F = 2PR/(P+R) with NaN
/// replaced by 0; a side with no tokens besides the two special tokens sets P and R to 0.
#[multiversion(targets("x86_64+avx2+fma"))]
pub fn score_pair(cand: &Embedded, reference: &Embedded, dim: usize, floor: PadFloor) -> Prf {
    let (n, m) = (cand.len(), reference.len());
    let mut best_p = vec![f32::NEG_INFINITY; n];
    let mut best_r = vec![f32::NEG_INFINITY; m];
    for (i, c) in cand.vectors.chunks_exact(dim).enumerate() {
        for (j, r) in reference.vectors.chunks_exact(dim).enumerate() {
            let s = dot(c, r);
            best_p[i] = best_p[i].max(s);
            best_r[j] = best_r[j].max(s);
        }
    }
    if floor.precision {
        best_p.iter_mut().for_each(|v| *v = v.max(0.0));
    }
    if floor.recall {
        best_r.iter_mut().for_each(|v| *v = v.max(0.0));
    }
    let p = weighted_mean(&best_p, cand.weights);
    let r = weighted_mean(&best_r, reference.weights);
    let f = 2.0 * p * r / (p + r);
    let (p, r) = if n <= 2 || m <= 2 { (0.0, 0.0) } else { (p, r) };
    Prf {
        p,
        r,
        f: if f.is_nan() { 0.0 } else { f },
    }
}

/// `sum(w*x) / sum(w)`; NaN when all weights are 0, as in bert-score.
fn weighted_mean(values: &[f32], weights: &[f64]) -> f64 {
    let total: f64 = weights.iter().sum();
    let sum: f64 = values
        .iter()
        .zip(weights)
        .map(|(v, w)| f64::from(*v) * w)
        .sum();
    sum / total
}

/// Scales each token vector to unit L2 norm, in place.
pub fn normalise(vectors: &mut [f32], dim: usize) {
    for row in vectors.chunks_exact_mut(dim) {
        let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
        row.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Token weights for one side: `get_idf_dict`'s idf (counted over the references) or 1, with
/// the start/end special tokens at 0.
pub enum Weighting {
    Uniform,
    Idf {
        doc_freq: HashMap<u32, usize>,
        docs: usize,
    },
}

impl Weighting {
    /// `log((M+1)/(df+1))` over the unique token ids of each reference, as `get_idf_dict`.
    pub fn idf<'a>(refs: impl ExactSizeIterator<Item = &'a [u32]>) -> Self {
        let docs = refs.len();
        let mut doc_freq = HashMap::new();
        for ids in refs {
            for id in ids.iter().copied().collect::<HashSet<u32>>() {
                *doc_freq.entry(id).or_insert(0) += 1;
            }
        }
        Self::Idf { doc_freq, docs }
    }

    pub fn weight(&self, id: u32, special: bool) -> f64 {
        if special {
            return 0.0;
        }
        match self {
            Self::Uniform => 1.0,
            Self::Idf { doc_freq, docs } => {
                let df = doc_freq.get(&id).copied().unwrap_or(0);
                ((*docs as f64 + 1.0) / (df as f64 + 1.0)).ln()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(rows: &[[f32; 2]]) -> Vec<f32> {
        let mut v: Vec<f32> = rows.iter().flatten().copied().collect();
        normalise(&mut v, 2);
        v
    }

    #[test]
    fn hand_computed_pair() {
        // cand: [CLS] a b [SEP]; ref: [CLS] a [SEP]; specials weigh 0.
        let c = unit(&[[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]);
        let r = unit(&[[1.0, 0.0], [1.0, 0.0], [1.0, 1.0]]);
        let cw = [0.0, 1.0, 1.0, 0.0];
        let rw = [0.0, 1.0, 0.0];
        let prf = score_pair(
            &Embedded {
                vectors: &c,
                weights: &cw,
            },
            &Embedded {
                vectors: &r,
                weights: &rw,
            },
            2,
            PadFloor::default(),
        );
        // a matches a (1.0); b's best is the [SEP] of the reference at cos 45deg.
        let half = std::f64::consts::FRAC_1_SQRT_2;
        assert!((prf.p - (1.0 + half) / 2.0).abs() < 1e-6, "{prf:?}");
        assert!((prf.r - 1.0).abs() < 1e-6, "{prf:?}");
        let f = 2.0 * prf.p * prf.r / (prf.p + prf.r);
        assert!((prf.f - f).abs() < 1e-12);
    }

    #[test]
    fn negative_best_cosine_floors_only_when_padded() {
        // Every reference token, specials included (they take part in the max), points away from c[1].
        let c = unit(&[[1.0, 0.0], [-1.0, 0.1], [1.0, 0.0]]);
        let r = unit(&[[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]);
        let w = [0.0, 1.0, 0.0];
        let (ce, re) = (
            Embedded {
                vectors: &c,
                weights: &w,
            },
            Embedded {
                vectors: &r,
                weights: &w,
            },
        );
        let plain = score_pair(&ce, &re, 2, PadFloor::default());
        assert!(plain.p < 0.0, "{plain:?}");
        let floored = score_pair(
            &ce,
            &re,
            2,
            PadFloor {
                precision: true,
                recall: false,
            },
        );
        assert!(floored.p.abs() < 1e-7, "{floored:?}");
    }

    #[test]
    fn empty_side_gives_zeros() {
        let c = unit(&[[1.0, 0.0], [0.0, 1.0]]);
        let r = unit(&[[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]);
        let cw = [0.0, 0.0];
        let rw = [0.0, 1.0, 0.0];
        let prf = score_pair(
            &Embedded {
                vectors: &c,
                weights: &cw,
            },
            &Embedded {
                vectors: &r,
                weights: &rw,
            },
            2,
            PadFloor::default(),
        );
        assert_eq!((prf.p, prf.r, prf.f), (0.0, 0.0, 0.0));
    }

    #[test]
    fn idf_counts_each_reference_once() {
        let refs: Vec<Vec<u32>> = vec![vec![101, 7, 7, 102], vec![101, 8, 102]];
        let w = Weighting::idf(refs.iter().map(|r| r.as_slice()));
        let expect_7 = (3.0f64 / 2.0).ln();
        assert!((w.weight(7, false) - expect_7).abs() < 1e-12);
        assert!((w.weight(9, false) - 3.0f64.ln()).abs() < 1e-12);
        assert_eq!(w.weight(101, true), 0.0);
        assert!(w.weight(102, false).abs() < 1e-12, "in every reference");
    }
}
