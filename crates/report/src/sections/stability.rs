//! Judge stability (`nmb score --judge-repeats K`): per run, judge and quantity, the test–retest ICC and
//! Fleiss' kappa between the judge's repeats; the items whose repeats disagree; what the repeats added; and one
//! sentence per judge a clinician can read. Built once as tables for HTML, Markdown and the terminal; the numbers
//! are the score report's ([`nmb_results::stability`]).

use nmb_results::stability::{JudgeStability, StabilityReport};
use nmb_stats::Estimate;

use crate::sections::summary::{run_columns, ScoredRun};
use crate::table::{Cell, Table};

/// Unstable items listed per run, at most; the score report's JSON has all of them.
const LISTED: usize = 50;

fn estimate(e: Option<&Estimate>, why: &str) -> Cell {
    match e {
        Some(e) => Cell::estimate(e.value, e.ci_low, e.ci_high, 1.0, 2, ""),
        None => Cell::undefined(why),
    }
}

/// The measures of every run scored with repeats, or `None` when none was.
pub fn table(runs: &[ScoredRun<'_>]) -> Option<Table> {
    let mut t = Table::new(
        "Each judge asked each question several times with different seeds (--judge-repeats). ICC(2,1): how much \
         of the spread of its scores lies between answers rather than between repeats of the same answer (1: \
         perfectly repeatable), with McGraw & Wong's 95% CI; κ: Fleiss' kappa between the repeats on the same \
         score or yes/no (95% bootstrap CI over cases); spread: the mean difference between the highest and \
         lowest repeat; unstable: items whose repeats differ by 2 rubric points or more, or on the yes/no. The \
         jury used the median of each judge's repeats.",
        &run_columns(&[
            ("judge", false),
            ("quantity", false),
            ("repeats", true),
            ("items", true),
            ("ICC(2,1)", true),
            ("κ", true),
            ("spread", true),
            ("unstable", true),
        ]),
    );
    for r in runs {
        let Some(s) = &r.scores.stability else {
            continue;
        };
        for m in &s.measures {
            let mut row = r.cells();
            row.extend([
                Cell::new(&m.judge),
                Cell::new(&m.quantity),
                Cell::new(s.repeats.to_string()),
                Cell::new(m.items.to_string()),
                estimate(
                    m.icc.as_ref(),
                    "not for yes/no, or undefined (see the score report's notes)",
                ),
                estimate(
                    m.kappa.as_ref(),
                    "undefined: every repeat gave the same label",
                ),
                m.mean_spread.map_or_else(
                    || Cell::undefined("no item with two valid repeats"),
                    |d| Cell::new(format!("{d:.2}")),
                ),
                Cell::new(m.unstable_items.to_string()),
            ]);
            t.push(row);
        }
    }
    (!t.is_empty()).then_some(t)
}

/// The unstable items of every run (at most [`LISTED`] each), or `None` when there are none.
pub fn unstable_table(runs: &[ScoredRun<'_>]) -> Option<Table> {
    let mut t = Table::new(
        "Items whose judge repeats disagree by 2 rubric points or more, on the quantity where they disagree most; \
         each repeat's score in seed order.",
        &run_columns(&[
            ("task", false),
            ("sample", true),
            ("judge", false),
            ("quantity", false),
            ("repeats", false),
        ]),
    );
    for r in runs {
        let Some(s) = &r.scores.stability else {
            continue;
        };
        for u in s.unstable.iter().take(LISTED) {
            let scores: Vec<String> = u
                .scores
                .iter()
                .map(|v| v.map_or("–".into(), |x| format!("{x}")))
                .collect();
            let mut row = r.cells();
            row.extend([
                Cell::new(&u.task_id),
                Cell::new(u.sample_index.to_string()),
                Cell::new(&u.judge),
                Cell::new(&u.quantity),
                Cell::new(scores.join(", ")),
            ]);
            t.push(row);
        }
    }
    (!t.is_empty()).then_some(t)
}

/// One sentence per run and judge: how repeatable its overall grade is, and what its repeats cost.
pub fn sentences(runs: &[ScoredRun<'_>]) -> Vec<String> {
    let mut out = Vec::new();
    for r in runs {
        let Some(s) = &r.scores.stability else {
            continue;
        };
        for added in &s.added {
            let overall = s
                .measures
                .iter()
                .find(|m| m.judge == added.judge && m.quantity == "rubric:overall");
            out.push(sentence(&r.name, s, overall, added));
        }
    }
    out
}

fn sentence(
    run: &str,
    s: &StabilityReport,
    overall: Option<&JudgeStability>,
    added: &nmb_results::stability::RepeatCost,
) -> String {
    let steadiness = match overall.and_then(|m| m.icc.as_ref().map(|e| (m, e))) {
        Some((m, e)) if (e.value, e.ci_low, e.ci_high) == (1.0, 1.0, 1.0) => format!(
            "asked {} times, {} gave each of {} answers the same overall grade on every repeat: its test–retest \
             ICC is 1 [1, 1], perfectly repeatable.",
            s.repeats, added.judge, m.items
        ),
        Some((m, e)) => format!(
            "asked {} times, {} gave {} of {} answers ({:.0}%) an overall grade that moved by 2 points or more; its \
             test–retest ICC is {:.2} [{:.2}, {:.2}] (1 would be perfectly repeatable).",
            s.repeats,
            added.judge,
            m.unstable_items,
            m.items,
            100.0 * m.unstable_items as f64 / m.items.max(1) as f64,
            e.value,
            e.ci_low,
            e.ci_high
        ),
        None if overall.is_some_and(|m| m.items > 1 && m.mean_spread == Some(0.0)) => format!(
            "asked {} times, {} gave each answer the same overall grade on every repeat, but also the same grade \
             to every answer, so its test–retest ICC is undefined (the answers' grades do not vary).",
            s.repeats, added.judge
        ),
        None => format!(
            "asked {} times, {}'s repeatability of the overall grade could not be measured.",
            s.repeats, added.judge
        ),
    };
    format!(
        "{run}: {steadiness} The repeats added {} calls and {} tokens to the {} calls and {} tokens of one asking.",
        added.calls,
        added.tokens_in.saturating_add(added.tokens_out),
        added.first_calls,
        added.first_tokens_in.saturating_add(added.first_tokens_out)
    )
}
