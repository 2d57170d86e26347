//! Pairwise review sets: two models' answers to the same task side by side, and the reviewer's vote between
//! them (A, B, a tie, or neither acceptable).
//!
//! Which two answers make a pair: for every task that two or more of the set's runs answered, each two runs
//! give one pair, of their lowest answered samples. The pairs are dealt out as single answers are ([`assign`]),
//! then each pair's order is drawn from the same seeded stream: the answer stored as the item's own row is
//! shown as A, the other as B, so the order shown is recorded with the set.
//!
//! [`assign`]: crate::assign

use std::collections::BTreeMap;

use nmb_store::{ReviewItem, ReviewPair, Vote, VOTE_CHOICES};
use rand::Rng;

use crate::assign::deal;
use crate::{AssignOptions, Candidate, ReviewError, COMMENT_LIMIT};

/// Two answers to one task, in a canonical order (by run id).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PairCandidate {
    pub task_id: String,
    pub first: (String, u32),
    pub second: (String, u32),
}

/// A pairwise set's items (the A answers), their B answers and each reviewer's item numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct PairAssignment {
    pub items: Vec<ReviewItem>,
    pub pairs: Vec<ReviewPair>,
    pub reviewers: Vec<(String, Vec<u32>)>,
}

/// Every pair of runs' answers to the same task: each run's lowest answered sample of the task.
pub fn pair_candidates(candidates: &[Candidate]) -> Vec<PairCandidate> {
    let mut by_task: BTreeMap<&str, BTreeMap<&str, u32>> = BTreeMap::new();
    for c in candidates {
        let sample = by_task
            .entry(&c.task_id)
            .or_default()
            .entry(&c.run_id)
            .or_insert(c.sample_index);
        *sample = (*sample).min(c.sample_index);
    }
    let mut out = Vec::new();
    for (task, runs) in by_task {
        let runs: Vec<(&str, u32)> = runs.into_iter().collect();
        for (i, x) in runs.iter().enumerate() {
            for y in &runs[i + 1..] {
                out.push(PairCandidate {
                    task_id: task.to_string(),
                    first: (x.0.to_string(), x.1),
                    second: (y.0.to_string(), y.1),
                });
            }
        }
    }
    out
}

/// Deals the pairs out (as [`crate::assign`] deals answers) and draws which answer of each is shown as A.
pub fn assign_pairs(
    candidates: &[Candidate],
    options: &AssignOptions,
) -> Result<PairAssignment, ReviewError> {
    let pairs = pair_candidates(candidates);
    if pairs.is_empty() {
        return Err(ReviewError::Invalid(
            "a pairwise review needs two or more runs that answered the same tasks; no task has answers from \
             two of these runs"
                .into(),
        ));
    }
    let mut dealt = deal(pairs, options)?;
    let (mut items, mut shown_b) = (Vec::new(), Vec::new());
    for (i, (p, shared)) in dealt.items.into_iter().enumerate() {
        let item_no = i as u32 + 1;
        let (a, b) = if dealt.rng.random_bool(0.5) {
            (p.first, p.second)
        } else {
            (p.second, p.first)
        };
        items.push(ReviewItem {
            item_no,
            run_id: a.0,
            task_id: p.task_id,
            sample_index: a.1,
            shared,
        });
        shown_b.push(ReviewPair {
            item_no,
            run_id: b.0,
            sample_index: b.1,
        });
    }
    Ok(PairAssignment {
        items,
        pairs: shown_b,
        reviewers: dealt.reviewers,
    })
}

/// A vote as a form sends it: every value a string, empty meaning unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VoteForm {
    pub choice: String,
    pub comment: String,
}

/// The vote the form describes (`None` when no choice was made yet, as autosave sends), or every problem.
pub fn check_vote(form: &VoteForm) -> Result<Option<Vote>, Vec<String>> {
    let mut problems = Vec::new();
    let choice = form.choice.trim();
    if !choice.is_empty() && !VOTE_CHOICES.contains(&choice) {
        problems.push(format!(
            "choice {choice:?}: expected one of {}",
            VOTE_CHOICES.join(", ")
        ));
    }
    let comment = form.comment.trim();
    if comment.chars().count() > COMMENT_LIMIT {
        problems.push(format!(
            "the comment is longer than {COMMENT_LIMIT} characters"
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok((!choice.is_empty()).then(|| Vote {
        choice: choice.to_string(),
        comment: (!comment.is_empty()).then(|| comment.to_string()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(run: &str, task: &str, sample: u32) -> Candidate {
        Candidate {
            run_id: run.into(),
            task_id: task.into(),
            sample_index: sample,
        }
    }

    #[test]
    fn each_two_runs_that_answered_a_task_make_one_pair() {
        let c = [
            answer("r1", "t1", 1),
            answer("r1", "t1", 0),
            answer("r2", "t1", 0),
            answer("r3", "t1", 2),
            answer("r1", "t2", 0),
        ];
        let pairs = pair_candidates(&c);
        assert_eq!(pairs.len(), 3, "{pairs:?}");
        assert!(pairs.iter().all(|p| p.task_id == "t1"));
        assert_eq!(pairs[0].first, ("r1".into(), 0));
        assert_eq!(pairs[1].second, ("r3".into(), 2));
    }

    #[test]
    fn both_orders_are_drawn_and_recorded() {
        let c: Vec<Candidate> = (0..40)
            .flat_map(|t| {
                [
                    answer("r1", &format!("t{t}"), 0),
                    answer("r2", &format!("t{t}"), 0),
                ]
            })
            .collect();
        let options = AssignOptions {
            reviewers: vec!["lee".into(), "park".into()],
            per_reviewer: None,
            overlap: 1.0,
            seed: 7,
        };
        let a = assign_pairs(&c, &options).unwrap();
        assert_eq!(a.items.len(), 40);
        let r1_first = a.items.iter().filter(|i| i.run_id == "r1").count();
        assert!((5..35).contains(&r1_first), "{r1_first} of 40 show r1 as A");
        for (item, pair) in a.items.iter().zip(&a.pairs) {
            assert_eq!(item.item_no, pair.item_no);
            assert_ne!(item.run_id, pair.run_id);
        }
        assert_eq!(a, assign_pairs(&c, &options).unwrap(), "the seed decides");
        assert!(
            assign_pairs(&c[..1], &options).is_err(),
            "one run has no pair"
        );
    }

    #[test]
    fn a_vote_is_one_of_the_choices() {
        let form = |choice: &str| VoteForm {
            choice: choice.into(),
            comment: " ok ".into(),
        };
        let v = check_vote(&form("neither")).unwrap().unwrap();
        assert_eq!(
            (v.choice.as_str(), v.comment.as_deref()),
            ("neither", Some("ok"))
        );
        assert_eq!(check_vote(&form("")).unwrap(), None);
        assert_eq!(check_vote(&form("maybe")).unwrap_err().len(), 1);
    }
}
