//! Paired comparisons between models run on the same suite (the table of [`crate::paired_table`]).

use std::fmt::Write;

use crate::paired_table;
use crate::sections::analysis::Analysis;

pub(super) fn paired(h: &mut String, analysis: &Analysis) {
    if analysis.paired.is_empty() {
        return;
    }
    h.push_str("<h2 id=\"paired\">Paired comparisons</h2>");
    h.push_str(&paired_table(&analysis.paired, &analysis.multiplicity).html());
    for s in crate::sections::power::sentences(&analysis.power) {
        let _ = write!(h, "<p class=\"power\">{}</p>", super::escape(&s));
    }
}
