//! Judge repeats in the viewer (`nmb score --judge-repeats K`). The run page lists the unstable items (a judge's
//! repeats of one answer spread [`UNSTABLE_SPREAD`] rubric points or more), each linked to its sample, and what
//! the repeats added; a sample's page shows each judge's repeats (grade, seed, a link to the judge's stored call)
//! beside the median the jury used, and marks the answer unstable by the rule the report follows
//! ([`nmb_results::stability::unstable_item`]). With one asking there is no section at all.
//!
//! The run page reads only the report's headline, which keeps the stability section and the judges' runs. A
//! sample's page reads its verdicts from the report when the report is small enough to read for one page
//! ([`crate::common::REPORT_READ_LIMIT`]); past that it shows what the headline holds (the unstable list and the
//! judge calls).

use std::fmt::Write as _;

use nmb_results::stability::{
    repeat_rows, spread, unstable_item, StabilityReport, UnstableItem, UNSTABLE_SPREAD,
};
use nmb_results::{JudgeDecision, JudgeInfo, RubricVerdict, SampleScore};
use nmb_store::Store;
use nmb_table::{Cell, Table};

use crate::common::{headline, report_samples, sample_path, Headline, PageError, ReportSamples};
use crate::html::escape;

/// Unstable items listed on a run page, at most; the score report's JSON has all of them.
const LISTED: usize = 200;

/// What the headline holds of the judges' repeats.
pub(crate) struct Repeats {
    stability: StabilityReport,
    judges: Vec<JudgeInfo>,
}

impl Repeats {
    /// `Ok(None)` when the judges were asked once (the report has no stability section); an error, as a
    /// sentence, when the section is in a layout this version cannot read.
    pub(crate) fn of(head: &Headline) -> Result<Option<Repeats>, String> {
        let Some(stability) = head.stability.clone().filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        let stability: StabilityReport = serde_json::from_value(stability)
            .map_err(|e| format!("its stability section could not be read ({e})"))?;
        let judges: Vec<JudgeInfo> = match head.judges.clone().filter(|v| !v.is_null()) {
            Some(v) => serde_json::from_value(v)
                .map_err(|e| format!("its judges could not be read ({e})"))?,
            None => Vec::new(),
        };
        Ok(Some(Repeats { stability, judges }).filter(|r| r.stability.repeats > 1))
    }

    /// The judge run holding repeat `r` (0-based) of `judge`, when the headline names it.
    fn judge_run(&self, judge: &str, r: usize) -> Option<&str> {
        let info = self.judges.iter().find(|j| j.spec == judge)?;
        if r == 0 {
            return Some(&info.judge_run_id);
        }
        let seed = self.stability.seeds.get(r)?;
        info.repeat_runs
            .iter()
            .find(|run| run.seed == *seed)
            .map(|run| run.judge_run_id.as_str())
    }

    /// The viewer's page of the call `judge` made for repeat `r` of the rubric grading of a sample (the judge
    /// run keeps each question as a sample named after it; see `nmb_judges::judge`).
    fn call_path(&self, judge: &str, r: usize, task_id: &str, sample_index: u32) -> Option<String> {
        let run = self.judge_run(judge, r)?;
        Some(sample_path(
            run,
            &format!("rubric:{task_id}#{sample_index}"),
            0,
        ))
    }

    fn seed(&self, r: usize) -> String {
        self.stability
            .seeds
            .get(r)
            .map_or_else(|| "—".into(), u64::to_string)
    }
}

/// The repeats of the headline, or why they are not shown (HTML); nothing at all with one asking.
fn repeats_of(head: Option<&Headline>) -> Option<Result<Repeats, String>> {
    match Repeats::of(head?) {
        Ok(r) => r.map(Ok),
        Err(why) => Some(Err(format!(
            "<p class=\"muted\" id=\"repeats-error\">The judges were asked more than once, but {}.</p>",
            escape(&why)
        ))),
    }
}

fn score(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), |x| format!("{x}"))
}

/// `seed 0: 3 · seed 1: 5 · seed 2: 3`.
fn by_seed(r: &Repeats, scores: &[Option<f64>]) -> String {
    scores
        .iter()
        .enumerate()
        .map(|(i, v)| format!("seed {}: {}", r.seed(i), score(*v)))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The run page's section: how often each judge was asked, what that added, and the unstable items.
pub(crate) fn run_block(body: &mut String, run_id: &str, head: Option<&Headline>) {
    let r = match repeats_of(head) {
        None => return,
        Some(Err(html)) => {
            body.push_str("<h2 id=\"repeats\">Judge repeats</h2>");
            body.push_str(&html);
            return;
        }
        Some(Ok(r)) => r,
    };
    let s = &r.stability;
    let seeds: Vec<String> = s.seeds.iter().map(u64::to_string).collect();
    let _ = write!(
        body,
        "<h2 id=\"repeats\">Judge repeats</h2><p id=\"repeats-seeds\">Each judge was asked each question {} \
         times, with seeds {}; the jury used the median of each judge's repeats.</p>",
        s.repeats,
        escape(&seeds.join(", "))
    );
    for a in &s.added {
        let _ = write!(
            body,
            "<p class=\"repeats-cost\">{}: the repeats added {} calls and {} tokens ({} in, {} out) to the {} \
             calls and {} tokens of one asking.</p>",
            escape(&a.judge),
            a.calls,
            a.tokens_in.saturating_add(a.tokens_out),
            a.tokens_in,
            a.tokens_out,
            a.first_calls,
            a.first_tokens_in.saturating_add(a.first_tokens_out)
        );
    }
    if s.unstable.is_empty() {
        let _ = write!(
            body,
            "<p id=\"unstable-none\">No unstable items: no judge's repeats of an answer spread {UNSTABLE_SPREAD} \
             points or more on a rubric dimension or the overall grade.</p>"
        );
        return;
    }
    let _ = write!(
        body,
        "<p id=\"unstable-count\">{} unstable {}: a judge whose repeats of one answer spread {UNSTABLE_SPREAD} \
         points or more on a rubric dimension or the overall grade.</p>",
        s.unstable.len(),
        if s.unstable.len() == 1 {
            "item"
        } else {
            "items"
        }
    );
    body.push_str(&unstable_table(run_id, &r).html());
}

/// The unstable items (at most [`LISTED`]), each linked to its sample.
fn unstable_table(run_id: &str, r: &Repeats) -> Table {
    let unstable = &r.stability.unstable;
    let mut t = Table::new(
        "On the quantity where the repeats disagree most; each repeat's score by seed.",
        &[
            ("answer", false),
            ("sample", true),
            ("judge", false),
            ("quantity", false),
            ("repeats", false),
            ("spread", true),
        ],
    );
    t.id = Some("unstable".into());
    for u in unstable.iter().take(LISTED) {
        t.push(vec![
            Cell::new(&u.task_id).linked(sample_path(run_id, &u.task_id, u.sample_index)),
            Cell::new(u.sample_index.to_string()),
            Cell::new(&u.judge),
            Cell::new(&u.quantity),
            Cell::new(by_seed(r, &u.scores)),
            Cell::new(format!("{}", u.spread)),
        ]);
    }
    if unstable.len() > LISTED {
        t.footnote = format!(
            "The first {LISTED} of {}; the score report's JSON lists them all.",
            unstable.len()
        );
    }
    t
}

/// A sample page's section: each judge's repeats of this answer beside the median used.
pub(crate) fn sample_block(
    body: &mut String,
    store: &Store,
    run_id: &str,
    task_id: &str,
    sample_index: u32,
) -> Result<(), PageError> {
    let head = headline(store, run_id)?;
    let r = match repeats_of(head.as_ref()) {
        None => return Ok(()),
        Some(Err(html)) => {
            body.push_str("<h2 id=\"repeats\">Judge repeats</h2>");
            body.push_str(&html);
            return Ok(());
        }
        Some(Ok(r)) => r,
    };
    body.push_str("<h2 id=\"repeats\">Judge repeats</h2>");
    match report_samples(store, run_id)? {
        ReportSamples::Read(samples) => {
            match samples
                .iter()
                .find(|s| s.task_id == task_id && s.sample_index == sample_index)
            {
                Some(s) => verdicts(body, &r, s),
                None => body.push_str(
                    "<p class=\"muted\">The latest score report has no entry for this answer.</p>",
                ),
            }
        }
        ReportSamples::TooLarge(bytes) => {
            let _ = write!(
                body,
                "<p class=\"muted\">Each repeat's whole grade is in the run's latest score report, which at \
                 {:.1} MB is too large to read for one page; below are the items the report lists as unstable \
                 and each repeat's call.</p>",
                bytes as f64 / 1_048_576.0
            );
            from_headline(body, &r, task_id, sample_index);
        }
        ReportSamples::Unreadable(why) => {
            let _ = write!(
                body,
                "<p class=\"muted\">The run's latest score report could not be read for each repeat's grade \
                 ({}); below is what its headline holds.</p>",
                escape(&why)
            );
            from_headline(body, &r, task_id, sample_index);
        }
        ReportSamples::NotScored => {}
    }
    Ok(())
}

/// Every judge's rubric repeats and match verdicts of one answer, from its entry in the report.
fn verdicts(body: &mut String, r: &Repeats, s: &SampleScore) {
    match &s.rubric {
        Some(rubric) if !rubric.judges.is_empty() => {
            let dimensions: Vec<String> =
                rubric.scores.iter().map(|d| d.dimension.clone()).collect();
            for (j, v) in rubric.judges.iter().enumerate() {
                judge_section(body, r, s, j, v, &dimensions);
            }
        }
        _ => body.push_str("<p class=\"muted\">No judge graded this answer with the rubric.</p>"),
    }
    if let Some(t) = match_table(r, s) {
        body.push_str("<h3>Match questions</h3>");
        body.push_str(&t.html());
    }
}

/// One judge's rubric repeats: a row per repeat (seed, call, scores), the median used, each quantity's spread,
/// and whether that makes the answer unstable.
fn judge_section(
    body: &mut String,
    r: &Repeats,
    s: &SampleScore,
    j: usize,
    v: &RubricVerdict,
    dimensions: &[String],
) {
    let _ = write!(
        body,
        "<section class=\"judge-repeats\" id=\"judge-{j}\"><h3>{}</h3>",
        escape(&v.judge)
    );
    match unstable_item(s, j, &v.judge, dimensions) {
        Some(u) => unstable_line(body, r, &u),
        None => {
            let _ = write!(
                body,
                "<p class=\"stable\">Stable: no rubric score of this judge's repeats spreads {UNSTABLE_SPREAD} \
                 points or more.</p>"
            );
        }
    }
    let mut columns: Vec<(&str, bool)> = vec![("repeat", false), ("seed", true), ("call", false)];
    columns.extend(dimensions.iter().map(|d| (d.as_str(), true)));
    columns.push(("overall", true));
    let mut t = Table::new("", &columns);
    t.id = Some(format!("repeats-{j}"));
    t.class = Some("repeats".into());
    for (i, g) in v.repeats.iter().enumerate() {
        let call = match r.call_path(&v.judge, i, &s.task_id, s.sample_index) {
            Some(path) => Cell::new("judge call").linked(path),
            None => Cell::muted("—"),
        };
        let mut row = vec![Cell::new((i + 1).to_string()), Cell::new(r.seed(i)), call];
        row.extend(
            dimensions
                .iter()
                .map(|d| Cell::new(score(g.scores.get(d).map(|x| f64::from(*x))))),
        );
        row.push(Cell::new(score(g.overall.map(f64::from))));
        t.push(row);
    }
    let mut median = vec![Cell::new("median (used)"), Cell::new(""), Cell::new("")];
    median.extend(
        dimensions
            .iter()
            .map(|d| Cell::new(score(v.scores.get(d).map(|x| f64::from(*x))))),
    );
    median.push(Cell::new(score(v.overall.map(f64::from))));
    t.push(median);
    let mut spreads = vec![Cell::new("spread"), Cell::new(""), Cell::new("")];
    spreads.extend(
        repeat_rows(s, j, dimensions)
            .iter()
            .map(|(_, row)| Cell::new(score(spread(row)))),
    );
    t.push(spreads);
    body.push_str(&t.html());
    body.push_str("</section>");
}

fn unstable_line(body: &mut String, r: &Repeats, u: &UnstableItem) {
    let _ = write!(
        body,
        "<p class=\"unstable\">Unstable: {}'s repeats spread {} points on {} ({}); {UNSTABLE_SPREAD} or more \
         count as unstable.</p>",
        escape(&u.judge),
        u.spread,
        escape(&u.quantity),
        escape(&by_seed(r, &u.scores))
    );
}

/// The yes/no match questions whose judges were asked more than once: each repeat's verdict and the median.
fn match_table(r: &Repeats, s: &SampleScore) -> Option<Table> {
    let mut questions: Vec<(String, &JudgeDecision)> = Vec::new();
    if let Some(d) = &s.diagnosis {
        for c in &d.candidates {
            if let Some(j) = &c.judge {
                questions.push((
                    format!(
                        "rank {}: {} (reference: {})",
                        c.rank, c.diagnosis, d.reference
                    ),
                    j,
                ));
            }
        }
    }
    if let Some(l) = &s.lesion {
        for (what, m) in [
            ("lesion type", &l.type_match),
            ("lesion location", &l.location_match),
        ] {
            if let Some(j) = m.as_ref().and_then(|m| m.judge.as_ref()) {
                let candidate = m
                    .as_ref()
                    .and_then(|m| m.candidate.clone())
                    .unwrap_or_default();
                questions.push((format!("{what}: {candidate}"), j));
            }
        }
    }
    let mut t = Table::new(
        "Is the answer's entry clinically equivalent to the reference? Each repeat's verdict by seed, and the \
         median the jury used.",
        &[
            ("question", false),
            ("judge", false),
            ("repeats", false),
            ("median (used)", false),
        ],
    );
    t.id = Some("match-repeats".into());
    for (question, decision) in questions {
        for v in decision.verdicts.iter().filter(|v| !v.repeats.is_empty()) {
            let repeats: Vec<String> = v
                .repeats
                .iter()
                .enumerate()
                .map(|(i, x)| format!("seed {}: {}", r.seed(i), yes_no(*x)))
                .collect();
            t.push(vec![
                Cell::new(&question),
                Cell::new(&v.judge),
                Cell::new(repeats.join(" · ")),
                Cell::new(yes_no(v.equivalent)),
            ]);
        }
    }
    (!t.is_empty()).then_some(t)
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "–",
    }
}

/// What the headline holds for one answer: its unstable items, and each judge's call per repeat.
fn from_headline(body: &mut String, r: &Repeats, task_id: &str, sample_index: u32) {
    let items: Vec<&UnstableItem> = r
        .stability
        .unstable
        .iter()
        .filter(|u| u.task_id == task_id && u.sample_index == sample_index)
        .collect();
    if items.is_empty() {
        let _ = write!(
            body,
            "<p class=\"stable\">Stable: no judge's repeats of this answer spread {UNSTABLE_SPREAD} points or \
             more.</p>"
        );
    }
    for u in items {
        unstable_line(body, r, u);
    }
    let mut t = Table::new(
        "",
        &[
            ("judge", false),
            ("repeat", true),
            ("seed", true),
            ("call", false),
        ],
    );
    t.id = Some("repeat-calls".into());
    for j in &r.judges {
        for i in 0..r.stability.seeds.len() {
            let call = match r.call_path(&j.spec, i, task_id, sample_index) {
                Some(path) => Cell::new("judge call").linked(path),
                None => Cell::muted("—"),
            };
            t.push(vec![
                Cell::new(&j.spec),
                Cell::new((i + 1).to_string()),
                Cell::new(r.seed(i)),
                call,
            ]);
        }
    }
    if !t.is_empty() {
        body.push_str(&t.html());
    }
}
