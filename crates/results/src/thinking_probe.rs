//! The thinking probe: what showing a reasoning model's thinking to a judge does to its rubric grades.
//!
//! The two judgings are two stored scorings of the same run that differ only in `--judge-sees-thinking` (every
//! other option, and so every other part of the configuration hash, the same): each is an ordinary scoring,
//! with its own judge runs, cached and resumed like any other, and answers without thinking get the same prompt
//! both ways (answered from the response cache the second time). The scorer finds the other scoring of a report
//! by recomputing the configuration hash with the flag flipped (`nmb_score::stored_probe`); [`thinking_probe`]
//! pairs the two.
//!
//! Per judge: the mean of (grade shown − grade hidden) over the answers that have thinking, with a percentile
//! bootstrap interval over cases, and the share of its verdicts (overall grade at or above a pass mark) that
//! flip ([`nmb_stats::paired_shift`]). Answers without thinking are left out and counted.

use std::collections::{BTreeMap, BTreeSet};

use nmb_stats::{paired_shift, BootstrapConfig, Design, Estimate, PairedShift};
use serde::{Deserialize, Serialize};

use crate::report::ScoreReport;

/// What showing the thinking did to the judges of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThinkingProbe {
    pub run_id: String,
    /// Configuration hash of the scoring whose judges saw the answers alone.
    pub hidden_config: String,
    /// Configuration hash of the scoring whose judges saw the thinking too.
    pub shown_config: String,
    /// Rubric-graded answers with thinking: the probe's items.
    pub with_thinking: usize,
    /// Rubric-graded answers without thinking, left out (their judges' prompts are the same both ways).
    pub without_thinking: usize,
    /// A verdict passes at this overall grade or above.
    pub pass_at: f64,
    /// One per judge of both scorings, in the scorings' order.
    pub judges: Vec<ThinkingEffect>,
    /// One sentence per judge, or why the probe does not apply.
    pub sentences: Vec<String>,
}

/// One judge's shift.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThinkingEffect {
    pub judge: String,
    /// Answers with thinking that the judge graded both ways.
    pub items: usize,
    /// Mean grade shown minus hidden.
    pub mean_difference: Option<Estimate>,
    /// Share of verdicts that flipped.
    pub flip_share: Option<Estimate>,
}

/// One rubric-graded answer as a judge graded it both ways.
struct Pair {
    case: String,
    hidden: f64,
    shown: f64,
}

/// Each judge's overall grade of each answer: (task id, sample index, judge) to (case id, grade).
type Grades = BTreeMap<(String, u32, String), (String, f64)>;

fn grades(r: &ScoreReport) -> Grades {
    let mut out = BTreeMap::new();
    for s in &r.samples {
        for v in s.rubric.iter().flat_map(|r| &r.judges) {
            if let Some(o) = v.overall {
                let key = (s.task_id.clone(), s.sample_index, v.judge.clone());
                out.insert(key, (s.case_id.clone(), f64::from(o)));
            }
        }
    }
    out
}

/// Pairs the judges' overall grades of the answers in `thinking` (task id, sample index) between the scoring
/// whose judges saw the answers alone (`hidden`) and the one whose judges saw the thinking too (`shown`).
pub fn thinking_probe(
    hidden: &ScoreReport,
    shown: &ScoreReport,
    thinking: &BTreeSet<(String, u32)>,
    pass_at: f64,
    cfg: &BootstrapConfig,
) -> ThinkingProbe {
    let order: Vec<&str> = shown
        .config
        .judges
        .iter()
        .map(|j| j.spec.as_str())
        .collect();
    let mut probe = pair_up(
        &grades(hidden),
        &grades(shown),
        thinking,
        &order,
        pass_at,
        cfg,
    );
    probe.run_id = shown.run_id.clone();
    probe.hidden_config = hidden.config.config_hash.clone();
    probe.shown_config = shown.config.config_hash.clone();
    probe
}

/// The probe without its run and configurations: `order` is the judges' order.
fn pair_up(
    before: &Grades,
    after: &Grades,
    thinking: &BTreeSet<(String, u32)>,
    order: &[&str],
    pass_at: f64,
    cfg: &BootstrapConfig,
) -> ThinkingProbe {
    let graded: BTreeSet<(&str, u32)> = after
        .keys()
        .map(|(task, sample, _)| (task.as_str(), *sample))
        .collect();
    let with_thinking = graded
        .iter()
        .filter(|(t, s)| thinking.contains(&(t.to_string(), *s)))
        .count();
    let mut pairs: BTreeMap<&str, Vec<Pair>> = BTreeMap::new();
    for ((task, sample, judge), (case, s)) in after {
        if !thinking.contains(&(task.clone(), *sample)) {
            continue;
        }
        if let Some((_, h)) = before.get(&(task.clone(), *sample, judge.clone())) {
            pairs.entry(judge.as_str()).or_default().push(Pair {
                case: case.clone(),
                hidden: *h,
                shown: *s,
            });
        }
    }
    let mut judges = Vec::new();
    let mut sentences = Vec::new();
    let without_thinking = graded.len() - with_thinking;
    if graded.is_empty() {
        sentences.push(
            "Thinking effect: not measurable, no answer of this run has a judge's rubric grade."
                .to_string(),
        );
    } else if with_thinking == 0 {
        sentences.push(format!(
            "Thinking effect: does not apply, none of the {} graded answers of this run has thinking.",
            graded.len()
        ));
    }
    for &judge in order {
        let Some(items) = pairs.get(judge) else {
            continue;
        };
        let shift = effect(items, pass_at, cfg);
        sentences.push(sentence(
            judge,
            items.len(),
            without_thinking,
            pass_at,
            shift.as_ref(),
        ));
        judges.push(ThinkingEffect {
            judge: judge.to_string(),
            items: items.len(),
            mean_difference: shift.as_ref().map(|s| s.mean_difference.clone()),
            flip_share: shift.map(|s| s.flip_share),
        });
    }
    ThinkingProbe {
        run_id: String::new(),
        hidden_config: String::new(),
        shown_config: String::new(),
        with_thinking,
        without_thinking,
        pass_at,
        judges,
        sentences,
    }
}

/// The shift over one judge's pairs, clustered by case as the other probes are; `None` with fewer than two.
fn effect(items: &[Pair], pass_at: f64, cfg: &BootstrapConfig) -> Option<PairedShift> {
    if items.len() < 2 {
        return None;
    }
    let shown: Vec<f64> = items.iter().map(|p| p.shown).collect();
    let hidden: Vec<f64> = items.iter().map(|p| p.hidden).collect();
    let cases: Vec<&str> = items.iter().map(|p| p.case.as_str()).collect();
    paired_shift(&shown, &hidden, pass_at, &Design::clusters_by(&cases), cfg).ok()
}

fn sentence(
    judge: &str,
    items: usize,
    left_out: usize,
    pass_at: f64,
    shift: Option<&PairedShift>,
) -> String {
    let Some(s) = shift else {
        return format!(
            "Thinking effect of {judge}: too few answers with thinking graded both ways ({items})."
        );
    };
    let e = &s.mean_difference;
    // Said as a rise or a fall, with the interval in the same direction.
    let (verb, value, low, high) = if e.value >= 0.0 {
        ("raised", e.value, e.ci_low, e.ci_high)
    } else {
        ("lowered", -e.value, -e.ci_high, -e.ci_low)
    };
    let f = &s.flip_share;
    format!(
        "Thinking effect: showing the model's thinking {verb} {judge}'s grade by {value:.2} points [{low:.2}, \
         {high:.2}] on {items} answers ({left_out} without thinking left out), and flipped {:.0}% [{:.0}%, \
         {:.0}%] of its verdicts (pass at {pass_at}).",
        f.value * 100.0,
        f.ci_low * 100.0,
        f.ci_high * 100.0
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grades(rows: &[(&str, &str, &str, f64)]) -> Grades {
        rows.iter()
            .map(|(task, case, judge, g)| {
                (
                    (task.to_string(), 0, judge.to_string()),
                    (case.to_string(), *g),
                )
            })
            .collect()
    }

    #[test]
    fn answers_with_thinking_are_paired_and_the_others_counted() {
        let hidden = grades(&[
            ("t1", "c1", "j", 2.0),
            ("t2", "c1", "j", 3.0),
            ("t3", "c2", "j", 4.0),
            ("t4", "c3", "j", 1.0),
        ]);
        // t4 has no thinking: its grade moved, yet it must stay out.
        let shown = grades(&[
            ("t1", "c1", "j", 3.0),
            ("t2", "c1", "j", 4.0),
            ("t3", "c2", "j", 4.0),
            ("t4", "c3", "j", 5.0),
        ]);
        let thinking: BTreeSet<(String, u32)> = ["t1", "t2", "t3"]
            .iter()
            .map(|t| (t.to_string(), 0))
            .collect();
        let p = pair_up(
            &hidden,
            &shown,
            &thinking,
            &["j"],
            3.0,
            &BootstrapConfig::default(),
        );
        assert_eq!((p.with_thinking, p.without_thinking), (3, 1));
        let e = &p.judges[0];
        assert_eq!(e.items, 3);
        assert!((e.mean_difference.as_ref().unwrap().value - 2.0 / 3.0).abs() < 1e-12);
        // t1 went from failing (2) to passing (3).
        assert!((e.flip_share.as_ref().unwrap().value - 1.0 / 3.0).abs() < 1e-12);
        assert!(
            p.sentences[0].contains("raised j's grade by 0.67 points")
                && p.sentences[0].contains("on 3 answers (1 without thinking left out)"),
            "{}",
            p.sentences[0]
        );
    }

    #[test]
    fn a_fall_is_said_as_one_and_no_thinking_says_the_probe_does_not_apply() {
        let hidden = grades(&[("t1", "c1", "j", 4.0), ("t2", "c2", "j", 5.0)]);
        let shown = grades(&[("t1", "c1", "j", 3.0), ("t2", "c2", "j", 4.0)]);
        let all: BTreeSet<(String, u32)> =
            ["t1", "t2"].iter().map(|t| (t.to_string(), 0)).collect();
        let cfg = BootstrapConfig::default();
        let p = pair_up(&hidden, &shown, &all, &["j"], 3.0, &cfg);
        assert!(
            p.sentences[0].contains("lowered j's grade by 1.00 points [1.00, 1.00]"),
            "{}",
            p.sentences[0]
        );
        let none = pair_up(&Grades::new(), &Grades::new(), &all, &["j"], 3.0, &cfg);
        assert!(
            none.sentences[0].contains("not measurable"),
            "{:?}",
            none.sentences
        );
        let p = pair_up(&hidden, &shown, &BTreeSet::new(), &["j"], 3.0, &cfg);
        assert!(p.judges.is_empty());
        assert_eq!(
            p.sentences,
            ["Thinking effect: does not apply, none of the 2 graded answers of this run has thinking."]
        );
    }
}
