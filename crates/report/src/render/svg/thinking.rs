//! Accuracy against thinking length: each run a line through its bins of thinking length, each bin a point at
//! its median length with its accuracy's CI, and a bar along the lengths it spans.

use std::fmt::Write;

use super::{
    colour, describe, frame, legend, legend_rows, line, open, round_up, whisker_v, Area, Value, W,
};
use crate::render::escape;
use crate::table::trimmed;

/// One run on the chart.
pub struct Series {
    pub label: String,
    pub bins: Vec<Bin>,
}

/// One bin of a run's answers.
pub struct Bin {
    /// The shortest, median and longest thinking in the bin.
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub answers: usize,
    pub accuracy: Value,
}

/// Accuracy (0–100%, CI whiskers) against thinking length in `unit` (from 0 to a round number past the longest).
pub fn accuracy_by_length(title: &str, description: &str, unit: &str, series: &[Series]) -> String {
    let mut out = String::new();
    let names: Vec<String> = series.iter().map(|s| s.label.clone()).collect();
    let top = 56.0 + legend_rows(&names) * 16.0;
    let area = Area {
        left: 64.0,
        top,
        width: W - 64.0 - 24.0,
        height: 280.0,
    };
    open(&mut out, W, top + area.height + 60.0, title, description);
    legend(&mut out, area.left, 34.0, &names);
    let longest = series
        .iter()
        .flat_map(|s| &s.bins)
        .map(|b| b.max)
        .fold(0.0, f64::max);
    let max = round_up(longest);
    let x = |v: f64| area.left + area.width * (v / max).clamp(0.0, 1.0);
    let y = |v: f64| area.top + area.height * (1.0 - v.clamp(0.0, 1.0));
    let tick = |f: f64| trimmed(f * max);
    frame(
        &mut out,
        &area,
        &tick,
        &format!("{unit} per answer"),
        "accuracy",
    );
    for (i, s) in series.iter().enumerate() {
        let c = colour(i);
        for pair in s.bins.windows(2) {
            let (a, b) = (&pair[0], &pair[1]);
            line(
                &mut out,
                x(a.median),
                y(a.accuracy.value),
                x(b.median),
                y(b.accuracy.value),
                c,
                1.5,
            );
        }
        for b in &s.bins {
            point(&mut out, b, c, &s.label, unit, (&x, &y));
        }
    }
    out.push_str("</svg>");
    out
}

type Scale<'a> = &'a dyn Fn(f64) -> f64;

/// A bin's span, whisker and point, with what it shows as its tooltip.
fn point(out: &mut String, b: &Bin, c: &str, label: &str, unit: &str, (x, y): (Scale, Scale)) {
    let (px, py) = (x(b.median), y(b.accuracy.value));
    line(out, x(b.min), py, x(b.max), py, c, 4.0);
    whisker_v(out, px, &b.accuracy, y);
    let what = format!(
        "{label}: {}–{} {unit} (median {}), {} answers, accuracy {}",
        trimmed(b.min),
        trimmed(b.max),
        trimmed(b.median),
        b.answers,
        describe(&b.accuracy)
    );
    let _ = write!(
        out,
        "<circle class=\"point\" cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"5\" fill=\"{c}\" stroke=\"#fff\"><title>{}</title></circle>",
        escape(&what)
    );
}
