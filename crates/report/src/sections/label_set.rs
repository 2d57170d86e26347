//! The label-set table: runs whose multiple-choice items all offer the same options (PubMedQA's yes / no /
//! maybe), with the macro-F1 and per-label F1 their official scoring reports beside accuracy.

use crate::input::RunData;
use crate::sections::summary::{run_columns, ScoredRun};
use crate::table::{percent, Cell, Table};

/// One row per run with label-set scores, or `None` when no run has them.
pub fn table(runs: &[RunData]) -> Option<Table> {
    let mut t = Table::new(
        "Multiple-choice suites whose items all offer the same options: macro- and weighted-F1 over the labels and \
         each label's F1, with 95% bootstrap CIs over cases. An answer with no recognisable choice is a false \
         negative for its true label, never a false positive.",
        &run_columns(&[
            ("labels", false),
            ("n", true),
            ("accuracy", true),
            ("macro-F1", true),
            ("weighted-F1", true),
            ("F1 per label", false),
            ("no choice", true),
        ]),
    );
    for r in ScoredRun::of(runs) {
        let Some(l) = &r.scores.label_set else {
            continue;
        };
        let per_label: Vec<String> = l
            .labels
            .iter()
            .map(|label| {
                let f1 = l.per_label.get(label).and_then(|c| c.f1.as_ref());
                f1.map_or(format!("{label} –"), |e| {
                    format!("{label} {:.1}%", e.value * 100.0)
                })
            })
            .collect();
        let mut row = r.cells();
        row.extend([
            Cell::new(l.labels.join(" / ")),
            Cell::new(l.n.to_string()),
            percent(Some(&l.accuracy)),
            percent(Some(&l.macro_f1)),
            percent(Some(&l.weighted_f1)),
            Cell::new(per_label.join(" · ")),
            Cell::new(l.extraction_failures.to_string()),
        ]);
        t.push(row);
    }
    (!t.rows.is_empty()).then_some(t)
}
