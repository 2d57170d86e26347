//! Per sample, before any judge: parse the answer, match it by the rules, note what a judge must decide.

use std::collections::BTreeSet;

use nmb_store::SampleRecord;
use nmb_suite::{Case, Family, Task};

use super::Work;
use super::MAX_RANK;
use crate::breadth::{self, BreadthError};
use crate::lexicon::Lexicon;
use crate::matching::{match_diagnosis, match_lesion_type, match_location, RuleVerdict};
use crate::parse::{parse_answer, ranked_diagnoses};
use nmb_judges::prompts::Field;
use nmb_results::{AnswerFacts, MatchMethod, MatchOutcome, SampleScore, SampleStatus};

pub(super) fn prepare<'a>(
    lex: &Lexicon,
    record: &'a SampleRecord,
    case: &'a Case,
    task: &'a Task,
) -> Work<'a> {
    let mut score = SampleScore {
        disease_group: task
            .metadata
            .get("disease_group")
            .or_else(|| case.metadata.get("disease_group"))
            .cloned(),
        modality: modality(case, task),
        case_metadata: case.metadata.clone(),
        ..SampleScore::new(
            task.id.clone(),
            record.sample_index,
            case.id.clone(),
            task.family,
            task.level,
        )
    };
    let mut w = Work {
        record,
        case,
        task,
        score: score.clone(),
        rules: Vec::new(),
        lesion_rules: Vec::new(),
    };
    match record.status {
        nmb_store::SampleStatus::Errored => {
            score.status = SampleStatus::Errored;
            score.error_class = record.error_class.clone();
            w.score = score;
            return w;
        }
        nmb_store::SampleStatus::Pending => {
            score.status = SampleStatus::Pending;
            w.score = score;
            return w;
        }
        nmb_store::SampleStatus::Ok => {}
    }
    // An answer stored with its thinking in front (by an nmb that kept it there) is scored without it.
    let stored = record.final_text.as_deref().unwrap_or_default();
    let text = nmb_chat::split_thinking(stored).answer.to_string();
    score.facts = AnswerFacts::of(&text);
    if task.family.is_breadth() {
        match breadth::score_answer(task, &text) {
            Ok(v) => {
                score.correct = Some(v.correct);
                score.breadth = Some(v);
            }
            Err(BreadthError::NoReference) | Err(BreadthError::NotBreadth(_)) => {
                score.status = SampleStatus::NoReference;
            }
        }
        w.score = score;
        return w;
    }
    let reference = task.reference.clone().unwrap_or_default();
    let has_reference = match task.family {
        Family::Lesion => reference.lesion_type.is_some() || reference.lesion_location.is_some(),
        _ => reference.diagnosis.is_some(),
    };
    if !has_reference {
        score.status = SampleStatus::NoReference;
        w.score = score;
        return w;
    }
    let parsed = parse_answer(task.family, &text);
    score.parsed = Some(parsed.answer.clone());
    if let Some(e) = parsed.error {
        score.status = SampleStatus::ParseFailed;
        score.parse_error = Some(e.to_string());
        score.correct = Some(false);
        w.score = score;
        return w;
    }
    let answer = parsed.answer;
    match task.family {
        Family::Lesion => {
            for (field, cand, refr) in [
                (
                    Field::LesionType,
                    &answer.lesion_type,
                    &reference.lesion_type,
                ),
                (
                    Field::Location,
                    &answer.lesion_location,
                    &reference.lesion_location,
                ),
            ] {
                let verdict = refr.as_ref().map(|r| {
                    let c = cand.as_deref().unwrap_or("");
                    match field {
                        Field::LesionType => match_lesion_type(lex, c, r),
                        _ => match_location(lex, c, r),
                    }
                });
                w.lesion_rules.push((field, cand.clone(), verdict));
            }
        }
        Family::Structured => w.rules.push(structured_verdict(&answer, &reference)),
        _ => {
            let refr = reference.diagnosis.as_deref().unwrap_or("");
            for entry in ranked_diagnoses(&answer).into_iter().take(MAX_RANK) {
                let v = match_diagnosis(lex, &entry.diagnosis, refr, &reference.synonyms);
                let matched = v.outcome == MatchOutcome::Match;
                w.rules.push((entry.rank, entry.diagnosis, v));
                if matched {
                    break; // later entries cannot change the first matching rank
                }
            }
        }
    }
    w.score = score;
    w
}

/// A structured answer is right when the class it names is the reference's class: exact, never judged.
fn structured_verdict(
    answer: &nmb_results::ParsedAnswer,
    reference: &nmb_suite::Reference,
) -> (u32, String, RuleVerdict) {
    let schema = crate::structured::Schema::bundled();
    let want = reference
        .diagnosis
        .as_deref()
        .and_then(|d| schema.class_index(d));
    let named = answer.final_diagnosis.clone().unwrap_or_default();
    let same = want.is_some() && schema.class_index(&named) == want;
    let note = match want {
        None => "the reference diagnosis is not one of the five NeuroVLM-Bench classes",
        Some(_) if named.is_empty() => "the answer abstained on diagnosis_name",
        Some(_) => "structured: the class named must equal the reference class",
    };
    let verdict = RuleVerdict {
        outcome: if same {
            MatchOutcome::Match
        } else {
            MatchOutcome::NoMatch
        },
        method: same.then_some(MatchMethod::Normalisation),
        matched: same.then(|| reference.diagnosis.clone().unwrap_or_default()),
        note: Some(note.to_string()),
    };
    (1, named, verdict)
}

/// Modalities of the case's images (turn images included), sorted and joined by `+`; `none` without images.
pub(super) fn modality(case: &Case, task: &Task) -> String {
    let set: BTreeSet<String> = case
        .images
        .iter()
        .chain(task.turns.iter().flat_map(|t| t.images.iter()))
        .filter_map(|i| i.modality.map(|m| m.as_str().to_string()))
        .collect();
    if set.is_empty() {
        if case.images.is_empty() {
            "none".into()
        } else {
            "unknown".into()
        }
    } else {
        set.into_iter().collect::<Vec<_>>().join("+")
    }
}
