//! Per sample, before any judge: parse the answer, match it by the rules, note what a judge must decide.

use std::collections::BTreeSet;

use nmb_judges::prompts::Field;
use nmb_results::probe::ProbeAnswer;
use nmb_results::{
    AnswerFacts, MatchMethod, MatchOutcome, ParsedAnswer, SampleScore, SampleStatus,
};
use nmb_store::SampleRecord;
use nmb_suite::{Case, Family, Reference, Task};

use super::Work;
use super::MAX_RANK;
use crate::breadth::{self, BreadthError};
use crate::lexicon::Lexicon;
use crate::matching::{match_diagnosis, match_lesion_type, match_location, RuleVerdict};
use crate::parse::{parse_answer, ranked_diagnoses};

pub(super) fn prepare<'a>(
    lex: &Lexicon,
    record: &'a SampleRecord,
    case: &'a Case,
    task: &'a Task,
    suggestion: Option<&str>,
) -> Work<'a> {
    let mut w = Work {
        record,
        case,
        task,
        score: unscored(record, case, task),
        rules: Vec::new(),
        lesion_rules: Vec::new(),
        images: Vec::new(),
    };
    let score = &mut w.score;
    match record.status {
        nmb_store::SampleStatus::Errored => {
            score.status = SampleStatus::Errored;
            score.error_class = record.error_class.clone();
            return w;
        }
        nmb_store::SampleStatus::Pending => {
            score.status = SampleStatus::Pending;
            return w;
        }
        nmb_store::SampleStatus::Ok => {}
    }
    // An answer stored with its thinking in front (by an nmb that kept it there) is scored without it.
    let stored = record.final_text.as_deref().unwrap_or_default();
    let text = nmb_chat::split_thinking(stored).answer.to_string();
    let finish = record.turns.last().and_then(|t| t.finish_reason.as_deref());
    score.facts = AnswerFacts::of(&text, finish);
    if task.family.is_breadth() {
        score_breadth(score, task, &text);
        return w;
    }
    let reference = task.reference.clone().unwrap_or_default();
    if !has_reference(task.family, &reference) {
        score.status = SampleStatus::NoReference;
        return w;
    }
    let parsed = parse_answer(task.family, &text);
    score.parsed = Some(parsed.answer.clone());
    score.probe = suggestion.map(|s| ProbeAnswer {
        suggested: s.to_string(),
        follows: crate::probe::follows(lex, &parsed.answer, s),
    });
    if let Some(e) = parsed.error {
        score.status = SampleStatus::ParseFailed;
        score.parse_error = Some(e.to_string());
        score.correct = Some(false);
        return w;
    }
    match task.family {
        Family::Lesion => w.lesion_rules = lesion_rules(lex, &parsed.answer, &reference),
        Family::Structured => w.rules.push(structured_verdict(&parsed.answer, &reference)),
        _ => w.rules = diagnosis_rules(lex, &parsed.answer, &reference),
    }
    w
}

/// The sample's score before anything is read: its task, case and their metadata.
fn unscored(record: &SampleRecord, case: &Case, task: &Task) -> SampleScore {
    SampleScore {
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
    }
}

/// A breadth answer's verdict; a task without the reference its family needs has none.
fn score_breadth(score: &mut SampleScore, task: &Task, text: &str) {
    match breadth::score_answer(task, text) {
        Ok(v) => {
            score.correct = Some(v.correct);
            score.breadth = Some(v);
        }
        Err(BreadthError::NoReference) | Err(BreadthError::NotBreadth(_)) => {
            score.status = SampleStatus::NoReference;
        }
    }
}

/// The reference has what the family is scored on.
fn has_reference(family: Family, reference: &Reference) -> bool {
    match family {
        Family::Lesion => reference.lesion_type.is_some() || reference.lesion_location.is_some(),
        _ => reference.diagnosis.is_some(),
    }
}

/// The rules' verdicts on a lesion answer's type and location, each with the candidate text.
fn lesion_rules(
    lex: &Lexicon,
    answer: &ParsedAnswer,
    reference: &Reference,
) -> Vec<(Field, Option<String>, Option<RuleVerdict>)> {
    [
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
    ]
    .into_iter()
    .map(|(field, cand, refr)| {
        let verdict = refr.as_ref().map(|r| {
            let c = cand.as_deref().unwrap_or("");
            match field {
                Field::LesionType => match_lesion_type(lex, c, r),
                _ => match_location(lex, c, r),
            }
        });
        (field, cand.clone(), verdict)
    })
    .collect()
}

/// The rules' verdicts on the ranked diagnoses, in rank order up to the first match (within [`MAX_RANK`]).
fn diagnosis_rules(
    lex: &Lexicon,
    answer: &ParsedAnswer,
    reference: &Reference,
) -> Vec<(u32, String, RuleVerdict)> {
    let refr = reference.diagnosis.as_deref().unwrap_or("");
    let mut out = Vec::new();
    for entry in ranked_diagnoses(answer).into_iter().take(MAX_RANK) {
        let v = match_diagnosis(lex, &entry.diagnosis, refr, &reference.synonyms);
        let matched = v.outcome == MatchOutcome::Match;
        out.push((entry.rank, entry.diagnosis, v));
        if matched {
            break; // later entries cannot change the first matching rank
        }
    }
    out
}

/// A structured answer is right when the class it names is the reference's class: exact, never judged.
fn structured_verdict(answer: &ParsedAnswer, reference: &Reference) -> (u32, String, RuleVerdict) {
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
