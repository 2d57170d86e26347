//! The self-contained HTML report.
//!
//! One file: inline CSS, inline SVG, thumbnails as `data:` PNGs made by nmb, no script at all. The
//! Content-Security-Policy forbids scripts, external loads, frames, forms and base changes, so even a gap in
//! escaping could not run code; escaping is still applied to every piece of text that reaches the page
//! ([`escape`]), model output or not.

mod calibration;
mod cases;
mod charts;
mod manifests;
mod neurovlm;
mod paired;
mod preference;
mod reliance;
mod revision;
mod stability;
mod summary;
mod sweep;
mod thinking;
mod worst;

use std::fmt::Write;

use crate::input::RunData;
use crate::sections::analysis::Analysis;
use crate::sections::TableSection;
use crate::ReportOptions;
use cases::cases;
use cases::thumbnail_styles;
use charts::charts;
use charts::two_axis;
use manifests::manifests;
use neurovlm::neurovlm;
use paired::paired;
use reliance::reliance;
use revision::revision;
use summary::breadth_tables;
use summary::criteria;
use summary::headline;
use summary::level_family;
use sweep::sweep;
use thinking::thinking;
use worst::worst;

/// No scripts, nothing fetched; images only from `data:`; inline styles allowed.
pub const CSP: &str =
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; \
                       form-action 'none'; frame-ancestors 'none'";

/// Escapes text for HTML element content and quoted attribute values (and SVG/XML); the renderers' one
/// escaping ([`crate::render::escape`]).
pub use super::escape;

const STYLE: &str = r#"
body{font-family:"DejaVu Sans",Arial,sans-serif;margin:24px auto;max-width:1180px;color:#1d1d1d;line-height:1.4;padding:0 16px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:32px 0 8px;border-bottom:2px solid #0072B2;padding-bottom:3px}
h3{font-size:15px;margin:18px 0 6px}h4{font-size:13.5px;margin:14px 0 4px}
section.neurovlm{border-top:1px solid #ddd;margin-top:14px}
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

/// The HTML page; `tables` are the table sections under the headline.
pub(crate) fn render(
    runs: &[RunData],
    analysis: &Analysis,
    tables: &[TableSection],
    opts: &ReportOptions,
) -> String {
    let mut h = String::with_capacity(256 * 1024);
    head(&mut h, runs);
    notes(&mut h, runs, analysis);
    headline(&mut h, runs, analysis, tables);
    summary::cost(&mut h, runs, analysis);
    thinking(&mut h, analysis);
    level_family(&mut h, runs);
    breadth_tables(&mut h, runs);
    criteria(&mut h, runs);
    revision(&mut h, runs);
    h.push_str(&stability::html(runs));
    charts(&mut h, runs);
    worst(&mut h, analysis);
    reliance(&mut h, analysis);
    neurovlm(&mut h, runs, analysis);
    if let Some(t) = &analysis.two_axis {
        two_axis(&mut h, t);
    }
    sweep(&mut h, analysis);
    paired(&mut h, analysis);
    h.push_str(&calibration::html(runs));
    h.push_str(&preference::html(runs));
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

/// `name · suite` for a run.
fn label(r: &RunData) -> String {
    format!("{} · {}", r.name(), r.manifest.suite_id)
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

/// The serde name of a unit enum value.
fn enum_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
        .replace('_', " ")
}
