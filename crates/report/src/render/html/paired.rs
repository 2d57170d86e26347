//! Paired comparisons between models run on the same suite (the table of [`crate::paired_table`]).

use crate::paired_table;
use crate::sections::analysis::Analysis;

pub(super) fn paired(h: &mut String, analysis: &Analysis) {
    if analysis.paired.is_empty() {
        return;
    }
    h.push_str("<h2 id=\"paired\">Paired comparisons</h2>");
    h.push_str(&paired_table(&analysis.paired).html());
}
