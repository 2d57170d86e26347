//! Adjusted p-values for the rows of a paired-comparison table: every p-value of one test in the table is one
//! family, adjusted with Holm's step-down and Benjamini–Hochberg's step-up (`nmb_stats::adjust_family`).
//!
//! A table shows one row per group of each comparison (overall, each level and family, each structured
//! field); a report with several pairs of runs (models, or models under each prompt of a sweep) shows every
//! pair's rows in one table, and a reader scans all of them for "significant" results at once. So the family
//! is the whole table: the bootstrap p-values of every row form one family, the McNemar p-values another (two
//! tests of the same differences, each adjusted on its own). [`rows`] enumerates the rows, so the table and the
//! adjustment cannot disagree on what was counted.

use std::collections::BTreeSet;

use nmb_stats::{adjust_family, AdjustedP, McNemar, PairedComparison, StatsError};
use serde::{Deserialize, Serialize};

use crate::error::ResultsError;
use crate::report::Comparison;

/// The level at which adjusted p-values are marked significant unless one is given.
pub const DEFAULT_ALPHA: f64 = 0.05;

/// One row of a paired-comparison table: a group of one comparison.
#[derive(Debug, Clone)]
pub struct Row<'a> {
    pub comparison: &'a Comparison,
    /// `overall`, `L1 · differential`, `field · modality`.
    pub group: String,
    pub items: usize,
    pub paired: Option<&'a PairedComparison>,
    pub mcnemar: Option<&'a McNemar>,
}

/// The rows of `comparisons` in table order: per comparison its groups (overall, then each level and
/// family), then its structured fields.
pub fn rows(comparisons: &[Comparison]) -> Vec<Row<'_>> {
    let mut out = Vec::new();
    for c in comparisons {
        for g in &c.groups {
            let group = match (g.level, g.family) {
                (Some(l), Some(f)) => format!("{} · {}", l.as_str(), f.as_str()),
                _ => "overall".into(),
            };
            out.push(Row {
                comparison: c,
                group,
                items: g.items,
                paired: g.paired.as_ref(),
                mcnemar: g.mcnemar.as_ref(),
            });
        }
        for f in &c.structured_fields {
            out.push(Row {
                comparison: c,
                group: format!("field · {}", f.field),
                items: f.items,
                paired: Some(&f.paired),
                mcnemar: Some(&f.mcnemar),
            });
        }
    }
    out
}

/// One p-value with its adjusted values and whether each is at or below α.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Adjusted {
    #[serde(flatten)]
    pub p: AdjustedP,
    pub holm_significant: bool,
    pub bh_significant: bool,
}

/// A row's adjusted p-values; `None` where the row has no p-value of that test (a group without paired items).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AdjustedRow {
    pub run_a: String,
    pub run_b: String,
    pub group: String,
    pub bootstrap: Option<Adjusted>,
    pub mcnemar: Option<Adjusted>,
}

/// The adjusted p-values of a paired-comparison table, one per row in [`rows`] order, with what was counted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Multiplicity {
    /// The level at which an adjusted p-value is marked significant.
    pub alpha: f64,
    /// Pairs of runs in the table.
    pub comparisons: usize,
    /// P-values in each family: the bootstrap's and McNemar's.
    pub bootstrap_family: usize,
    pub mcnemar_family: usize,
    /// What was counted, in words, for under the table.
    pub family: String,
    pub rows: Vec<AdjustedRow>,
}

/// Holm and Benjamini–Hochberg adjusted p-values of every row of `comparisons`' table, each test's p-values
/// one family. `alpha` must be in (0, 1).
pub fn adjust(comparisons: &[Comparison], alpha: f64) -> Result<Multiplicity, ResultsError> {
    if !(alpha > 0.0 && alpha < 1.0) {
        return Err(ResultsError::Stats(StatsError::Invalid {
            what: "significance level alpha",
            expected: format!("a level between 0 and 1 (exclusive), got {alpha}"),
        }));
    }
    let rows = rows(comparisons);
    let boot: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.paired.map(|p| p.p_value))
        .collect();
    let mcn: Vec<f64> = rows
        .iter()
        .filter_map(|r| r.mcnemar.map(|m| m.p_value))
        .collect();
    let mark = |p: AdjustedP| Adjusted {
        p,
        holm_significant: p.holm <= alpha,
        bh_significant: p.bh <= alpha,
    };
    let mut boot_adj = adjust_family(&boot)?.into_iter().map(mark);
    let mut mcn_adj = adjust_family(&mcn)?.into_iter().map(mark);
    let adjusted: Vec<AdjustedRow> = rows
        .iter()
        .map(|r| AdjustedRow {
            run_a: r.comparison.run_a.clone(),
            run_b: r.comparison.run_b.clone(),
            group: r.group.clone(),
            bootstrap: r.paired.and_then(|_| boot_adj.next()),
            mcnemar: r.mcnemar.and_then(|_| mcn_adj.next()),
        })
        .collect();
    let groups: BTreeSet<&str> = rows.iter().map(|r| r.group.as_str()).collect();
    let family = statement(comparisons.len(), &groups, boot.len(), mcn.len(), alpha);
    Ok(Multiplicity {
        alpha,
        comparisons: comparisons.len(),
        bootstrap_family: boot.len(),
        mcnemar_family: mcn.len(),
        family,
        rows: adjusted,
    })
}

/// The family in words: how many p-values, from how many pairs of runs and which groups.
fn statement(
    pairs: usize,
    groups: &BTreeSet<&str>,
    boot: usize,
    mcnemar: usize,
    alpha: f64,
) -> String {
    let count = |prefix: &str| groups.iter().filter(|g| g.starts_with(prefix)).count();
    let (fields, overall) = (count("field · "), count("overall"));
    let levels = groups.len() - fields - overall;
    let mut parts = Vec::new();
    if overall > 0 {
        parts.push("overall".to_string());
    }
    if levels > 0 {
        parts.push(format!("{levels} level · family group(s)"));
    }
    if fields > 0 {
        parts.push(format!("{fields} structured field(s)"));
    }
    format!(
        "Multiple comparisons: each p-value column is one family, adjusted over every row of this table: {boot} \
         bootstrap p-values and {mcnemar} McNemar p-values, from {pairs} pair(s) of runs × ({}). Holm keeps the \
         chance of any false positive in the family at or below α; Benjamini–Hochberg (BH) keeps the expected \
         share of false positives among the marked ones at or below α. * marks an adjusted p-value at or below \
         α = {alpha}. A raw p-value is for one comparison looked at alone.",
        parts.join(", ")
    )
}
