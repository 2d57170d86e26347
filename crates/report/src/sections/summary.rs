//! The headline, errored samples by class, level × family, breadth and breadth-versus-depth tables, each built
//! once as a [`Table`] and rendered into HTML, Markdown and (level × family and breadth, for `nmb score`) the
//! terminal.

use std::collections::BTreeSet;

use nmb_results::{GroupAggregate, ScoreReport};
use nmb_stats::Estimate;
use nmb_store::SampleRecord;
use nmb_suite::{Family, Level};

use crate::input::RunData;
use crate::sections::analysis::{Analysis, TwoAxis};
use crate::table::{number, percent, Cell, Table};

/// What the per-group tables need of a scored run: the name it is shown under, its suite and its scores.
pub struct ScoredRun<'a> {
    pub name: String,
    pub suite: String,
    pub scores: &'a ScoreReport,
}

impl<'a> ScoredRun<'a> {
    /// The runs that have scores, in order.
    pub fn of(runs: &'a [RunData]) -> Vec<ScoredRun<'a>> {
        runs.iter()
            .filter_map(|r| {
                Some(ScoredRun {
                    name: r.name(),
                    suite: r.manifest.suite_id.clone(),
                    scores: r.scores.as_ref()?,
                })
            })
            .collect()
    }

    /// One score report on its own, named and placed as its manifest says.
    pub fn from_report(scores: &'a ScoreReport) -> ScoredRun<'a> {
        let manifest = scores.config.manifest();
        ScoredRun {
            name: manifest.display_name(),
            suite: manifest.suite_id,
            scores,
        }
    }
}

impl ScoredRun<'_> {
    /// The run's name and suite: the first cells of every per-run table.
    pub fn cells(&self) -> Vec<Cell> {
        vec![Cell::new(&self.name), Cell::new(&self.suite)]
    }
}

/// `model` and `suite`, then `rest`: the columns of a per-run table.
pub fn run_columns<'a>(rest: &[(&'a str, bool)]) -> Vec<(&'a str, bool)> {
    [("model", false), ("suite", false)]
        .iter()
        .chain(rest)
        .copied()
        .collect()
}

/// The four pass@k columns, in the order every table shows them; each header names its reading.
const PASS_AT_K: [(&str, bool); 4] = [
    ("pass@1 unbiased (a)", true),
    ("pass@5 unbiased (a)", true),
    ("pass@1 top-k (b)", true),
    ("pass@5 top-k (b)", true),
];

fn pass_at_k(g: &GroupAggregate) -> [Cell; 4] {
    [
        percent(g.pass_at_1.unbiased_estimator.as_ref()),
        percent(g.pass_at_5.unbiased_estimator.as_ref()),
        percent(g.pass_at_1.top_k_in_answer.as_ref()),
        percent(g.pass_at_5.top_k_in_answer.as_ref()),
    ]
}

fn columns<'a>(head: &[(&'a str, bool)], tail: &[(&'a str, bool)]) -> Vec<(&'a str, bool)> {
    head.iter().chain(&PASS_AT_K).chain(tail).copied().collect()
}

fn count(n: impl ToString) -> Cell {
    Cell::new(n.to_string())
}

/// Unparseable answers, and how many of them stopped at the token limit when any did.
fn parse_failures(g: &GroupAggregate) -> Cell {
    match g.parse_failed_at_limit {
        0 => count(g.parse_failed),
        n => Cell::new(format!("{} ({n} at the token limit)", g.parse_failed)),
    }
}

/// One row per run: status, sample counts, pass@k in both readings and accuracy over the whole run, usage, cost
/// and latency.
pub fn headline(runs: &[RunData], analysis: &Analysis) -> Table {
    let mut t = Table::new(
        "",
        &columns(
            &[
                ("model", false),
                ("suite", false),
                ("status", false),
                ("tasks", true),
                ("samples ok / errored / pending", true),
            ],
            &[
                ("accuracy", true),
                ("parse failures", true),
                ("tokens in / out", true),
                ("cost", true),
                ("latency p50 / p90", true),
            ],
        ),
    );
    t.class = Some("headline".into());
    for (r, cost) in runs.iter().zip(&analysis.costs) {
        let s = &r.summary;
        let overall = r.scores.as_ref().map(|s| &s.overall);
        let tasks = r
            .scores
            .as_ref()
            .map_or_else(|| distinct_tasks(&r.samples), |s| s.tasks.len());
        let mut row = vec![
            Cell::new(r.name()),
            Cell::new(&r.manifest.suite_id),
            Cell::new(r.info.status.as_str()),
            count(tasks),
            Cell::new(format!(
                "{} / {} / {}",
                s.samples_ok, s.samples_errored, s.samples_pending
            )),
        ];
        match overall {
            Some(o) => row.extend(pass_at_k(o)),
            None => row.extend([(); 4].map(|()| percent(None))),
        }
        row.extend([
            accuracy(r, overall.and_then(|o| o.accuracy.as_ref())),
            overall.map_or_else(|| count(0), parse_failures),
            Cell::new(format!("{} / {}", s.tokens_in, s.tokens_out)),
            match cost.dollars {
                Some(d) => Cell::new(format!("${d:.4}")),
                None => Cell::muted("no price"),
            },
            Cell::new(format!("{} / {} ms", s.latency_ms.p50, s.latency_ms.p90)),
        ]);
        t.push(row);
    }
    t
}

/// Where each priced run's dollars went, and what one correct answer cost; `None` when no run has a price.
pub fn cost(runs: &[RunData], analysis: &Analysis) -> Option<Table> {
    if analysis.costs.iter().all(|c| c.split.is_none()) {
        return None;
    }
    let mut t = Table::new(
        "Dollars from the tokens the APIs reported, at the given prices (cached input and cache writes at the \
         input rate where no rate of their own was given; reasoning at the output rate)",
        &[
            ("model", false),
            ("tokens in (cached / written)", true),
            ("tokens out (reasoning)", true),
            ("input", true),
            ("cached input", true),
            ("cache writes", true),
            ("output", true),
            ("reasoning", true),
            ("total", true),
            ("correct answers", true),
            ("per correct answer", true),
        ],
    );
    t.class = Some("cost".into());
    let dollars = |d: f64| Cell::new(format!("${d:.4}"));
    for (r, c) in runs.iter().zip(&analysis.costs) {
        let k = &c.tokens;
        let mut row = vec![
            Cell::new(r.name()),
            Cell::new(format!("{} ({} / {})", k.input, k.cached_in, k.cache_write)),
            Cell::new(format!("{} ({})", k.output, k.reasoning)),
        ];
        match &c.split {
            Some(s) => row.extend(
                [
                    s.input,
                    s.cached_input,
                    s.cache_write,
                    s.output,
                    s.reasoning,
                    s.total,
                ]
                .map(dollars),
            ),
            None => row.extend([(); 6].map(|()| Cell::muted("no price"))),
        }
        row.push(c.correct.map_or_else(|| Cell::muted("not scored"), count));
        row.push(c.per_correct.map_or_else(|| Cell::muted("–"), dollars));
        t.push(row);
    }
    Some(t)
}

/// One priced run on the accuracy-against-cost chart.
pub(crate) struct CostAccuracy {
    pub label: String,
    /// Dollars per 100 answered samples.
    pub dollars: f64,
    pub accuracy: Estimate,
}

/// Each priced run with an accuracy and answers: its dollars per 100 answered samples against its accuracy.
pub(crate) fn accuracy_against_cost(runs: &[RunData], analysis: &Analysis) -> Vec<CostAccuracy> {
    runs.iter()
        .zip(&analysis.costs)
        .filter_map(|(r, c)| {
            let accuracy = r.scores.as_ref()?.overall.accuracy.as_ref()?;
            let answered = r.summary.samples_ok;
            let dollars = c.dollars.filter(|_| answered > 0)? * 100.0 / answered as f64;
            Some(CostAccuracy {
                label: r.name(),
                dollars,
                accuracy: accuracy.clone(),
            })
        })
        .collect()
}

/// The accuracy, with the clinician-corrected rate as its note when a review measured the scoring's decisions.
fn accuracy(r: &RunData, e: Option<&Estimate>) -> Cell {
    let cell = percent(e);
    match crate::sections::calibration::corrected_note(r) {
        Some(note) => cell.noted(note),
        None => cell,
    }
}

fn distinct_tasks(samples: &[SampleRecord]) -> usize {
    samples
        .iter()
        .map(|s| &s.task_id)
        .collect::<BTreeSet<_>>()
        .len()
}

/// Errored samples per run and error class, or `None` when no sample errored.
pub fn errors_by_class(runs: &[RunData]) -> Option<Table> {
    let mut t = Table::new(
        "",
        &[("model", false), ("error class", false), ("samples", true)],
    );
    t.footnote =
        "Errored samples are not answers: they are left out of every accuracy and counted here."
            .into();
    for r in runs {
        for (class, n) in &r.summary.errors_by_class {
            t.push(vec![Cell::new(r.name()), Cell::new(class), count(n)]);
        }
    }
    (!t.is_empty()).then_some(t)
}

/// One row per run, level and depth family (breadth and structured families have tables of their own), and
/// with `overall` one more per run for the run as a whole. Empty when no run has a depth family and `overall`
/// is false.
pub fn level_family(runs: &[ScoredRun], overall: bool) -> Table {
    let mut t = Table::new(
        "",
        &columns(
            &[
                ("model", false),
                ("level", false),
                ("family", false),
                ("tasks", true),
                ("n", true),
            ],
            &[
                ("accuracy", true),
                ("errored", true),
                ("parse failed", true),
                ("unresolved", true),
                ("rubric overall", true),
                ("BERTScore F1", true),
                ("median answer words", true),
            ],
        ),
    );
    for r in runs {
        let s = r.scores;
        let depth = s
            .by_level_family
            .iter()
            .filter(|g| g.family.is_some_and(Family::is_depth));
        let last = overall.then_some(&s.overall);
        for g in depth.chain(last) {
            let mut row = vec![
                Cell::new(&r.name),
                Cell::new(g.level.map_or("all", Level::as_str)),
                Cell::new(g.family.map_or("all", Family::as_str)),
                count(g.tasks),
                count(g.n),
            ];
            row.extend(pass_at_k(g));
            row.extend([
                percent(g.accuracy.as_ref()),
                count(g.errored),
                parse_failures(g),
                count(g.unresolved),
                number(
                    g.rubric.as_ref().and_then(|x| x.overall.as_ref()),
                    1.0,
                    2,
                    "",
                ),
                number(g.bertscore.as_ref().and_then(|x| x.f.as_ref()), 1.0, 3, ""),
                number(g.answer_words.as_ref(), 1.0, 1, ""),
            ]);
            t.push(row);
        }
    }
    t
}

/// One row per run and breadth family, or `None` when no run has breadth scores.
pub fn breadth(runs: &[ScoredRun]) -> Option<Table> {
    let mut t = Table::new(
        "",
        &run_columns(&[
            ("family", false),
            ("n", true),
            ("accuracy", true),
            ("exact match", true),
            ("token recall", true),
            ("extraction failures", true),
            ("errored", true),
        ]),
    );
    t.footnote = "Closed VQA: accuracy after normalisation (yes/no by polarity). Open VQA: accuracy is exact match \
                  after normalisation; token recall is the share of reference words in the answer. Multiple \
                  choice: extraction failures count as wrong."
        .into();
    for r in runs {
        for g in &r.scores.by_family {
            let Some(b) = &g.breadth else { continue };
            let mut row = r.cells();
            row.extend([
                Cell::new(g.family.map_or("all", Family::as_str)),
                count(b.n),
                percent(b.accuracy.as_ref()),
                percent(b.exact_match.as_ref()),
                percent(b.token_recall.as_ref()),
                count(b.extraction_failures),
                count(g.errored),
            ]);
            t.push(row);
        }
    }
    (!t.is_empty()).then_some(t)
}

/// Each model's breadth accuracy beside its depth pass@1 (a), and the runs behind each.
pub fn two_axis(t: &TwoAxis) -> Table {
    let mut table = Table::new(
        "",
        &[
            ("model", false),
            ("breadth accuracy", true),
            ("depth pass@1 (a)", true),
            ("breadth runs", false),
            ("depth runs", false),
        ],
    );
    for p in &t.points {
        table.push(vec![
            Cell::new(&p.name),
            percent(Some(&p.breadth)),
            percent(Some(&p.depth)),
            Cell::new(p.breadth_runs.join(", ")),
            Cell::new(p.depth_runs.join(", ")),
        ]);
    }
    table
}
