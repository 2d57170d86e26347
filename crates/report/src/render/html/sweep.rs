//! Prompt sensitivity (the tables of [`crate::sections::sweep::tables`]).

use std::fmt::Write;

use super::escape;
use crate::sections::analysis::Analysis;

pub(super) fn sweep(h: &mut String, analysis: &Analysis) {
    if analysis.sweep.is_empty() {
        return;
    }
    let (groups, ranking) = crate::sections::sweep::tables(&analysis.sweep);
    h.push_str("<h2 id=\"prompt-sensitivity\">Prompt sensitivity</h2>");
    for (heading, t) in &groups {
        let _ = write!(h, "<h3>{}</h3>", escape(heading));
        h.push_str(&t.html());
    }
    if let Some(t) = ranking {
        h.push_str("<h3>Ranking across variants</h3>");
        h.push_str(&t.html());
    }
}
