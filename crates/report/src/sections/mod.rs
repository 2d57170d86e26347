//! The report's sections as data: each module builds what its section shows (tables, estimates, chart
//! points) once from the runs and their score reports, including the cross-run statistics (the two-axis
//! comparison, sweep spread, thinking bins, paired tests). The renderers only lay them out.

pub(crate) mod analysis;
pub(crate) mod calibration;
pub(crate) mod criteria;
pub(crate) mod errored_by_family;
pub(crate) mod few_shot;
pub(crate) mod label_set;
pub(crate) mod neurovlm;
pub(crate) mod paired;
pub(crate) mod power;
pub(crate) mod preference;
pub(crate) mod probes;
pub mod reliance;
pub(crate) mod revision;
pub(crate) mod stability;
pub(crate) mod subgroups;
pub(crate) mod summary;
pub mod sweep;
pub mod thinking;
pub mod worst;

use crate::input::RunData;
use crate::table::Table;
use analysis::Analysis;

/// A section that is one table under a heading: the renderers lay out every such section the same way (HTML
/// and Markdown: the heading and the table; JSON: `sections.ID`, the section's rows).
pub(crate) struct TableSection {
    /// The HTML anchor and the key in `report.json`'s `sections`.
    pub id: &'static str,
    pub title: &'static str,
    pub table: Table,
    /// The rows as data, for `report.json`.
    pub json: serde_json::Value,
}

/// What builds a table section: `None` when it has nothing to show.
type Builder = fn(&[RunData], &Analysis) -> Option<TableSection>;

/// The table sections under the headline, in the order shown. A new table section is a module here and one
/// entry in this list.
const UNDER_HEADLINE: &[Builder] = &[
    errored_by_family::section,
    subgroups::section,
    probes::section,
    few_shot::section,
];

/// The table sections shown under the headline, each built once; one that has nothing to show is left out.
pub(crate) fn under_headline(runs: &[RunData], analysis: &Analysis) -> Vec<TableSection> {
    UNDER_HEADLINE
        .iter()
        .filter_map(|b| b(runs, analysis))
        .collect()
}
