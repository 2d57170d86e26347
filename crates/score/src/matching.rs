//! The rule steps of matching: deciding, without a model, whether a candidate diagnosis (or lesion type, or
//! location) matches the reference, does not, or cannot be decided by rules.
//!
//! Diagnoses, in order:
//! 1. the normalised candidate equals the normalised reference → match (`normalisation`);
//! 2. it equals a normalised synonym from the answer key → match (`synonym`);
//! 3. an entry that hedges or combines ("not", "vs", "or", "unlikely", ...) → inconclusive;
//! 4. lexicon diagnoses named in both: the same one → match (`normalisation`, or `synonym` when only a synonym
//!    named it); one broader than the other ("stroke" vs "ischemic stroke", "vascular dementia" vs "SIVD") →
//!    inconclusive, because whether the granularity suffices is a clinical judgement; linked as related →
//!    inconclusive; otherwise different diagnoses → no match;
//! 5. anything else (a term the lexicon does not know, a compound reference, several diagnoses in one entry) →
//!    inconclusive.
//!
//! Inconclusive pairs go to the LLM judge when one is configured (see `judge`), and otherwise stay unresolved.
//!
//! Lesion type: equal after normalisation → match; else the reference's primary lesion category (its first
//! mentioned: infarct, hemorrhage, tumor, abscess, ...) named in the candidate → match; categories named on both
//! sides but none shared → no match; else inconclusive. Location: conflicting laterality → no match; an
//! anatomical structure shared (with laterality stated where the reference states it) → match; structures named
//! on both sides but none shared → no match; else inconclusive.

use nmb_results::{MatchMethod, MatchOutcome};

use crate::lexicon::{Lexicon, Relation};

/// The rules' verdict on one pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleVerdict {
    pub outcome: MatchOutcome,
    pub method: Option<MatchMethod>,
    /// The reference text or synonym that matched.
    pub matched: Option<String>,
    /// Why the rules decided as they did (or could not).
    pub note: Option<String>,
}

impl RuleVerdict {
    fn matched(method: MatchMethod, matched: &str, note: Option<String>) -> Self {
        RuleVerdict {
            outcome: MatchOutcome::Match,
            method: Some(method),
            matched: Some(matched.to_string()),
            note,
        }
    }

    fn no_match(note: String) -> Self {
        RuleVerdict {
            outcome: MatchOutcome::NoMatch,
            method: Some(MatchMethod::Normalisation),
            matched: None,
            note: Some(note),
        }
    }

    fn inconclusive(note: impl Into<String>) -> Self {
        RuleVerdict {
            outcome: MatchOutcome::Inconclusive,
            method: None,
            matched: None,
            note: Some(note.into()),
        }
    }
}

/// Words that make an entry something other than one plain diagnosis.
const HEDGE_WORDS: &[&str] = &[
    "not",
    "no",
    "without",
    "unlikely",
    "excluded",
    "exclude",
    "versus",
    "vs",
    "or",
    "rule",
    "ruled",
    "differential",
    "unclear",
    "uncertain",
    "unknown",
];

/// Compares a candidate diagnosis with the reference and its synonyms.
pub fn match_diagnosis(
    lex: &Lexicon,
    candidate: &str,
    reference: &str,
    synonyms: &[String],
) -> RuleVerdict {
    let cand = lex.diagnosis_tokens(candidate);
    if cand.is_empty() {
        return RuleVerdict::no_match("empty entry".into());
    }
    if cand == lex.diagnosis_tokens(reference) {
        return RuleVerdict::matched(MatchMethod::Normalisation, reference, None);
    }
    if let Some(s) = synonyms.iter().find(|s| lex.diagnosis_tokens(s) == cand) {
        return RuleVerdict::matched(MatchMethod::Synonym, s, None);
    }
    if let Some(w) = cand.iter().find(|t| HEDGE_WORDS.contains(&t.as_str())) {
        return RuleVerdict::inconclusive(format!("hedged or combined entry (\"{w}\")"));
    }
    let cand_hits = lex.entities_in(&cand);
    let ref_hits = lex.entities_in(&lex.diagnosis_tokens(reference));
    if cand_hits.is_empty() {
        return RuleVerdict::inconclusive("candidate names no diagnosis the lexicon knows");
    }
    if cand_hits.len() > 1 {
        return RuleVerdict::inconclusive(format!(
            "several diagnoses in one entry ({})",
            names(lex, cand_hits.iter().map(|h| h.entity))
        ));
    }
    if ref_hits.len() > 1 {
        return RuleVerdict::inconclusive("the reference names several diagnoses");
    }
    let c = cand_hits[0].entity;
    // Reference entities: from the reference itself, then from each synonym, each with its source text.
    let mut targets: Vec<(usize, &str, MatchMethod)> = ref_hits
        .iter()
        .map(|h| (h.entity, reference, MatchMethod::Normalisation))
        .collect();
    for s in synonyms {
        let hits = lex.entities_in(&lex.diagnosis_tokens(s));
        // A synonym whose only known diagnosis is broader than the reference's ("acute left MCA stroke" for an
        // ischaemic stroke: the lexicon sees just "stroke") would let broad candidates through; skip it.
        let broader = |e: usize| {
            ref_hits
                .iter()
                .any(|r| lex.relation(e, r.entity) == Relation::Broader)
        };
        if let [only] = hits.as_slice() {
            if !broader(only.entity) {
                targets.push((only.entity, s.as_str(), MatchMethod::Synonym));
            }
        }
    }
    if targets.is_empty() {
        return RuleVerdict::inconclusive("reference names no diagnosis the lexicon knows");
    }
    if let Some((_, text, method)) = targets.iter().find(|(r, _, _)| *r == c) {
        return RuleVerdict::matched(
            *method,
            text,
            Some(format!("same lexicon diagnosis ({})", lex.entity(c).id)),
        );
    }
    let relations: Vec<(Relation, usize)> = targets
        .iter()
        .map(|(r, _, _)| (lex.relation(c, *r), *r))
        .collect();
    let first = |want: Relation| {
        relations
            .iter()
            .find(|(rel, _)| *rel == want)
            .map(|(_, r)| *r)
    };
    if let Some(r) = first(Relation::Broader) {
        return RuleVerdict::inconclusive(format!(
            "granularity: {} is broader than {}",
            lex.entity(c).id,
            lex.entity(r).id
        ));
    }
    if let Some(r) = first(Relation::Narrower) {
        return RuleVerdict::inconclusive(format!(
            "granularity: {} is narrower than {}",
            lex.entity(c).id,
            lex.entity(r).id
        ));
    }
    if let Some(r) = first(Relation::Related) {
        return RuleVerdict::inconclusive(format!(
            "related diagnoses: {} and {}",
            lex.entity(c).id,
            lex.entity(r).id
        ));
    }
    RuleVerdict::no_match(format!(
        "different diagnoses: {} vs {}",
        lex.entity(c).id,
        names(lex, targets.iter().map(|t| t.0))
    ))
}

fn names(lex: &Lexicon, ids: impl Iterator<Item = usize>) -> String {
    let mut v: Vec<&str> = ids.map(|i| lex.entity(i).id.as_str()).collect();
    v.dedup();
    v.join(", ")
}

/// Compares a lesion type with the reference's.
pub fn match_lesion_type(lex: &Lexicon, candidate: &str, reference: &str) -> RuleVerdict {
    let (cand, refr) = (lex.tokens(candidate), lex.tokens(reference));
    if cand.is_empty() {
        return RuleVerdict::no_match("empty lesion type".into());
    }
    if cand == refr {
        return RuleVerdict::matched(MatchMethod::Normalisation, reference, None);
    }
    let cand_cats = lex.lesion_categories(&cand);
    let ref_cats = lex.lesion_categories(&refr);
    let (Some((primary, _)), false) = (ref_cats.first(), cand_cats.is_empty()) else {
        return RuleVerdict::inconclusive("no known lesion category on one side");
    };
    if cand_cats.iter().any(|(c, _)| c == primary) {
        return RuleVerdict::matched(
            MatchMethod::Normalisation,
            reference,
            Some(format!("same lesion category ({primary})")),
        );
    }
    if cand_cats
        .iter()
        .any(|(c, _)| ref_cats.iter().any(|(r, _)| r == c))
    {
        return RuleVerdict::inconclusive(format!(
            "shares a secondary category but not the primary one ({primary})"
        ));
    }
    RuleVerdict::no_match(format!(
        "different lesion categories: {} vs {}",
        cand_cats
            .iter()
            .map(|c| c.0.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        ref_cats
            .iter()
            .map(|c| c.0.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Sides {
    left: bool,
    right: bool,
    bilateral: bool,
}

impl Sides {
    fn of(tokens: &[String]) -> Sides {
        let has = |w: &[&str]| tokens.iter().any(|t| w.contains(&t.as_str()));
        let left = has(&["left", "sinistral"]);
        let right = has(&["right", "dextral"]);
        Sides {
            left,
            right,
            bilateral: has(&[
                "bilateral",
                "bilaterally",
                "both",
                "symmetric",
                "symmetrical",
            ]) || (left && right),
        }
    }

    fn any(self) -> bool {
        self.left || self.right || self.bilateral
    }

    fn overlaps(self, other: Sides) -> bool {
        (self.left && other.left)
            || (self.right && other.right)
            || (self.bilateral && other.bilateral)
    }
}

/// Compares a lesion location with the reference's.
pub fn match_location(lex: &Lexicon, candidate: &str, reference: &str) -> RuleVerdict {
    let (cand, refr) = (lex.tokens(candidate), lex.tokens(reference));
    if cand.is_empty() {
        return RuleVerdict::no_match("empty location".into());
    }
    if cand == refr {
        return RuleVerdict::matched(MatchMethod::Normalisation, reference, None);
    }
    let (cs, rs) = (Sides::of(&cand), Sides::of(&refr));
    if cs.any() && rs.any() && !cs.overlaps(rs) {
        return RuleVerdict::no_match("laterality differs from the reference".into());
    }
    let (c_struct, r_struct) = (lex.structures(&cand), lex.structures(&refr));
    if c_struct.is_empty() || r_struct.is_empty() {
        return RuleVerdict::inconclusive("no known anatomical structure on one side");
    }
    let shared: Vec<&String> = c_struct.intersection(&r_struct).collect();
    if shared.is_empty() {
        return RuleVerdict::no_match(format!(
            "different structures: {} vs {}",
            join(&c_struct),
            join(&r_struct)
        ));
    }
    if rs.any() && !cs.any() {
        return RuleVerdict::inconclusive("laterality not stated");
    }
    RuleVerdict::matched(
        MatchMethod::Normalisation,
        reference,
        Some(format!(
            "shared structure ({})",
            shared
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    )
}

fn join(set: &std::collections::BTreeSet<String>) -> String {
    set.iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexicon::builtin;

    fn syn(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    fn outcome(
        candidate: &str,
        reference: &str,
        synonyms: &[&str],
    ) -> (MatchOutcome, Option<MatchMethod>) {
        let v = match_diagnosis(builtin(), candidate, reference, &syn(synonyms));
        (v.outcome, v.method)
    }

    use MatchMethod::{Normalisation, Synonym};
    use MatchOutcome::{Inconclusive, Match, NoMatch};

    #[test]
    fn abbreviations_and_expansions_match_by_normalisation() {
        // Each pair is the same diagnosis written two ways; no synonyms given, so only normalisation can match.
        let pairs = [
            ("MS", "Multiple sclerosis"),
            ("Alzheimer's disease", "AD"),
            ("SIVD", "Subcortical ischaemic vascular disease"),
            ("CJD", "Creutzfeldt–Jakob disease"),
            ("PRES", "Posterior reversible encephalopathy syndrome"),
            ("ADEM", "acute disseminated encephalomyelitis"),
            ("ICH", "Intracerebral haemorrhage"),
            ("SAH", "subarachnoid hemorrhage"),
            ("GBM", "Glioblastoma"),
            ("NMOSD", "Neuromyelitis optica spectrum disorder"),
            ("ALS", "amyotrophic lateral sclerosis"),
            ("PD", "Parkinson's disease"),
            ("probable Alzheimer disease", "Alzheimer's disease"),
        ];
        for (a, b) in pairs {
            assert_eq!(
                outcome(a, b, &[]),
                (Match, Some(Normalisation)),
                "{a} vs {b}"
            );
            assert_eq!(
                outcome(b, a, &[]),
                (Match, Some(Normalisation)),
                "{b} vs {a}"
            );
        }
    }

    #[test]
    fn the_lexicon_matches_the_same_disease_in_other_words() {
        assert_eq!(
            outcome(
                "Acute ischemic stroke",
                "Acute ischaemic stroke in the left middle cerebral artery territory",
                &[]
            ),
            (Match, Some(Normalisation))
        );
        assert_eq!(
            outcome("Cerebral abscess", "Pyogenic brain abscess", &[]),
            (Match, Some(Normalisation))
        );
        assert_eq!(
            outcome("Binswanger disease", "SIVD", &[]),
            (Match, Some(Normalisation))
        );
    }

    #[test]
    fn a_synonym_the_lexicon_reads_as_broader_does_not_widen_the_reference() {
        // The key's "acute left MCA stroke" is as specific as the reference, but the lexicon only sees "stroke"
        // in it; a bare "Stroke" is still a granularity question for the judge.
        let v = match_diagnosis(
            builtin(),
            "Stroke",
            "Acute ischaemic stroke in the left middle cerebral artery territory",
            &syn(&["acute left MCA stroke", "cerebral infarction"]),
        );
        assert_eq!(v.outcome, Inconclusive, "{v:?}");
        assert_eq!(
            outcome(
                "Cerebral infarct",
                "Acute ischaemic stroke",
                &["cerebral infarction"]
            ),
            (Match, Some(Normalisation))
        );
    }

    #[test]
    fn answer_key_synonyms_match_as_synonyms() {
        assert_eq!(
            outcome(
                "putaminal haemorrhage",
                "Hypertensive intracerebral haemorrhage in the left putamen",
                &["putaminal haemorrhage"]
            ),
            (Match, Some(Synonym))
        );
        // A term the lexicon does not know is matched only through the key.
        assert_eq!(
            outcome(
                "Fahr's disease",
                "Primary familial brain calcification",
                &["Fahr disease"]
            ),
            (Match, Some(Synonym))
        );
        assert_eq!(
            outcome(
                "Fahr's disease",
                "Primary familial brain calcification",
                &[]
            )
            .0,
            Inconclusive
        );
    }

    #[test]
    fn granularity_and_related_diagnoses_go_to_the_judge() {
        for (a, b) in [
            ("Vascular dementia", "SIVD"),
            ("SIVD", "vascular dementia"),
            ("Stroke", "Acute ischaemic stroke"),
            ("Dementia", "Alzheimer's disease"),
            ("Encephalitis", "Herpes simplex encephalitis"),
            (
                "Autoimmune limbic encephalitis",
                "Herpes simplex encephalitis",
            ),
            ("Hypertensive encephalopathy", "PRES"),
        ] {
            let v = match_diagnosis(builtin(), a, b, &[]);
            assert_eq!(v.outcome, Inconclusive, "{a} vs {b}: {v:?}");
        }
        let v = match_diagnosis(builtin(), "Vascular dementia", "SIVD", &[]);
        assert!(v.note.unwrap().contains("granularity"));
    }

    #[test]
    fn different_diagnoses_do_not_match_without_a_judge() {
        for (a, b) in [
            ("Multiple sclerosis", "ADEM"),
            ("Glioblastoma", "Pyogenic brain abscess"),
            (
                "Intracerebral haemorrhage",
                "Acute ischaemic stroke in the left MCA territory",
            ),
            ("Solitary brain metastasis", "Glioblastoma"),
            (
                "Perimesencephalic non-aneurysmal SAH",
                "Aneurysmal subarachnoid haemorrhage",
            ),
        ] {
            assert_eq!(
                outcome(a, b, &[]),
                (NoMatch, Some(Normalisation)),
                "{a} vs {b}"
            );
        }
    }

    #[test]
    fn hedged_combined_and_unknown_entries_are_inconclusive() {
        assert_eq!(
            outcome("MS vs ADEM", "Multiple sclerosis", &[]).0,
            Inconclusive
        );
        assert_eq!(
            outcome("Not multiple sclerosis", "Multiple sclerosis", &[]).0,
            Inconclusive
        );
        assert_eq!(
            outcome("Susac syndrome", "Multiple sclerosis", &[]).0,
            Inconclusive
        );
        assert_eq!(outcome("", "Multiple sclerosis", &[]).0, NoMatch);
    }

    #[test]
    fn lesion_types_by_category() {
        let lex = builtin();
        let reference =
            "Acute ischaemic infarct with restricted diffusion (DWI hyperintense, ADC hypointense)";
        assert_eq!(
            match_lesion_type(lex, "Acute infarct", reference).outcome,
            Match
        );
        assert_eq!(
            match_lesion_type(lex, "Haemorrhage", reference).outcome,
            NoMatch
        );
        assert_eq!(
            match_lesion_type(lex, "Hyperintense lesion", reference).outcome,
            Inconclusive
        );
        let abscess = "Ring-enhancing lesion with a smooth, thin, complete rim around a fluid-filled centre, with \
                       surrounding vasogenic oedema";
        assert_eq!(
            match_lesion_type(lex, "Brain abscess", abscess).outcome,
            Match
        );
        // Only the secondary finding: not enough.
        assert_eq!(
            match_lesion_type(lex, "Vasogenic oedema", abscess).outcome,
            Inconclusive
        );
    }

    #[test]
    fn locations_by_side_and_structure() {
        let lex = builtin();
        let reference =
            "Left parietal lobe, subcortical and deep white matter lateral to the atrium";
        assert_eq!(
            match_location(lex, "left parietal lobe", reference).outcome,
            Match
        );
        assert_eq!(
            match_location(lex, "right parietal lobe", reference).outcome,
            NoMatch
        );
        assert_eq!(
            match_location(lex, "left cerebellar hemisphere", reference).outcome,
            NoMatch
        );
        assert_eq!(
            match_location(lex, "parietal lobe", reference).outcome,
            Inconclusive
        );
        let pres = "Both parieto-occipital lobes, roughly symmetric";
        assert_eq!(
            match_location(lex, "bilateral occipital lobes", pres).outcome,
            Match
        );
        assert_eq!(
            match_location(lex, "left occipital lobe", pres).outcome,
            NoMatch
        );
    }
}
