//! Agreement between annotators on each rubric dimension, and judges measured against clinicians.

use std::collections::{BTreeMap, BTreeSet};

use nmb_stats::{
    agreement, calibrated_rate, corrected_pass_rate, learning_curve, BootstrapConfig,
    CalibratedRate, CorrectedRate, CurvePoint, Estimate, Measure,
};
use serde::Serialize;

use crate::ratings::Ratings;
use crate::Standing;

/// The measures that compare groups of raters (any number of columns).
const GROUP_MEASURES: [Measure; 3] = [
    Measure::AlphaInterval,
    Measure::AlphaNominal,
    Measure::Icc21,
];

/// Which annotators are judges, which dimensions to analyse, and how.
#[derive(Debug, Clone)]
pub struct AgreementOptions {
    /// Annotators that are LLM judges. Every other annotator is a clinician.
    pub judges: Vec<String>,
    /// Annotators whose name starts with this are judges too (nmb writes judges as `judge:MODEL`).
    pub judge_prefix: String,
    /// Dimensions to analyse; empty means all, in file order.
    pub dimensions: Vec<String>,
    /// A score at or above this passes; enables the Rogan–Gladen corrected pass rate of each judge.
    pub pass_threshold: Option<f64>,
    /// Per-dimension thresholds, over `pass_threshold` (a verdict scale differs from a rubric's).
    pub pass_thresholds: BTreeMap<String, f64>,
    pub bootstrap: BootstrapConfig,
}

impl Default for AgreementOptions {
    fn default() -> Self {
        AgreementOptions {
            judges: Vec::new(),
            judge_prefix: "judge:".into(),
            dimensions: Vec::new(),
            pass_threshold: None,
            pass_thresholds: BTreeMap::new(),
            bootstrap: BootstrapConfig::default(),
        }
    }
}

impl AgreementOptions {
    pub fn is_judge(&self, annotator: &str) -> bool {
        self.judges.iter().any(|j| j == annotator)
            || (!self.judge_prefix.is_empty() && annotator.starts_with(&self.judge_prefix))
    }

    /// The pass threshold of a dimension, if any.
    pub fn threshold_for(&self, dimension: &str) -> Option<f64> {
        self.pass_thresholds
            .get(dimension)
            .copied()
            .or(self.pass_threshold)
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct AgreementReport {
    pub source: String,
    pub bootstrap: BootstrapConfig,
    pub judges: Vec<String>,
    pub clinicians: Vec<String>,
    pub dimensions: Vec<DimensionReport>,
    /// Criterion marks (`criterion:*` dimensions), judge against clinicians as balanced F1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub criteria: Option<crate::criteria::CriteriaAgreement>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DimensionReport {
    pub dimension: String,
    /// Distinct items rated on this dimension by anyone.
    pub items: usize,
    pub annotators: Vec<AnnotatorSummary>,
    /// Every pair of annotators with at least two items in common.
    pub pairs: Vec<PairAgreement>,
    /// All raters together, the clinicians alone and the judges alone (each when it has two or more raters).
    pub groups: Vec<GroupAgreement>,
    /// Each judge against the clinicians' consensus (their mean score per item).
    pub judge_vs_clinicians: Vec<JudgeAgreement>,
    /// Each judge's pass rate corrected for its sensitivity and specificity against the clinicians.
    pub corrected_pass_rates: Vec<CorrectedPassRate>,
    /// Each judge's scores mapped to the clinicians' verdicts on the reviewed items, and the pass rate that map
    /// gives the run (with a pass threshold).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub calibrated_rates: Vec<CalibratedPassRate>,
    /// Where each judge stands among the clinicians (with two clinicians or more).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub standings: Vec<Standing>,
    /// Why a judge's standing could not be computed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub standings_undefined: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct AnnotatorSummary {
    pub name: String,
    pub role: Role,
    pub items: usize,
    pub mean_score: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Judge,
    Clinician,
}

#[derive(Debug, Clone, Serialize)]
pub struct PairAgreement {
    pub a: String,
    pub b: String,
    pub shared_items: usize,
    pub measures: Vec<MeasureResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct GroupAgreement {
    /// `all`, `clinicians` or `judges`.
    pub group: String,
    pub raters: Vec<String>,
    pub measures: Vec<MeasureResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JudgeAgreement {
    pub judge: String,
    /// Items the judge and at least one clinician rated.
    pub items: usize,
    /// Pearson, Spearman, interval alpha and ICC use the consensus as it is; Cohen's kappa, quadratic kappa and
    /// nominal alpha use it rounded to the nearest whole score.
    pub measures: Vec<MeasureResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CorrectedPassRate {
    pub judge: String,
    pub threshold: f64,
    /// Items the judge rated: its observed pass rate is over these.
    pub run_items: usize,
    /// Items the clinicians rated too: sensitivity and specificity come from these.
    pub calibration_items: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<CorrectedRate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undefined: Option<String>,
}

/// The run's pass rate from one judge's scores calibrated to the clinicians' verdicts on the reviewed items
/// ([`nmb_stats::calibrated_rate`]).
#[derive(Debug, Clone, Serialize)]
pub struct CalibratedPassRate {
    pub judge: String,
    /// A clinicians' consensus at or above it passes.
    pub threshold: f64,
    /// Items the clinicians reviewed and the judge scored.
    pub reviewed: usize,
    /// Items only the judge scored.
    pub unreviewed: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<CalibratedRate>,
    /// The interval with a quarter, half, three quarters and all of the reviews (in item order).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<CurvePoint>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undefined: Option<String>,
    /// What this says, in one sentence a clinician can read.
    pub sentence: String,
}

/// One statistic: an estimate with its interval, or why it is undefined here.
#[derive(Debug, Clone, Serialize)]
pub struct MeasureResult {
    pub measure: Measure,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimate: Option<Estimate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undefined: Option<String>,
}

impl MeasureResult {
    fn compute(measure: Measure, items: &[Vec<Option<f64>>], cfg: &BootstrapConfig) -> Self {
        match agreement(measure, items, cfg) {
            Ok(e) => MeasureResult {
                measure,
                estimate: Some(e),
                undefined: None,
            },
            Err(e) => MeasureResult {
                measure,
                estimate: None,
                undefined: Some(e.to_string()),
            },
        }
    }
}

/// Scores of one dimension: annotator -> item -> score.
type Table = BTreeMap<String, BTreeMap<String, f64>>;

/// Analyses every requested dimension. Statistics that cannot be computed (too few shared items, no variance)
/// are reported as undefined with the reason, never dropped.
pub fn analyse(ratings: &Ratings, options: &AgreementOptions) -> Result<AgreementReport, String> {
    let available = ratings.dimensions();
    // Criterion marks get their own section; they are rubric dimensions only when named.
    let dimensions = if options.dimensions.is_empty() {
        available
            .iter()
            .filter(|d| !d.starts_with(crate::criteria::CRITERION_PREFIX))
            .cloned()
            .collect()
    } else {
        options.dimensions.clone()
    };
    if let Some(unknown) = dimensions.iter().find(|d| !available.contains(d)) {
        return Err(format!(
            "{}: no ratings on dimension {unknown:?}; the file has: {}",
            ratings.source.display(),
            available.join(", ")
        ));
    }
    let annotators: BTreeSet<&str> = ratings.rows.iter().map(|r| r.annotator.as_str()).collect();
    let (judges, clinicians): (Vec<String>, Vec<String>) = annotators
        .iter()
        .map(|a| a.to_string())
        .partition(|a| options.is_judge(a));
    let reports = dimensions
        .iter()
        .map(|d| dimension_report(d, &table(ratings, d), options))
        .collect();
    let criteria =
        crate::criteria::criteria_agreement(ratings, &judges, &clinicians, &options.bootstrap)?;
    Ok(AgreementReport {
        source: ratings.source.display().to_string(),
        bootstrap: options.bootstrap,
        judges,
        clinicians,
        dimensions: reports,
        criteria,
    })
}

fn table(ratings: &Ratings, dimension: &str) -> Table {
    let mut t = Table::new();
    for r in ratings.rows.iter().filter(|r| r.dimension == dimension) {
        t.entry(r.annotator.clone())
            .or_default()
            .insert(r.item.clone(), r.score);
    }
    t
}

fn dimension_report(dimension: &str, t: &Table, options: &AgreementOptions) -> DimensionReport {
    let cfg = &options.bootstrap;
    let names: Vec<&String> = t.keys().collect();
    let (judges, clinicians): (Vec<&String>, Vec<&String>) =
        names.iter().partition(|a| options.is_judge(a));
    let items: BTreeSet<&String> = t.values().flat_map(|m| m.keys()).collect();
    let mut groups = Vec::new();
    for (group, raters) in [
        ("all", &names),
        ("clinicians", &clinicians),
        ("judges", &judges),
    ] {
        if raters.len() >= 2 {
            groups.push(GroupAgreement {
                group: group.into(),
                raters: raters.iter().map(|s| s.to_string()).collect(),
                measures: GROUP_MEASURES
                    .iter()
                    .map(|m| MeasureResult::compute(*m, &matrix(t, raters), cfg))
                    .collect(),
            });
        }
    }
    let consensus = consensus(t, &clinicians);
    let (mut standings, mut standings_undefined) = (Vec::new(), Vec::new());
    for j in judges.iter().filter(|_| clinicians.len() >= 2) {
        match crate::standing(j, t, &clinicians, cfg) {
            Ok(s) => standings.push(s),
            Err(why) => standings_undefined.push(format!("{j}: {why}")),
        }
    }
    DimensionReport {
        dimension: dimension.to_string(),
        items: items.len(),
        annotators: names
            .iter()
            .map(|n| summary(n, &t[*n], options.is_judge(n)))
            .collect(),
        pairs: pairs(t, &names, cfg),
        groups,
        judge_vs_clinicians: judges
            .iter()
            .filter(|_| !clinicians.is_empty())
            .map(|j| judge_agreement(j, &t[*j], &consensus, cfg))
            .collect(),
        corrected_pass_rates: match options.threshold_for(dimension) {
            Some(th) if !clinicians.is_empty() => judges
                .iter()
                .map(|j| corrected(j, &t[*j], &consensus, th, cfg))
                .collect(),
            _ => Vec::new(),
        },
        calibrated_rates: match options.threshold_for(dimension) {
            Some(th) if !clinicians.is_empty() => judges
                .iter()
                .map(|j| calibrated(j, &t[*j], &consensus, th, cfg))
                .collect(),
            _ => Vec::new(),
        },
        standings,
        standings_undefined,
    }
}

fn summary(name: &str, scores: &BTreeMap<String, f64>, judge: bool) -> AnnotatorSummary {
    AnnotatorSummary {
        name: name.to_string(),
        role: if judge { Role::Judge } else { Role::Clinician },
        items: scores.len(),
        mean_score: scores.values().sum::<f64>() / scores.len() as f64,
    }
}

/// Rows = every item any of `raters` rated, columns = `raters`.
fn matrix(t: &Table, raters: &[&String]) -> Vec<Vec<Option<f64>>> {
    let items: BTreeSet<&String> = raters.iter().flat_map(|r| t[*r].keys()).collect();
    items
        .into_iter()
        .map(|item| raters.iter().map(|r| t[*r].get(item).copied()).collect())
        .collect()
}

fn pairs(t: &Table, names: &[&String], cfg: &BootstrapConfig) -> Vec<PairAgreement> {
    let mut out = Vec::new();
    for (i, a) in names.iter().enumerate() {
        for b in &names[i + 1..] {
            let shared = t[*a].keys().filter(|k| t[*b].contains_key(*k)).count();
            if shared < 2 {
                continue;
            }
            let m = matrix(t, &[a, b]);
            out.push(PairAgreement {
                a: a.to_string(),
                b: b.to_string(),
                shared_items: shared,
                measures: Measure::ALL
                    .iter()
                    .map(|measure| MeasureResult::compute(*measure, &m, cfg))
                    .collect(),
            });
        }
    }
    out
}

/// Mean clinician score per item rated by at least one clinician.
fn consensus(t: &Table, clinicians: &[&String]) -> BTreeMap<String, f64> {
    let mut sums: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for c in clinicians {
        for (item, score) in &t[*c] {
            let e = sums.entry(item.clone()).or_default();
            e.0 += score;
            e.1 += 1.0;
        }
    }
    sums.into_iter().map(|(k, (s, n))| (k, s / n)).collect()
}

fn judge_agreement(
    judge: &str,
    scores: &BTreeMap<String, f64>,
    consensus: &BTreeMap<String, f64>,
    cfg: &BootstrapConfig,
) -> JudgeAgreement {
    let shared: Vec<(f64, f64)> = scores
        .iter()
        .filter_map(|(item, s)| Some((*s, *consensus.get(item)?)))
        .collect();
    let exact: Vec<Vec<Option<f64>>> = shared
        .iter()
        .map(|(j, c)| vec![Some(*j), Some(*c)])
        .collect();
    let rounded: Vec<Vec<Option<f64>>> = shared
        .iter()
        .map(|(j, c)| vec![Some(*j), Some(c.round())])
        .collect();
    let measures = Measure::ALL
        .iter()
        .map(|m| {
            let categorical = matches!(
                m,
                Measure::CohenKappa | Measure::QuadraticKappa | Measure::AlphaNominal
            );
            MeasureResult::compute(*m, if categorical { &rounded } else { &exact }, cfg)
        })
        .collect();
    JudgeAgreement {
        judge: judge.to_string(),
        items: shared.len(),
        measures,
    }
}

fn corrected(
    judge: &str,
    scores: &BTreeMap<String, f64>,
    consensus: &BTreeMap<String, f64>,
    threshold: f64,
    cfg: &BootstrapConfig,
) -> CorrectedPassRate {
    let run: Vec<bool> = scores.values().map(|s| *s >= threshold).collect();
    let calibration: Vec<(bool, bool)> = scores
        .iter()
        .filter_map(|(item, s)| Some((*s >= threshold, *consensus.get(item)? >= threshold)))
        .collect();
    let (result, undefined) = match corrected_pass_rate(&run, &calibration, cfg) {
        Ok(r) => (Some(r), None),
        Err(e) => (None, Some(e.to_string())),
    };
    CorrectedPassRate {
        judge: judge.to_string(),
        threshold,
        run_items: run.len(),
        calibration_items: calibration.len(),
        result,
        undefined,
    }
}
/// The run's pass rate through `judge`'s scores mapped to the clinicians' consensus verdicts.
fn calibrated(
    judge: &str,
    scores: &BTreeMap<String, f64>,
    consensus: &BTreeMap<String, f64>,
    threshold: f64,
    cfg: &BootstrapConfig,
) -> CalibratedPassRate {
    let mut reviewed = Vec::new();
    let mut unreviewed = Vec::new();
    for (item, s) in scores {
        match consensus.get(item) {
            Some(c) => reviewed.push((*s, *c >= threshold)),
            None => unreviewed.push(*s),
        }
    }
    let quarter = |q: usize| (reviewed.len() * q).div_ceil(4);
    let steps = [quarter(1), quarter(2), quarter(3), reviewed.len()];
    let outcome = calibrated_rate(&unreviewed, &reviewed, cfg)
        .and_then(|r| Ok((learning_curve(&unreviewed, &reviewed, &steps, cfg)?, r)));
    let (result, curve, undefined) = match outcome {
        Ok((curve, r)) => (Some(r), curve, None),
        Err(e) => (None, Vec::new(), Some(e.to_string())),
    };
    let sentence =
        calibrated_sentence(judge, reviewed.len(), result.as_ref(), undefined.as_deref());
    CalibratedPassRate {
        judge: judge.to_string(),
        threshold,
        reviewed: reviewed.len(),
        unreviewed: unreviewed.len(),
        result,
        curve,
        undefined,
        sentence,
    }
}

fn calibrated_sentence(
    judge: &str,
    reviewed: usize,
    result: Option<&CalibratedRate>,
    undefined: Option<&str>,
) -> String {
    let Some(r) = result else {
        return format!(
            "{judge}'s scores could not be calibrated to the clinicians: {}",
            undefined.unwrap_or("undefined")
        );
    };
    let e = &r.corrected;
    let check = r.logistic.map_or_else(
        || " (a logistic map does not fit these scores)".to_string(),
        |l| format!(" (a logistic map gives {:.1}%)", l * 100.0),
    );
    format!(
        "Mapping {judge}'s scores to the clinicians' verdicts on {reviewed} reviewed items, clinicians would pass \
         {:.1}% [{:.1}, {:.1}] of all {} items{check}.",
        e.value * 100.0,
        e.ci_low * 100.0,
        e.ci_high * 100.0,
        r.reviewed + r.unreviewed,
    )
}
