//! Curves over k (pass@k and worst-at-k): each series a line through its points at k = 1, 2, …, each point
//! with its CI whisker; dashed series are drawn dashed.

use std::fmt::Write;

use super::{colour, describe, frame, line, open, whisker_v, Area, Value, W};
use crate::render::escape;

/// One line on the chart.
pub struct Curve {
    pub label: String,
    /// The palette index of its colour (a run's pass@k and worst-at-k share one).
    pub colour: usize,
    pub dashed: bool,
    /// (k, value) in rising k.
    pub points: Vec<(usize, Value)>,
}

/// Values on a 0–100% axis against k from 1 to the largest k of any curve.
pub fn over_k(title: &str, description: &str, y_label: &str, curves: &[Curve]) -> String {
    let mut out = String::new();
    let top = 44.0 + curves.len() as f64 * 16.0;
    let area = Area {
        left: 64.0,
        top,
        width: W - 64.0 - 24.0,
        height: 260.0,
    };
    open(&mut out, W, top + area.height + 60.0, title, description);
    legend(&mut out, area.left, curves);
    let max_k = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .max()
        .unwrap_or(1)
        .max(2);
    let span = (max_k - 1) as f64;
    let x = |k: usize| area.left + area.width * ((k - 1) as f64 / span);
    let y = |v: f64| area.top + area.height * (1.0 - v.clamp(0.0, 1.0));
    let tick = |f: f64| {
        format!("{:.1}", 1.0 + f * span)
            .trim_end_matches(".0")
            .to_string()
    };
    frame(&mut out, &area, &tick, "k (samples drawn)", y_label);
    for c in curves {
        let stroke = colour(c.colour);
        for pair in c.points.windows(2) {
            let ((ka, a), (kb, b)) = (&pair[0], &pair[1]);
            if c.dashed {
                let _ = write!(
                    out,
                    "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{stroke}\" stroke-width=\"1.5\" stroke-dasharray=\"5 4\"/>",
                    x(*ka),
                    y(a.value),
                    x(*kb),
                    y(b.value)
                );
            } else {
                line(
                    &mut out,
                    x(*ka),
                    y(a.value),
                    x(*kb),
                    y(b.value),
                    stroke,
                    1.5,
                );
            }
        }
        for (k, v) in &c.points {
            whisker_v(&mut out, x(*k), v, &y);
            let _ = write!(
                out,
                "<circle class=\"curve-point\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{}\" stroke=\"{stroke}\"><title>{}</title></circle>",
                x(*k),
                y(v.value),
                if c.dashed { "#fff" } else { stroke },
                escape(&format!("{} at k = {k}: {}", c.label, describe(v)))
            );
        }
    }
    out.push_str("</svg>");
    out
}

/// One legend line per curve, in its colour, dashed curves marked (a run's two curves share a colour).
fn legend(out: &mut String, x: f64, curves: &[Curve]) {
    for (i, c) in curves.iter().enumerate() {
        let cy = 34.0 + i as f64 * 16.0;
        let _ = write!(
            out,
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"3\" fill=\"{}\"/>",
            cy - 5.0,
            colour(c.colour)
        );
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{cy:.1}\">{}{}</text>",
            x + 16.0,
            escape(&c.label),
            if c.dashed { " (dashed)" } else { "" }
        );
    }
}
