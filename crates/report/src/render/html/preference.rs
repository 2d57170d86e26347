//! The preference section in HTML (built in [`crate::sections::preference`]).

use super::escape;
use crate::input::RunData;
use crate::sections::preference::{judges_table, ranking_table, rankings, title, win_rate_table};

/// The section in HTML, empty without a pairwise review; every text escaped.
pub(super) fn html(runs: &[RunData]) -> String {
    let all = rankings(runs);
    if all.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2 id=\"preference\">Clinicians' pairwise preference</h2>");
    for p in all {
        h.push_str(&format!("<h3>{}</h3>", escape(&title(p))));
        h.push_str(&format!(
            "<p class=\"sentence\">{}</p>",
            escape(&p.sentence)
        ));
        for n in &p.notes {
            h.push_str(&format!("<p class=\"muted\">{}</p>", escape(n)));
        }
        h.push_str(&ranking_table(p).html());
        h.push_str(&win_rate_table(p).html());
        if let Some(t) = judges_table(p) {
            for j in &p.judges {
                h.push_str(&format!(
                    "<p class=\"sentence\">{}</p>",
                    escape(&j.sentence)
                ));
            }
            h.push_str(&t.html());
        }
    }
    h
}
