//! Errored samples by task family: per scored run and family, the share of its samples whose call failed
//! (after retries), with a Wilson interval at the report's level. An errored sample is not an answer, so it is
//! counted here and left out of every accuracy; a wrong answer is not counted here. Shown when some sample
//! errored.

use std::collections::BTreeMap;

use nmb_results::SampleStatus;
use nmb_stats::{wilson, Estimate};
use serde::Serialize;

use super::analysis::Analysis;
use super::TableSection;
use crate::input::RunData;
use crate::table::{percent, Cell, Table};

/// One run's samples of one family.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FamilyErrors {
    pub run_id: String,
    pub model: String,
    pub family: String,
    /// Every sample of the family in the score report (answered, errored, pending or unscorable).
    pub samples: u64,
    pub errored: u64,
    /// `errored / samples` with its Wilson interval.
    pub share: Option<Estimate>,
}

/// The rows: per scored run, one per family, families in name order.
pub(crate) fn rows(runs: &[RunData], level: f64) -> Vec<FamilyErrors> {
    let mut out = Vec::new();
    for r in runs {
        let Some(scores) = &r.scores else { continue };
        let mut counts: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for s in &scores.samples {
            let c = counts.entry(s.family.as_str()).or_default();
            c.0 += 1;
            c.1 += u64::from(s.status == SampleStatus::Errored);
        }
        for (family, (samples, errored)) in counts {
            out.push(FamilyErrors {
                run_id: r.info.run_id.clone(),
                model: r.name(),
                family: family.to_string(),
                samples,
                errored,
                share: wilson(errored, samples, level).ok(),
            });
        }
    }
    out
}

/// The section, or `None` when no sample of a scored run errored.
pub(crate) fn section(runs: &[RunData], analysis: &Analysis) -> Option<TableSection> {
    let rows = rows(runs, analysis.bootstrap.level);
    if rows.iter().all(|r| r.errored == 0) {
        return None;
    }
    let mut table = Table::new(
        "",
        &[
            ("model", false),
            ("family", false),
            ("samples", true),
            ("errored", true),
            ("errored share", true),
        ],
    );
    table.footnote = "Errored samples are calls that failed after retries: not answers, so neither right nor \
                      wrong, and left out of every accuracy. The share is of all the family's samples, with a \
                      Wilson interval."
        .into();
    for r in &rows {
        table.push(vec![
            Cell::new(&r.model),
            Cell::new(&r.family),
            Cell::new(r.samples.to_string()),
            Cell::new(r.errored.to_string()),
            percent(r.share.as_ref()),
        ]);
    }
    Some(TableSection {
        id: "errored-by-family",
        title: "Errored samples by family",
        table,
        json: serde_json::to_value(&rows).unwrap_or_default(),
    })
}
