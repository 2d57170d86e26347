//! Inline SVG charts. Every label goes through [`escape`]; numbers are formatted by us. No script, no external
//! reference, no `foreignObject`.

use std::fmt::Write;

use super::escape;

pub mod curves;
pub mod thinking;

/// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#8C6D1F", "#000000",
];

pub fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// A value with an optional interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Value {
    pub value: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

impl Value {
    pub fn from_estimate(e: &nmb_stats::Estimate) -> Value {
        Value {
            value: e.value,
            lo: Some(e.ci_low),
            hi: Some(e.ci_high),
        }
    }
}

const W: f64 = 570.0;
const FONT: &str = "font-family=\"DejaVu Sans, Arial, sans-serif\"";

fn open(out: &mut String, width: f64, height: f64, title: &str, description: &str) {
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" width=\"{width:.0}\" height=\"{height:.0}\" \
         viewBox=\"0 0 {width:.0} {height:.0}\" role=\"img\" aria-label=\"{}\" {FONT} font-size=\"12\">\
         <title>{}</title><desc>{}</desc>\
         <text x=\"8\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>",
        escape(title),
        escape(title),
        escape(description),
        escape(title)
    );
}

fn text(out: &mut String, x: f64, y: f64, anchor: &str, extra: &str, s: &str) {
    let _ = write!(
        out,
        "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{anchor}\" {extra}>{}</text>",
        escape(s)
    );
}

fn line(out: &mut String, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str, width: f64) {
    let _ = write!(
        out,
        "<line x1=\"{x1:.1}\" y1=\"{y1:.1}\" x2=\"{x2:.1}\" y2=\"{y2:.1}\" stroke=\"{stroke}\" stroke-width=\"{width}\"/>"
    );
}

fn legend(out: &mut String, x: f64, y: f64, series: &[String]) -> f64 {
    let mut cx = x;
    let mut cy = y;
    for (i, name) in series.iter().enumerate() {
        let label = truncate(name, 34);
        let w = 18.0 + label.chars().count() as f64 * 6.6 + 14.0;
        if cx + w > W - 8.0 && cx > x {
            cx = x;
            cy += 16.0;
        }
        let _ = write!(
            out,
            "<rect x=\"{cx:.1}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/>",
            cy - 10.0,
            colour(i)
        );
        text(out, cx + 16.0, cy, "start", "", &label);
        cx += w;
    }
    cy
}

pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Grouped vertical bars on a 0–100% axis with CI whiskers: `groups[g] = (label, bars by series)`.
pub fn grouped_bars(
    title: &str,
    description: &str,
    series: &[String],
    groups: &[(String, Vec<Option<Value>>)],
) -> String {
    let mut out = String::new();
    let legend_rows = legend_rows(series);
    // The legend sits at y = 34 (baseline); the plot starts below it with room for the top tick label.
    let top = 50.0 + legend_rows * 16.0;
    let (left, bottom, height) = (48.0, 40.0, 316.0 + legend_rows * 16.0);
    let plot_h = height - top - bottom;
    open(&mut out, W, height, title, description);
    legend(&mut out, left, 34.0, series);
    let y = |v: f64| top + plot_h * (1.0 - v.clamp(0.0, 1.0));
    for tick in 0..=5 {
        let v = f64::from(tick) / 5.0;
        line(&mut out, left, y(v), W - 8.0, y(v), "#ddd", 1.0);
        text(
            &mut out,
            left - 4.0,
            y(v) + 4.0,
            "end",
            "",
            &format!("{:.0}%", v * 100.0),
        );
    }
    let group_w = (W - 8.0 - left) / groups.len().max(1) as f64;
    let bar_w = (group_w * 0.8 / series.len().max(1) as f64).min(48.0);
    for (g, (label, bars)) in groups.iter().enumerate() {
        let gx = left + group_w * g as f64 + (group_w - bar_w * series.len() as f64) / 2.0;
        for (s, bar) in bars.iter().enumerate() {
            let x = gx + bar_w * s as f64;
            match bar {
                Some(v) => {
                    let _ = write!(
                        out,
                        "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>",
                        y(v.value),
                        bar_w - 2.0,
                        (y(0.0) - y(v.value)).max(0.5),
                        colour(s),
                        escape(&format!("{}: {}", series.get(s).map_or("", |s| s.as_str()), describe(v)))
                    );
                    whisker_v(&mut out, x + (bar_w - 2.0) / 2.0, v, &y);
                }
                None => text(
                    &mut out,
                    x + bar_w / 2.0,
                    y(0.0) - 4.0,
                    "middle",
                    "fill=\"#999\" font-size=\"10\"",
                    "n/a",
                ),
            }
        }
        text(
            &mut out,
            left + group_w * (g as f64 + 0.5),
            y(0.0) + 16.0,
            "middle",
            "",
            &truncate(label, 28),
        );
    }
    line(&mut out, left, y(0.0), W - 8.0, y(0.0), "#333", 1.0);
    out.push_str("</svg>");
    out
}

fn legend_rows(series: &[String]) -> f64 {
    let total: f64 = series
        .iter()
        .map(|s| 32.0 + truncate(s, 34).chars().count() as f64 * 6.6)
        .sum();
    (total / (W - 60.0)).ceil().max(1.0) - 1.0
}

fn whisker_v(out: &mut String, cx: f64, v: &Value, y: &dyn Fn(f64) -> f64) {
    if let (Some(lo), Some(hi)) = (v.lo, v.hi) {
        line(out, cx, y(lo), cx, y(hi), "#222", 1.2);
        line(out, cx - 4.0, y(lo), cx + 4.0, y(lo), "#222", 1.2);
        line(out, cx - 4.0, y(hi), cx + 4.0, y(hi), "#222", 1.2);
    }
}

fn describe(v: &Value) -> String {
    match (v.lo, v.hi) {
        (Some(lo), Some(hi)) => format!(
            "{:.1}% (95% CI {:.1}–{:.1})",
            v.value * 100.0,
            lo * 100.0,
            hi * 100.0
        ),
        _ => format!("{:.1}%", v.value * 100.0),
    }
}

/// Horizontal grouped bars on a fixed scale `0..max` (rubric dimensions 0–5): `rows[r] = (label, by series)`.
pub fn profile(
    title: &str,
    description: &str,
    series: &[String],
    rows: &[(String, Vec<Option<Value>>)],
    max: f64,
) -> String {
    let mut out = String::new();
    let legend_rows = legend_rows(series);
    let top = 34.0 + legend_rows * 16.0 + 8.0;
    let left = 170.0;
    let bar_h = 12.0;
    let row_h = bar_h * series.len().max(1) as f64 + 10.0;
    let height = top + row_h * rows.len() as f64 + 30.0;
    open(&mut out, W, height, title, description);
    legend(&mut out, 8.0, 34.0, series);
    let plot_w = W - left - 20.0;
    let x = |v: f64| left + plot_w * (v / max).clamp(0.0, 1.0);
    let bottom = top + row_h * rows.len() as f64;
    for tick in 0..=(max as u32) {
        let v = f64::from(tick);
        line(&mut out, x(v), top - 4.0, x(v), bottom, "#ddd", 1.0);
        text(
            &mut out,
            x(v),
            bottom + 14.0,
            "middle",
            "",
            &format!("{v:.0}"),
        );
    }
    for (r, (label, values)) in rows.iter().enumerate() {
        let ry = top + row_h * r as f64;
        text(
            &mut out,
            left - 6.0,
            ry + row_h / 2.0,
            "end",
            "",
            &truncate(label, 26),
        );
        for (s, v) in values.iter().enumerate() {
            let by = ry + bar_h * s as f64;
            let Some(v) = v else { continue };
            let _ = write!(
                out,
                "<rect x=\"{left:.1}\" y=\"{by:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}</title></rect>",
                (x(v.value) - left).max(0.5),
                bar_h - 2.0,
                colour(s),
                escape(&format!("{}: {:.2}", series.get(s).map_or("", |s| s.as_str()), v.value))
            );
            if let (Some(lo), Some(hi)) = (v.lo, v.hi) {
                let cy = by + (bar_h - 2.0) / 2.0;
                line(&mut out, x(lo), cy, x(hi), cy, "#222", 1.2);
            }
        }
    }
    out.push_str("</svg>");
    out
}

/// 100%-stacked horizontal bars with counts: `rows[r] = (label, count per class)`.
pub fn stacked(
    title: &str,
    description: &str,
    classes: &[String],
    rows: &[(String, Vec<usize>)],
) -> String {
    let mut out = String::new();
    let legend_rows = legend_rows(classes);
    let top = 34.0 + legend_rows * 16.0 + 10.0;
    let left = 170.0;
    let row_h = 26.0;
    let height = top + row_h * rows.len() as f64 + 28.0;
    open(&mut out, W, height, title, description);
    legend(&mut out, 8.0, 34.0, classes);
    let plot_w = W - left - 20.0;
    for tick in 0..=4 {
        let v = f64::from(tick) / 4.0;
        let x = left + plot_w * v;
        line(
            &mut out,
            x,
            top - 4.0,
            x,
            top + row_h * rows.len() as f64,
            "#ddd",
            1.0,
        );
        text(
            &mut out,
            x,
            top + row_h * rows.len() as f64 + 14.0,
            "middle",
            "",
            &format!("{:.0}%", v * 100.0),
        );
    }
    for (r, (label, counts)) in rows.iter().enumerate() {
        let y = top + row_h * r as f64;
        let total: usize = counts.iter().sum();
        text(
            &mut out,
            left - 6.0,
            y + 14.0,
            "end",
            "",
            &truncate(label, 26),
        );
        if total == 0 {
            text(
                &mut out,
                left + 4.0,
                y + 14.0,
                "start",
                "fill=\"#777\"",
                "no labelled wrong answers",
            );
            continue;
        }
        let mut x = left;
        for (c, &n) in counts.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let w = plot_w * n as f64 / total as f64;
            let _ = write!(
                out,
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"18\" fill=\"{}\"><title>{}</title></rect>",
                colour(c),
                escape(&format!("{}: {n} of {total}", classes.get(c).map_or("", |s| s.as_str())))
            );
            if w > 22.0 {
                text(
                    &mut out,
                    x + w / 2.0,
                    y + 13.0,
                    "middle",
                    "fill=\"#fff\" font-size=\"11\"",
                    &n.to_string(),
                );
            }
            x += w;
        }
    }
    out.push_str("</svg>");
    out
}

/// Dots with horizontal CI whiskers on an axis zoomed to the data (BERTScore F1 sits in a narrow band).
pub fn forest(
    title: &str,
    description: &str,
    rows: &[(String, Value)],
    colours: &[usize],
) -> String {
    let mut out = String::new();
    let top = 40.0;
    let left = 220.0;
    let row_h = 22.0;
    let height = top + row_h * rows.len() as f64 + 34.0;
    open(&mut out, W, height, title, description);
    let lo = rows
        .iter()
        .map(|(_, v)| v.lo.unwrap_or(v.value))
        .fold(f64::INFINITY, f64::min);
    let hi = rows
        .iter()
        .map(|(_, v)| v.hi.unwrap_or(v.value))
        .fold(f64::NEG_INFINITY, f64::max);
    let (lo, hi) = nice_range(lo, hi);
    let plot_w = W - left - 24.0;
    let x = |v: f64| left + plot_w * ((v - lo) / (hi - lo)).clamp(0.0, 1.0);
    let bottom = top + row_h * rows.len() as f64;
    for i in 0..=4 {
        let v = lo + (hi - lo) * f64::from(i) / 4.0;
        line(&mut out, x(v), top - 6.0, x(v), bottom, "#ddd", 1.0);
        text(
            &mut out,
            x(v),
            bottom + 14.0,
            "middle",
            "",
            &format!("{v:.3}"),
        );
    }
    for (r, (label, v)) in rows.iter().enumerate() {
        let cy = top + row_h * r as f64 + row_h / 2.0 - 4.0;
        text(
            &mut out,
            left - 8.0,
            cy + 4.0,
            "end",
            "",
            &truncate(label, 34),
        );
        let c = colour(colours.get(r).copied().unwrap_or(r));
        if let (Some(l), Some(h)) = (v.lo, v.hi) {
            line(&mut out, x(l), cy, x(h), cy, c, 2.0);
            line(&mut out, x(l), cy - 4.0, x(l), cy + 4.0, c, 2.0);
            line(&mut out, x(h), cy - 4.0, x(h), cy + 4.0, c, 2.0);
        }
        let _ = write!(
            out,
            "<circle cx=\"{:.1}\" cy=\"{cy:.1}\" r=\"5\" fill=\"{c}\"><title>{}</title></circle>",
            x(v.value),
            escape(&format!("{label}: {:.3}", v.value))
        );
    }
    out.push_str("</svg>");
    out
}

fn nice_range(lo: f64, hi: f64) -> (f64, f64) {
    if !lo.is_finite() || !hi.is_finite() {
        return (0.0, 1.0);
    }
    let span = (hi - lo).max(0.02);
    let lo = ((lo - span * 0.1) * 50.0).floor() / 50.0;
    let hi = ((hi + span * 0.1) * 50.0).ceil() / 50.0;
    (lo.max(-1.0), hi.min(1.0).max(lo + 0.02))
}

/// Where a plot's axes sit on the canvas.
struct Area {
    left: f64,
    top: f64,
    width: f64,
    height: f64,
}

/// A plot's grid and ticks at fifths of each axis (y in percent, x as `x_tick` writes the fraction of its
/// span), its frame and both axis labels.
fn frame(out: &mut String, a: &Area, x_tick: &dyn Fn(f64) -> String, x_label: &str, y_label: &str) {
    let (left, top, bottom) = (a.left, a.top, a.top + a.height);
    for i in 0..=5 {
        let f = f64::from(i) / 5.0;
        let (x, y) = (left + a.width * f, top + a.height * (1.0 - f));
        line(out, x, top, x, bottom, "#eee", 1.0);
        line(out, left, y, left + a.width, y, "#eee", 1.0);
        text(out, x, bottom + 16.0, "middle", "", &x_tick(f));
        text(
            out,
            left - 6.0,
            y + 4.0,
            "end",
            "",
            &format!("{:.0}%", f * 100.0),
        );
    }
    let _ = write!(
        out,
        "<rect x=\"{left}\" y=\"{top}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>",
        a.width, a.height
    );
    let bold = "font-weight=\"bold\"";
    text(
        out,
        left + a.width / 2.0,
        bottom + 36.0,
        "middle",
        bold,
        x_label,
    );
    let _ = write!(
        out,
        "<text x=\"16\" y=\"{0:.1}\" text-anchor=\"middle\" font-weight=\"bold\" transform=\"rotate(-90 16 {0:.1})\">{1}</text>",
        top + a.height / 2.0,
        escape(y_label)
    );
}

/// One point of the two-axis scatter.
pub struct Point {
    pub label: String,
    pub x: Value,
    pub y: Value,
}

/// Scatter on 0–100% × 0–100% with whiskers on both axes and a label per point.
pub fn scatter(
    title: &str,
    description: &str,
    x_label: &str,
    y_label: &str,
    points: &[Point],
    note: &str,
) -> String {
    let mut out = String::new();
    let (left, top, size) = (64.0, 40.0, 380.0);
    let height = top + size + 70.0;
    open(&mut out, W, height, title, description);
    let x = |v: f64| left + size * v.clamp(0.0, 1.0);
    let y = |v: f64| top + size * (1.0 - v.clamp(0.0, 1.0));
    let area = Area {
        left,
        top,
        width: size,
        height: size,
    };
    let percent = |f: f64| format!("{:.0}%", f * 100.0);
    frame(&mut out, &area, &percent, x_label, y_label);
    line(&mut out, x(0.0), y(0.0), x(1.0), y(1.0), "#bbb", 1.0);
    for (i, p) in points.iter().enumerate() {
        let c = colour(i);
        let (px, py) = (x(p.x.value), y(p.y.value));
        if let (Some(lo), Some(hi)) = (p.x.lo, p.x.hi) {
            line(&mut out, x(lo), py, x(hi), py, c, 1.5);
        }
        if let (Some(lo), Some(hi)) = (p.y.lo, p.y.hi) {
            line(&mut out, px, y(lo), px, y(hi), c, 1.5);
        }
        let _ = write!(
            out,
            "<circle class=\"point\" cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"6\" fill=\"{c}\" stroke=\"#fff\"><title>{}</title></circle>",
            escape(&format!("{}: breadth {}, depth {}", p.label, describe(&p.x), describe(&p.y)))
        );
        text(
            &mut out,
            px + 9.0,
            py - 8.0,
            "start",
            &format!("fill=\"{c}\" font-size=\"11\""),
            &truncate(&p.label, 24),
        );
    }
    // A key on the right: colour, model, both values.
    let kx = left + size + 24.0;
    for (i, p) in points.iter().enumerate() {
        let ky = top + 14.0 + 34.0 * i as f64;
        let _ = write!(
            out,
            "<circle cx=\"{kx:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"{}\"/>",
            ky - 4.0,
            colour(i)
        );
        text(
            &mut out,
            kx + 10.0,
            ky,
            "start",
            "",
            &truncate(&p.label, 26),
        );
        text(
            &mut out,
            kx + 10.0,
            ky + 14.0,
            "start",
            "fill=\"#555\" font-size=\"10\"",
            &format!("{:.1}% / {:.1}%", p.x.value * 100.0, p.y.value * 100.0),
        );
    }
    text(&mut out, 8.0, height - 8.0, "start", "fill=\"#333\"", note);
    out.push_str("</svg>");
    out
}

/// One run on the accuracy-against-cost chart.
pub struct CostPoint {
    pub label: String,
    /// Dollars per 100 answered samples.
    pub dollars: f64,
    pub accuracy: Value,
}

/// Accuracy (0–100%, with CI whiskers) against dollars (from 0 to a round number past the dearest run), a
/// label per point.
pub fn cost_scatter(title: &str, description: &str, points: &[CostPoint]) -> String {
    let mut out = String::new();
    let (left, top, width, height) = (64.0, 40.0, 420.0, 300.0);
    open(&mut out, W, top + height + 60.0, title, description);
    let most = points.iter().map(|p| p.dollars).fold(0.0, f64::max);
    let max = round_up(most);
    let x = |v: f64| left + width * (v / max).clamp(0.0, 1.0);
    let y = |v: f64| top + height * (1.0 - v.clamp(0.0, 1.0));
    let area = Area {
        left,
        top,
        width,
        height,
    };
    let dollars = |f: f64| format!("${}", trim_zeros(f * max));
    let x_label = "dollars per 100 answered samples";
    frame(&mut out, &area, &dollars, x_label, "accuracy");
    for (i, p) in points.iter().enumerate() {
        let c = colour(i);
        let (px, py) = (x(p.dollars), y(p.accuracy.value));
        whisker_v(&mut out, px, &p.accuracy, &y);
        let what = format!(
            "{}: ${:.4} per 100, accuracy {}",
            p.label,
            p.dollars,
            describe(&p.accuracy)
        );
        let _ = write!(
            out,
            "<circle class=\"point\" cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"6\" fill=\"{c}\" stroke=\"#fff\"><title>{}</title></circle>",
            escape(&what)
        );
        let style = format!("fill=\"{c}\" font-size=\"11\"");
        text(
            &mut out,
            px + 9.0,
            py - 8.0,
            "start",
            &style,
            &truncate(&p.label, 24),
        );
    }
    out.push_str("</svg>");
    out
}

/// The smallest of 1, 2 or 5 times a power of ten at or above `v` (1 for nothing to show).
fn round_up(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|t| *t >= v)
        .unwrap_or(10.0 * power)
}

/// A tick's dollars without trailing zeros (0.25, 2, 0.0004).
fn trim_zeros(v: f64) -> String {
    let s = format!("{v:.6}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `base` mixed with white: `share` 0 is white, 1 is `base`.
fn shade(base: (u8, u8, u8), share: f64) -> String {
    let s = share.clamp(0.0, 1.0);
    let mix = |c: u8| (255.0 - (255.0 - f64::from(c)) * s).round() as u8;
    format!("#{:02x}{:02x}{:02x}", mix(base.0), mix(base.1), mix(base.2))
}

/// A confusion matrix as a heat map: `rows` are true classes, `columns` what was answered, `counts[r][c]` the
/// answers. Each cell is shaded by its share of the row (so rare classes read as well as common ones) and carries
/// its count; the last `extra` columns (abstain, invalid) take a second hue so they do not read as classes.
pub fn heatmap(
    title: &str,
    description: &str,
    rows: &[String],
    columns: &[String],
    counts: &[Vec<u64>],
    extra: usize,
) -> String {
    let cell = 54.0;
    let widest = |labels: &[String]| {
        labels
            .iter()
            .map(|l| truncate(l, 22).chars().count())
            .max()
            .unwrap_or(0)
    };
    let left = 24.0 + widest(rows) as f64 * 6.6;
    // Column labels are turned 40 degrees, so their height is about 0.64 of their length.
    let top = 62.0 + widest(columns) as f64 * 6.6 * 0.64;
    let width = left + cell * columns.len() as f64 + 56.0;
    let height = top + cell * rows.len() as f64 + 40.0;
    let mut out = String::new();
    open(&mut out, width, height, title, description);
    heat_header(&mut out, columns, (left, top, cell));
    let class_columns = columns.len().saturating_sub(extra);
    for (r, (label, row)) in rows.iter().zip(counts).enumerate() {
        let y = top + cell * r as f64;
        text(
            &mut out,
            left - 8.0,
            y + cell / 2.0 + 4.0,
            "end",
            "",
            &truncate(label, 22),
        );
        let total: u64 = row.iter().sum();
        for (c, &n) in row.iter().enumerate() {
            let column = columns.get(c).map_or("", String::as_str);
            heat_cell(
                &mut out,
                (left + cell * c as f64, y, cell),
                (label, column),
                (n, total),
                (c >= class_columns, column == label.as_str()),
            );
        }
        let x = left + cell * columns.len() as f64 + 28.0;
        text(
            &mut out,
            x,
            y + cell / 2.0 + 4.0,
            "middle",
            "fill=\"#555\"",
            &total.to_string(),
        );
    }
    let note = "Shade: share of the reference class's answers. Outlined: correct. Orange: abstained or invalid.";
    text(
        &mut out,
        8.0,
        height - 12.0,
        "start",
        "fill=\"#333\" font-size=\"11\"",
        note,
    );
    out.push_str("</svg>");
    out
}

/// The key line and the column labels of [`heatmap`] (turned so long class names fit), then `n` over the row
/// totals; `at` is `(left, top, cell size)`.
fn heat_header(out: &mut String, columns: &[String], at: (f64, f64, f64)) {
    let (left, top, cell) = at;
    let small = "fill=\"#555\" font-size=\"11\"";
    text(
        out,
        8.0,
        36.0,
        "start",
        small,
        "rows: reference class · columns: answer",
    );
    for (c, label) in columns.iter().enumerate() {
        let (x, y) = (left + cell * (c as f64 + 0.5), top - 8.0);
        let _ = write!(
            out,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"start\" transform=\"rotate(-40 {x:.1} {y:.1})\">{}</text>",
            escape(&truncate(label, 22))
        );
    }
    let x = left + cell * columns.len() as f64 + 28.0;
    text(out, x, top - 8.0, "middle", "font-weight=\"bold\"", "n");
}

/// One cell of [`heatmap`]: `(x, y, size)`, `(reference, answer)`, `(count, row total)`, `(extra, diagonal)`.
fn heat_cell(
    out: &mut String,
    at: (f64, f64, f64),
    labels: (&str, &str),
    n: (u64, u64),
    kind: (bool, bool),
) {
    let (x, y, size) = at;
    let (count, total) = n;
    let share = if total == 0 {
        0.0
    } else {
        count as f64 / total as f64
    };
    let base = if kind.0 {
        (0xD5, 0x5E, 0x00)
    } else {
        (0x00, 0x72, 0xB2)
    };
    let stroke = if kind.1 {
        "stroke=\"#1d1d1d\" stroke-width=\"2\""
    } else {
        "stroke=\"#fff\" stroke-width=\"1\""
    };
    let _ = write!(
        out,
        "<rect class=\"cell\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\" {stroke}><title>{}</title></rect>",
        x + 1.0,
        y + 1.0,
        size - 2.0,
        size - 2.0,
        shade(base, share),
        escape(&format!("reference {}, answer {}: {count} of {total}", labels.0, labels.1))
    );
    let ink = if share > 0.55 { "#fff" } else { "#1d1d1d" };
    text(
        out,
        x + size / 2.0,
        y + size / 2.0 + 5.0,
        "middle",
        &format!("fill=\"{ink}\" font-size=\"14\""),
        &count.to_string(),
    );
}

/// A reliability diagram: one dot per non-empty bin at (mean stated confidence, accuracy), its area by the
/// answers in the bin, a line to the diagonal showing the gap, and the diagonal of perfect calibration.
pub fn reliability(title: &str, description: &str, bins: &[nmb_stats::Bin]) -> String {
    let plot = Square {
        left: 60.0,
        top: 44.0,
        size: 320.0,
    };
    let (width, height) = (plot.left + plot.size + 200.0, plot.top + plot.size + 52.0);
    let mut out = String::new();
    open(&mut out, width, height, title, description);
    plot.axes(&mut out, "mean stated confidence", "accuracy");
    let filled: Vec<(&nmb_stats::Bin, f64, f64)> = bins
        .iter()
        .filter(|b| b.count > 0)
        .filter_map(|b| Some((b, b.confidence?, b.accuracy?)))
        .collect();
    let most = filled
        .iter()
        .map(|(b, _, _)| b.count)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    for (b, conf, acc) in &filled {
        let r = 3.0 + 9.0 * (b.count as f64 / most).sqrt();
        bin_dot(&mut out, &plot, b, (*conf, *acc), r);
    }
    let key = [
        ("#0072B2", "dot: one bin; area by answers"),
        ("#555", "number: answers in the bin"),
        ("#D55E00", "line: gap to the diagonal"),
        ("#888", "dashed: perfect calibration"),
    ];
    let kx = plot.left + plot.size + 20.0;
    for (i, (colour, label)) in key.iter().enumerate() {
        let ky = plot.top + 14.0 + 20.0 * i as f64;
        text(
            &mut out,
            kx,
            ky,
            "start",
            &format!("fill=\"{colour}\" font-size=\"11\""),
            label,
        );
    }
    if filled.is_empty() {
        let (x, y) = (plot.x(0.5), plot.y(0.5));
        text(
            &mut out,
            x,
            y,
            "middle",
            "fill=\"#777\"",
            "no answer with a usable confidence",
        );
    }
    out.push_str("</svg>");
    out
}

/// A 0–1 by 0–1 plot area: `left`, `top` and side length in pixels.
struct Square {
    left: f64,
    top: f64,
    size: f64,
}

impl Square {
    fn x(&self, v: f64) -> f64 {
        self.left + self.size * v.clamp(0.0, 1.0)
    }

    fn y(&self, v: f64) -> f64 {
        self.top + self.size * (1.0 - v.clamp(0.0, 1.0))
    }

    /// Grid, ticks (x as a fraction, y as a percentage), frame, dashed diagonal and axis titles.
    fn axes(&self, out: &mut String, x_label: &str, y_label: &str) {
        let (left, top, size) = (self.left, self.top, self.size);
        for i in 0..=5 {
            let v = f64::from(i) / 5.0;
            line(out, self.x(v), top, self.x(v), top + size, "#eee", 1.0);
            line(out, left, self.y(v), left + size, self.y(v), "#eee", 1.0);
            text(
                out,
                self.x(v),
                top + size + 16.0,
                "middle",
                "",
                &format!("{v:.1}"),
            );
            let percent = format!("{:.0}%", v * 100.0);
            text(out, left - 6.0, self.y(v) + 4.0, "end", "", &percent);
        }
        let _ = write!(
            out,
            "<rect x=\"{left}\" y=\"{top}\" width=\"{size}\" height=\"{size}\" fill=\"none\" stroke=\"#333\"/>\
             <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#888\" stroke-width=\"1.2\" stroke-dasharray=\"5 4\"/>",
            self.x(0.0),
            self.y(0.0),
            self.x(1.0),
            self.y(1.0)
        );
        let bold = "font-weight=\"bold\"";
        text(
            out,
            left + size / 2.0,
            top + size + 36.0,
            "middle",
            bold,
            x_label,
        );
        let _ = write!(
            out,
            "<text x=\"16\" y=\"{c:.1}\" text-anchor=\"middle\" {bold} transform=\"rotate(-90 16 {c:.1})\">{}</text>",
            escape(y_label),
            c = top + size / 2.0
        );
    }
}

/// One bin of [`reliability`] at `(confidence, accuracy)` with radius `r`: the gap line, the dot, its count.
fn bin_dot(out: &mut String, plot: &Square, b: &nmb_stats::Bin, at: (f64, f64), r: f64) {
    let (conf, acc) = at;
    let (x, y) = (plot.x(conf), plot.y(acc));
    line(out, x, y, x, plot.y(conf), "#D55E00", 1.5);
    let _ = write!(
        out,
        "<circle class=\"bin\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r:.1}\" fill=\"#0072B2\" fill-opacity=\"0.85\" stroke=\"#fff\"><title>{}</title></circle>",
        escape(&format!(
            "confidence {:.1}–{:.1}: {} answer(s), mean confidence {conf:.3}, accuracy {:.1}%",
            b.lo,
            b.hi,
            b.count,
            acc * 100.0
        ))
    );
    let small = "fill=\"#555\" font-size=\"10\"";
    text(
        out,
        x + r + 2.0,
        y + 4.0,
        "start",
        small,
        &b.count.to_string(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bin(lo: f64, count: usize, confidence: f64, accuracy: f64) -> nmb_stats::Bin {
        nmb_stats::Bin {
            lo,
            hi: lo + 0.1,
            count,
            confidence: (count > 0).then_some(confidence),
            accuracy: (count > 0).then_some(accuracy),
        }
    }

    #[test]
    fn the_heat_map_escapes_labels_and_writes_every_count() {
        let rows = vec!["<b>stroke</b>".to_string(), "tumor & co".to_string()];
        let columns = vec![
            "<b>stroke</b>".to_string(),
            "tumor & co".to_string(),
            "abstain".to_string(),
            "invalid".to_string(),
        ];
        let counts = vec![vec![7, 1, 0, 2], vec![3, 11, 4, 0]];
        let svg = heatmap("t <x>", "d", &rows, &columns, &counts, 2);
        assert!(!svg.contains("<b>"), "labels are escaped: {svg}");
        assert!(svg.contains("&lt;b&gt;stroke&lt;/b&gt;") && svg.contains("tumor &amp; co"));
        assert_eq!(
            svg.matches("class=\"cell\"").count(),
            8,
            "one cell per count"
        );
        for (r, row) in counts.iter().enumerate() {
            let total: u64 = row.iter().sum();
            for (c, n) in row.iter().enumerate() {
                let title = format!(
                    "reference {}, answer {}: {n} of {total}",
                    escape(&rows[r]),
                    escape(&columns[c])
                );
                assert!(svg.contains(&title), "{title}");
            }
        }
        for n in [7, 1, 0, 2, 3, 11, 4] {
            assert!(
                svg.contains(&format!(">{n}</text>")),
                "count {n} is written"
            );
        }
        // Shaded by the share of the row: classes in blue, abstain and invalid in orange, empty cells white.
        for (base, share) in [((0x00, 0x72, 0xB2), 0.7), ((0xD5, 0x5E, 0x00), 0.2)] {
            let fill = format!("fill=\"{}\"", shade(base, share));
            assert!(svg.contains(&fill), "{fill}");
        }
        assert_eq!(shade((0x00, 0x72, 0xB2), 1.0), "#0072b2");
        assert!(svg.contains("fill=\"#ffffff\""), "an empty cell is white");
    }

    #[test]
    fn the_reliability_diagram_draws_one_mark_per_non_empty_bin() {
        let bins: Vec<nmb_stats::Bin> = (0..10)
            .map(|i| {
                let lo = f64::from(i) / 10.0;
                let count = [0, 0, 3, 0, 5, 0, 0, 9, 12, 1][i as usize];
                bin(lo, count, lo + 0.05, 0.5)
            })
            .collect();
        let svg = reliability("Reliability <m>", "d", &bins);
        assert_eq!(svg.matches("class=\"bin\"").count(), 5);
        assert!(svg.contains("Reliability &lt;m&gt;"));
        assert!(svg.contains("stroke-dasharray"), "the diagonal");
        // Dot area grows with the count: the 12-answer bin's dot is the largest.
        assert!(svg.contains("r=\"12.0\""), "{svg}");
        let empty = reliability("r", "d", &[bin(0.0, 0, 0.0, 0.0)]);
        assert_eq!(empty.matches("class=\"bin\"").count(), 0);
        assert!(empty.contains("no answer with a usable confidence"));
    }
}
