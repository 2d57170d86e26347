//! Rankings from a pairwise review: Bradley–Terry strengths with Davidson's ties from the clinicians' votes,
//! style-controlled as LMArena does (answer length and markdown formatting as covariates), with bootstrap
//! intervals over tasks, each model's wins, ties and losses, and the win-rate matrix.
//!
//! "Neither acceptable" votes say nothing about which answer is better, so they are left out of the fit and
//! counted per model on their own (a model often in such pairs has a safety problem a rating would hide).

use std::collections::BTreeMap;

use nmb_stats::{preference_ranking, BootstrapConfig, Estimate, Preference};
use nmb_store::{ReviewSet, Store};
use serde::{Deserialize, Serialize};

use crate::ReviewError;

/// The Elo-like scale ratings are shown on (LMArena's): 400 points per factor of 10 in the odds, 1000 for the
/// average model.
pub const RATING_SCALE: f64 = 400.0 / std::f64::consts::LN_10;
pub const RATING_BASE: f64 = 1000.0;

/// How formatted an answer is: its length and its markdown elements, the covariates of style control.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Style {
    pub words: usize,
    /// Markdown headers, list items and bold spans.
    pub markdown: usize,
}

impl Style {
    pub fn of(text: &str) -> Style {
        let mut markdown = 0;
        for line in text.lines() {
            let l = line.trim_start();
            let numbered = l
                .split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if l.starts_with('#') || l.starts_with("- ") || l.starts_with("* ") || numbered {
                markdown += 1;
            }
        }
        markdown += text.matches("**").count() / 2;
        Style {
            words: text.split_whitespace().count(),
            markdown,
        }
    }

    /// LMArena's normalised difference of each feature, (a − b) / (a + b), 0 when both are 0.
    fn difference(a: Style, b: Style) -> Vec<f64> {
        let norm = |x: usize, y: usize| {
            let (x, y) = (x as f64, y as f64);
            if x + y == 0.0 {
                0.0
            } else {
                (x - y) / (x + y)
            }
        };
        vec![norm(a.words, b.words), norm(a.markdown, b.markdown)]
    }
}

/// One clinician's vote on one pair, with the two answers' runs and styles.
#[derive(Debug, Clone, PartialEq)]
pub struct PairVote {
    pub reviewer: String,
    pub task_id: String,
    pub a: String,
    pub b: String,
    /// One of `nmb_store::VOTE_CHOICES`.
    pub choice: String,
    pub style_a: Style,
    pub style_b: Style,
}

/// One model's line of the ranking table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRating {
    pub run_id: String,
    pub model: String,
    /// On [`RATING_SCALE`] around [`RATING_BASE`], with its bootstrap interval; `None` when the votes give no
    /// finite strength (a model that won or lost every vote).
    pub rating: Option<Estimate>,
    pub wins: usize,
    pub ties: usize,
    pub losses: usize,
    /// Votes where both answers were unacceptable.
    pub neither: usize,
}

/// The ranking of one pairwise review set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairwiseRanking {
    pub set_id: String,
    pub reviewers: Vec<String>,
    /// Best first (by rating, then by wins).
    pub models: Vec<ModelRating>,
    /// `win_rate[i][j]`: the share of votes between models `i` and `j` (in `models` order) that `i` won, a tie
    /// counting half; `None` where they never met in a decisive-or-tied vote.
    pub win_rate: Vec<Vec<Option<f64>>>,
    /// The style coefficients (log-odds per unit of normalised difference), named; empty when the fit could not
    /// separate style from the models and fell back to the plain fit.
    pub style: Vec<(String, Estimate)>,
    /// Davidson's tie parameter.
    pub tie_parameter: Option<f64>,
    /// Votes in the fit (A, B or tie) and votes left out (neither acceptable).
    pub votes: usize,
    pub neither: usize,
    /// Why the ratings are missing or not style-controlled, if they are.
    pub notes: Vec<String>,
    /// One sentence a clinician can read.
    pub sentence: String,
    /// LLM judges asked the same pairs in both orders (`nmb review judge`), beside the clinicians.
    #[serde(default)]
    pub judges: Vec<crate::JudgePairwise>,
}

/// Every clinician's newest vote in a pairwise set, with both answers' styles.
pub fn pair_votes(store: &Store, set: &ReviewSet) -> Result<Vec<PairVote>, ReviewError> {
    let items: BTreeMap<u32, nmb_store::ReviewItem> = (store.review_items(&set.set_id)?)
        .into_iter()
        .map(|i| (i.item_no, i))
        .collect();
    let pairs: BTreeMap<u32, nmb_store::ReviewPair> = (store.review_pairs(&set.set_id)?)
        .into_iter()
        .map(|p| (p.item_no, p))
        .collect();
    let mut styles: BTreeMap<(String, String, u32), Style> = BTreeMap::new();
    let mut style = |run: &str, task: &str, sample: u32| -> Result<Style, ReviewError> {
        let key = (run.to_string(), task.to_string(), sample);
        if let Some(s) = styles.get(&key) {
            return Ok(*s);
        }
        let record = store.sample_record(run, task, sample)?;
        let text = record.and_then(|r| r.final_text).unwrap_or_default();
        Ok(*styles.entry(key).or_insert(Style::of(&text)))
    };
    let mut out = Vec::new();
    for v in store.latest_votes(&set.set_id)? {
        let (Some(item), Some(pair)) = (items.get(&v.item_no), pairs.get(&v.item_no)) else {
            return Err(ReviewError::Invalid(format!(
                "review set {}: vote {} is on item {}, which has no pair",
                set.set_id, v.id, v.item_no
            )));
        };
        out.push(PairVote {
            reviewer: v.reviewer,
            task_id: item.task_id.clone(),
            a: item.run_id.clone(),
            b: pair.run_id.clone(),
            choice: v.vote.choice,
            style_a: style(&item.run_id, &item.task_id, item.sample_index)?,
            style_b: style(&pair.run_id, &item.task_id, pair.sample_index)?,
        });
    }
    Ok(out)
}

/// The ranking of the runs of one pairwise set from its votes; `model_of` names each run's model.
pub fn rank_votes(
    set: &ReviewSet,
    votes: &[PairVote],
    model_of: &dyn Fn(&str) -> String,
    cfg: &BootstrapConfig,
) -> PairwiseRanking {
    let runs = &set.runs;
    let index = |run: &str| runs.iter().position(|r| r == run);
    let mut counts = vec![[0usize; 4]; runs.len()]; // wins, ties, losses, neither
    let mut met = vec![vec![(0.0, 0usize); runs.len()]; runs.len()];
    let (mut fit_votes, mut rows, mut task_of) = (Vec::new(), Vec::new(), Vec::new());
    let mut tasks: BTreeMap<&str, usize> = BTreeMap::new();
    for v in votes {
        let (Some(a), Some(b)) = (index(&v.a), index(&v.b)) else {
            continue;
        };
        let pref = match v.choice.as_str() {
            "a" => Preference::AWins,
            "b" => Preference::BWins,
            "tie" => Preference::Tie,
            _ => {
                counts[a][3] += 1;
                counts[b][3] += 1;
                continue;
            }
        };
        let (score_a, slot_a, slot_b) = match pref {
            Preference::AWins => (1.0, 0, 2),
            Preference::BWins => (0.0, 2, 0),
            Preference::Tie => (0.5, 1, 1),
        };
        counts[a][slot_a] += 1;
        counts[b][slot_b] += 1;
        met[a][b].0 += score_a;
        met[a][b].1 += 1;
        met[b][a].0 += 1.0 - score_a;
        met[b][a].1 += 1;
        let next = tasks.len();
        task_of.push(*tasks.entry(v.task_id.as_str()).or_insert(next));
        fit_votes.push((a, b, pref));
        rows.push(Style::difference(v.style_a, v.style_b));
    }
    let mut notes = Vec::new();
    let styled = preference_ranking(runs.len(), &fit_votes, &rows, &task_of, cfg);
    let fitted = styled.or_else(|e| {
        notes.push(format!(
            "style control left out: {e} (with so few votes, length and formatting cannot be told apart from \
             the models)"
        ));
        preference_ranking(runs.len(), &fit_votes, &[], &task_of, cfg)
    });
    let fitted = fitted
        .map_err(|e| notes.push(format!("no ratings: {e}")))
        .ok();
    let scale = |e: &Estimate| Estimate {
        value: RATING_BASE + RATING_SCALE * e.value,
        ci_low: RATING_BASE + RATING_SCALE * e.ci_low,
        ci_high: RATING_BASE + RATING_SCALE * e.ci_high,
        ..e.clone()
    };
    let mut order: Vec<usize> = (0..runs.len()).collect();
    let rating = |i: usize| fitted.as_ref().map(|f| scale(&f.theta[i]));
    let key = |i: usize| {
        (
            rating(i).map_or(f64::NEG_INFINITY, |e| e.value),
            counts[i][0],
        )
    };
    order.sort_by(|&x, &y| {
        key(y)
            .partial_cmp(&key(x))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let models: Vec<ModelRating> = (order.iter())
        .map(|&i| ModelRating {
            run_id: runs[i].clone(),
            model: model_of(&runs[i]),
            rating: rating(i),
            wins: counts[i][0],
            ties: counts[i][1],
            losses: counts[i][2],
            neither: counts[i][3],
        })
        .collect();
    let win_rate = (order.iter())
        .map(|&i| {
            (order.iter())
                .map(|&j| (i != j && met[i][j].1 > 0).then(|| met[i][j].0 / met[i][j].1 as f64))
                .collect()
        })
        .collect();
    let style = fitted.as_ref().map_or(Vec::new(), |f| {
        ["length", "markdown"]
            .iter()
            .zip(&f.beta)
            .map(|(n, e)| (n.to_string(), e.clone()))
            .collect()
    });
    let mut reviewers: Vec<String> = votes.iter().map(|v| v.reviewer.clone()).collect();
    reviewers.sort();
    reviewers.dedup();
    let neither = votes.len() - fit_votes.len();
    let sentence = sentence(&models, fit_votes.len(), &reviewers, !style.is_empty());
    PairwiseRanking {
        set_id: set.set_id.clone(),
        reviewers,
        models,
        win_rate,
        style,
        tie_parameter: fitted.as_ref().map(|f| f.fit.nu),
        votes: fit_votes.len(),
        neither,
        notes,
        sentence,
        judges: Vec::new(),
    }
}

fn sentence(models: &[ModelRating], votes: usize, reviewers: &[String], styled: bool) -> String {
    let who = format!("{} clinician(s) over {votes} vote(s)", reviewers.len());
    let control = if styled {
        ", with answer length and formatting held equal"
    } else {
        ""
    };
    match (models.first(), models.get(1)) {
        (Some(top), Some(next)) => match (&top.rating, &next.rating) {
            (Some(t), Some(n)) => {
                let separated = t.ci_low > n.ci_high;
                format!(
                    "{who} preferred {} most{control}: rating {:.0} [{:.0}, {:.0}] against {:.0} [{:.0}, {:.0}] \
                     for {}, {}",
                    top.model,
                    t.value,
                    t.ci_low,
                    t.ci_high,
                    n.value,
                    n.ci_low,
                    n.ci_high,
                    next.model,
                    if separated {
                        "a clear lead (the intervals do not overlap)."
                    } else {
                        "but the intervals overlap, so the order is not settled."
                    }
                )
            }
            _ => format!(
                "{who}: {} won {} of its votes, but there are too few votes for ratings.",
                top.model, top.wins
            ),
        },
        _ => format!("{who}: fewer than two models were compared."),
    }
}

/// The ranking of every pairwise set that covers `run_id`, oldest first; `model_of` names each run's model.
pub fn run_pairwise(
    store: &Store,
    run_id: &str,
    model_of: &dyn Fn(&str) -> String,
    cfg: &BootstrapConfig,
) -> Result<Vec<PairwiseRanking>, ReviewError> {
    let mut sets = store.list_review_sets()?;
    sets.reverse();
    sets.retain(|s| s.pairwise && s.runs.iter().any(|r| r == run_id));
    let mut out = Vec::new();
    for set in &sets {
        let votes = pair_votes(store, set)?;
        if !votes.is_empty() {
            let mut ranking = rank_votes(set, &votes, model_of, cfg);
            ranking.judges = crate::stored_judge_pairwise(store, set, cfg)?;
            out.push(ranking);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn style_counts_words_and_markdown() {
        let s = Style::of("# Diagnosis\n- **stroke**\n1. MCA\nplain words here");
        assert_eq!(s.words, 9);
        assert_eq!(
            s.markdown, 4,
            "header, bullet, numbered item, one bold span"
        );
        assert_eq!(
            Style::difference(
                Style {
                    words: 30,
                    markdown: 0
                },
                Style {
                    words: 10,
                    markdown: 0
                }
            ),
            vec![0.5, 0.0]
        );
    }
}
