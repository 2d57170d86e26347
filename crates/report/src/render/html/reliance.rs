//! Image reliance and robustness: each model's sentence, the table of [`crate::sections::reliance::table`] and a
//! chart of every overall difference from the unperturbed run, with its interval.

use std::fmt::Write as _;

use super::escape;
use crate::render::svg::{self, Value};
use crate::sections::analysis::Analysis;
use crate::sections::reliance::{table, taxonomy_table};

pub(super) fn reliance(h: &mut String, analysis: &Analysis) {
    let Some(t) = table(&analysis.reliance) else {
        return;
    };
    h.push_str("<h2 id=\"image-reliance\">Image reliance and robustness</h2>");
    for m in &analysis.reliance {
        let _ = write!(
            h,
            "<p class=\"reliance-verdict\">{}</p>",
            escape(&m.sentence)
        );
    }
    h.push_str(&t.html());
    if let Some(t) = taxonomy_table(&analysis.reliance) {
        h.push_str("<h3 id=\"image-reliance-taxonomy\">Visual errors per perturbation</h3>");
        h.push_str(&t.html());
    }
    for note in (analysis.reliance.iter()).filter_map(|m| m.taxonomy_note.as_ref()) {
        let _ = write!(
            h,
            "<p class=\"reliance-taxonomy-note\">{}</p>",
            escape(note)
        );
    }
    let mut rows = Vec::new();
    let mut colours = Vec::new();
    for (i, m) in analysis.reliance.iter().enumerate() {
        for r in m.rows.iter().filter(|r| r.group == "overall") {
            if let Some(d) = &r.difference {
                rows.push((
                    format!("{} [{}]", m.name, r.perturbation),
                    Value::from_estimate(d),
                ));
                colours.push(i);
            }
        }
    }
    if !rows.is_empty() {
        h.push_str("<div class=\"charts\">");
        h.push_str(&svg::forest(
            "Accuracy under each perturbation minus unperturbed, with 95% CI",
            "Per model and perturbation: accuracy (pass@1) with the perturbed images minus with the true \
             images, paired by answer, with a case-clustered bootstrap interval. Below zero: the perturbation \
             costs accuracy.",
            &rows,
            &colours,
        ));
        h.push_str("</div>");
    }
}
