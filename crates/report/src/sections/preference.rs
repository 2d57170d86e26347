//! Pairwise preference in the report: for each pairwise review set over the reported runs, the ranking table
//! (model, rating with its CI, wins / ties / losses, votes where neither answer was acceptable), the win-rate
//! matrix and one sentence, from `nmb_review::run_pairwise`.

use nmb_review::PairwiseRanking;
use nmb_table::{Cell, Table};

use crate::input::RunData;

/// Every pairwise set's ranking over the runs, each once (a set usually covers several of them).
pub(crate) fn rankings(runs: &[RunData]) -> Vec<&PairwiseRanking> {
    let mut out: Vec<&PairwiseRanking> = Vec::new();
    for r in runs.iter().flat_map(|r| &r.pairwise) {
        if !out.iter().any(|o| o.set_id == r.set_id) {
            out.push(r);
        }
    }
    out
}

pub(crate) fn ranking_table(p: &PairwiseRanking) -> Table {
    let mut t = Table::new(
        "Ratings from the clinicians' votes: Bradley–Terry with Davidson's ties, on the Elo-like scale (1000 is \
         the average model; 400 points are a factor of 10 in the odds of being preferred), answer length and \
         markdown formatting held equal where the votes allow; 95% bootstrap CIs over tasks. \"Neither\" votes \
         (both answers unacceptable) are left out of the ratings and counted here.",
        &[
            ("rank", true),
            ("model", false),
            ("rating", true),
            ("wins", true),
            ("ties", true),
            ("losses", true),
            ("neither acceptable", true),
        ],
    );
    for (i, m) in p.models.iter().enumerate() {
        let rating = match &m.rating {
            Some(e) => Cell::estimate(e.value, e.ci_low, e.ci_high, 1.0, 0, ""),
            None => Cell::undefined("too few votes for a finite rating"),
        };
        t.push(vec![
            Cell::new((i + 1).to_string()),
            Cell::new(&m.model),
            rating,
            Cell::new(m.wins.to_string()),
            Cell::new(m.ties.to_string()),
            Cell::new(m.losses.to_string()),
            Cell::new(m.neither.to_string()),
        ]);
    }
    t
}

pub(crate) fn win_rate_table(p: &PairwiseRanking) -> Table {
    let names: Vec<&str> = p.models.iter().map(|m| m.model.as_str()).collect();
    let mut columns: Vec<(&str, bool)> = vec![("row beats column", false)];
    columns.extend(names.iter().map(|n| (*n, true)));
    let mut t = Table::new(
        "Win rate of the row's model against the column's: the share of their votes the row won, a tie \
         counting half.",
        &columns,
    );
    for (name, row) in names.iter().zip(&p.win_rate) {
        let mut cells = vec![Cell::new(*name)];
        cells.extend(row.iter().map(|w| match w {
            Some(w) => Cell::new(format!("{:.0}%", w * 100.0)),
            None => Cell::undefined("no votes between these two"),
        }));
        t.push(cells);
    }
    t
}

pub(crate) fn judges_table(p: &PairwiseRanking) -> Option<Table> {
    if p.judges.is_empty() {
        return None;
    }
    let mut t = Table::new(
        "LLM judges asked the same pairs in both orders: the share of pairs whose verdict flips when the answers          swap places, the share of decisive verdicts won by the answer shown first (50% is no position bias), and          the share of pairs where the judge's verdict (a tie when it flips) is the clinicians' majority; 95%          bootstrap CIs over tasks.",
        &[
            ("judge", false),
            ("pairs", true),
            ("flips with order", true),
            ("first shown wins", true),
            ("agrees with clinicians", true),
        ],
    );
    let share = |e: Option<&nmb_stats::Estimate>| match e {
        Some(e) => Cell::estimate(e.value, e.ci_low, e.ci_high, 100.0, 0, "%"),
        None => Cell::undefined("undefined on these pairs"),
    };
    for j in &p.judges {
        let bias = j.position_bias.as_ref();
        t.push(vec![
            Cell::new(&j.judge),
            Cell::new(j.pairs.to_string()),
            share(bias.map(|b| &b.flip_share)),
            share(bias.map(|b| &b.first_position_wins)),
            share(j.agreement.as_ref()),
        ]);
    }
    Some(t)
}

pub(crate) fn title(p: &PairwiseRanking) -> String {
    format!(
        "review set {} · clinicians: {} · {} votes ({} neither acceptable)",
        p.set_id,
        p.reviewers.join(", "),
        p.votes + p.neither,
        p.neither
    )
}
