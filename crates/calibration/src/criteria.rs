//! Meta-evaluation criterion by criterion, as HealthBench does it: each rater's met / not-met marks against the
//! clinicians' marks on the same criteria of the same answers, as balanced F1 (the mean of F1 on "met" and F1
//! on "not met"), every (rater, clinician) pair counted.
//!
//! Criterion marks are ratings on dimensions named `criterion:<id>` (one per criterion, or `criterion:<task>/<id>`)
//! with score 1 (met) or 0 (not met). Each judge is compared with every clinician; each clinician with the
//! other clinicians, which places the judges among them. Intervals resample answers (items), keeping all
//! criteria of an answer together.

use std::collections::{BTreeMap, BTreeSet};

use nmb_stats::{balanced_f1_estimate, BootstrapConfig, Design, Estimate};
use serde::Serialize;

use crate::ratings::Ratings;

/// The dimension prefix that marks criterion ratings.
pub const CRITERION_PREFIX: &str = "criterion:";

/// Every rater's balanced F1 against the clinicians over all criteria, and each judge's per criterion.
#[derive(Debug, Clone, Serialize)]
pub struct CriteriaAgreement {
    /// Distinct criteria (dimensions) and answers (items) marked.
    pub criteria: usize,
    pub items: usize,
    /// Each judge against every clinician.
    pub judges: Vec<RaterF1>,
    /// Each clinician against the other clinicians.
    pub clinicians: Vec<RaterF1>,
    /// Each judge against every clinician, criterion by criterion.
    pub by_criterion: Vec<CriterionF1>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RaterF1 {
    pub rater: String,
    /// (rater, clinician) pairs of marks compared.
    pub pairs: usize,
    pub balanced_f1: Option<Estimate>,
    /// Why the value is missing (one class never marked, too few pairs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undefined: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct CriterionF1 {
    pub criterion: String,
    pub judge: String,
    pub pairs: usize,
    pub balanced_f1: Option<Estimate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undefined: Option<String>,
}

/// (item, criterion) -> annotator -> met.
type Marks = BTreeMap<(String, String), BTreeMap<String, bool>>;

/// The criterion dimensions of `ratings`, in file order.
pub fn criterion_dimensions(ratings: &Ratings) -> Vec<String> {
    ratings
        .dimensions()
        .into_iter()
        .filter(|d| d.starts_with(CRITERION_PREFIX))
        .collect()
}

/// Criterion agreement, or `None` when the ratings have no criterion marks. An error names the first mark that
/// is not 0 or 1.
pub fn criteria_agreement(
    ratings: &Ratings,
    judges: &[String],
    clinicians: &[String],
    cfg: &BootstrapConfig,
) -> Result<Option<CriteriaAgreement>, String> {
    let mut marks: Marks = BTreeMap::new();
    for r in ratings
        .rows
        .iter()
        .filter(|r| r.dimension.starts_with(CRITERION_PREFIX))
    {
        let met = if r.score == 1.0 {
            true
        } else if r.score == 0.0 {
            false
        } else {
            return Err(format!(
                "{}: {} marked {} on item {} as {}; criterion marks are 1 (met) or 0 (not met)",
                ratings.source.display(),
                r.annotator,
                r.dimension,
                r.item,
                r.score
            ));
        };
        marks
            .entry((r.item.clone(), r.dimension.clone()))
            .or_default()
            .insert(r.annotator.clone(), met);
    }
    if marks.is_empty() {
        return Ok(None);
    }
    let criteria: BTreeSet<&str> = marks.keys().map(|(_, c)| c.as_str()).collect();
    let items: BTreeSet<&str> = marks.keys().map(|(i, _)| i.as_str()).collect();
    // Only raters who marked criteria take part (a judge of the rubric scores alone has nothing to compare).
    let marked: BTreeSet<&str> = marks
        .values()
        .flat_map(|by| by.keys().map(String::as_str))
        .collect();
    let judges: Vec<String> = judges
        .iter()
        .filter(|j| marked.contains(j.as_str()))
        .cloned()
        .collect();
    let clinicians: Vec<String> = clinicians
        .iter()
        .filter(|c| marked.contains(c.as_str()))
        .cloned()
        .collect();
    let (judges, clinicians) = (&judges, &clinicians);
    let everyone = |_: &str| true;
    let judges_f1 = judges
        .iter()
        .map(|j| rater_f1(&marks, j, clinicians, &everyone, cfg))
        .collect();
    let clinicians_f1 = clinicians
        .iter()
        .map(|c| rater_f1(&marks, c, clinicians, &everyone, cfg))
        .collect();
    let mut by_criterion = Vec::new();
    for criterion in &criteria {
        for j in judges {
            let r = rater_f1(&marks, j, clinicians, &|c| c == *criterion, cfg);
            by_criterion.push(CriterionF1 {
                criterion: criterion.to_string(),
                judge: r.rater,
                pairs: r.pairs,
                balanced_f1: r.balanced_f1,
                undefined: r.undefined,
            });
        }
    }
    Ok(Some(CriteriaAgreement {
        criteria: criteria.len(),
        items: items.len(),
        judges: judges_f1,
        clinicians: clinicians_f1,
        by_criterion,
    }))
}

impl CriteriaAgreement {
    /// One sentence per judge a clinician can read: its balanced F1 against the clinicians, beside the median
    /// clinician's against the others.
    pub fn sentences(&self) -> Vec<String> {
        let mut clinician_values: Vec<f64> = self
            .clinicians
            .iter()
            .filter_map(|r| r.balanced_f1.as_ref().map(|e| e.value))
            .collect();
        clinician_values.sort_by(f64::total_cmp);
        let median = (!clinician_values.is_empty()).then(|| {
            let n = clinician_values.len();
            (clinician_values[(n - 1) / 2] + clinician_values[n / 2]) / 2.0
        });
        let mut out = Vec::new();
        for r in &self.judges {
            let line = match (&r.balanced_f1, median) {
                (Some(e), Some(m)) => format!(
                    "judge {} marks criteria like the clinicians with balanced F1 {} over {} pairs; the median \
                     clinician against the others: {m:.2}",
                    r.rater,
                    crate::estimate::interval(e),
                    r.pairs
                ),
                (Some(e), None) => format!(
                    "judge {} marks criteria like the clinicians with balanced F1 {} over {} pairs",
                    r.rater,
                    crate::estimate::interval(e),
                    r.pairs
                ),
                (None, _) => format!(
                    "judge {}: balanced F1 undefined ({})",
                    r.rater,
                    r.undefined.as_deref().unwrap_or("")
                ),
            };
            out.push(line);
        }
        out
    }
}

/// `rater`'s marks against every other clinician's, on the criteria `keep` selects.
fn rater_f1(
    marks: &Marks,
    rater: &str,
    clinicians: &[String],
    keep: &dyn Fn(&str) -> bool,
    cfg: &BootstrapConfig,
) -> RaterF1 {
    let mut units: Vec<Vec<(bool, bool)>> = Vec::new();
    let mut unit_items: Vec<&str> = Vec::new();
    for ((item, criterion), by) in marks {
        let Some(&mine) = by.get(rater).filter(|_| keep(criterion)) else {
            continue;
        };
        let pairs: Vec<(bool, bool)> = clinicians
            .iter()
            .filter(|c| c.as_str() != rater)
            .filter_map(|c| by.get(c).map(|&theirs| (mine, theirs)))
            .collect();
        if !pairs.is_empty() {
            units.push(pairs);
            unit_items.push(item);
        }
    }
    let pairs = units.iter().map(Vec::len).sum();
    let (balanced_f1, undefined) = if units.is_empty() {
        (
            None,
            Some("no criterion marked by both this rater and a clinician".to_string()),
        )
    } else {
        match balanced_f1_estimate(&units, &Design::clusters_by(&unit_items), cfg) {
            Ok(e) => (Some(e), None),
            Err(e) => (None, Some(e.to_string())),
        }
    };
    RaterF1 {
        rater: rater.to_string(),
        pairs,
        balanced_f1,
        undefined,
    }
}
