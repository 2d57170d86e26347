//! Paired comparisons between models run on the same suite.

use std::fmt::Write;

use super::escape;
use crate::analysis::Analysis;

pub(super) fn paired(h: &mut String, analysis: &Analysis) {
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
