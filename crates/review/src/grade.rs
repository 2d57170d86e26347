//! Checking a grade a reviewer submits: every field is optional (autosave sends partial grades), and whatever
//! is there must fit the rubric.

use std::collections::{BTreeMap, BTreeSet};

use nmb_results::criteria::Criterion;
use nmb_results::ErrorCategory;
use nmb_results::Rubric;
use nmb_store::Grade;

/// The verdicts a reviewer can give. `skip` means "unsure / skip": stored, but not a grade.
pub const VERDICTS: [&str; 4] = ["correct", "partly", "incorrect", "skip"];

/// The error-taxonomy classes a reviewer can pick for a wrong answer.
pub const TAXONOMY: [ErrorCategory; 5] = ErrorCategory::ALL;

/// The longest comment kept, in characters.
pub const COMMENT_LIMIT: usize = 4000;

/// A grade as a form sends it: every value a string, empty meaning unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GradeForm {
    pub verdict: String,
    /// Dimension id (or `overall`) to the score typed.
    pub scores: BTreeMap<String, String>,
    pub taxonomy: String,
    pub comment: String,
    /// The criteria checked as met, when the page listed the item's criteria (`None`: it listed none, so
    /// nothing is said about them); an unchecked criterion on a page that listed it is not met.
    pub criteria: Option<BTreeSet<String>>,
}

/// The grade the form describes, or every problem with it. `criteria` are the item's criteria, from the set's
/// criterion rubric (empty without one).
pub fn check_grade(
    rubric: &Rubric,
    criteria: &[Criterion],
    form: &GradeForm,
) -> Result<Grade, Vec<String>> {
    let mut problems = Vec::new();
    let verdict = match form.verdict.trim() {
        "" => None,
        v if VERDICTS.contains(&v) => Some(v.to_string()),
        v => {
            problems.push(format!(
                "verdict {v:?}: expected one of {}",
                VERDICTS.join(", ")
            ));
            None
        }
    };
    let mut scores = BTreeMap::new();
    let mut known = rubric.dimension_ids();
    known.push("overall".into());
    for (dim, value) in &form.scores {
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        if !known.contains(dim) {
            problems.push(format!(
                "unknown rubric dimension {dim:?}; expected one of {}",
                known.join(", ")
            ));
            continue;
        }
        match value.parse::<u8>() {
            Ok(n) if (rubric.min..=rubric.max).contains(&n) => {
                scores.insert(dim.clone(), n);
            }
            _ => problems.push(format!(
                "{dim}: {value:?} is not a whole number from {} to {}",
                rubric.min, rubric.max
            )),
        }
    }
    let taxonomy = match form.taxonomy.trim() {
        "" => None,
        t if TAXONOMY.iter().any(|c| c.as_str() == t) => Some(t.to_string()),
        t => {
            let names: Vec<&str> = TAXONOMY.iter().map(|c| c.as_str()).collect();
            problems.push(format!(
                "taxonomy class {t:?}: expected one of {}",
                names.join(", ")
            ));
            None
        }
    };
    let mut marks = BTreeMap::new();
    if let Some(met) = &form.criteria {
        if let Some(unknown) = met.iter().find(|id| !criteria.iter().any(|c| &c.id == *id)) {
            problems.push(format!("unknown criterion {unknown:?} for this item"));
        }
        marks = criteria
            .iter()
            .map(|c| (c.id.clone(), met.contains(&c.id)))
            .collect();
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
    Ok(Grade {
        verdict,
        scores,
        taxonomy,
        comment: (!comment.is_empty()).then(|| comment.to_string()),
        criteria: marks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn criteria_listed_on_the_page_are_met_when_checked_and_not_met_otherwise() {
        let rubric = nmb_results::criteria::CriterionRubric::sample();
        let criteria = rubric.for_task("stroke_left_mca/dx");
        let mut f = form("correct", &[], "");
        f.criteria = Some([criteria[0].id.clone()].into());
        let g = check_grade(&Rubric::builtin(), criteria, &f).unwrap();
        assert_eq!(g.criteria.len(), criteria.len());
        assert!(g.criteria[&criteria[0].id]);
        assert!(!g.criteria[&criteria[1].id]);
        f.criteria = Some(["nope".to_string()].into());
        let e = check_grade(&Rubric::builtin(), criteria, &f).unwrap_err();
        assert!(e[0].contains("nope"), "{e:?}");
        f.criteria = None;
        assert!(check_grade(&Rubric::builtin(), criteria, &f)
            .unwrap()
            .criteria
            .is_empty());
    }

    fn form(verdict: &str, scores: &[(&str, &str)], taxonomy: &str) -> GradeForm {
        GradeForm {
            verdict: verdict.into(),
            scores: scores
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            taxonomy: taxonomy.into(),
            comment: " fine \n".into(),
            criteria: None,
        }
    }

    #[test]
    fn a_partial_grade_is_kept_as_far_as_it_goes() {
        let g = check_grade(
            &Rubric::builtin(),
            &[],
            &form("", &[("overall", "4"), ("clinical_safety", "")], ""),
        )
        .unwrap();
        assert_eq!(g.verdict, None);
        assert_eq!(g.scores.get("overall"), Some(&4));
        assert_eq!(g.scores.len(), 1);
        assert_eq!(g.comment.as_deref(), Some("fine"));
    }

    #[test]
    fn every_problem_is_listed() {
        let e = check_grade(
            &Rubric::builtin(),
            &[],
            &form(
                "maybe",
                &[("overall", "9"), ("charm", "3"), ("clinical_safety", "2.5")],
                "bad_luck",
            ),
        )
        .unwrap_err();
        assert_eq!(e.len(), 5, "{e:?}");
    }

    #[test]
    fn a_full_grade_passes() {
        let g = check_grade(
            &Rubric::builtin(),
            &[],
            &form(
                "incorrect",
                &[("overall", "1"), ("diagnostic_correctness", "0")],
                "reasoning_failure",
            ),
        )
        .unwrap();
        assert_eq!(g.verdict.as_deref(), Some("incorrect"));
        assert_eq!(g.taxonomy.as_deref(), Some("reasoning_failure"));
    }
}
