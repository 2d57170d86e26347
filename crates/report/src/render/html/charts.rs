//! The SVG charts: pass@k by level, rubric profile, error taxonomy, BERTScore, and breadth against depth.

use std::collections::BTreeSet;
use std::fmt::Write;

use nmb_results::{BertScoreConfig, ErrorCategory, ScoreReport};
use nmb_suite::Level;

use super::escape;
use crate::input::RunData;
use crate::render::svg::{self, Value};
use crate::sections::analysis::TwoAxis;

pub(super) fn charts(h: &mut String, runs: &[RunData]) {
    h.push_str("<h2 id=\"charts\">Charts</h2><div class=\"charts\">");
    let depth: Vec<(&RunData, &ScoreReport)> = runs
        .iter()
        .filter(|r| r.has_depth())
        .filter_map(|r| r.scores.as_ref().map(|s| (r, s)))
        .collect();
    let series: Vec<String> = depth.iter().map(|(r, _)| r.name()).collect();
    let levels: BTreeSet<Level> = depth
        .iter()
        .flat_map(|(_, s)| s.by_level.iter().filter_map(|g| g.level))
        .collect();
    if depth.is_empty() || levels.is_empty() {
        h.push_str("<p class=\"muted\">No scored depth tasks: no pass@k chart.</p>");
    } else {
        for k in [1usize, 5] {
            let groups: Vec<(String, Vec<Option<Value>>)> = levels
                .iter()
                .map(|level| {
                    let bars = depth
                        .iter()
                        .map(|(_, s)| {
                            let g = s.by_level.iter().find(|g| g.level == Some(*level))?;
                            let p = if k == 1 { &g.pass_at_1 } else { &g.pass_at_5 };
                            p.unbiased_estimator.as_ref().map(Value::from_estimate)
                        })
                        .collect();
                    (level_name(*level).to_string(), bars)
                })
                .collect();
            h.push_str(&svg::grouped_bars(
                &format!("pass@{k} by level, reading (a), 95% CI"),
                "Unbiased pass@k estimator over each task's samples, averaged over tasks; whiskers are case-clustered bootstrap intervals.",
                &series,
                &groups,
            ));
        }
    }
    rubric_chart(h, &depth);
    taxonomy_chart(h, &depth);
    bertscore_chart(h, &depth);
    h.push_str("</div>");
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::Direct => "L1 Direct",
        Level::Complex => "L2 Complex",
        Level::MultiTurn => "L3 Multi-turn",
    }
}

fn rubric_chart(h: &mut String, runs: &[(&RunData, &ScoreReport)]) {
    let with: Vec<(&RunData, &nmb_results::RubricAggregate)> = runs
        .iter()
        .filter_map(|(r, s)| s.overall.rubric.as_ref().map(|x| (*r, x)))
        .collect();
    if with.is_empty() {
        h.push_str("<p class=\"muted\">No rubric scores (scoring ran without a judge): no rubric profile.</p>");
        return;
    }
    let dims: Vec<String> = with
        .iter()
        .flat_map(|(_, x)| x.dimensions.iter().map(|d| d.dimension.clone()))
        .fold(Vec::new(), |mut acc, d| {
            if !acc.contains(&d) {
                acc.push(d);
            }
            acc
        });
    let mut rows: Vec<(String, Vec<Option<Value>>)> = dims
        .iter()
        .map(|d| {
            let vals = with
                .iter()
                .map(|(_, x)| {
                    x.dimensions
                        .iter()
                        .find(|m| &m.dimension == d)
                        .and_then(|m| m.mean.as_ref())
                        .map(Value::from_estimate)
                })
                .collect();
            (d.replace('_', " "), vals)
        })
        .collect();
    rows.push((
        "overall".into(),
        with.iter()
            .map(|(_, x)| x.overall.as_ref().map(Value::from_estimate))
            .collect(),
    ));
    let series: Vec<String> = with.iter().map(|(r, _)| r.name()).collect();
    h.push_str(&svg::profile(
        "Rubric profile (0–5), mean with 95% CI",
        "Mean judge score per rubric dimension.",
        &series,
        &rows,
        5.0,
    ));
}

fn taxonomy_chart(h: &mut String, runs: &[(&RunData, &ScoreReport)]) {
    let rows: Vec<(String, Vec<usize>)> = runs
        .iter()
        .filter_map(|(r, s)| {
            let t = s.overall.taxonomy.as_ref()?;
            let counts = ErrorCategory::ALL
                .iter()
                .map(|c| {
                    t.classes
                        .iter()
                        .find(|x| x.category == *c)
                        .map_or(0, |x| x.count)
                })
                .collect();
            Some((format!("{} ({} wrong)", r.name(), t.wrong), counts))
        })
        .collect();
    if rows.is_empty() {
        h.push_str("<p class=\"muted\">No error-taxonomy labels (no judge and no human labels): no taxonomy chart.</p>");
        return;
    }
    let classes: Vec<String> = ErrorCategory::ALL
        .iter()
        .map(|c| c.as_str().replace('_', " "))
        .collect();
    h.push_str(&svg::stacked(
        "Error taxonomy of wrong answers",
        "Share of labelled wrong answers per class; counts on the bars.",
        &classes,
        &rows,
    ));
}

fn bertscore_chart(h: &mut String, runs: &[(&RunData, &ScoreReport)]) {
    let mut rows = Vec::new();
    let mut colours = Vec::new();
    for (i, (r, s)) in runs.iter().enumerate() {
        let groups = std::iter::once(("all", &s.overall)).chain(
            s.by_level
                .iter()
                .map(|g| (g.level.map_or("all", level_name), g)),
        );
        for (name, g) in groups {
            if let Some(f) = g.bertscore.as_ref().and_then(|b| b.f.as_ref()) {
                rows.push((format!("{} · {name}", r.name()), Value::from_estimate(f)));
                colours.push(i);
            }
        }
    }
    if rows.is_empty() {
        h.push_str("<p class=\"muted\">No BERTScore (no encoder configured for scoring): no BERTScore chart.</p>");
        return;
    }
    let kinds: BTreeSet<&str> = runs
        .iter()
        .map(|(_, s)| bertscore_kind(&s.config.bertscore))
        .collect();
    let kind = kinds.into_iter().collect::<Vec<_>>().join(" / ");
    h.push_str(&svg::forest(
        &format!("BERTScore F1 ({kind}), mean with 95% CI"),
        "Mean BERTScore F1 of rationale answers per model and level.",
        &rows,
        &colours,
    ));
}

/// How a run's BERTScore was computed, for chart titles: raw, idf-weighted, rescaled.
fn bertscore_kind(c: &BertScoreConfig) -> &'static str {
    match (c.idf, c.rescaled) {
        (false, false) => "raw",
        (true, false) => "idf",
        (false, true) => "rescaled",
        (true, true) => "idf, rescaled",
    }
}

pub(super) fn two_axis(h: &mut String, t: &TwoAxis) {
    h.push_str("<h2 id=\"two-axis\">Breadth vs depth</h2>");
    let points: Vec<svg::Point> = t
        .points
        .iter()
        .map(|p| svg::Point {
            label: p.name.clone(),
            x: Value::from_estimate(&p.breadth),
            y: Value::from_estimate(&p.depth),
        })
        .collect();
    let note = match &t.correlation {
        Some(c) => format!(
            "Spearman rho = {:.2} [95% CI {:.2} to {:.2}], permutation p = {:.3}, {} models",
            c.rho.value, c.rho.ci_low, c.rho.ci_high, c.permutation.p_value, c.rho.n
        ),
        None => t.correlation_note.clone().unwrap_or_default(),
    };
    h.push_str(&svg::scatter(
        "Breadth accuracy vs depth pass@1",
        "Each point is a model: breadth accuracy (x) against depth pass@1 reading (a) (y), with 95% CI whiskers.",
        "breadth accuracy",
        "depth pass@1 (a)",
        &points,
        &note,
    ));
    let _ = write!(
        h,
        "<p id=\"rank-correlation\"><b>Rank correlation:</b> {}</p>",
        escape(&note)
    );
    if t.correlation.is_some() {
        h.push_str("<p class=\"muted\">The interval resamples models, so with few models it is wide; the permutation p-value is exact for up to nine models.</p>");
    }
    h.push_str(&crate::sections::summary::two_axis(t).html());
}
