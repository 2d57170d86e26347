//! Matching with judges: the pairs the rules could not decide go to the jury.

use std::collections::BTreeMap;

use nmb_judges::judge::{Answer, Panel, Question};
use nmb_judges::jury::{agreement_rows, Jury};
use nmb_judges::prompts::{self, Equivalence, Field};
use nmb_results::{
    CandidateMatch, DiagnosisScore, FieldMatch, JudgeDecision, JuryAgreement, LesionScore,
    MatchMethod, MatchOutcome, SampleStatus,
};
use nmb_stats::{BootstrapConfig, Measure};
use nmb_suite::Family;

use super::Work;
use crate::lexicon::builtin;
use crate::matching::RuleVerdict;
use crate::repeats::EquivalenceRepeats;
use crate::ScoreError;

/// Per equivalence question: each judge's 0/1 answer (for agreement).
type EquivalenceRows = Vec<Vec<Option<f64>>>;

pub(super) async fn resolve_matches(
    panel: Option<&Panel>,
    jury: &Jury<'_>,
    work: &mut [Work<'_>],
    failed: &mut [u64],
) -> Result<(EquivalenceRows, EquivalenceRepeats), ScoreError> {
    // Collect the distinct questions the rules left open.
    let mut open = OpenQuestions::default();
    let asking = panel.is_some();
    let (wanted, wanted_lesion): (Vec<_>, Vec<_>) = work
        .iter()
        .map(|w| (open.diagnosis(w, asking), open.lesion(w, asking)))
        .unzip();
    let answers: Vec<Vec<Answer<Equivalence>>> = match panel {
        Some(p) if !open.questions.is_empty() => {
            p.ask(&open.questions, prompts::validate_equivalence)
                .await?
        }
        _ => Vec::new(),
    };
    count_failures(&answers, failed);
    let decisions: Vec<JudgeDecision> = answers.iter().map(|a| jury.equivalence(a)).collect();
    for (i, w) in work.iter_mut().enumerate() {
        finish_diagnosis(w, &wanted[i], &decisions);
        finish_lesion(w, &wanted_lesion[i], &decisions);
    }
    Ok((equivalence_rows(&answers), equivalence_repeats(&answers)))
}

/// The distinct equivalence questions the rules left open, each asked once however many samples raise it.
#[derive(Default)]
struct OpenQuestions {
    questions: Vec<Question>,
    slot: BTreeMap<String, usize>,
}

impl OpenQuestions {
    /// The index of question `q` among those to ask, added if new.
    fn ask(&mut self, q: Question) -> usize {
        *self.slot.entry(q.item_id.clone()).or_insert_with(|| {
            self.questions.push(q);
            self.questions.len() - 1
        })
    }

    /// Per ranked diagnosis the rules examined: the question the judges decide, where the rule was inconclusive
    /// and judges are `asking`.
    fn diagnosis(&mut self, w: &Work<'_>, asking: bool) -> Vec<Option<usize>> {
        let reference = w.task.reference.clone().unwrap_or_default();
        let dx = reference.diagnosis.clone().unwrap_or_default();
        w.rules
            .iter()
            .map(|(_, cand, v)| {
                (v.outcome == MatchOutcome::Inconclusive && asking).then(|| {
                    self.ask(prompts::equivalence(
                        Field::Diagnosis,
                        cand,
                        &dx,
                        &reference.synonyms,
                    ))
                })
            })
            .collect()
    }

    /// Per lesion field the rules examined: the question the judges decide, where the rule was inconclusive and
    /// judges are `asking`.
    fn lesion(&mut self, w: &Work<'_>, asking: bool) -> Vec<Option<usize>> {
        let reference = w.task.reference.clone().unwrap_or_default();
        w.lesion_rules
            .iter()
            .map(|(field, cand, v)| {
                let open = v
                    .as_ref()
                    .is_some_and(|v| v.outcome == MatchOutcome::Inconclusive);
                let refr = match field {
                    Field::LesionType => reference.lesion_type.clone(),
                    _ => reference.lesion_location.clone(),
                };
                (open && asking).then(|| {
                    self.ask(prompts::equivalence(
                        *field,
                        cand.as_deref().unwrap_or(""),
                        refr.as_deref().unwrap_or(""),
                        &[],
                    ))
                })
            })
            .collect()
    }
}

/// Per question, each judge's 0/1 answer.
fn equivalence_rows(answers: &[Vec<Answer<Equivalence>>]) -> EquivalenceRows {
    answers
        .iter()
        .map(|row| {
            row.iter()
                .map(|a| a.value.as_ref().map(|v| f64::from(u8::from(v.equivalent))))
                .collect()
        })
        .collect()
}

/// Per question, each judge's answer on each repeat.
fn equivalence_repeats(answers: &[Vec<Answer<Equivalence>>]) -> EquivalenceRepeats {
    answers
        .iter()
        .map(|row| {
            row.iter()
                .map(|a| {
                    a.repeats
                        .iter()
                        .map(|r| r.as_ref().map(|v| v.equivalent))
                        .collect()
                })
                .collect()
        })
        .collect()
}

pub(super) fn count_failures<T>(answers: &[Vec<Answer<T>>], failed: &mut [u64]) {
    for row in answers {
        for (j, a) in row.iter().enumerate() {
            if a.value.is_none() {
                failed[j] += 1;
            }
        }
    }
}

/// Final outcome of a rule verdict after the judges: the rule's, else the jury's, else inconclusive.
fn settle(
    v: &RuleVerdict,
    decision: Option<&JudgeDecision>,
) -> (MatchOutcome, Option<MatchMethod>) {
    if v.outcome != MatchOutcome::Inconclusive {
        return (v.outcome, v.method);
    }
    match decision.and_then(|d| d.equivalent) {
        Some(true) => (MatchOutcome::Match, Some(MatchMethod::Judge)),
        Some(false) => (MatchOutcome::NoMatch, Some(MatchMethod::Judge)),
        None => (MatchOutcome::Inconclusive, None),
    }
}

fn finish_diagnosis(w: &mut Work, asked: &[Option<usize>], decisions: &[JudgeDecision]) {
    if w.rules.is_empty() && w.score.status != SampleStatus::Ok {
        return;
    }
    if !matches!(
        w.task.family,
        Family::Differential | Family::Rationale | Family::Structured
    ) {
        return;
    }
    let reference = w
        .task
        .reference
        .as_ref()
        .and_then(|r| r.diagnosis.clone())
        .unwrap_or_default();
    let mut candidates = Vec::new();
    let mut matched: Option<(u32, Option<MatchMethod>)> = None;
    for ((rank, cand, v), q) in w.rules.iter().zip(asked) {
        let decision = q.map(|q| &decisions[q]);
        let (outcome, method) = settle(v, decision);
        candidates.push(CandidateMatch {
            rank: *rank,
            diagnosis: cand.clone(),
            normalised: builtin().normalise(cand),
            outcome,
            method,
            matched: v.matched.clone(),
            rule_note: v.note.clone(),
            judge: decision.cloned(),
        });
        if outcome == MatchOutcome::Match {
            matched = Some((*rank, method));
            break;
        }
    }
    let first_open = candidates
        .first()
        .is_some_and(|c| c.outcome == MatchOutcome::Inconclusive);
    let rank = matched.map(|m| m.0);
    w.score.correct = Some(rank == Some(1));
    w.score.unresolved = first_open;
    w.score.diagnosis = Some(DiagnosisScore {
        reference,
        matched_rank: rank,
        method: matched.and_then(|m| m.1),
        top_1: rank.is_some_and(|r| r <= 1),
        top_5: rank.is_some_and(|r| r <= 5),
        candidates,
    });
}

fn finish_lesion(w: &mut Work, asked: &[Option<usize>], decisions: &[JudgeDecision]) {
    if w.task.family != Family::Lesion || w.score.status != SampleStatus::Ok {
        return;
    }
    let reference = w.task.reference.clone().unwrap_or_default();
    let mut fields: BTreeMap<Field, FieldMatch> = BTreeMap::new();
    for ((field, cand, v), q) in w.lesion_rules.iter().zip(asked) {
        let Some(v) = v else { continue };
        let decision = q.map(|q| &decisions[q]);
        let (outcome, method) = settle(v, decision);
        fields.insert(
            *field,
            FieldMatch {
                candidate: cand.clone(),
                outcome,
                method,
                rule_note: v.note.clone(),
                judge: decision.cloned(),
            },
        );
    }
    let all_match = fields.values().all(|f| f.outcome == MatchOutcome::Match);
    w.score.correct = Some(!fields.is_empty() && all_match);
    w.score.unresolved = fields
        .values()
        .any(|f| f.outcome == MatchOutcome::Inconclusive);
    w.score.lesion = Some(LesionScore {
        reference_type: reference.lesion_type,
        reference_location: reference.lesion_location,
        type_match: fields.remove(&Field::LesionType),
        location_match: fields.remove(&Field::Location),
    });
}

pub(super) fn equivalence_agreement(
    specs: &[String],
    rows: &EquivalenceRows,
    cfg: &BootstrapConfig,
) -> Vec<JuryAgreement> {
    agreement_rows(
        "equivalence",
        &[Measure::AlphaNominal, Measure::CohenKappa],
        specs,
        rows,
        cfg,
    )
}
