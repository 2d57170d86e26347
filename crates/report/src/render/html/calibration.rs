//! The calibration section in HTML (built in [`crate::sections::calibration`]).

use nmb_review::tables as review_tables;

use super::escape;
use crate::input::RunData;
use crate::sections::calibration::{tables, thinking};

/// The section in HTML (empty when no review covers any run and no run was scored both with and without the
/// thinking shown).
pub(super) fn html(runs: &[RunData]) -> String {
    let mut h = review_tables::section_html(&tables(runs));
    let probes = thinking(runs);
    if !probes.is_empty() && h.is_empty() {
        h.push_str("<h2 id=\"review\">Judges against clinicians</h2>");
    }
    for (name, sentences) in probes {
        h.push_str(&format!(
            "<h4>How the judges lean when shown the thinking · {}</h4><ul>",
            escape(&name)
        ));
        for s in sentences {
            h.push_str(&format!("<li>{}</li>", escape(s)));
        }
        h.push_str("</ul>");
    }
    h
}
