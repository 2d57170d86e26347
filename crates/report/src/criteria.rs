//! The criterion-rubric table: each run's score by HealthBench's rule, overall and by tag.

use crate::summary::{run_columns, ScoredRun};
use crate::table::{percent, Cell, Table};

/// One row per run and measure (all criteria, then each tag), or `None` when no run was scored with criteria.
pub fn table(runs: &[ScoredRun]) -> Option<Table> {
    let mut t = Table::new(
        "Criterion rubric (HealthBench's rule): an answer earns the points of the criteria it meets, harms \
         subtract theirs, over the points a complete answer could earn; the run's score is the mean over answers, \
         clipped to 0–100%, with a 95% bootstrap CI over cases. 60% means the answers earned on average 60% of \
         what a complete, harmless answer earns. Answers a judge could not decide are left out and counted.",
        &run_columns(&[
            ("criteria", false),
            ("answers", true),
            ("score", true),
            ("undecided", true),
        ]),
    );
    for r in runs {
        let Some(c) = &r.scores.criteria else {
            continue;
        };
        let mut row = r.cells();
        row.extend([
            Cell::new(format!("all ({} v{})", c.rubric.id, c.rubric.version)),
            Cell::new(c.answers.to_string()),
            percent(c.score.as_ref()),
            Cell::new(c.undecided.to_string()),
        ]);
        t.push(row);
        for tag in &c.by_tag {
            let mut row = r.cells();
            row.extend([
                Cell::new(&tag.tag),
                Cell::new(tag.answers.to_string()),
                percent(Some(&tag.score)),
                Cell::muted(""),
            ]);
            t.push(row);
        }
    }
    (!t.rows.is_empty()).then_some(t)
}
