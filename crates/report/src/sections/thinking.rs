//! The thinking section: how much each run's reasoning model thought before its answers, per level and task
//! family, and how accuracy went with the length of that thinking (the answers binned at the quartiles of their
//! thinking's length, each bin's accuracy with a bootstrap CI clustered by case). Built once as data ([`build`],
//! in `report.json` under `analysis.thinking`), then as tables for HTML and Markdown; the chart is
//! `svg::thinking`'s.
//!
//! A run's lengths are the reasoning tokens its APIs reported for each answer, where every answer with thinking
//! text has such a count, else the words of the thinking stored with each answer, counted here (an API that
//! returns the thinking without counting it, a `<think>` block): the section says which. A run none of whose answers thought has no
//! entry, so a report without thinking has no section.

use std::collections::BTreeMap;

use nmb_results::SampleScore;
use nmb_stats::{bootstrap_mean, BootstrapConfig, Design, Estimate};
use nmb_store::{SampleRecord, SampleStatus, TurnRecord};
use nmb_suite::{Family, Level};
use serde::Serialize;

use crate::input::RunData;
use crate::table::trimmed;
use crate::table::{percent, Cell, Table};

/// How a run's thinking was measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Measure {
    /// Reasoning tokens the APIs reported; an answer from a call that asked for several gets its share.
    ReportedTokens,
    /// Words of the stored thinking, counted by nmb, because the APIs did not report reasoning tokens.
    CountedWords,
}

impl Measure {
    /// The unit, for axis labels.
    pub fn unit(self) -> &'static str {
        match self {
            Measure::ReportedTokens => "reasoning tokens",
            Measure::CountedWords => "thinking words",
        }
    }

    /// Where the numbers come from, for a table cell.
    pub fn source(self) -> &'static str {
        match self {
            Measure::ReportedTokens => "reasoning tokens, as the API reported them",
            Measure::CountedWords => {
                "thinking words, counted (the API reported no reasoning tokens)"
            }
        }
    }
}

/// The thinking of one run's answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunThinking {
    pub run_id: String,
    pub name: String,
    pub measure: Measure,
    /// One per level and family of the scored answers, then every answer (level and family `None`).
    pub groups: Vec<ThinkingGroup>,
    /// Accuracy by thinking length, shortest first; empty for an unscored run.
    pub bins: Vec<LengthBin>,
}

/// How much the answers of one group thought.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThinkingGroup {
    pub level: Option<Level>,
    pub family: Option<Family>,
    pub answers: usize,
    /// Answers with thinking text or reasoning tokens (a share of their call's, when it asked for several).
    pub with_thinking: usize,
    /// Of those, answers with no text: the model thought until the token limit and never answered (an empty
    /// answer, scored wrong; a larger `--max-tokens` leaves room, see `docs/providers.md`).
    pub cut_off: usize,
    pub mean: f64,
    pub median: f64,
}

/// Scored answers whose thinking's length lies in `min..=max`, and how many of them were right.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LengthBin {
    pub min: f64,
    pub max: f64,
    pub median: f64,
    pub answers: usize,
    pub correct: usize,
    /// Bootstrap CI clustered by case; `None` where it cannot be computed (no resamples).
    pub accuracy: Option<Estimate>,
}

/// One answered sample and its thinking's length.
struct Answer<'a> {
    length: f64,
    thought: bool,
    /// It thought and gave no text: cut off at the token limit while thinking.
    cut_off: bool,
    score: Option<&'a SampleScore>,
}

/// The thinking of every run whose answers thought, in the order given.
pub fn build(runs: &[RunData], cfg: &BootstrapConfig) -> Vec<RunThinking> {
    runs.iter().filter_map(|r| of_run(r, cfg)).collect()
}

fn of_run(run: &RunData, cfg: &BootstrapConfig) -> Option<RunThinking> {
    let answered: Vec<&SampleRecord> = (run.samples.iter())
        .filter(|s| s.status == SampleStatus::Ok)
        .collect();
    let measure = measure(&answered)?;
    let scored = run.scored();
    let answers: Vec<Answer> = answered
        .iter()
        .map(|s| Answer {
            length: length(s, measure),
            thought: thought(s),
            cut_off: thought(s) && s.final_text.as_deref().is_none_or(|t| t.trim().is_empty()),
            score: scored.get(&(s.task_id.as_str(), s.sample_index)).copied(),
        })
        .collect();
    Some(RunThinking {
        run_id: run.info.run_id.clone(),
        name: run.name(),
        measure,
        groups: groups(&answers),
        bins: bins(&answers, cfg),
    })
}

/// Reported tokens when some call reported reasoning tokens and every turn with thinking text has a count, else
/// counted words; `None` when no answer thought. The store keeps a count of 0 as no count, so a turn with
/// neither text nor count thought for 0 tokens.
fn measure(answered: &[&SampleRecord]) -> Option<Measure> {
    let turns = || answered.iter().flat_map(|s| &s.turns);
    let counted = turns().any(|t| t.call.tokens.reasoning.is_some());
    let uncounted_text = turns().any(|t| has_text(t) && t.call.tokens.reasoning.is_none());
    if counted && !uncounted_text {
        Some(Measure::ReportedTokens)
    } else if turns().any(has_text) {
        Some(Measure::CountedWords)
    } else {
        None
    }
}

fn has_text(t: &TurnRecord) -> bool {
    t.thinking.as_deref().is_some_and(|x| !x.trim().is_empty())
}

/// Any turn of the sample has thinking text or reasoning tokens.
fn thought(s: &SampleRecord) -> bool {
    s.turns
        .iter()
        .any(|t| has_text(t) || t.call.tokens.reasoning.is_some_and(|n| n > 0))
}

/// The thinking of every turn of the sample, in `measure`'s unit. A call's reasoning tokens cover all the
/// answers it asked for, so each gets its share.
fn length(s: &SampleRecord, measure: Measure) -> f64 {
    s.turns
        .iter()
        .map(|t| match measure {
            Measure::ReportedTokens => {
                t.call.tokens.reasoning.unwrap_or(0) as f64 / f64::from(t.call.n_choices.max(1))
            }
            Measure::CountedWords => {
                t.thinking
                    .as_deref()
                    .map_or(0, |x| x.split_whitespace().count()) as f64
            }
        })
        .sum()
}

/// Each level × family of the scored answers (breadth and depth alike), then all answers.
fn groups(answers: &[Answer]) -> Vec<ThinkingGroup> {
    let mut by: BTreeMap<(Level, Family), Vec<&Answer>> = BTreeMap::new();
    for a in answers {
        if let Some(s) = a.score {
            by.entry((s.level, s.family)).or_default().push(a);
        }
    }
    let mut out: Vec<ThinkingGroup> = (by.into_iter())
        .map(|((level, family), group)| group_of(Some(level), Some(family), &group))
        .collect();
    out.push(group_of(None, None, &answers.iter().collect::<Vec<_>>()));
    out
}

fn group_of(level: Option<Level>, family: Option<Family>, group: &[&Answer]) -> ThinkingGroup {
    let mut lengths: Vec<f64> = group.iter().map(|a| a.length).collect();
    lengths.sort_by(f64::total_cmp);
    ThinkingGroup {
        level,
        family,
        answers: group.len(),
        with_thinking: group.iter().filter(|a| a.thought).count(),
        cut_off: group.iter().filter(|a| a.cut_off).count(),
        mean: lengths.iter().sum::<f64>() / lengths.len().max(1) as f64,
        median: median(&lengths),
    }
}

/// The median of sorted values (0 for none).
fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// The scored answers without thinking in a bin of their own, then those with thinking in up to four bins cut
/// at the quartiles of their lengths (an answer at a cut goes below it, so equal lengths share a bin).
fn bins(answers: &[Answer], cfg: &BootstrapConfig) -> Vec<LengthBin> {
    let mut scored: Vec<(&Answer, &SampleScore)> = (answers.iter())
        .filter_map(|a| Some((a, a.score.filter(|s| s.status.is_scored())?)))
        .collect();
    scored.sort_by(|x, y| x.0.length.total_cmp(&y.0.length));
    let (none, some): (Vec<_>, Vec<_>) = scored.into_iter().partition(|(a, _)| a.length <= 0.0);
    let lengths: Vec<f64> = some.iter().map(|(a, _)| a.length).collect();
    let cuts: Vec<f64> = [0.25, 0.5, 0.75].map(|q| quantile(&lengths, q)).into();
    let mut out = Vec::new();
    if !none.is_empty() {
        out.push(bin_of(&none, cfg));
    }
    let mut rest = some.as_slice();
    for cut in cuts.iter().chain([&f64::INFINITY]) {
        let n = rest.iter().take_while(|(a, _)| a.length <= *cut).count();
        let (here, later) = rest.split_at(n);
        if !here.is_empty() {
            out.push(bin_of(here, cfg));
        }
        rest = later;
    }
    out
}

/// The nearest-rank quantile of sorted values: the smallest with at least `q` of them at or below it.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// `bin` is sorted by length.
fn bin_of(bin: &[(&Answer, &SampleScore)], cfg: &BootstrapConfig) -> LengthBin {
    let lengths: Vec<f64> = bin.iter().map(|(a, _)| a.length).collect();
    let right: Vec<f64> = (bin.iter())
        .map(|(_, s)| f64::from(u8::from(s.correct == Some(true))))
        .collect();
    let cases: Vec<&str> = bin.iter().map(|(_, s)| s.case_id.as_str()).collect();
    LengthBin {
        min: lengths[0],
        max: lengths[lengths.len() - 1],
        median: median(&lengths),
        answers: bin.len(),
        correct: right.iter().filter(|r| **r > 0.0).count(),
        accuracy: bootstrap_mean(&right, &Design::clusters_by(&cases), cfg).ok(),
    }
}

/// How much each run thought, per level and family and over all its answers; `None` when no run thought.
pub fn table(runs: &[RunThinking]) -> Option<Table> {
    if runs.is_empty() {
        return None;
    }
    let mut t = Table::new(
        "Thinking before each answered sample's answer (every turn of a consult together): reasoning tokens as \
         the API reported them (a call that asked for several answers shares its count among them), or, where \
         the API reported none, the words of the thinking it returned, counted by nmb. Cut off: answers with no \
         text because the model thought until the token limit (empty answers, scored wrong; a larger \
         --max-tokens leaves room).",
        &[
            ("model", false),
            ("level", false),
            ("family", false),
            ("answers", true),
            ("with thinking", true),
            ("cut off while thinking", true),
            ("mean", true),
            ("median", true),
            ("measured as", false),
        ],
    );
    t.id = Some("thinking-table".into());
    for r in runs {
        for g in &r.groups {
            t.push(vec![
                Cell::new(&r.name),
                Cell::new(g.level.map_or("all", Level::as_str)),
                Cell::new(g.family.map_or("all", Family::as_str)),
                Cell::new(g.answers.to_string()),
                Cell::new(format!(
                    "{} ({:.0}%)",
                    g.with_thinking,
                    100.0 * g.with_thinking as f64 / g.answers.max(1) as f64
                )),
                Cell::new(g.cut_off.to_string()),
                Cell::new(trimmed(g.mean)),
                Cell::new(trimmed(g.median)),
                Cell::new(r.measure.source()),
            ]);
        }
    }
    Some(t)
}

/// Each scored run's accuracy per bin of thinking length; `None` when no run with thinking was scored.
pub fn bins_table(runs: &[RunThinking]) -> Option<Table> {
    let mut t = Table::new(
        "Scored answers binned by the length of their thinking: those without any, then the rest cut at the \
         quartiles of their lengths (equal lengths share a bin, so there may be fewer than four). Accuracy with \
         its 95% bootstrap CI, clustered by case.",
        &[
            ("model", false),
            ("thinking length", false),
            ("answers", true),
            ("correct", true),
            ("accuracy", true),
        ],
    );
    t.id = Some("thinking-bins".into());
    for r in runs {
        for b in &r.bins {
            t.push(vec![
                Cell::new(&r.name),
                Cell::new(range(b, r.measure)),
                Cell::new(b.answers.to_string()),
                Cell::new(b.correct.to_string()),
                percent(b.accuracy.as_ref()),
            ]);
        }
    }
    (!t.is_empty()).then_some(t)
}

/// `12–40 thinking words`, `7 reasoning tokens`, or `no thinking` for the bin of answers without any.
pub fn range(b: &LengthBin, measure: Measure) -> String {
    if b.max <= 0.0 {
        "no thinking".into()
    } else if b.min == b.max {
        format!("{} {}", trimmed(b.min), measure.unit())
    } else {
        format!("{}–{} {}", trimmed(b.min), trimmed(b.max), measure.unit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_rank() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        assert_eq!(quantile(&v, 0.25), 2.0);
        assert_eq!(quantile(&v, 0.5), 4.0);
        assert_eq!(quantile(&v, 0.75), 6.0);
        assert_eq!(quantile(&[3.0], 0.25), 3.0);
        assert_eq!(median(&v), 4.5);
        assert_eq!(median(&[1.0, 5.0, 9.0]), 5.0);
    }
}
