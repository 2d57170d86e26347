//! Breadth items: closed VQA, open VQA and multiple choice, scored against a short reference.
//!
//! Pure functions over text; no I/O, no statistics (aggregation and CIs happen elsewhere in this crate).

use nmb_suite::{Family, Task};
use serde::{Deserialize, Serialize};

/// The verdict on one answer to one breadth item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreadthVerdict {
    /// Counts towards accuracy.
    pub correct: bool,
    /// What was taken from the answer: the choice letter, or the normalised short answer.
    pub extracted: Option<String>,
    /// No answer could be extracted (multiple choice: no letter or option text found). Counted separately.
    pub extraction_failed: bool,
    /// Open VQA: share of normalised reference tokens present in the answer.
    pub token_recall: Option<f64>,
    /// Open VQA: the whole normalised answer equals the normalised reference.
    pub exact_match: Option<bool>,
}

/// Why a breadth item could not be scored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreadthError {
    /// The task has no reference answer (or no choice key).
    NoReference,
    /// The task is a depth task; see the diagnosis scorers.
    NotBreadth(Family),
}

/// Scores `answer` to a breadth task by its family.
pub fn score_answer(task: &Task, answer: &str) -> Result<BreadthVerdict, BreadthError> {
    let reference = task.reference.as_ref();
    match task.family {
        Family::MultipleChoice => {
            let key = reference
                .and_then(|r| r.choice.as_deref())
                .ok_or(BreadthError::NoReference)?;
            Ok(score_choice(answer, &task.options, key))
        }
        Family::ClosedVqa | Family::OpenVqa => {
            let want = reference
                .and_then(|r| r.answer.as_deref())
                .ok_or(BreadthError::NoReference)?;
            Ok(if task.family == Family::ClosedVqa {
                score_closed(answer, want)
            } else {
                score_open(answer, want)
            })
        }
        other => Err(BreadthError::NotBreadth(other)),
    }
}

/// Lower case, punctuation to spaces, collapsed whitespace.
pub fn normalise(text: &str) -> String {
    let mapped: String = text
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                ' '
            }
        })
        .collect();
    mapped.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Closed VQA: the normalised answer equals the reference, or starts with it as a whole word ("yes, there is").
pub fn score_closed(answer: &str, reference: &str) -> BreadthVerdict {
    let (a, r) = (normalise(answer), normalise(reference));
    let correct = !r.is_empty() && (a == r || a.starts_with(&format!("{r} ")));
    BreadthVerdict {
        correct,
        extracted: Some(a),
        extraction_failed: false,
        token_recall: None,
        exact_match: None,
    }
}

/// Open VQA: exact match after normalisation, plus token recall.
pub fn score_open(answer: &str, reference: &str) -> BreadthVerdict {
    let (a, r) = (normalise(answer), normalise(reference));
    let answer_tokens: Vec<&str> = a.split_whitespace().collect();
    let reference_tokens: Vec<&str> = r.split_whitespace().collect();
    let found = reference_tokens
        .iter()
        .filter(|t| answer_tokens.contains(t))
        .count();
    let recall =
        (!reference_tokens.is_empty()).then(|| found as f64 / reference_tokens.len() as f64);
    let exact = !r.is_empty() && a == r;
    BreadthVerdict {
        correct: exact,
        extracted: Some(a),
        extraction_failed: false,
        token_recall: recall,
        exact_match: Some(exact),
    }
}

/// Multiple choice: the letter after "Answer:", else a lone letter, else an option's full text.
pub fn score_choice(answer: &str, options: &[(String, String)], key: &str) -> BreadthVerdict {
    let extracted = extract_choice(answer, options);
    BreadthVerdict {
        correct: extracted
            .as_deref()
            .is_some_and(|c| c.eq_ignore_ascii_case(key.trim())),
        extraction_failed: extracted.is_none(),
        extracted,
        token_recall: None,
        exact_match: None,
    }
}

fn extract_choice(answer: &str, options: &[(String, String)]) -> Option<String> {
    let is_letter = |w: &str| options.iter().any(|(l, _)| l.eq_ignore_ascii_case(w));
    let words: Vec<&str> = answer
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    if let Some(i) = words.iter().position(|w| w.eq_ignore_ascii_case("answer")) {
        if let Some(w) = words.get(i + 1).filter(|w| is_letter(w)) {
            return Some(w.to_ascii_uppercase());
        }
    }
    if let [only] = words.as_slice() {
        if is_letter(only) {
            return Some(only.to_ascii_uppercase());
        }
    }
    let a = normalise(answer);
    let mut named = options
        .iter()
        .filter(|(_, text)| !normalise(text).is_empty() && a.contains(&normalise(text)));
    match (named.next(), named.next()) {
        (Some((letter, _)), None) => Some(letter.to_ascii_uppercase()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Vec<(String, String)> {
        [
            ("A", "Multiple sclerosis"),
            ("B", "Stroke"),
            ("C", "Glioma"),
        ]
        .iter()
        .map(|(l, t)| (l.to_string(), t.to_string()))
        .collect()
    }

    #[test]
    fn choice_from_label_letter_or_text() {
        assert_eq!(
            score_choice("Answer: B", &opts(), "B").extracted.as_deref(),
            Some("B")
        );
        assert!(score_choice("c", &opts(), "C").correct);
        assert!(score_choice("I think it is a glioma.", &opts(), "C").correct);
        let none = score_choice("I am not sure.", &opts(), "A");
        assert!(none.extraction_failed && !none.correct);
    }

    #[test]
    fn closed_and_open() {
        assert!(score_closed("Yes, there is.", "yes").correct);
        assert!(!score_closed("No", "yes").correct);
        let v = score_open("left frontal lobe", "Frontal lobe");
        assert_eq!(v.token_recall, Some(1.0));
        assert_eq!(v.exact_match, Some(false));
    }
}
