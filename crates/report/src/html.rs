//! The self-contained HTML report.
//!
//! One file: inline CSS, inline SVG, thumbnails as `data:` PNGs made by nmb, no script at all. The
//! Content-Security-Policy forbids scripts, external loads, frames, forms and base changes, so even a gap in
//! escaping could not run code; escaping is still applied to every piece of text that reaches the page
//! ([`escape`]), model output or not.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use nmb_score::results::{
    ErrorCategory, GroupAggregate, JudgeDecision, MatchOutcome, SampleScore, SampleStatus,
    ScoreReport,
};
use nmb_stats::Estimate;
use nmb_store::SampleRecord;
use nmb_suite::{Family, Level};

use crate::analysis::{Analysis, TwoAxis};
use crate::input::RunData;
use crate::svg::{self, Value};
use crate::ReportOptions;

/// No scripts, nothing fetched; images only from `data:`; inline styles allowed.
pub const CSP: &str =
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; \
                       form-action 'none'; frame-ancestors 'none'";

/// Escapes text for HTML element content and quoted attribute values (and SVG/XML): `& < > " '`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Control characters other than tab and newlines are not allowed in HTML text.
            c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = r#"
body{font-family:"DejaVu Sans",Arial,sans-serif;margin:24px auto;max-width:1180px;color:#1d1d1d;line-height:1.4;padding:0 16px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 8px;border-bottom:2px solid #0072B2;padding-bottom:3px}
h3{font-size:15px;margin:18px 0 6px}
table{border-collapse:collapse;margin:6px 0 14px;font-size:12.5px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f0f4f8}td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.ci{color:#666;font-size:11px}.muted{color:#666}.note{background:#fff8e1;border-left:4px solid #E69F00;padding:6px 10px;margin:6px 0}
.charts{display:flex;flex-wrap:wrap;gap:14px}.chart{border:1px solid #e3e3e3;background:#fff}
details.case{border:1px solid #ccc;margin:8px 0;padding:4px 10px;border-radius:4px}
details.case>summary{font-weight:bold;cursor:pointer}
.thumbs .thumb{display:inline-block;margin:4px;border:1px solid #999;background-color:#000;background-size:100% 100%}
.answer{white-space:pre-wrap;font-family:"DejaVu Sans Mono",monospace;font-size:12px;background:#f7f7f7;border:1px solid #e0e0e0;padding:6px;max-height:360px;overflow:auto;margin:4px 0}
.sample{border-left:3px solid #bbb;padding-left:8px;margin:8px 0}
.ok{border-left-color:#009E73}.bad{border-left-color:#D55E00}.err{border-left-color:#777}
.tag{display:inline-block;padding:0 6px;border-radius:3px;font-size:11px;margin-right:4px;background:#eee}
.tag.ok{background:#d7f2e6}.tag.bad{background:#fbe0d2}.tag.err{background:#ddd}
dl.manifest{display:grid;grid-template-columns:220px 1fr;gap:2px 12px;font-size:12.5px}
dl.manifest dt{font-weight:bold}dl.manifest dd{margin:0;word-break:break-all}
"#;

pub fn render(runs: &[RunData], analysis: &Analysis, opts: &ReportOptions) -> String {
    let mut h = String::with_capacity(256 * 1024);
    head(&mut h, runs);
    notes(&mut h, runs, analysis);
    headline(&mut h, runs, analysis);
    level_family(&mut h, runs);
    breadth_tables(&mut h, runs);
    charts(&mut h, runs);
    if let Some(t) = &analysis.two_axis {
        two_axis(&mut h, t);
    }
    paired(&mut h, analysis);
    cases(&mut h, runs, opts);
    manifests(&mut h, runs);
    h.push_str("</body></html>\n");
    h
}

fn head(h: &mut String, runs: &[RunData]) {
    let mut models: Vec<&str> = Vec::new();
    for m in runs.iter().map(RunData::model) {
        if !models.contains(&m) {
            models.push(m);
        }
    }
    let title = match runs {
        [one] => format!("nmb report: {}", label(one)),
        _ => format!("nmb report: {} runs · {}", runs.len(), models.join(", ")),
    };
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\
         <meta name=\"referrer\" content=\"no-referrer\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{}</title><style>{STYLE}{}</style></head><body>\
         <h1>{}</h1><p class=\"muted\">{} run(s) · nmb {} · every aggregate carries a 95% bootstrap CI \
         (percentile, clustered by case) · pass@k in two labelled readings: (a) the unbiased estimator over the n \
         samples of a task, (b) the reference within the first k entries of one answer's ranked differential.</p>",
        escape(CSP),
        escape(&title),
        thumbnail_styles(runs),
        escape(&title),
        runs.len(),
        escape(env!("CARGO_PKG_VERSION")),
    );
}

/// `model · suite` for a run.
fn label(r: &RunData) -> String {
    format!("{} · {}", r.model(), r.manifest.suite_id)
}

fn notes(h: &mut String, runs: &[RunData], analysis: &Analysis) {
    let mut all: Vec<String> = analysis.notes.clone();
    for r in runs {
        if let Some(s) = &r.scores {
            all.extend(s.notes.iter().map(|n| format!("{}: {n}", r.info.run_id)));
        }
        for d in &r.manifest.dropped_inputs {
            all.push(format!("{}: dropped input: {d}", r.info.run_id));
        }
    }
    for n in all {
        let _ = write!(h, "<div class=\"note\">{}</div>", escape(&n));
    }
}

fn pct(e: Option<&Estimate>) -> String {
    match e {
        Some(e) => format!(
            "{:.1}%<br><span class=\"ci\">[{:.1}–{:.1}]</span>",
            e.value * 100.0,
            e.ci_low * 100.0,
            e.ci_high * 100.0
        ),
        None => "<span class=\"muted\">–</span>".into(),
    }
}

fn num(e: Option<&Estimate>, digits: usize) -> String {
    match e {
        Some(e) => format!(
            "{:.d$}<br><span class=\"ci\">[{:.d$}–{:.d$}]</span>",
            e.value,
            e.ci_low,
            e.ci_high,
            d = digits
        ),
        None => "<span class=\"muted\">–</span>".into(),
    }
}

fn headline(h: &mut String, runs: &[RunData], analysis: &Analysis) {
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
            escape(r.model()),
            escape(&r.manifest.suite_id),
            escape(r.info.status.as_str()),
            s.samples_ok,
            s.samples_errored,
            s.samples_pending,
            pct(overall.and_then(|o| o.pass_at_1.unbiased_estimator.as_ref())),
            pct(overall.and_then(|o| o.pass_at_5.unbiased_estimator.as_ref())),
            pct(overall.and_then(|o| o.pass_at_1.top_k_in_answer.as_ref())),
            pct(overall.and_then(|o| o.pass_at_5.top_k_in_answer.as_ref())),
            pct(overall.and_then(|o| o.accuracy.as_ref())),
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
                    escape(r.model()),
                    escape(class)
                );
            }
        }
        h.push_str("</table><p class=\"muted\">Errored samples are not answers: they are left out of every accuracy and counted here.</p>");
    }
}

fn distinct_tasks(samples: &[SampleRecord]) -> usize {
    samples
        .iter()
        .map(|s| &s.task_id)
        .collect::<BTreeSet<_>>()
        .len()
}

fn level_family(h: &mut String, runs: &[RunData]) {
    let scored: Vec<(&RunData, &ScoreReport)> = runs
        .iter()
        .filter_map(|r| r.scores.as_ref().map(|s| (r, s)))
        .collect();
    if scored.is_empty() {
        return;
    }
    h.push_str(
        "<h2 id=\"levels\">By level and family</h2><table><tr><th>model</th><th>level</th><th>family</th>\
         <th>tasks</th><th>n</th><th>pass@1 (a)</th><th>pass@5 (a)</th><th>pass@1 (b)</th><th>pass@5 (b)</th>\
         <th>accuracy</th><th>errored</th><th>parse failed</th><th>unresolved</th><th>rubric overall</th>\
         <th>BERTScore F1</th></tr>",
    );
    for (r, s) in scored {
        for g in s
            .by_level_family
            .iter()
            .filter(|g| g.family.is_some_and(Family::is_depth))
        {
            group_row(h, r, g);
        }
    }
    h.push_str("</table>");
}

fn group_row(h: &mut String, r: &RunData, g: &GroupAggregate) {
    let _ = write!(
        h,
        "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
        escape(r.model()),
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

fn breadth_tables(h: &mut String, runs: &[RunData]) {
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
            escape(r.model()),
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
}

fn charts(h: &mut String, runs: &[RunData]) {
    h.push_str("<h2 id=\"charts\">Charts</h2><div class=\"charts\">");
    let depth: Vec<(&RunData, &ScoreReport)> = runs
        .iter()
        .filter(|r| r.has_depth())
        .filter_map(|r| r.scores.as_ref().map(|s| (r, s)))
        .collect();
    let series: Vec<String> = depth.iter().map(|(r, _)| r.model().to_string()).collect();
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
    let with: Vec<(&RunData, &nmb_score::results::RubricAggregate)> = runs
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
    let series: Vec<String> = with.iter().map(|(r, _)| r.model().to_string()).collect();
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
            Some((format!("{} ({} wrong)", r.model(), t.wrong), counts))
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
                rows.push((format!("{} · {name}", r.model()), Value::from_estimate(f)));
                colours.push(i);
            }
        }
    }
    if rows.is_empty() {
        h.push_str("<p class=\"muted\">No BERTScore (no encoder configured for scoring): no BERTScore chart.</p>");
        return;
    }
    h.push_str(&svg::forest(
        "BERTScore F1 (raw), mean with 95% CI",
        "Mean BERTScore F1 of rationale answers per model and level.",
        &rows,
        &colours,
    ));
}

fn two_axis(h: &mut String, t: &TwoAxis) {
    h.push_str("<h2 id=\"two-axis\">Breadth vs depth</h2>");
    let points: Vec<svg::Point> = t
        .points
        .iter()
        .map(|p| svg::Point {
            label: p.model.clone(),
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
    h.push_str("<table><tr><th>model</th><th>breadth accuracy</th><th>depth pass@1 (a)</th><th>breadth runs</th><th>depth runs</th></tr>");
    for p in &t.points {
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(&p.model),
            pct(Some(&p.breadth)),
            pct(Some(&p.depth)),
            escape(&p.breadth_runs.join(", ")),
            escape(&p.depth_runs.join(", ")),
        );
    }
    h.push_str("</table>");
}

fn paired(h: &mut String, analysis: &Analysis) {
    if analysis.paired.is_empty() {
        return;
    }
    h.push_str(
        "<h2 id=\"paired\">Paired comparisons</h2><p class=\"muted\">Runs of different models on the same suite, \
         paired on (task, sample). Difference A − B in accuracy with a case-clustered paired bootstrap CI and \
         p-value; exact McNemar test on the discordant items.</p><table><tr><th>A</th><th>B</th><th>group</th>\
         <th>items</th><th>A</th><th>B</th><th>A − B</th><th>bootstrap p</th><th>only A / only B</th>\
         <th>McNemar p</th></tr>",
    );
    for c in &analysis.paired {
        for g in &c.groups {
            let group = match (g.level, g.family) {
                (Some(l), Some(f)) => format!("{} · {}", l.as_str(), f.as_str()),
                _ => "overall".into(),
            };
            let (ma, mb, diff, p) = match &g.paired {
                Some(p) => (
                    format!("{:.1}%", p.mean_a * 100.0),
                    format!("{:.1}%", p.mean_b * 100.0),
                    format!(
                        "{:+.1} pp<br><span class=\"ci\">[{:+.1}, {:+.1}]</span>",
                        p.diff.value * 100.0,
                        p.diff.ci_low * 100.0,
                        p.diff.ci_high * 100.0
                    ),
                    format!("{:.3}", p.p_value),
                ),
                None => ("–".into(), "–".into(), "–".into(), "–".into()),
            };
            let (disc, mp) = match &g.mcnemar {
                Some(m) => (
                    format!("{} / {}", m.only_a, m.only_b),
                    format!("{:.3}", m.p_value),
                ),
                None => ("–".into(), "–".into()),
            };
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{ma}</td>\
                 <td class=\"num\">{mb}</td><td class=\"num\">{diff}</td><td class=\"num\">{p}</td>\
                 <td class=\"num\">{disc}</td><td class=\"num\">{mp}</td></tr>",
                escape(&c.model_a),
                escape(&c.model_b),
                escape(&group),
                g.items,
            );
        }
    }
    h.push_str("</table>");
}

/// The case a task belongs to: from the scores, else the task id up to its first `/`.
fn case_of<'a>(task_id: &'a str, scored: &BTreeMap<(&str, u32), &'a SampleScore>) -> &'a str {
    scored
        .range((task_id, 0)..=(task_id, u32::MAX))
        .next()
        .map(|(_, s)| s.case_id.as_str())
        .unwrap_or_else(|| task_id.split('/').next().unwrap_or(task_id))
}

fn cases(h: &mut String, runs: &[RunData], opts: &ReportOptions) {
    // case -> task -> runs that have it
    let mut tree: BTreeMap<String, BTreeMap<String, Vec<usize>>> = BTreeMap::new();
    let scored: Vec<BTreeMap<(&str, u32), &SampleScore>> =
        runs.iter().map(RunData::scored).collect();
    for (i, r) in runs.iter().enumerate() {
        for task in r
            .samples
            .iter()
            .map(|s| s.task_id.as_str())
            .collect::<BTreeSet<_>>()
        {
            let case = case_of(task, &scored[i]).to_string();
            let runs_of = tree
                .entry(case)
                .or_default()
                .entry(task.to_string())
                .or_default();
            runs_of.push(i);
        }
    }
    let _ = write!(h, "<h2 id=\"cases\">Cases ({})</h2>", tree.len());
    let open = if tree.len() <= opts.expand_cases_up_to {
        " open"
    } else {
        ""
    };
    for (case, tasks) in &tree {
        let _ = write!(
            h,
            "<details class=\"case\"{open}><summary>{} <span class=\"muted\">({} task(s))</span></summary>",
            escape(case),
            tasks.len()
        );
        thumbnails(h, runs, tasks);
        for (task, run_ids) in tasks {
            task_section(h, runs, &scored, task, run_ids);
        }
        h.push_str("</details>");
    }
}

/// The CSS class carrying one image (hex digits only, so it needs no escaping).
fn thumb_class(sha: &str) -> String {
    let hex: String = sha
        .chars()
        .filter(char::is_ascii_hexdigit)
        .take(24)
        .collect();
    format!("t{hex}")
}

/// One CSS rule per distinct thumbnail, so an image shared by many cases is embedded once.
fn thumbnail_styles(runs: &[RunData]) -> String {
    let mut seen = BTreeSet::new();
    let mut css = String::new();
    for r in runs {
        for (sha, t) in &r.thumbnails {
            let Some(b64) = &t.png_base64 else { continue };
            if !seen.insert(thumb_class(sha)) {
                continue;
            }
            // Base64 holds only [A-Za-z0-9+/=]; filtering keeps anything else from closing the string, the
            // rule or the style element.
            let clean: String = b64
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '='))
                .collect();
            let _ = write!(
                css,
                ".{}{{background-image:url(\"data:image/png;base64,{clean}\")}}",
                thumb_class(sha)
            );
        }
    }
    css
}

fn thumbnails(h: &mut String, runs: &[RunData], tasks: &BTreeMap<String, Vec<usize>>) {
    let mut seen = BTreeSet::new();
    let mut html = String::new();
    for (task, run_ids) in tasks {
        for &i in run_ids {
            let Some(prompt) = runs[i].prompts.get(task) else {
                continue;
            };
            for sha in &prompt.images {
                if !seen.insert(sha.clone()) {
                    continue;
                }
                let Some(t) = runs[i].thumbnails.get(sha) else {
                    continue;
                };
                match &t.png_base64 {
                    Some(_) => {
                        let _ = write!(
                            html,
                            "<span class=\"thumb {}\" role=\"img\" aria-label=\"{}\" title=\"{}\" \
                             style=\"width:{}px;height:{}px\"></span>",
                            thumb_class(sha),
                            escape(&format!("image {}", &sha[..sha.len().min(12)])),
                            escape(&format!("sha256 {sha}")),
                            t.width,
                            t.height,
                        );
                    }
                    None => {
                        let _ = write!(
                            html,
                            "<span class=\"note\">{}</span>",
                            escape(t.problem.as_deref().unwrap_or("no thumbnail"))
                        );
                    }
                }
            }
        }
    }
    if !html.is_empty() {
        let _ = write!(h, "<div class=\"thumbs\">{html}</div>");
    }
}

fn task_section(
    h: &mut String,
    runs: &[RunData],
    scored: &[BTreeMap<(&str, u32), &SampleScore>],
    task: &str,
    run_ids: &[usize],
) {
    let first = scored.iter().find_map(|m| {
        m.range((task, 0)..=(task, u32::MAX))
            .next()
            .map(|(_, s)| *s)
    });
    let kind = first.map_or(String::new(), |s| {
        format!(
            " <span class=\"tag\">{}</span><span class=\"tag\">{}</span>",
            s.family.as_str(),
            s.level.as_str()
        )
    });
    let _ = write!(h, "<h3>{}{kind}</h3>", escape(task));
    if let Some(prompt) = run_ids.iter().find_map(|&i| runs[i].prompts.get(task)) {
        let _ = write!(
            h,
            "<details><summary class=\"muted\">prompt</summary><div class=\"answer\">{}</div></details>",
            escape(&prompt.text)
        );
    }
    if let Some(reference) = first.and_then(reference_text) {
        let _ = write!(h, "<p><b>Reference:</b> {}</p>", escape(&reference));
    }
    for &i in run_ids {
        let r = &runs[i];
        let _ = write!(h, "<div><b>{}</b>", escape(r.model()));
        for s in r.samples.iter().filter(|s| s.task_id == task) {
            sample(h, s, scored[i].get(&(task, s.sample_index)).copied());
        }
        h.push_str("</div>");
    }
}

fn reference_text(s: &SampleScore) -> Option<String> {
    if let Some(d) = &s.diagnosis {
        return Some(d.reference.clone());
    }
    if let Some(l) = &s.lesion {
        let parts: Vec<&str> = [l.reference_type.as_deref(), l.reference_location.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        return (!parts.is_empty()).then(|| parts.join(" · "));
    }
    None
}

fn sample(h: &mut String, rec: &SampleRecord, score: Option<&SampleScore>) {
    let (class, verdict) = match (rec.status, score) {
        (nmb_store::SampleStatus::Errored, _) => ("err", "errored".to_string()),
        (nmb_store::SampleStatus::Pending, _) => ("err", "pending".to_string()),
        (_, Some(s)) => match (s.status, s.correct) {
            (SampleStatus::NoReference, _) => ("err", "no reference".into()),
            (SampleStatus::ParseFailed, _) => ("bad", "parse failed".into()),
            (_, Some(true)) => ("ok", "correct".into()),
            (_, Some(false)) if s.unresolved => ("bad", "wrong (unresolved match)".into()),
            (_, Some(false)) => ("bad", "wrong".into()),
            (_, None) => ("err", "not scored".into()),
        },
        (_, None) => ("err", "not scored".into()),
    };
    let _ = write!(
        h,
        "<div class=\"sample {class}\"><span class=\"tag {class}\">sample {} · {}</span>",
        rec.sample_index,
        escape(&verdict)
    );
    if let Some(e) = &rec.error_class {
        let _ = write!(
            h,
            "<span class=\"tag err\">error class: {}</span> <span class=\"muted\">{}</span>",
            escape(e),
            escape(rec.error_message.as_deref().unwrap_or(""))
        );
    }
    if let Some(t) = score.and_then(|s| s.taxonomy.as_ref()) {
        let _ = write!(
            h,
            "<span class=\"tag\">taxonomy: {}</span> <span class=\"muted\">{}</span>",
            escape(t.category.map_or("unlabelled", |c| c.as_str())),
            escape(t.justification.as_deref().unwrap_or(""))
        );
    }
    for t in &rec.turns {
        if rec.turns.len() > 1 {
            let _ = write!(h, "<div class=\"muted\">turn {}</div>", t.turn_index + 1);
        }
        match &t.text {
            Some(text) => {
                let _ = write!(h, "<div class=\"answer\">{}</div>", escape(text));
            }
            None => {
                let _ = write!(
                    h,
                    "<div class=\"muted\">no answer ({})</div>",
                    escape(t.error_class.as_deref().unwrap_or("none"))
                );
            }
        }
    }
    if let Some(s) = score {
        parsed(h, s);
    }
    h.push_str("</div>");
}

fn parsed(h: &mut String, s: &SampleScore) {
    if let Some(e) = &s.parse_error {
        let _ = write!(h, "<div class=\"muted\">parse: {}</div>", escape(e));
    }
    if let Some(d) = &s.diagnosis {
        h.push_str("<div>Parsed differential:</div><ol>");
        for c in &d.candidates {
            let outcome = match c.outcome {
                MatchOutcome::Match => "match",
                MatchOutcome::NoMatch => "no match",
                MatchOutcome::Inconclusive => "inconclusive",
            };
            let method = c
                .method
                .map_or(String::new(), |m| format!(" by {}", enum_text(&m)));
            let _ = write!(
                h,
                "<li>{} <span class=\"tag\">{}{}</span>",
                escape(&c.diagnosis),
                outcome,
                escape(&method)
            );
            if let Some(j) = &c.judge {
                judge(h, j);
            }
            h.push_str("</li>");
        }
        h.push_str("</ol>");
    } else if let Some(p) = &s.parsed {
        if !p.differential.is_empty() {
            h.push_str("<div>Parsed differential:</div><ol>");
            for d in &p.differential {
                let _ = write!(h, "<li>{}</li>", escape(&d.diagnosis));
            }
            h.push_str("</ol>");
        }
    }
    if let Some(l) = &s.lesion {
        for (name, m) in [("type", &l.type_match), ("location", &l.location_match)] {
            if let Some(m) = m {
                let _ = write!(
                    h,
                    "<div>Lesion {name}: {} <span class=\"tag\">{}</span></div>",
                    escape(m.candidate.as_deref().unwrap_or("–")),
                    escape(&enum_text(&m.outcome))
                );
                if let Some(j) = &m.judge {
                    judge(h, j);
                }
            }
        }
    }
    if let Some(b) = &s.breadth {
        let _ = write!(
            h,
            "<div>Extracted: {}{}{}</div>",
            escape(b.extracted.as_deref().unwrap_or("–")),
            if b.extraction_failed {
                " <span class=\"tag bad\">extraction failed</span>"
            } else {
                ""
            },
            b.token_recall
                .map_or(String::new(), |r| format!(" · token recall {r:.2}"))
        );
    }
    if let Some(r) = &s.rubric {
        let scores: Vec<String> = r
            .scores
            .iter()
            .map(|d| {
                format!(
                    "{} {}",
                    d.dimension,
                    d.score.map_or("–".into(), |v| format!("{v:.1}"))
                )
            })
            .collect();
        let _ = write!(h, "<div>Rubric: {}</div>", escape(&scores.join(" · ")));
        for j in &r.judges {
            let _ = write!(
                h,
                "<div class=\"muted\">{}{}: {}</div>",
                escape(&j.judge),
                if j.self_grading {
                    " (self-grading)"
                } else {
                    ""
                },
                escape(
                    j.rationale
                        .as_deref()
                        .or(j.failure.as_deref())
                        .unwrap_or("")
                )
            );
        }
    }
    if let Some(b) = &s.bertscore {
        let _ = write!(
            h,
            "<div>BERTScore P {:.3} · R {:.3} · F1 {:.3}</div>",
            b.p, b.r, b.f
        );
    }
}

fn judge(h: &mut String, j: &JudgeDecision) {
    h.push_str("<ul>");
    for v in &j.verdicts {
        let said = match v.equivalent {
            Some(true) => "equivalent",
            Some(false) => "not equivalent",
            None => "no valid verdict",
        };
        let _ = write!(
            h,
            "<li class=\"muted\">judge {}{}: {said} — {}</li>",
            escape(&v.judge),
            if v.self_grading {
                " (self-grading)"
            } else {
                ""
            },
            escape(
                v.rationale
                    .as_deref()
                    .or(v.failure.as_deref())
                    .unwrap_or("")
            )
        );
    }
    h.push_str("</ul>");
}

/// The serde name of a unit enum value.
fn enum_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
        .replace('_', " ")
}

fn manifests(h: &mut String, runs: &[RunData]) {
    h.push_str("<h2 id=\"manifest\">Run manifests</h2>");
    for r in runs {
        let m = &r.manifest;
        let mut rows: Vec<(&str, String)> = vec![
            ("run", r.info.run_id.clone()),
            ("status", r.info.status.as_str().into()),
            ("created", nmb_store::format_utc_ms(r.info.created_ms)),
            ("model", m.model.clone()),
            ("suite", format!("{} ({})", m.suite_id, m.suite_hash)),
            (
                "template",
                format!("{} ({})", m.template_id, m.template_hash),
            ),
            ("parameters", m.params.to_string()),
            ("input mode", m.input_mode.clone()),
            ("samples per task", m.samples.to_string()),
            ("nmb version (run)", m.nmb_version.clone()),
            ("config hash", r.info.config_hash.clone()),
            (
                "dropped inputs",
                if m.dropped_inputs.is_empty() {
                    "none".into()
                } else {
                    m.dropped_inputs.join("; ")
                },
            ),
        ];
        for (k, v) in &m.extra {
            rows.push((k.as_str(), v.to_string()));
        }
        if let Some(s) = &r.scores {
            let c = &s.config;
            rows.push(("scored by nmb", c.nmb_version.clone()));
            rows.push(("score config hash", c.config_hash.clone()));
            let judges: Vec<String> = c
                .judges
                .iter()
                .map(|j| {
                    format!(
                        "{}{}",
                        j.spec,
                        if j.self_grading {
                            " (self-grading)"
                        } else {
                            ""
                        }
                    )
                })
                .collect();
            rows.push((
                "judges",
                if judges.is_empty() {
                    "none".into()
                } else {
                    judges.join(", ")
                },
            ));
            rows.push((
                "rubric",
                c.rubric.as_ref().map_or("none".into(), |x| {
                    format!("{} v{} ({})", x.id, x.version, x.hash)
                }),
            ));
            rows.push((
                "bootstrap",
                format!(
                    "seed {}, {} resamples, level {}",
                    c.bootstrap.seed, c.bootstrap.resamples, c.bootstrap.level
                ),
            ));
            rows.push(("suite hash scored", c.suite_hash_scored.clone()));
        }
        let _ = write!(h, "<h3>{}</h3><dl class=\"manifest\">", escape(&label(r)));
        for (k, v) in rows {
            let _ = write!(h, "<dt>{}</dt><dd>{}</dd>", escape(k), escape(&v));
        }
        h.push_str("</dl>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_every_special_character() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(escape("a\u{0}b"), "a\u{FFFD}b");
    }
}
