//! The two-axis view: does ranking models by breadth accuracy predict their ranking by depth pass@1?
//!
//! With a handful of models, any interval on a rank correlation is wide and rough, and two complementary ones
//! are offered. [`model_rank_correlation`] resamples *models* — it asks how the correlation would vary over other
//! sets of models, treats the evaluated models as a random sample of models (they rarely are), and with fewer
//! than about eight models many resamples repeat one model so often that the rank correlation is undefined or
//! sits at ±1; those facts show in the interval's width and in `undefined_resamples`. It comes with an exact
//! permutation p-value, which is valid at any n. [`rank_correlation_over_items`] keeps the models fixed and
//! resamples the *benchmark items* — it asks how much the correlation owes to which items happened to be in the
//! suites, which is the measurement noise a reader of one report cares about.

use serde::{Deserialize, Serialize};

use crate::agreement::{average_ranks, spearman};
use crate::bootstrap::{bootstrap, defined, mean_at, resample_loop, BootstrapConfig, Design};
use crate::rng::Draw;
use crate::{check_finite, check_same_len, CiMethod, Estimate, Result, StatsError};

/// Largest number of models whose permutations are all enumerated (9! = 362,880).
const EXACT_PERMUTATION_LIMIT: usize = 9;

/// Two-sided permutation p-value for "no association": the share of pairings of the two score lists whose
/// |rho| is at least the observed |rho|.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermutationP {
    pub p_value: f64,
    /// True when every permutation was enumerated; false when `permutations` random ones were drawn from the
    /// estimate's seed (then `p = (1 + hits) / (1 + permutations)`).
    pub exact: bool,
    pub permutations: u64,
}

/// Spearman's rho between models' breadth and depth scores, with a bootstrap interval over models and a
/// permutation p-value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RankCorrelation {
    /// `n` is the number of models.
    pub rho: Estimate,
    pub permutation: PermutationP,
}

/// `breadth[m]` and `depth[m]` are model `m`'s breadth accuracy and depth pass@1. Needs at least three models
/// (with two, rho is ±1 by construction) and errors when either list is constant.
pub fn model_rank_correlation(
    breadth: &[f64],
    depth: &[f64],
    cfg: &BootstrapConfig,
) -> Result<RankCorrelation> {
    const WHAT: &str = "model_rank_correlation";
    check_same_len(WHAT, breadth.len(), depth.len())?;
    if breadth.len() < 3 {
        return Err(StatsError::TooFew {
            what: WHAT,
            min: 3,
            got: breadth.len(),
        });
    }
    spearman(breadth, depth)?;
    let (mut bx, mut by) = (Vec::new(), Vec::new());
    let rho = bootstrap(&Design::units(breadth.len()), cfg, |idx| {
        bx.clear();
        bx.extend(idx.iter().map(|&i| breadth[i]));
        by.clear();
        by.extend(idx.iter().map(|&i| depth[i]));
        spearman(&bx, &by).ok()
    })?;
    Ok(RankCorrelation {
        rho,
        permutation: permutation_p(breadth, depth, cfg),
    })
}

/// Spearman's rho between the models' mean breadth and mean depth scores, with a bootstrap interval that
/// resamples benchmark items and keeps the models fixed.
///
/// `breadth[m][i]` is model `m`'s score on breadth item `i` (for example 0/1 correctness) and `depth[m][t]` its
/// score on depth task `t` (for example per-task pass@1); every model must be scored on the same items in the
/// same order, so one draw of item indices applies to all models. `breadth_design` and `depth_design` say how
/// to draw items: use clusters for depth tasks that share a case. `n` in the result is the number of models.
pub fn rank_correlation_over_items(
    breadth: &[Vec<f64>],
    depth: &[Vec<f64>],
    breadth_design: &Design,
    depth_design: &Design,
    cfg: &BootstrapConfig,
) -> Result<Estimate> {
    const WHAT: &str = "rank_correlation_over_items";
    check_same_len(WHAT, breadth.len(), depth.len())?;
    if breadth.len() < 3 {
        return Err(StatsError::TooFew {
            what: WHAT,
            min: 3,
            got: breadth.len(),
        });
    }
    check_rows(
        "rank_correlation_over_items breadth",
        breadth,
        breadth_design,
    )?;
    check_rows("rank_correlation_over_items depth", depth, depth_design)?;
    let all_b: Vec<usize> = (0..breadth[0].len()).collect();
    let all_d: Vec<usize> = (0..depth[0].len()).collect();
    let means = |rows: &[Vec<f64>], idx: &[usize]| {
        rows.iter().map(|r| mean_at(r, idx)).collect::<Vec<f64>>()
    };
    let value = spearman(&means(breadth, &all_b), &means(depth, &all_d))?;
    let mut draw = Draw::new(cfg.seed);
    let (mut ib, mut id) = (Vec::new(), Vec::new());
    let run = resample_loop(cfg, value, |_| {
        breadth_design.resample(&mut draw, &mut ib);
        depth_design.resample(&mut draw, &mut id);
        defined(spearman(&means(breadth, &ib), &means(depth, &id)).ok())
    })?;
    Ok(run.estimate(CiMethod::PercentileBootstrap, cfg, breadth.len()))
}

fn check_rows(what: &'static str, rows: &[Vec<f64>], design: &Design) -> Result<()> {
    for (m, row) in rows.iter().enumerate() {
        check_same_len(what, row.len(), rows[0].len()).map_err(|_| StatsError::Invalid {
            what,
            expected: format!(
                "the same items for every model; model 0 has {}, model {m} has {}",
                rows[0].len(),
                row.len()
            ),
        })?;
        check_finite(what, row)?;
    }
    design.check(rows[0].len())
}

/// Exact over all n! pairings up to [`EXACT_PERMUTATION_LIMIT`] models, seeded Monte Carlo beyond. Pairings
/// only permute the centred ranks of one side, so rho is a dot product over a fixed denominator.
fn permutation_p(x: &[f64], y: &[f64], cfg: &BootstrapConfig) -> PermutationP {
    let centred = |v: &[f64]| {
        let ranks = average_ranks(v);
        let m = ranks.iter().sum::<f64>() / ranks.len() as f64;
        ranks.into_iter().map(|r| r - m).collect::<Vec<f64>>()
    };
    let (cx, mut cy) = (centred(x), centred(y));
    let dot = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(p, q)| p * q).sum::<f64>();
    let observed = dot(&cx, &cy).abs();
    // Sums of half-integer products: anything within 1e-9 of the observed value is the same value.
    let at_least = |s: f64| s.abs() >= observed - 1e-9;
    if x.len() <= EXACT_PERMUTATION_LIMIT {
        let (mut hits, mut total) = (0u64, 0u64);
        for_each_permutation(&mut cy, |perm| {
            total += 1;
            hits += u64::from(at_least(dot(&cx, perm)));
        });
        return PermutationP {
            p_value: hits as f64 / total as f64,
            exact: true,
            permutations: total,
        };
    }
    let mut draw = Draw::new(cfg.seed);
    let mut hits = 0u64;
    for _ in 0..cfg.resamples {
        for i in (1..cy.len()).rev() {
            cy.swap(i, draw.below(i + 1));
        }
        hits += u64::from(at_least(dot(&cx, &cy)));
    }
    let draws = cfg.resamples as u64;
    PermutationP {
        p_value: (1 + hits) as f64 / (1 + draws) as f64,
        exact: false,
        permutations: draws,
    }
}

/// Heap's algorithm (iterative): calls `visit` once for each of the n! orderings of `items`.
fn for_each_permutation<F: FnMut(&[f64])>(items: &mut [f64], mut visit: F) {
    let n = items.len();
    let mut counters = vec![0usize; n];
    visit(items);
    let mut i = 1;
    while i < n {
        if counters[i] < i {
            let j = if i % 2 == 0 { 0 } else { counters[i] };
            items.swap(j, i);
            visit(items);
            counters[i] += 1;
            i = 1;
        } else {
            counters[i] = 0;
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> BootstrapConfig {
        BootstrapConfig {
            resamples: 2_000,
            level: 0.95,
            seed: 17,
        }
    }

    #[test]
    fn heap_visits_every_ordering_once() {
        let mut items = [1.0, 2.0, 3.0, 4.0];
        let mut seen = Vec::new();
        for_each_permutation(&mut items, |p| seen.push(p.to_vec()));
        assert_eq!(seen.len(), 24);
        seen.sort_by(|a, b| a.partial_cmp(b).unwrap());
        seen.dedup();
        assert_eq!(seen.len(), 24);
    }

    #[test]
    fn perfect_ranking_of_five_models() {
        let breadth = [0.5, 0.6, 0.7, 0.8, 0.9];
        let depth = [0.1, 0.15, 0.2, 0.3, 0.4];
        let r = model_rank_correlation(&breadth, &depth, &cfg()).unwrap();
        assert!((r.rho.value - 1.0).abs() < 1e-15);
        // Only the identity and the full reversal reach |rho| = 1: p = 2/120.
        assert!(r.permutation.exact);
        assert_eq!(r.permutation.permutations, 120);
        assert!((r.permutation.p_value - 2.0 / 120.0).abs() < 1e-15);
        assert_eq!(r.rho.n, 5);
        assert_eq!(r, model_rank_correlation(&breadth, &depth, &cfg()).unwrap());
    }

    #[test]
    fn three_models_give_a_wide_honest_interval() {
        let r = model_rank_correlation(&[0.6, 0.7, 0.8], &[0.2, 0.1, 0.3], &cfg()).unwrap();
        assert!((r.rho.value - 0.5).abs() < 1e-15);
        assert!(
            r.rho.undefined_resamples > 0,
            "resamples of one repeated model must be counted: {r:?}"
        );
        assert!(r.rho.ci_high - r.rho.ci_low >= 1.0, "{r:?}");
        // Every ordering of three reaches |rho| >= 0.5.
        assert_eq!(r.permutation.p_value, 1.0);
    }

    #[test]
    fn many_models_use_seeded_monte_carlo() {
        let breadth: Vec<f64> = (0..12).map(|i| i as f64).collect();
        let depth: Vec<f64> = (0..12).map(|i| ((i * 7) % 12) as f64).collect();
        let r = model_rank_correlation(&breadth, &depth, &cfg()).unwrap();
        assert!(!r.permutation.exact);
        assert_eq!(r, model_rank_correlation(&breadth, &depth, &cfg()).unwrap());
        assert!(r.permutation.p_value > 0.0 && r.permutation.p_value <= 1.0);
    }

    #[test]
    fn too_few_or_constant_models_are_errors() {
        assert!(model_rank_correlation(&[0.1, 0.2], &[0.3, 0.4], &cfg()).is_err());
        assert!(model_rank_correlation(&[0.1, 0.2, 0.3], &[0.3, 0.3, 0.3], &cfg()).is_err());
    }

    #[test]
    fn item_resampling_interval() {
        // Four models; breadth accuracy rises with the model index, depth mostly does too.
        let mut draw = Draw::new(5);
        let mut scores = |p: f64, n: usize| -> Vec<f64> {
            (0..n)
                .map(|_| {
                    if (draw.below(1000) as f64) < p * 1000.0 {
                        1.0
                    } else {
                        0.0
                    }
                })
                .collect()
        };
        let breadth: Vec<Vec<f64>> = [0.4, 0.55, 0.7, 0.85]
            .iter()
            .map(|&p| scores(p, 300))
            .collect();
        let depth: Vec<Vec<f64>> = [0.1, 0.2, 0.3, 0.4]
            .iter()
            .map(|&p| scores(p, 200))
            .collect();
        let cases: Vec<usize> = (0..200).map(|t| t / 2).collect();
        let e = rank_correlation_over_items(
            &breadth,
            &depth,
            &Design::units(300),
            &Design::clusters_by(&cases),
            &cfg(),
        )
        .unwrap();
        assert_eq!(e.n, 4);
        assert!(e.ci_low <= e.value && e.value <= e.ci_high, "{e:?}");
        let ragged = vec![vec![1.0; 3], vec![1.0; 2], vec![0.0; 3]];
        assert!(rank_correlation_over_items(
            &ragged,
            &depth[..3],
            &Design::units(3),
            &Design::units(200),
            &cfg()
        )
        .is_err());
    }
}
