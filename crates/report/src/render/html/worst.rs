//! Worst-at-k beside pass@k: the table of [`crate::sections::worst::table`] and one chart per score, a run's
//! pass@k dashed and its worst-at-k solid in one colour.

use crate::render::svg::curves::{over_k, Curve};
use crate::render::svg::Value;
use crate::sections::analysis::Analysis;
use crate::sections::worst::{table, WorstScore};

pub(super) fn worst(h: &mut String, analysis: &Analysis) {
    let Some(t) = table(&analysis.worst_at_k) else {
        return;
    };
    h.push_str("<h2 id=\"worst-at-k\">Worst-at-k beside pass@k</h2>");
    h.push_str(&t.html());
    h.push_str("<div class=\"charts\">");
    for score in [WorstScore::Accuracy, WorstScore::Criteria] {
        let mut curves = Vec::new();
        let runs = analysis.worst_at_k.iter().filter(|c| c.score == score);
        for (i, c) in runs.enumerate() {
            let pass: Vec<(usize, Value)> = (c.points.iter())
                .filter_map(|p| Some((p.k, Value::from_estimate(p.pass_at_k.as_ref()?))))
                .collect();
            if !pass.is_empty() {
                curves.push(Curve {
                    label: format!("{} pass@k", c.name),
                    colour: i,
                    dashed: true,
                    points: pass,
                });
            }
            curves.push(Curve {
                label: format!("{} worst-at-k", c.name),
                colour: i,
                dashed: false,
                points: (c.points.iter())
                    .map(|p| (p.k, Value::from_estimate(&p.worst_at_k)))
                    .collect(),
            });
        }
        if curves.is_empty() {
            continue;
        }
        h.push_str(&over_k(
            &format!("Worst-at-k and pass@k, {}", score.label()),
            "Per run: pass@k (dashed, the chance that some of k samples is right) and worst-at-k (solid, the expected \
             lowest score of k samples) against k; whiskers are case-clustered 95% bootstrap intervals.",
            score.label(),
            &curves,
        ));
    }
    h.push_str("</div>");
}
