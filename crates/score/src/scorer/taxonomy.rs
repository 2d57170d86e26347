//! The error taxonomy of wrong answers: human labels first, then the judges.

use nmb_judges::judge::{Answer, Panel, Question};
use nmb_judges::jury::Jury;
use nmb_judges::prompts::{self, Context, TaxonomyLabel};
use nmb_results::{
    FieldMatch, LabelSource, MatchOutcome, SampleScore, TaxonomyResult, TaxonomyVerdict,
};

use super::grade::turn_answers;
use super::resolve::count_failures;
use super::Work;
use super::MAX_RANK;
use crate::labels::{HumanLabel, HumanLabels};
use crate::ScoreError;

pub(super) async fn classify_errors(
    panel: Option<&Panel>,
    jury: &Jury<'_>,
    human: Option<&HumanLabels>,
    work: &mut [Work<'_>],
    failed: &mut [u64],
    thinking: bool,
) -> Result<Vec<Vec<Option<f64>>>, ScoreError> {
    let wrong: Vec<usize> = work
        .iter()
        .enumerate()
        .filter(|(_, w)| {
            w.score.status.is_scored() && w.task.family.is_depth() && w.score.correct == Some(false)
        })
        .map(|(i, _)| i)
        .collect();
    let mut answers: Vec<Vec<Answer<TaxonomyLabel>>> = Vec::new();
    if let Some(p) = panel {
        let questions: Vec<Question> = wrong
            .iter()
            .map(|&i| taxonomy_question(&work[i], thinking))
            .collect();
        if !questions.is_empty() {
            answers = p.ask(&questions, prompts::validate_taxonomy).await?;
        }
        count_failures(&answers, failed);
    }
    let mut rows = Vec::new();
    for (n, &i) in wrong.iter().enumerate() {
        let verdicts = answers
            .get(n)
            .map(|a| jury.taxonomy_verdicts(a))
            .unwrap_or_default();
        let s = &work[i].score;
        let human_label = human.and_then(|h| h.get(&s.task_id, s.sample_index));
        if answers.get(n).is_some() {
            rows.push(
                verdicts
                    .iter()
                    .map(|v| v.category.map(category_code))
                    .collect(),
            );
        }
        if let Some(result) = taxonomy_result(jury, human_label, verdicts, panel.is_some()) {
            work[i].score.taxonomy = Some(result);
        }
    }
    Ok(rows)
}

/// The taxonomy question of one wrong sample's answers.
fn taxonomy_question(w: &Work<'_>, thinking: bool) -> Question {
    let answers = turn_answers(w.record, thinking);
    prompts::taxonomy(
        &Context {
            case: w.case,
            task: w.task,
            answers: &answers,
            images: &w.images,
        },
        w.record.sample_index,
        &why_wrong(&w.score),
    )
}

/// A wrong sample's category: the human label's, else the jury's choice, else none when judges were asked
/// (`asked`); nothing without a label and without judges.
fn taxonomy_result(
    jury: &Jury<'_>,
    human_label: Option<&HumanLabel>,
    verdicts: Vec<TaxonomyVerdict>,
    asked: bool,
) -> Option<TaxonomyResult> {
    Some(match (human_label, jury.taxonomy_choice(&verdicts)) {
        (Some(h), _) => TaxonomyResult {
            category: Some(h.category),
            justification: h.justification.clone(),
            source: Some(LabelSource::Human),
            annotator: h.annotator.clone(),
            judges: verdicts,
        },
        (None, Some(j)) => TaxonomyResult {
            category: verdicts[j].category,
            justification: verdicts[j].justification.clone(),
            source: Some(LabelSource::Judge),
            annotator: None,
            judges: verdicts,
        },
        (None, None) if asked => TaxonomyResult {
            category: None,
            justification: None,
            source: None,
            annotator: None,
            judges: verdicts,
        },
        (None, None) => return None,
    })
}

/// Category codes for nominal agreement statistics.
fn category_code(c: nmb_results::ErrorCategory) -> f64 {
    nmb_results::ErrorCategory::ALL
        .iter()
        .position(|x| *x == c)
        .unwrap_or(0) as f64
}

/// What the automatic scoring found wrong, for the taxonomy judge.
fn why_wrong(s: &SampleScore) -> String {
    if let Some(e) = &s.parse_error {
        return format!("the answer could not be read: {e}");
    }
    if let Some(d) = &s.diagnosis {
        let lead = d
            .candidates
            .first()
            .map(|c| c.diagnosis.as_str())
            .unwrap_or("(none)");
        return match d.matched_rank {
            Some(r) => format!(
                "the leading diagnosis \"{lead}\" is not the reference \"{}\", which the answer ranks {r}",
                d.reference
            ),
            None => format!(
                "the leading diagnosis \"{lead}\" is not the reference \"{}\", which is not among its first {MAX_RANK}",
                d.reference
            ),
        };
    }
    if let Some(l) = &s.lesion {
        let part = |name: &str, m: &Option<FieldMatch>, r: &Option<String>| match (m, r) {
            (Some(m), Some(r)) => format!(
                "{name} \"{}\" vs reference \"{r}\": {}",
                m.candidate.as_deref().unwrap_or(""),
                match m.outcome {
                    MatchOutcome::Match => "matches",
                    MatchOutcome::NoMatch => "does not match",
                    MatchOutcome::Inconclusive => "undecided",
                }
            ),
            _ => String::new(),
        };
        return [
            part("lesion type", &l.type_match, &l.reference_type),
            part("location", &l.location_match, &l.reference_location),
        ]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    }
    "the answer does not match the reference".into()
}
