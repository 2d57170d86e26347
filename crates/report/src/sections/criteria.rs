//! The criterion-rubric tables: each run's score by HealthBench's rule, overall and by tag, and how often each
//! criterion was met, worst first.

use std::cmp::Ordering;

use nmb_results::criteria::score::CriterionRate;

use crate::sections::summary::{run_columns, ScoredRun};
use crate::table::{percent, Cell, Table};

/// Rows of the per-criterion table per run: a HealthBench-sized rubric has thousands of criteria, and the
/// ordering puts the ones a reader should look at first; the rest stay in the JSON.
pub const CRITERIA_SHOWN: usize = 40;

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

/// Harms (negative points) first, the most often met first; then the criteria an answer should meet, the
/// least often met first; ties go to the larger points, then to the task and id. Criteria no judge decided
/// come last.
pub fn worst_first(rates: &[CriterionRate]) -> Vec<&CriterionRate> {
    let mut out: Vec<&CriterionRate> = rates.iter().collect();
    out.sort_by(|a, b| {
        let key = |r: &CriterionRate| {
            let rate = r.rate.as_ref().map(|e| e.value);
            // Lower sorts first: undecided, then harms by falling rate, then the rest by rising rate.
            match (rate, r.points < 0.0) {
                (None, _) => (2, 0.0),
                (Some(v), true) => (0, -v),
                (Some(v), false) => (1, v),
            }
        };
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0)
            .then(ka.1.partial_cmp(&kb.1).unwrap_or(Ordering::Equal))
            .then(b.points.abs().total_cmp(&a.points.abs()))
            .then_with(|| (&a.task_id, &a.id).cmp(&(&b.task_id, &b.id)))
    });
    out
}

/// How often each criterion was met, per run, worst first (at most [`CRITERIA_SHOWN`] rows a run), or `None`
/// when no run has criterion rates.
pub fn criterion_table(runs: &[ScoredRun]) -> Option<Table> {
    let mut t = Table::new(
        "How often each criterion was met, with a 95% Wilson interval over the answers a judge decided it for \
         (n). Harms (negative points) come first, the most often met first; then the criteria a complete answer \
         meets, the least often met first.",
        &run_columns(&[
            ("task", false),
            ("criterion", false),
            ("points", true),
            ("tags", false),
            ("met", true),
            ("n", true),
        ]),
    );
    for r in runs {
        let Some(c) = &r.scores.criteria else {
            continue;
        };
        let ordered = worst_first(&c.by_criterion);
        for rate in ordered.iter().take(CRITERIA_SHOWN) {
            let mut row = r.cells();
            row.extend([
                Cell::new(&rate.task_id),
                Cell::new(description(rate)).noted(&rate.id),
                Cell::new(points(rate.points)),
                Cell::new(rate.tags.join(" ")),
                percent(rate.rate.as_ref()),
                Cell::new(rate.decided.to_string()),
            ]);
            t.push(row);
        }
        if ordered.len() > CRITERIA_SHOWN {
            let mut row = r.cells();
            row.push(Cell::muted(format!(
                "{} more criteria in the report's JSON (criteria.by_criterion)",
                ordered.len() - CRITERIA_SHOWN
            )));
            row.extend((0..5).map(|_| Cell::muted("")));
            t.push(row);
        }
    }
    (!t.rows.is_empty()).then_some(t)
}

/// One sentence per run naming its most often met harm and its least often met desirable criterion.
pub fn sentences(runs: &[ScoredRun]) -> Vec<String> {
    let mut out = Vec::new();
    for r in runs {
        let Some(c) = &r.scores.criteria else {
            continue;
        };
        let ordered = worst_first(&c.by_criterion);
        let decided = |harm: bool| {
            ordered
                .iter()
                .find(|x| x.rate.is_some() && (x.points < 0.0) == harm)
        };
        let mut parts = Vec::new();
        if let Some(h) = decided(true) {
            parts.push(format!(
                "the harm met most often was \"{}\" ({}, {} points), in {}",
                description(h),
                h.task_id,
                points(h.points),
                share(h)
            ));
        }
        if let Some(d) = decided(false) {
            parts.push(format!(
                "the criterion a complete answer meets that was met least often was \"{}\" ({}, {} points), in {}",
                description(d),
                d.task_id,
                points(d.points),
                share(d)
            ));
        }
        if !parts.is_empty() {
            out.push(format!("{}: {}.", r.name, parts.join("; ")));
        }
    }
    out
}

/// The criterion's text, or its id where the stored report predates the text.
fn description(r: &CriterionRate) -> &str {
    if r.criterion.is_empty() {
        &r.id
    } else {
        &r.criterion
    }
}

fn points(p: f64) -> String {
    format!("{p:+}")
}

/// "12 of 40 answers (30% [17–46])".
fn share(r: &CriterionRate) -> String {
    let e = r.rate.as_ref().expect("a decided criterion has a rate");
    let answers = if r.decided == 1 { "answer" } else { "answers" };
    format!(
        "{} of {} {answers} ({:.0}% [{:.0}–{:.0}])",
        r.met,
        r.decided,
        100.0 * e.value,
        100.0 * e.ci_low,
        100.0 * e.ci_high
    )
}
