//! The headline per run, the level x family table and the breadth tables.

use std::collections::BTreeSet;
use std::fmt::Write;

use nmb_score::results::GroupAggregate;
use nmb_store::SampleRecord;
use nmb_suite::{Family, Level};

use super::escape;
use super::num;
use super::pct;
use crate::analysis::Analysis;
use crate::input::RunData;

pub(super) fn headline(h: &mut String, runs: &[RunData], analysis: &Analysis) {
    h.push_str(
        "<h2 id=\"summary\">Headline</h2><table class=\"headline\"><tr><th>model</th><th>suite</th><th>status</th>\
         <th>tasks</th><th>samples ok / errored / pending</th><th>pass@1 (a)</th><th>pass@5 (a)</th>\
         <th>pass@1 (b)</th><th>pass@5 (b)</th><th>accuracy</th><th>parse failures</th>\
         <th>tokens in / out</th><th>cost</th><th>latency p50 / p90</th></tr>",
    );
    for (r, cost) in runs.iter().zip(&analysis.costs) {
        let s = &r.summary;
        let overall = r.scores.as_ref().map(|s| &s.overall);
        let tasks = r
            .scores
            .as_ref()
            .map_or_else(|| distinct_tasks(&r.samples), |s| s.tasks.len());
        let cost_text = match cost.dollars {
            Some(d) => format!("${d:.4}"),
            None => "<span class=\"muted\">no price</span>".into(),
        };
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{tasks}</td>\
             <td class=\"num\">{} / {} / {}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{} / {}</td><td class=\"num\">{cost_text}</td><td class=\"num\">{} / {} ms</td></tr>",
            escape(&r.name()),
            escape(&r.manifest.suite_id),
            escape(r.info.status.as_str()),
            s.samples_ok,
            s.samples_errored,
            s.samples_pending,
            pct(overall.and_then(|o| o.pass_at_1.unbiased_estimator.as_ref())),
            pct(overall.and_then(|o| o.pass_at_5.unbiased_estimator.as_ref())),
            pct(overall.and_then(|o| o.pass_at_1.top_k_in_answer.as_ref())),
            pct(overall.and_then(|o| o.pass_at_5.top_k_in_answer.as_ref())),
            accuracy_cell(r, overall.and_then(|o| o.accuracy.as_ref())),
            overall.map_or(0, |o| o.parse_failed),
            s.tokens_in,
            s.tokens_out,
            s.latency_ms.p50,
            s.latency_ms.p90,
        );
    }
    h.push_str("</table>");
    if runs.iter().any(|r| r.summary.samples_errored > 0) {
        h.push_str("<h3>Errored samples by class</h3><table><tr><th>model</th><th>error class</th><th>samples</th></tr>");
        for r in runs {
            for (class, n) in &r.summary.errors_by_class {
                let _ = write!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td class=\"num\">{n}</td></tr>",
                    escape(&r.name()),
                    escape(class)
                );
            }
        }
        h.push_str("</table><p class=\"muted\">Errored samples are not answers: they are left out of every accuracy and counted here.</p>");
    }
}

/// The accuracy, and below it the clinician-corrected rate when a review measured the scoring's decisions.
fn accuracy_cell(r: &RunData, accuracy: Option<&nmb_stats::Estimate>) -> String {
    match crate::calibration::corrected_note(r) {
        Some(note) => format!(
            "{}<br><span class=\"ci\">{}</span>",
            pct(accuracy),
            escape(&note)
        ),
        None => pct(accuracy),
    }
}

fn distinct_tasks(samples: &[SampleRecord]) -> usize {
    samples
        .iter()
        .map(|s| &s.task_id)
        .collect::<BTreeSet<_>>()
        .len()
}

pub(super) fn level_family(h: &mut String, runs: &[RunData]) {
    let mut rows = String::new();
    for (r, s) in runs
        .iter()
        .filter_map(|r| r.scores.as_ref().map(|s| (r, s)))
    {
        for g in s
            .by_level_family
            .iter()
            .filter(|g| g.family.is_some_and(Family::is_depth))
        {
            group_row(&mut rows, r, g);
        }
    }
    // Breadth and structured runs have tables of their own; an empty header table would only puzzle.
    if rows.is_empty() {
        return;
    }
    h.push_str(
        "<h2 id=\"levels\">By level and family</h2><table><tr><th>model</th><th>level</th><th>family</th>\
         <th>tasks</th><th>n</th><th>pass@1 (a)</th><th>pass@5 (a)</th><th>pass@1 (b)</th><th>pass@5 (b)</th>\
         <th>accuracy</th><th>errored</th><th>parse failed</th><th>unresolved</th><th>rubric overall</th>\
         <th>BERTScore F1</th></tr>",
    );
    h.push_str(&rows);
    h.push_str("</table>");
}

fn group_row(h: &mut String, r: &RunData, g: &GroupAggregate) {
    let _ = write!(
        h,
        "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
        escape(&r.name()),
        g.level.map_or("all", Level::as_str),
        g.family.map_or("all", Family::as_str),
        g.tasks,
        g.n,
        pct(g.pass_at_1.unbiased_estimator.as_ref()),
        pct(g.pass_at_5.unbiased_estimator.as_ref()),
        pct(g.pass_at_1.top_k_in_answer.as_ref()),
        pct(g.pass_at_5.top_k_in_answer.as_ref()),
        pct(g.accuracy.as_ref()),
        g.errored,
        g.parse_failed,
        g.unresolved,
        num(g.rubric.as_ref().and_then(|x| x.overall.as_ref()), 2),
        num(g.bertscore.as_ref().and_then(|x| x.f.as_ref()), 3),
    );
}

pub(super) fn breadth_tables(h: &mut String, runs: &[RunData]) {
    let rows: Vec<(&RunData, &GroupAggregate)> = runs
        .iter()
        .filter_map(|r| r.scores.as_ref().map(|s| (r, s)))
        .flat_map(|(r, s)| s.by_family.iter().map(move |g| (r, g)))
        .filter(|(_, g)| g.breadth.is_some())
        .collect();
    if rows.is_empty() {
        return;
    }
    h.push_str(
        "<h2 id=\"breadth\">Breadth</h2><table><tr><th>model</th><th>suite</th><th>family</th><th>n</th>\
         <th>accuracy</th><th>exact match</th><th>token recall</th><th>extraction failures</th><th>errored</th></tr>",
    );
    for (r, g) in rows {
        let b = g.breadth.as_ref().expect("filtered");
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            escape(&r.name()),
            escape(&r.manifest.suite_id),
            g.family.map_or("all", Family::as_str),
            b.n,
            pct(b.accuracy.as_ref()),
            pct(b.exact_match.as_ref()),
            pct(b.token_recall.as_ref()),
            b.extraction_failures,
            g.errored,
        );
    }
    h.push_str("</table><p class=\"muted\">Closed VQA: accuracy after normalisation (yes/no by polarity). Open VQA: accuracy is exact match after normalisation; token recall is the share of reference words in the answer. Multiple choice: extraction failures count as wrong.</p>");
    if let Some(t) = crate::label_set::table(runs) {
        h.push_str("<h3 id=\"label-set\">Fixed label sets (accuracy and macro-F1)</h3>");
        h.push_str(&t.html());
    }
}
