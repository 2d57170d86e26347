//! The thinking section (built in [`crate::sections::thinking`]): the table per level and family, one chart of accuracy
//! against thinking length per unit of measure, and the table behind the charts.

use crate::render::svg::thinking::{accuracy_by_length, Bin, Series};
use crate::render::svg::Value;
use crate::sections::analysis::Analysis;
use crate::sections::thinking::{self as data, Measure, RunThinking};

pub(super) fn thinking(h: &mut String, analysis: &Analysis) {
    let runs = &analysis.thinking;
    let Some(t) = data::table(runs) else {
        return;
    };
    h.push_str("<h2 id=\"thinking\">Thinking</h2>");
    h.push_str(&t.html());
    for measure in [Measure::ReportedTokens, Measure::CountedWords] {
        let series = series(runs, measure);
        if !series.is_empty() {
            h.push_str(&accuracy_by_length(
                &format!("Accuracy against thinking length ({})", measure.unit()),
                "Each run's scored answers binned by the length of their thinking (none, then the quartiles): a \
                 point per bin at its median length with the accuracy's 95% CI, a bar along the lengths it spans.",
                measure.unit(),
                &series,
            ));
        }
    }
    if let Some(t) = data::bins_table(runs) {
        h.push_str("<h3 id=\"thinking-length\">Accuracy by thinking length</h3>");
        h.push_str(&t.html());
    }
}

/// The runs measured in `measure` with a bin whose accuracy has a CI, as chart series.
fn series(runs: &[RunThinking], measure: Measure) -> Vec<Series> {
    runs.iter()
        .filter(|r| r.measure == measure)
        .map(|r| Series {
            label: r.name.clone(),
            bins: (r.bins.iter())
                .filter_map(|b| {
                    Some(Bin {
                        min: b.min,
                        median: b.median,
                        max: b.max,
                        answers: b.answers,
                        accuracy: Value::from_estimate(b.accuracy.as_ref()?),
                    })
                })
                .collect(),
        })
        .filter(|s| !s.bins.is_empty())
        .collect()
}
