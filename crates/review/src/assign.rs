//! Which answers a review set holds, and in what order each reviewer sees them.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::ReviewError;

/// An answer that may be reviewed: one sample of one task of a run.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Candidate {
    pub run_id: String,
    pub task_id: String,
    pub sample_index: u32,
}

#[derive(Debug, Clone)]
pub struct AssignOptions {
    pub reviewers: Vec<String>,
    /// Items each reviewer grades; `None` uses every candidate once (plus the shared ones for everybody).
    pub per_reviewer: Option<usize>,
    /// Share (0 to 1) of each reviewer's items that every reviewer grades.
    pub overlap: f64,
    pub seed: u64,
}

/// The set's items (numbered 1.. in shuffled order) and each reviewer's item numbers in their own order.
#[derive(Debug, Clone, PartialEq)]
pub struct Assignment {
    pub items: Vec<nmb_store::ReviewItem>,
    pub reviewers: Vec<(String, Vec<u32>)>,
}

/// Shuffles the candidates with the seed, takes the shared items first (graded by everyone), deals the rest
/// out so no two reviewers share them, and shuffles each reviewer's list on its own, so the shared items do not
/// come at the same point for everybody.
pub fn assign(
    candidates: Vec<Candidate>,
    options: &AssignOptions,
) -> Result<Assignment, ReviewError> {
    let dealt = deal(candidates, options)?;
    let items = (dealt.items.into_iter().enumerate())
        .map(|(i, (c, shared))| nmb_store::ReviewItem {
            item_no: i as u32 + 1,
            run_id: c.run_id,
            task_id: c.task_id,
            sample_index: c.sample_index,
            shared,
        })
        .collect();
    Ok(Assignment {
        items,
        reviewers: dealt.reviewers,
    })
}

/// Items dealt out: each with whether it is shared (item `i` is numbered `i + 1`), each reviewer's item numbers,
/// and the random stream, for whatever else the caller draws.
pub(crate) struct Dealt<T> {
    pub(crate) items: Vec<(T, bool)>,
    pub(crate) reviewers: Vec<(String, Vec<u32>)>,
    pub(crate) rng: ChaCha8Rng,
}

/// [`assign`] for any kind of item (one answer, or a pair of answers).
pub(crate) fn deal<T: Ord>(
    mut candidates: Vec<T>,
    options: &AssignOptions,
) -> Result<Dealt<T>, ReviewError> {
    check(options)?;
    candidates.sort();
    candidates.dedup();
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    candidates.shuffle(&mut rng);
    let reviewers = options.reviewers.len();
    let (shared, unique_each) = sizes(candidates.len(), reviewers, options)?;
    let mut items: Vec<(T, bool)> = (candidates.into_iter().enumerate())
        .map(|(i, c)| (c, i < shared))
        .collect();
    let mut lists: Vec<Vec<u32>> = vec![(1..=shared as u32).collect(); reviewers];
    let mut next = shared;
    for (r, list) in lists.iter_mut().enumerate() {
        let take = unique_each[r];
        list.extend((next + 1..=next + take).map(|n| n as u32));
        next += take;
    }
    items.truncate(next);
    for list in &mut lists {
        list.shuffle(&mut rng);
    }
    Ok(Dealt {
        items,
        reviewers: options.reviewers.iter().cloned().zip(lists).collect(),
        rng,
    })
}

fn check(options: &AssignOptions) -> Result<(), ReviewError> {
    if options.reviewers.is_empty() {
        return Err(ReviewError::Invalid(
            "no reviewers; expected --reviewers a,b,...".into(),
        ));
    }
    for name in &options.reviewers {
        let ok = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
        if !ok {
            return Err(ReviewError::Invalid(format!(
                "reviewer name {name:?}: expected 1 to 64 letters, digits, '.', '_' or '-'"
            )));
        }
    }
    let mut names = options.reviewers.clone();
    names.sort();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(ReviewError::Invalid(format!(
            "reviewer {:?} is named twice",
            w[0]
        )));
    }
    if !(0.0..=1.0).contains(&options.overlap) {
        return Err(ReviewError::Invalid(format!(
            "--overlap {} is outside 0..=1; expected the share of items every reviewer grades",
            options.overlap
        )));
    }
    if options.per_reviewer == Some(0) {
        return Err(ReviewError::Invalid(
            "--per-reviewer 0: expected at least 1".into(),
        ));
    }
    Ok(())
}

/// How many shared items, and how many of its own each reviewer gets.
fn sizes(
    available: usize,
    reviewers: usize,
    options: &AssignOptions,
) -> Result<(usize, Vec<usize>), ReviewError> {
    if available == 0 {
        return Err(ReviewError::Invalid(
            "the runs have no answered samples to review".into(),
        ));
    }
    match options.per_reviewer {
        Some(per) => {
            let shared = (options.overlap * per as f64).round() as usize;
            let needed = shared + reviewers * (per - shared);
            if needed > available {
                return Err(ReviewError::Invalid(format!(
                    "{reviewers} reviewers x {per} items with {shared} shared need {needed} answers; the runs \
                     have {available}; lower --per-reviewer or raise --overlap"
                )));
            }
            Ok((shared, vec![per - shared; reviewers]))
        }
        None => {
            let shared = ((options.overlap * available as f64).round() as usize).min(available);
            let rest = available - shared;
            let each = (0..reviewers)
                .map(|r| rest / reviewers + usize::from(r < rest % reviewers))
                .collect();
            Ok((shared, each))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidates(n: usize) -> Vec<Candidate> {
        (0..n)
            .map(|i| Candidate {
                run_id: "r".into(),
                task_id: format!("t{i:02}"),
                sample_index: 0,
            })
            .collect()
    }

    fn opts(per: Option<usize>, overlap: f64, seed: u64) -> AssignOptions {
        AssignOptions {
            reviewers: vec!["a".into(), "b".into(), "c".into()],
            per_reviewer: per,
            overlap,
            seed,
        }
    }

    #[test]
    fn shared_items_go_to_everyone_and_the_rest_to_one_each() {
        let a = assign(candidates(30), &opts(Some(6), 0.5, 7)).unwrap();
        assert_eq!(a.items.len(), 3 + 3 * 3);
        let shared: Vec<u32> = a
            .items
            .iter()
            .filter(|i| i.shared)
            .map(|i| i.item_no)
            .collect();
        assert_eq!(shared.len(), 3);
        for (_, list) in &a.reviewers {
            assert_eq!(list.len(), 6);
            assert!(shared.iter().all(|s| list.contains(s)));
        }
        let mut own: Vec<u32> = a
            .reviewers
            .iter()
            .flat_map(|(_, l)| l.iter().copied().filter(|n| !shared.contains(n)))
            .collect();
        own.sort();
        let before = own.len();
        own.dedup();
        assert_eq!(own.len(), before, "an unshared item went to two reviewers");
    }

    #[test]
    fn the_seed_decides_the_order() {
        let x = assign(candidates(30), &opts(Some(6), 0.5, 1)).unwrap();
        let y = assign(candidates(30), &opts(Some(6), 0.5, 1)).unwrap();
        let z = assign(candidates(30), &opts(Some(6), 0.5, 2)).unwrap();
        assert_eq!(x, y);
        assert_ne!(x, z);
        let in_order: Vec<String> = (0..12).map(|i| format!("t{i:02}")).collect();
        let got: Vec<String> = x.items.iter().map(|i| i.task_id.clone()).collect();
        assert_ne!(got, in_order, "items were not shuffled");
    }

    #[test]
    fn without_a_size_every_answer_is_used_once() {
        let a = assign(candidates(10), &opts(None, 0.2, 3)).unwrap();
        assert_eq!(a.items.len(), 10);
        let lens: Vec<usize> = a.reviewers.iter().map(|(_, l)| l.len()).collect();
        assert_eq!(lens.iter().sum::<usize>(), 2 * 3 + 8);
    }

    #[test]
    fn impossible_requests_say_why() {
        let e = assign(candidates(5), &opts(Some(4), 0.0, 1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("need 12 answers") && e.contains("have 5"), "{e}");
        let e = assign(candidates(5), &opts(None, 1.5, 1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--overlap"), "{e}");
        let mut o = opts(None, 0.5, 1);
        o.reviewers = vec!["a".into(), "a".into()];
        assert!(assign(candidates(5), &o)
            .unwrap_err()
            .to_string()
            .contains("twice"));
        o.reviewers = vec!["<b>".into()];
        assert!(assign(candidates(5), &o).is_err());
        assert!(assign(Vec::new(), &opts(None, 0.5, 1)).is_err());
    }
}
