//! The headline per run, the level x family table and the breadth tables (built in [`crate::sections::summary`]).

use super::escape;
use crate::input::RunData;
use crate::render::svg::{cost_scatter, CostPoint, Value};
use crate::sections::analysis::Analysis;
use crate::sections::summary::{self, ScoredRun};
use crate::sections::TableSection;

pub(super) fn headline(
    h: &mut String,
    runs: &[RunData],
    analysis: &Analysis,
    tables: &[TableSection],
) {
    h.push_str("<h2 id=\"summary\">Headline</h2>");
    h.push_str(&summary::headline(runs, analysis).html());
    if let Some(t) = summary::errors_by_class(runs) {
        h.push_str("<h3>Errored samples by class</h3>");
        h.push_str(&t.html());
    }
    for s in tables {
        h.push_str(&format!(
            "<h3 id=\"{}\">{}</h3>",
            escape(s.id),
            escape(s.title)
        ));
        h.push_str(&s.table.html());
    }
}

/// The cost split and, with two or more priced and scored runs, accuracy against cost.
pub(super) fn cost(h: &mut String, runs: &[RunData], analysis: &Analysis) {
    let Some(t) = summary::cost(runs, analysis) else {
        return;
    };
    h.push_str("<h2 id=\"cost\">Cost</h2>");
    h.push_str(&t.html());
    let points: Vec<CostPoint> = summary::accuracy_against_cost(runs, analysis)
        .into_iter()
        .map(|p| CostPoint {
            label: p.label,
            dollars: p.dollars,
            accuracy: Value::from_estimate(&p.accuracy),
        })
        .collect();
    if points.len() >= 2 {
        h.push_str(&cost_scatter(
            "Accuracy against cost",
            "Each point is a run: its dollars per 100 answered samples (x) against its accuracy (y), with the \
             accuracy's 95% CI.",
            &points,
        ));
    }
}

pub(super) fn level_family(h: &mut String, runs: &[RunData]) {
    let t = summary::level_family(&ScoredRun::of(runs), false);
    // Breadth and structured runs have tables of their own; an empty header table would only puzzle.
    if !t.is_empty() {
        h.push_str("<h2 id=\"levels\">By level and family</h2>");
        h.push_str(&t.html());
    }
}

pub(super) fn breadth_tables(h: &mut String, runs: &[RunData]) {
    let Some(t) = summary::breadth(&ScoredRun::of(runs)) else {
        return;
    };
    h.push_str("<h2 id=\"breadth\">Breadth</h2>");
    h.push_str(&t.html());
    if let Some(t) = crate::sections::label_set::table(runs) {
        h.push_str("<h3 id=\"label-set\">Fixed label sets (accuracy and macro-F1)</h3>");
        h.push_str(&t.html());
    }
}

pub(super) fn criteria(h: &mut String, runs: &[RunData]) {
    let scored = ScoredRun::of(runs);
    if let Some(t) = crate::sections::criteria::table(&scored) {
        h.push_str("<h2 id=\"criteria\">Criterion rubric</h2>");
        h.push_str(&t.html());
    }
    if let Some(t) = crate::sections::criteria::criterion_table(&scored) {
        h.push_str("<h3 id=\"criteria-by-criterion\">By criterion</h3>");
        for s in crate::sections::criteria::sentences(&scored) {
            h.push_str(&format!("<p>{}</p>", escape(&s)));
        }
        h.push_str(&t.html());
    }
}
