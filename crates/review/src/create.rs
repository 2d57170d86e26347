//! Creating a review set: the runs' answered samples drawn and shared out ([`assign`]), one secret token per
//! reviewer (only its hash is stored), and the invitations to print once.

use std::path::PathBuf;

use nmb_results::Rubric;
use nmb_store::{NewReviewSet, NewReviewer, Store};
use serde_json::{json, Value};

use crate::{
    assign, assign_pairs, candidates, hash_token, load_criteria, load_rubric, new_set_id,
    new_token, thinking_line, AssignOptions, Assignment, ReviewError,
};

/// What a new review set is made of.
pub struct NewSet {
    pub runs: Vec<String>,
    pub assign: AssignOptions,
    /// The rubric file [default: the bundled neurology rubric].
    pub rubric: Option<PathBuf>,
    /// Reviewers see each answer's thinking. Off by default: the blind review grades the answer, and a model's
    /// thinking can sway a grade either way.
    pub show_thinking: bool,
    /// Reviewers vote between two runs' answers to the same task instead of grading one ([`crate::assign_pairs`]).
    pub pairwise: bool,
    /// A criterion rubric whose criteria reviewers mark met or not met on the items of tasks it covers.
    pub criteria: Option<PathBuf>,
}

/// A review set just stored, with each reviewer's token (shown only now).
pub struct CreatedSet {
    pub set_id: String,
    pub runs: Vec<String>,
    pub seed: u64,
    pub rubric: Rubric,
    pub items: usize,
    /// Items every reviewer grades.
    pub shared: usize,
    /// Each reviewer, the number of their items and their token.
    pub invites: Vec<(String, usize, String)>,
    pub show_thinking: bool,
    pub pairwise: bool,
    /// The criterion rubric's file name, when the set has one.
    pub criteria: Option<String>,
}

/// Draws, shares out and stores a review set.
pub fn create_set(store: &Store, new: NewSet) -> Result<CreatedSet, ReviewError> {
    let (rubric, rubric_text) = load_rubric(new.rubric.as_deref())?;
    let criteria = new.criteria.as_deref().map(load_criteria).transpose()?;
    let answers = candidates(store, &new.runs)?;
    let (assignment, pairs) = if new.pairwise {
        let a = assign_pairs(&answers, &new.assign)?;
        let assignment = Assignment {
            items: a.items,
            reviewers: a.reviewers,
        };
        (assignment, a.pairs)
    } else {
        (assign(answers, &new.assign)?, Vec::new())
    };
    let set_id = new_set_id();
    let tokens: Vec<String> = assignment.reviewers.iter().map(|_| new_token()).collect();
    let reviewers = (assignment.reviewers.iter().zip(&tokens))
        .map(|((name, items), token)| NewReviewer {
            reviewer: name.clone(),
            token_sha256: hash_token(token),
            items: items.clone(),
        })
        .collect();
    let set = NewReviewSet {
        set_id: set_id.clone(),
        rubric_hash: rubric.hash.clone(),
        rubric: rubric_text,
        seed: new.assign.seed,
        overlap: new.assign.overlap,
        runs: new.runs.clone(),
        items: assignment.items.clone(),
        reviewers,
        show_thinking: new.show_thinking,
        criteria: criteria.clone(),
    };
    if new.pairwise {
        store.create_pairwise_review_set(&set, &pairs)?;
    } else {
        store.create_review_set(&set)?;
    }
    let invites = (assignment.reviewers.into_iter().zip(tokens))
        .map(|((name, items), token)| (name, items.len(), token))
        .collect();
    Ok(CreatedSet {
        set_id,
        runs: new.runs,
        seed: new.assign.seed,
        rubric,
        items: assignment.items.len(),
        shared: assignment.items.iter().filter(|i| i.shared).count(),
        invites,
        show_thinking: new.show_thinking,
        pairwise: new.pairwise,
        criteria: criteria.map(|c| c.name),
    })
}

impl CreatedSet {
    /// A reviewer's URL on the `nmb serve` at `base`.
    fn url(&self, base: &str, token: &str) -> String {
        format!(
            "{}/review/{}?token={token}",
            base.trim_end_matches('/'),
            self.set_id
        )
    }

    pub fn json(&self, base: &str) -> Value {
        let people: Vec<Value> = (self.invites.iter())
            .map(|(name, items, token)| {
                json!({"reviewer": name, "items": items, "token": token, "url": self.url(base, token)})
            })
            .collect();
        let r = &self.rubric;
        json!({
            "set_id": self.set_id,
            "items": self.items,
            "shared_items": self.shared,
            "runs": self.runs,
            "seed": self.seed,
            "rubric": {"id": r.id, "version": r.version, "sha256": r.hash},
            "show_thinking": self.show_thinking,
            "mode": if self.pairwise { "pairwise" } else { "grade" },
            "criteria": self.criteria,
            "reviewers": people,
        })
    }

    pub fn text(&self, base: &str) -> String {
        let r = &self.rubric;
        let kind = if self.pairwise { "pairs" } else { "items" };
        let mut out = format!(
            "review set {}: {} {kind} ({} graded by every reviewer) from {} run(s), rubric {} v{} (sha256 {})\n",
            self.set_id,
            self.items,
            self.shared,
            self.runs.len(),
            r.id,
            r.version,
            &r.hash[..12.min(r.hash.len())]
        );
        out += &format!("{}\n", thinking_line(self.show_thinking));
        if let Some(c) = &self.criteria {
            out += &format!("reviewers also mark the criteria of {c}, met or not met\n");
        }
        out += "each URL is shown only now; send each reviewer their own:\n";
        for (name, items, token) in &self.invites {
            out += &format!("  {name:<16} {items:>4} items  {}\n", self.url(base, token));
        }
        out
    }
}
