//! Numbers a report derives across runs: cost, the breadth-versus-depth view, paired comparisons between
//! models evaluated on the same items, prompt sensitivity ([`crate::sections::sweep`]) and thinking
//! ([`crate::sections::thinking`]). Per-run numbers come from the score report as they are.

use std::collections::{BTreeMap, BTreeSet};

use nmb_results::Comparison;
use nmb_stats::{
    bootstrap_mean, model_rank_correlation, BootstrapConfig, Design, Estimate, RankCorrelation,
};
use serde::Serialize;

use crate::input::RunData;
use crate::sections::sweep::task_pass;

pub use nmb_results::cost::{CostSplit, Price, Prices, Tokens};

/// The price `prices` gives `run`'s model.
pub fn price_for(prices: &Prices, run: &RunData) -> Option<Price> {
    prices.for_model(&run.manifest.model)
}

/// Tokens and what they cost for one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CostEstimate {
    pub run_id: String,
    pub tokens_in: u64,
    pub tokens_out: u64,
    /// Every count the APIs reported, reasoning and cache included.
    pub tokens: Tokens,
    pub price: Option<Price>,
    /// `None` without a price for the model.
    pub dollars: Option<f64>,
    /// Where the dollars went (input, cached input, cache writes, output, reasoning).
    pub split: Option<CostSplit>,
    /// Correct answers in the run's score report, and the dollars per correct answer (`None` without a price,
    /// a score report or any correct answer).
    pub correct: Option<u64>,
    pub per_correct: Option<f64>,
}

/// One model on the two axes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelPoint {
    /// The model spec without base URL: runs of one model are paired by it.
    pub model: String,
    /// The name shown (the display name of the model's first run).
    pub name: String,
    /// Accuracy over the scored samples of the model's breadth runs, bootstrap CI clustered by case.
    pub breadth: Estimate,
    /// Mean per-task pass@1 (reading (a), the unbiased estimator) over the model's depth tasks, bootstrap CI
    /// clustered by case.
    pub depth: Estimate,
    pub breadth_runs: Vec<String>,
    pub depth_runs: Vec<String>,
}

/// Breadth accuracy against depth pass@1, per model, and whether the ranks agree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TwoAxis {
    pub points: Vec<ModelPoint>,
    /// Spearman's rho over models, with a bootstrap CI over models and a permutation p-value; `None` with
    /// fewer than three models or a constant axis (see `correlation_note`).
    pub correlation: Option<RankCorrelation>,
    pub correlation_note: Option<String>,
}

/// Everything derived across the runs of one report.
#[derive(Debug, Clone, Serialize)]
pub struct Analysis {
    /// One per run, in the order given.
    pub costs: Vec<CostEstimate>,
    /// Present when at least one model has both a breadth and a depth run.
    pub two_axis: Option<TwoAxis>,
    /// Pairs of runs of different models on the same suite (and, on a suite with a prompt sweep, under the same
    /// template).
    pub paired: Vec<Comparison>,
    /// Holm and Benjamini–Hochberg adjusted p-values of every row of the paired table, with the family counted.
    pub multiplicity: nmb_results::multiplicity::Multiplicity,
    /// Per paired comparison (in `paired`'s order, where it could be computed): the smallest difference in
    /// accuracy the suite detects with 80% power at α, from the two runs' paired answers.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub power: Vec<nmb_results::power::PowerAnalysis>,
    /// Worst-at-k beside pass@k for k = 1..n, per run and score, where tasks have several samples.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub worst_at_k: Vec<crate::sections::worst::RunWorst>,
    /// Image reliance and robustness: per model, its perturbed runs against its unperturbed one (empty
    /// without `--perturb` runs).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reliance: Vec<crate::sections::reliance::ModelReliance>,
    /// Prompt sweeps: per suite and score, models under several template variants (empty without a sweep).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sweep: Vec<crate::sections::sweep::SweepGroup>,
    /// The runs whose answers thought: how much, and accuracy by how much (empty without thinking).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<crate::sections::thinking::RunThinking>,
    pub bootstrap: BootstrapConfig,
    pub notes: Vec<String>,
}

/// Everything derived across `runs`; `alpha` is the level at which adjusted p-values are marked and power
/// figures are computed.
pub fn build(runs: &[RunData], prices: &Prices, cfg: &BootstrapConfig, alpha: f64) -> Analysis {
    let mut notes = Vec::new();
    for r in runs.iter().filter(|r| r.scores.is_none()) {
        notes.push(format!(
            "run {} has not been scored: it shows answers, errors and usage only (run `nmb score {}`)",
            r.info.run_id, r.info.run_id
        ));
    }
    let sweep = crate::sections::sweep::build(runs, cfg, &mut notes);
    let swept: BTreeSet<&str> = sweep.iter().map(|g| g.suite_hash.as_str()).collect();
    let paired = paired(runs, &swept, cfg, &mut notes);
    let multiplicity = crate::sections::power::multiplicity(&paired, alpha, &mut notes);
    Analysis {
        costs: runs.iter().map(|r| cost(r, prices)).collect(),
        two_axis: two_axis(runs, cfg),
        power: crate::sections::power::build(runs, &paired, alpha),
        worst_at_k: crate::sections::worst::build(runs, cfg),
        reliance: crate::sections::reliance::build(runs, cfg),
        paired,
        multiplicity,
        sweep,
        thinking: crate::sections::thinking::build(runs, cfg),
        bootstrap: *cfg,
        notes,
    }
}

fn cost(run: &RunData, prices: &Prices) -> CostEstimate {
    let price = price_for(prices, run);
    let s = &run.summary;
    let tokens = Tokens::from(s);
    let split = price.map(|p| p.run_cost(s));
    let dollars = split.map(|c| c.total);
    let correct = run.scores.as_ref().map(|r| r.overall.correct as u64);
    CostEstimate {
        run_id: run.info.run_id.clone(),
        tokens_in: s.tokens_in,
        tokens_out: s.tokens_out,
        tokens,
        price,
        dollars,
        split,
        correct,
        per_correct: dollars
            .zip(correct.filter(|c| *c > 0))
            .map(|(d, c)| d / c as f64),
    }
}

#[derive(Default)]
struct Axis {
    values: Vec<f64>,
    clusters: Vec<(String, String)>,
    runs: BTreeSet<String>,
}

impl Axis {
    fn estimate(&self, cfg: &BootstrapConfig) -> Option<Estimate> {
        if self.values.is_empty() {
            return None;
        }
        bootstrap_mean(&self.values, &Design::clusters_by(&self.clusters), cfg).ok()
    }
}

fn two_axis(runs: &[RunData], cfg: &BootstrapConfig) -> Option<TwoAxis> {
    let mut by_model: BTreeMap<String, (Axis, Axis)> = BTreeMap::new();
    let mut names: BTreeMap<String, String> = BTreeMap::new();
    for run in runs {
        let Some(scores) = &run.scores else { continue };
        names
            .entry(run.model().to_string())
            .or_insert_with(|| run.name());
        let (breadth, depth) = by_model.entry(run.model().to_string()).or_default();
        for s in scores
            .samples
            .iter()
            .filter(|s| s.family.is_breadth() && s.status.is_scored())
        {
            breadth
                .values
                .push(f64::from(u8::from(s.correct == Some(true))));
            breadth
                .clusters
                .push((run.info.run_id.clone(), s.case_id.clone()));
            breadth.runs.insert(run.info.run_id.clone());
        }
        for t in scores.tasks.iter().filter(|t| t.family.is_depth()) {
            if let Some(p) = task_pass(t, 1) {
                depth.values.push(p);
                depth
                    .clusters
                    .push((run.info.run_id.clone(), t.case_id.clone()));
                depth.runs.insert(run.info.run_id.clone());
            }
        }
    }
    let points: Vec<ModelPoint> = by_model
        .into_iter()
        .filter_map(|(model, (b, d))| {
            Some(ModelPoint {
                breadth: b.estimate(cfg)?,
                depth: d.estimate(cfg)?,
                breadth_runs: b.runs.into_iter().collect(),
                depth_runs: d.runs.into_iter().collect(),
                name: names.get(&model).cloned().unwrap_or_else(|| model.clone()),
                model,
            })
        })
        .collect();
    if points.is_empty() {
        return None;
    }
    let breadth: Vec<f64> = points.iter().map(|p| p.breadth.value).collect();
    let depth: Vec<f64> = points.iter().map(|p| p.depth.value).collect();
    let (correlation, correlation_note) = match model_rank_correlation(&breadth, &depth, cfg) {
        Ok(c) => (Some(c), None),
        Err(e) => (
            None,
            Some(format!(
                "no rank correlation: {e} (models with both a breadth and a depth run: {})",
                points.len()
            )),
        ),
    };
    Some(TwoAxis {
        points,
        correlation,
        correlation_note,
    })
}

/// Every pair of runs of different models on the same suite, compared with nmb-results' paired comparison (the
/// same numbers as `nmb compare`). On a suite with a prompt sweep (`swept`, by suite hash) only runs under the
/// same template are paired: comparing model A under one prompt with model B under another mixes two effects.
fn paired(
    runs: &[RunData],
    swept: &BTreeSet<&str>,
    cfg: &BootstrapConfig,
    notes: &mut Vec<String>,
) -> Vec<Comparison> {
    let mut out = Vec::new();
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            let (Some(sa), Some(sb)) = (&a.scores, &b.scores) else {
                continue;
            };
            if a.model() == b.model() || a.manifest.suite_hash != b.manifest.suite_hash {
                continue;
            }
            if swept.contains(a.manifest.suite_hash.as_str())
                && a.manifest.template_hash != b.manifest.template_hash
            {
                continue;
            }
            match nmb_results::compare::compare(sa, sb, cfg) {
                Ok(c) if c.groups.first().is_some_and(|g| g.items > 0) => out.push(c),
                Ok(_) => notes.push(format!(
                    "runs {} and {} share a suite but no item scored in both; no paired comparison",
                    a.info.run_id, b.info.run_id
                )),
                Err(e) => notes.push(format!(
                    "runs {} and {}: no paired comparison: {e}",
                    a.info.run_id, b.info.run_id
                )),
            }
        }
    }
    out
}
