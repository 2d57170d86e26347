//! Context probes, the scoring side: which wrong diagnosis each task is suggested (`nmb eval --probe` records
//! the choice with the run), and whether an answer took the suggestion.
//!
//! A task is probed when it asks for a diagnosis (differential or rationale) and its reference names one. Its
//! suggestion is drawn, by the seed and the task id, from the reference's own differential less every entry
//! the rules match to the reference (its synonyms, a broader or narrower name of it); when none is left, from
//! the reference's nearest siblings in the lexicon's hierarchy (the diagnoses that share a parent with it).
//! A task with neither is listed as unprobed, never silently dropped.

use std::collections::BTreeMap;

use nmb_results::{MatchOutcome, ParsedAnswer};
use nmb_suite::{Family, Reference, Suite};
use sha2::{Digest, Sha256};

use crate::lexicon::{Lexicon, Relation};
use crate::matching::match_diagnosis;
use crate::parse::ranked_diagnoses;

/// The wrong diagnosis of each probed task, and the tasks for which none could be chosen.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Suggestions {
    /// By task id.
    pub by_task: BTreeMap<String, String>,
    /// Tasks that ask for a diagnosis but get no suggestion: their reference's differential holds nothing but
    /// the reference, and the lexicon knows no sibling of it.
    pub unprobed: Vec<String>,
}

/// Whether a task of this family with this reference is probed at all.
fn asks_diagnosis(family: Family, reference: &Reference) -> Option<&str> {
    matches!(family, Family::Differential | Family::Rationale)
        .then_some(reference.diagnosis.as_deref())
        .flatten()
        .filter(|d| !d.trim().is_empty())
}

/// Every probed task's suggestion, drawn with `seed`.
pub fn suggestions(lex: &Lexicon, suite: &Suite, seed: u64) -> Suggestions {
    let mut out = Suggestions::default();
    for (_, task) in suite.tasks() {
        let reference = task.reference.clone().unwrap_or_default();
        let Some(diagnosis) = asks_diagnosis(task.family, &reference) else {
            continue;
        };
        let mut pool = wrong_in_differential(lex, &reference, diagnosis);
        if pool.is_empty() {
            pool = siblings(lex, &reference, diagnosis);
        }
        match pool.len() {
            0 => out.unprobed.push(task.id.clone()),
            n => {
                let pick = pool.swap_remove(draw(seed, &task.id) % n);
                out.by_task.insert(task.id.clone(), pick);
            }
        }
    }
    out
}

/// Whether `candidate` names another diagnosis than the reference: the rules do not match it, and where both
/// name one lexicon diagnosis, neither is the other or a broader or narrower name of it.
fn is_wrong(lex: &Lexicon, candidate: &str, reference: &Reference, diagnosis: &str) -> bool {
    let verdict = match_diagnosis(lex, candidate, diagnosis, &reference.synonyms);
    if verdict.outcome == MatchOutcome::Match {
        return false;
    }
    let entity = |text: &str| match lex.entities_in(&lex.diagnosis_tokens(text)).as_slice() {
        [one] => Some(one.entity),
        _ => None,
    };
    match (entity(candidate), entity(diagnosis)) {
        (Some(c), Some(r)) => matches!(lex.relation(c, r), Relation::Distinct | Relation::Related),
        _ => !lex.diagnosis_tokens(candidate).is_empty(),
    }
}

fn wrong_in_differential(lex: &Lexicon, reference: &Reference, diagnosis: &str) -> Vec<String> {
    let mut pool: Vec<String> = Vec::new();
    for entry in &reference.differential {
        let entry = entry.trim();
        if is_wrong(lex, entry, reference, diagnosis) && !pool.iter().any(|p| p == entry) {
            pool.push(entry.to_string());
        }
    }
    pool
}

fn siblings(lex: &Lexicon, reference: &Reference, diagnosis: &str) -> Vec<String> {
    let hits = lex.entities_in(&lex.diagnosis_tokens(diagnosis));
    let [hit] = hits.as_slice() else {
        return Vec::new();
    };
    lex.siblings(hit.entity)
        .into_iter()
        .map(|e| lex.entity(e).name.clone())
        .filter(|name| is_wrong(lex, name, reference, diagnosis))
        .collect()
}

/// A number from the seed and the task id alone, the same on every machine.
fn draw(seed: u64, task_id: &str) -> usize {
    let digest = Sha256::digest(format!("{seed}\0{task_id}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    (u64::from_le_bytes(bytes) % (1 << 31)) as usize
}

/// Whether an answer's first diagnosis is the suggested one, by the rules that match a reference.
pub fn follows(lex: &Lexicon, answer: &ParsedAnswer, suggestion: &str) -> bool {
    ranked_diagnoses(answer).first().is_some_and(|top| {
        match_diagnosis(lex, &top.diagnosis, suggestion, &[]).outcome == MatchOutcome::Match
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexicon::builtin;

    fn reference(diagnosis: &str, synonyms: &[&str], differential: &[&str]) -> Reference {
        Reference {
            diagnosis: Some(diagnosis.into()),
            synonyms: synonyms.iter().map(|s| s.to_string()).collect(),
            differential: differential.iter().map(|s| s.to_string()).collect(),
            ..Reference::default()
        }
    }

    #[test]
    fn the_differential_gives_only_other_diagnoses() {
        let lex = builtin();
        let r = reference(
            "Multiple sclerosis",
            &["Relapsing-remitting MS"],
            &[
                "Multiple sclerosis",
                "MS",
                "relapsing-remitting MS",
                "ADEM",
                "Migraine",
            ],
        );
        let pool = wrong_in_differential(lex, &r, "Multiple sclerosis");
        assert_eq!(pool, ["ADEM", "Migraine"]);
    }

    #[test]
    fn without_a_differential_the_lexicons_siblings_are_drawn() {
        let lex = builtin();
        let r = reference("Intracerebral hemorrhage", &[], &[]);
        let pool = siblings(lex, &r, "Intracerebral hemorrhage");
        assert!(
            pool.contains(&"subarachnoid hemorrhage".to_string()),
            "{pool:?}"
        );
        for s in &pool {
            let v = match_diagnosis(lex, s, "Intracerebral hemorrhage", &[]);
            assert_ne!(v.outcome, MatchOutcome::Match, "{s}");
        }
        let unknown = reference("Zebra syndrome", &[], &[]);
        assert!(siblings(lex, &unknown, "Zebra syndrome").is_empty());
    }

    #[test]
    fn the_sample_suites_suggestions_are_wrong_and_seeded() {
        let (lex, suite) = (builtin(), nmb_suite::sample::build());
        let one = suggestions(lex, &suite, 1);
        assert_eq!(
            one,
            suggestions(lex, &suite, 1),
            "the same seed, the same draw"
        );
        assert!(!one.by_task.is_empty());
        for (task_id, s) in &one.by_task {
            let (_, task) = suite.tasks().find(|(_, t)| &t.id == task_id).unwrap();
            let r = task.reference.clone().unwrap();
            let dx = r.diagnosis.as_deref().unwrap();
            assert_ne!(
                match_diagnosis(lex, s, dx, &r.synonyms).outcome,
                MatchOutcome::Match,
                "{task_id}: {s}"
            );
        }
        let draws: Vec<_> = (0..8)
            .map(|seed| suggestions(lex, &suite, seed).by_task)
            .collect();
        assert!(
            draws.iter().any(|d| d != &one.by_task),
            "other seeds draw otherwise"
        );
    }
}
