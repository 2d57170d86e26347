//! The numbers behind nmb's scores: pass@k, bootstrap confidence intervals, paired tests and agreement
//! statistics.
//!
//! This crate owns the arithmetic only. It takes plain slices (per-item scores, correctness flags, ratings
//! matrices) and returns plain values or serialisable [`Estimate`]s. It does no I/O, knows nothing about suites,
//! stores or judges, and never decides *what* is correct — `nmb-score` does that and calls in here.
//!
//! What is here:
//! - [`pass_at_k`] (the unbiased estimator, reading (a)) and [`top_k_hit`] (reading (b));
//! - a seeded bootstrap: [`bootstrap`] for any statistic, [`bootstrap_mean`], [`paired_bootstrap`], each over
//!   plain units or clusters ([`Design`]), with percentile intervals;
//! - [`mcnemar_exact`] / [`mcnemar_paired`] for independent pairs, [`mcnemar_clustered`] (Durkalski 2003) for
//!   pairs in clusters, and the [`wilson`] score interval;
//! - agreement: [`pearson`], [`spearman`], [`cohen_kappa`], [`quadratic_kappa`], [`krippendorff_alpha`],
//!   [`icc_2_1`], and [`agreement`] which adds a bootstrap CI over items to any of them;
//! - [`balanced_f1`] of met / not-met decisions (HealthBench's meta-evaluation of a grader, criterion by
//!   criterion), with [`balanced_f1_estimate`] for its bootstrap interval;
//! - [`corrected_pass_rate`] (Rogan–Gladen with a bootstrap CI);
//! - [`model_rank_correlation`] and [`rank_correlation_over_items`] for the breadth-vs-depth view;
//! - prompt sensitivity: [`kendall_w`] (with the ties correction), [`rank_flips`], and [`variant_spread`] and
//!   [`concordance`], which resample cases jointly across prompt variants and models;
//! - classification with abstentions ([`classification`]: accuracy, balanced accuracy, macro/weighted F1,
//!   per-class precision/recall/F1) and stated-confidence calibration ([`ece`], [`adaptive_ece`], [`brier`],
//!   [`auroc`], [`reliability`]), each also with bootstrap intervals, for NeuroVLM-Bench's structured answers;
//! - [`isotonic`] regression (scikit-learn's), to calibrate judge scores to clinicians' verdicts, and
//!   [`bradley_terry`] strengths from pairwise preferences, with Davidson's ties, [`bradley_terry_styled`] with
//!   covariates (style control), [`preference_ranking`] with bootstrap intervals over tasks (limits at the
//!   (B + 1)·α/2-th order statistics, which leave α/2 in each tail on average at any number of resamples), and
//!   a judge's [`position_bias`] from pairs asked in both orders;
//! - a judge's stability and leanings: [`retest_icc`] and [`retest_kappa`] ([`fleiss_kappa`]) between its
//!   repeats, the [`length_slope`] of its score at a fixed clinician grade, and the [`group_gap`] of its residual
//!   against clinicians (its own family's answers against the others'), and the [`paired_shift`] of its scores
//!   of the same answers when it is shown something more (a model's thinking);
//! - the conclusions readers draw from a report: [`adjust_family`] (Holm and Benjamini–Hochberg adjusted
//!   p-values for a family of comparisons), [`PairedVariance`] and [`power_summary`] (the power of a paired
//!   comparison, the smallest difference a suite detects and the cases a target difference needs),
//!   [`worst_at_k`] and [`worst_at_k_curve`] (HealthBench's expected worst score of k samples), and
//!   [`subgroups`] (estimates per subgroup and the gap between the best and the worst, resampled within
//!   subgroups) with [`Bands`] and [`GroupBy`] for subgroups such as `age:0-40,40-65,65-`.
//!
//! Determinism: every random draw comes from a ChaCha8 stream keyed by the explicit `u64` seed in
//! [`BootstrapConfig`]; the seed, level and resample count are written into every [`Estimate`]. Nothing iterates
//! a hash map and nothing runs on threads, so the same inputs and seed give bit-identical outputs.

mod agreement;
mod balanced_f1;
mod bootstrap;
mod calibrated;
mod classify;
mod concordance;
mod confidence;
mod isotonic;
mod multiplicity;
mod paired;
mod passk;
mod power;
mod preference;
mod prevalence;
mod proportion;
mod rank;
mod rng;
mod stability;
mod subgroup;
mod worst;

pub use agreement::{
    agreement, average_ranks, cohen_kappa, icc_2_1, krippendorff_alpha, pearson, quadratic_kappa,
    spearman, AlphaLevel, Measure,
};
pub use balanced_f1::{balanced_f1, balanced_f1_estimate};
pub use bootstrap::{
    bootstrap, bootstrap_many, bootstrap_mean, paired_bootstrap, BootstrapConfig, Design,
    PairedComparison, DEFAULT_RESAMPLES, DEFAULT_SEED,
};
pub use calibrated::{
    calibrated_rate, learning_curve, logistic, reviews_for_width, CalibratedRate, CurvePoint,
    Logistic,
};
pub use classify::{
    classification, classification_estimates, ClassEstimates, ClassMetrics, Classification,
    ClassificationEstimates,
};
pub use concordance::{
    concordance, kendall_w, rank_flips, variant_spread, CaseScores, Concordance, RankFlip,
    VariantSpread,
};
pub use confidence::{
    adaptive_ece, auroc, brier, calibration_estimates, ece, reliability, Bin, CalibrationEstimates,
};
pub use isotonic::{isotonic, Isotonic};
pub use multiplicity::{adjust, adjust_family, AdjustedP, Correction};
pub use paired::{bradley_terry, bradley_terry_styled, Preference, Strengths, StyledStrengths};
pub use passk::{pass_at_k, top_k_hit};
pub use power::{power_summary, PairedTest, PairedVariance, PowerSummary, VarianceComponents};
pub use preference::{position_bias, preference_ranking, PositionBias, PreferenceRanking};
pub use prevalence::{corrected_pass_rate, rogan_gladen, CorrectedRate};
pub use proportion::{
    mcnemar_clustered, mcnemar_exact, mcnemar_paired, normal_quantile, wilson, McNemar, McNemarTest,
};
pub use rank::{
    model_rank_correlation, rank_correlation_over_items, PermutationP, RankCorrelation,
};
pub use stability::{
    fleiss_kappa, group_gap, length_slope, paired_shift, retest_icc, retest_kappa, PairedShift,
};
pub use subgroup::{
    subgroups, Band, Bands, GroupBy, SubgroupEstimate, SubgroupGap, Subgroups, MIN_SUBGROUP_CASES,
};
pub use worst::{worst_at_k, worst_at_k_curve, Average, TaskSamples, WorstAtK};

use serde::{Deserialize, Serialize};

/// Why a statistic could not be computed. `what` names the function and argument concerned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("{what}: needs at least {min}, got {got}")]
    TooFew {
        what: &'static str,
        min: usize,
        got: usize,
    },
    #[error("{what}: lengths differ ({left} vs {right})")]
    LengthMismatch {
        what: &'static str,
        left: usize,
        right: usize,
    },
    #[error("{what}: value at index {index} is {value}, expected a finite number")]
    NonFinite {
        what: &'static str,
        index: usize,
        value: f64,
    },
    #[error("{what}: expected {expected}")]
    Invalid {
        what: &'static str,
        expected: String,
    },
    #[error("{what} is undefined: {why}")]
    Undefined {
        what: &'static str,
        why: &'static str,
    },
}

pub type Result<T> = std::result::Result<T, StatsError>;

/// How an interval was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CiMethod {
    /// Percentile interval over bootstrap resamples of independent units (items, models).
    PercentileBootstrap,
    /// Percentile interval over bootstrap resamples of whole clusters (for example all tasks of one case).
    ClusterPercentileBootstrap,
    /// The same resamples, with the limits at the (B + 1)·α/2-th and (B + 1)·(1 − α/2)-th sorted values rather
    /// than NumPy's rule, so each tail holds α/2 at any number of resamples B (the preference ranking's).
    ClusterPercentileOrderStatistics,
    /// Percentile interval of a bootstrap that resamples several samples independently, each with its own size
    /// kept fixed (Rogan–Gladen: the run, the clinician-positive and the clinician-negative calibration items).
    StratifiedPercentileBootstrap,
    /// Wilson score interval for a binomial proportion (no resampling).
    Wilson,
    /// McGraw & Wong's (1996) interval for ICC(A,1) from F quantiles with Satterthwaite's degrees of freedom,
    /// the interval pingouin reports for ICC2 (no resampling).
    FDistribution,
    /// Hesterberg's (2015) expanded percentile interval over resamples of whole clusters within strata (the
    /// cases of each subgroup): the percentile interval taken at the wider level whose normal quantile is
    /// sqrt(n / (n − 1))·t₍ₙ₋₁₎ of the nominal one (n clusters; Welch's degrees of freedom for a difference of
    /// two strata). It corrects the plain percentile interval's undercoverage with few clusters (about 90%
    /// instead of 95% at 12 cases). The recorded level is the nominal one.
    ExpandedPercentileBootstrap,
}

/// A point estimate with its interval and everything needed to reproduce it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub value: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    /// Coverage of the interval, e.g. 0.95.
    pub level: f64,
    pub method: CiMethod,
    /// Seed of the resampling stream; `None` for closed-form intervals.
    pub seed: Option<u64>,
    /// Resamples drawn; `None` for closed-form intervals.
    pub resamples: Option<usize>,
    /// Resamples on which the statistic was undefined (for example zero variance); they are left out of the
    /// interval, so a large share here means the interval describes an unusual subset of resamples.
    #[serde(default)]
    pub undefined_resamples: usize,
    /// Units behind the point estimate (items, models, samples).
    pub n: usize,
}

pub(crate) fn check_finite(what: &'static str, values: &[f64]) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(StatsError::NonFinite {
            what,
            index,
            value: values[index],
        }),
        None => Ok(()),
    }
}

pub(crate) fn check_same_len(what: &'static str, left: usize, right: usize) -> Result<()> {
    if left == right {
        Ok(())
    } else {
        Err(StatsError::LengthMismatch { what, left, right })
    }
}
