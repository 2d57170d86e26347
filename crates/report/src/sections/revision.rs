//! The revision table: per run and level, how multi-turn consults moved as evidence arrived (first- and
//! last-turn accuracy, changed top diagnosis, wrong → right and right → wrong), built once for HTML and
//! Markdown. The numbers are the score report's ([`nmb_results::revision`]).

use nmb_results::revision::{Rate, RevisionGroup};
use nmb_suite::Level;

use crate::input::RunData;
use crate::sections::summary::{run_columns, ScoredRun};
use crate::table::{percent, Cell, Table};

/// One row per run with consults and level (and one for all levels when a run has several), or `None` when no
/// run has consult scores.
pub fn table(runs: &[RunData]) -> Option<Table> {
    let mut t = Table::new(
        "Multi-turn consults, every turn scored by the rules that score the final answer (no judge is asked about \
         an intermediate turn; a verdict the judges gave on the same candidate is reused). Accuracy at the first \
         and the last turn; changed: the last turn's top diagnosis is not the first turn's by the matching rules \
         (normalisation, abbreviations, the lexicon); wrong → right and right → wrong: the share of consults with \
         at least one such step between consecutive turns. Unparseable turns count as wrong; unresolved turns \
         (the rules cannot decide) are left out of each number they would decide and counted in the last column. \
         Each share has its count and a 95% bootstrap CI over cases.",
        &run_columns(&[
            ("level", false),
            ("consults", true),
            ("first-turn accuracy", true),
            ("last-turn accuracy", true),
            ("changed top diagnosis", true),
            ("wrong → right", true),
            ("right → wrong", true),
            ("unresolved turns", true),
        ]),
    );
    for r in ScoredRun::of(runs) {
        let Some(rev) = &r.scores.revision else {
            continue;
        };
        let mut groups: Vec<&RevisionGroup> = rev.by_level.iter().collect();
        if groups.len() != 1 {
            groups.push(&rev.overall);
        }
        for g in groups {
            let mut row = r.cells();
            row.extend([
                Cell::new(g.level.map_or("all", Level::as_str)),
                Cell::new(g.consults.to_string()),
                share(
                    percent(g.first_turn.accuracy.as_ref()),
                    g.first_turn.correct,
                    g.first_turn.n,
                ),
                share(
                    percent(g.last_turn.accuracy.as_ref()),
                    g.last_turn.correct,
                    g.last_turn.n,
                ),
                rate(&g.changed_top_diagnosis),
                rate(&g.wrong_to_right),
                rate(&g.right_to_wrong),
                Cell::new(g.unresolved_turns.to_string()),
            ]);
            t.push(row);
        }
    }
    (!t.rows.is_empty()).then_some(t)
}

fn rate(r: &Rate) -> Cell {
    share(percent(r.share.as_ref()), r.count, r.n)
}

/// A percentage cell with `count/n` before its CI; a dash with the reason when nothing was decided.
fn share(cell: Cell, count: usize, n: usize) -> Cell {
    if n == 0 {
        return Cell::undefined("no consult could be decided");
    }
    Cell {
        text: format!("{} ({count}/{n})", cell.text),
        ..cell
    }
}
