//! Breadth items: closed VQA, open VQA and multiple choice, scored against a short reference.
//!
//! Pure functions over text; no I/O, no statistics (aggregation and CIs happen elsewhere in this crate).
//!
//! - **Closed VQA** (accuracy). A Chinese reference (SLAKE's `zh` questions) is read by the phrase rules of
//!   [`chinese`]. A yes/no reference is matched by the answer's polarity ("Yes, there is" is yes,
//!   "There is no fracture" is no; an answer with neither is an extraction failure). Any other reference ("Left
//!   side", "Hypodense", "With contrast") is matched by content: the reference's words, normalised and without
//!   fillers, must appear together in the answer's first sentence, not negated ("non-contrast", "not
//!   enlarged"), not hedged ("left or right"), and before any rival the question offered ("Is it X or Y?").
//! - **Open VQA**: exact match of the answer's first sentence after normalisation (this is what `correct`
//!   means), plus token recall: the share of the reference's distinct content words present anywhere in the
//!   answer.
//! - **Multiple choice**: the letter after "Answer"/"Option" (the last one wins), else a lone "(X)", else a leading
//!   "X." or a bare letter, else the one option whose full text the answer contains. Nothing found is an
//!   extraction failure, counted separately from a wrong choice.
//!
//! The normalisation rules are in [`text`]; the tests in `tests/it/breadth_real.rs` check them on every reference
//! answer of VQA-RAD, MedQA and MedMCQA.

pub mod chinese;
pub mod text;

use nmb_results::BreadthVerdict;
use nmb_suite::{Family, Task};
use text::{
    content_tokens, find_runs, lead, sentence_prefixes, strip_answer_prefix, tokens, NEGATORS,
};

/// Why a breadth item could not be scored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BreadthError {
    /// The task has no reference answer (or no choice key).
    NoReference,
    /// The task is a depth task; see the diagnosis scorers.
    NotBreadth(Family),
}

impl std::fmt::Display for BreadthError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BreadthError::NoReference => {
                f.write_str("the task has no reference answer (closed/open VQA need `answer`, multiple choice needs `choice`)")
            }
            BreadthError::NotBreadth(family) => {
                write!(f, "task family {family} is a depth family, not a breadth one")
            }
        }
    }
}

impl std::error::Error for BreadthError {}

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
                score_closed_for(&task.question, answer, want)
            } else {
                score_open(answer, want)
            })
        }
        other => Err(BreadthError::NotBreadth(other)),
    }
}

/// Lower case, punctuation to spaces, articles dropped, canonical spellings, collapsed whitespace (see
/// [`text::tokens`]).
pub fn normalise(text: &str) -> String {
    tokens(text).join(" ")
}

/// Closed VQA without the question (no rival alternatives known); see [`score_closed_for`].
pub fn score_closed(answer: &str, reference: &str) -> BreadthVerdict {
    score_closed_for("", answer, reference)
}

/// Closed VQA: yes/no by polarity, anything else by content, first mention of the question's alternatives wins.
/// A Chinese reference is read by [`chinese`]'s phrase rules.
pub fn score_closed_for(question: &str, answer: &str, reference: &str) -> BreadthVerdict {
    if chinese::is_chinese(reference) {
        return score_closed_chinese(answer, reference);
    }
    match yes_no(reference) {
        Some(want) => {
            let got = polarity(answer);
            BreadthVerdict {
                correct: got == Some(want),
                extracted: got.map(|y| if y { "yes" } else { "no" }.to_string()),
                extraction_failed: got.is_none(),
                token_recall: None,
                exact_match: None,
            }
        }
        None => {
            let mut answer_tokens = content_tokens(lead(answer));
            strip_answer_prefix(&mut answer_tokens);
            let correct = closed_content_match(question, &answer_tokens, reference);
            BreadthVerdict {
                correct,
                extraction_failed: answer_tokens.is_empty(),
                extracted: Some(answer_tokens.join(" ")),
                token_recall: None,
                exact_match: None,
            }
        }
    }
}

fn score_closed_chinese(answer: &str, reference: &str) -> BreadthVerdict {
    let verdict = |correct: bool, extracted: Option<String>| BreadthVerdict {
        correct,
        extraction_failed: extracted.is_none(),
        extracted,
        token_recall: None,
        exact_match: None,
    };
    match chinese::yes_no(reference) {
        Some(want) => {
            let got = chinese::polarity(answer);
            let extracted = got.map(|y| if y { "yes" } else { "no" }.to_string());
            verdict(got == Some(want), extracted)
        }
        None => {
            let lead = answer.trim();
            let extracted = (!lead.is_empty()).then(|| lead.chars().take(40).collect());
            verdict(chinese::content_match(answer, reference), extracted)
        }
    }
}

/// Open VQA: exact match after normalisation, plus token recall.
pub fn score_open(answer: &str, reference: &str) -> BreadthVerdict {
    let want = comparable(reference);
    let prefix_tokens = |p: &str| {
        let mut t = comparable(p);
        strip_answer_prefix(&mut t);
        t
    };
    // A reference may itself span sentences ("retroperitoneum; retroperitoneal space"), so every prefix that
    // ends a sentence is a candidate, shortest first.
    let mut first = prefix_tokens(lead(answer));
    if first != want {
        if let Some(t) = sentence_prefixes(answer)
            .map(prefix_tokens)
            .find(|t| *t == want)
        {
            first = t;
        }
    }
    let whole = tokens(answer);
    let mut distinct: Vec<&String> = want.iter().collect();
    distinct.sort();
    distinct.dedup();
    let found = distinct.iter().filter(|t| whole.contains(t)).count();
    let recall = (!distinct.is_empty()).then(|| found as f64 / distinct.len() as f64);
    let exact = !want.is_empty() && first == want;
    BreadthVerdict {
        correct: exact,
        extraction_failed: first.is_empty(),
        extracted: Some(first.join(" ")),
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

/// Content tokens, or all tokens when the text is nothing but fillers.
fn comparable(text: &str) -> Vec<String> {
    let content = content_tokens(text);
    if content.is_empty() {
        tokens(text)
    } else {
        content
    }
}

/// `Some(true)` for a yes reference, `Some(false)` for no, `None` for anything else.
fn yes_no(reference: &str) -> Option<bool> {
    match tokens(reference).as_slice() {
        [w] if w == "yes" => Some(true),
        [w] if w == "no" => Some(false),
        _ => None,
    }
}

/// The yes/no polarity of an answer: its first word when that is yes/no/true/false, else the only one of yes
/// or no it contains, else weak cues ("absent", "not seen" / "present").
fn polarity(answer: &str) -> Option<bool> {
    let mut t = tokens(answer);
    strip_answer_prefix(&mut t);
    let word = |w: &str| match w {
        "yes" | "true" => Some(true),
        "no" | "false" => Some(false),
        _ => None,
    };
    if let Some(p) = t.first().and_then(|w| word(w)) {
        return Some(p);
    }
    let has = |p: bool| t.iter().any(|w| word(w) == Some(p));
    match (has(true), has(false)) {
        (true, false) => return Some(true),
        (false, true) => return Some(false),
        (true, true) => return None,
        (false, false) => {}
    }
    // "Not sure", "cannot tell": a hedge, not a "no".
    let hedged = t.iter().any(|w| {
        matches!(
            w.as_str(),
            "sure"
                | "unsure"
                | "unclear"
                | "uncertain"
                | "maybe"
                | "possibly"
                | "cannot"
                | "cant"
                | "unknown"
        )
    });
    if hedged {
        return None;
    }
    let negative = t.iter().any(|w| {
        matches!(
            w.as_str(),
            "not" | "absent" | "negative" | "without" | "none"
        )
    });
    let positive = t
        .iter()
        .any(|w| matches!(w.as_str(), "present" | "positive"));
    match (positive, negative) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

/// The reference's content words appear together in the answer, not negated, not hedged with "or", and before
/// any rival alternative offered by the question.
fn closed_content_match(question: &str, answer: &[String], reference: &str) -> bool {
    let want = comparable(reference);
    let ok_at = |p: usize| {
        let before = p.checked_sub(1).map(|i| answer[i].as_str());
        let after = answer.get(p + want.len()).map(String::as_str);
        !before.is_some_and(|w| NEGATORS.contains(&w) || w == "or")
            && !after.is_some_and(|w| w == "or" || w == "vs")
    };
    let Some(at) = find_runs(answer, &want).into_iter().find(|&p| ok_at(p)) else {
        return false;
    };
    let rivals: Vec<String> = alternatives(question)
        .into_iter()
        .filter(|w| !want.contains(w))
        .collect();
    !answer[..at].iter().any(|w| rivals.contains(w))
}

/// The words right next to "or" / "vs" in a question ("gray or white matter" gives gray and white). Negators are
/// left out: "contrast or not" offers no rival word.
fn alternatives(question: &str) -> Vec<String> {
    let t = content_tokens(question);
    let mut out = Vec::new();
    for (i, w) in t.iter().enumerate() {
        if matches!(w.as_str(), "or" | "vs" | "versus") {
            out.extend(i.checked_sub(1).and_then(|j| t.get(j)).cloned());
            out.extend(t.get(i + 1).cloned());
        }
    }
    out.retain(|w| !NEGATORS.contains(&w.as_str()));
    out
}

/// One word of an answer with where it sits, for letter extraction (which needs case and the next character).
struct Word<'a> {
    text: &'a str,
    /// Byte offset of the word in the answer.
    start: usize,
    /// The character right after the word, if any.
    next: Option<char>,
}

fn words(answer: &str) -> Vec<Word<'_>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in answer
        .char_indices()
        .chain(std::iter::once((answer.len(), ' ')))
    {
        match (c.is_alphanumeric() && i < answer.len(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push(Word {
                    text: &answer[s..i],
                    start: s,
                    next: answer[i..].chars().next(),
                });
                start = None;
            }
            _ => {}
        }
    }
    out
}

/// Options as (upper-case letter, normalised text tokens).
type Options = [(String, Vec<String>)];

fn extract_choice(answer: &str, options: &[(String, String)]) -> Option<String> {
    let options: Vec<(String, Vec<String>)> = options
        .iter()
        .map(|(l, t)| (l.trim().to_ascii_uppercase(), tokens(t)))
        .collect();
    let words = words(answer);
    labelled_letter(answer, &words, &options)
        .or_else(|| leading_letter(answer, &words, &options))
        .or_else(|| parenthesised_letter(answer, &options))
        .or_else(|| named_option(answer, &options))
}

fn letter_of(options: &Options, w: &str) -> Option<String> {
    options
        .iter()
        .find(|(l, _)| l.eq_ignore_ascii_case(w))
        .map(|(l, _)| l.clone())
}

/// The letter meant by a one-letter word, if it is one: "C", "C.", "(c)", "**C**". A capital letter that starts
/// a phrase ("A reduction in ...", "D-dimer") is an option's text when the phrase is one, and never a letter when
/// it is hyphenated; a lower-case letter followed by more words is the article "a" or the pronoun "i".
fn letter_at(answer: &str, w: &Word<'_>, options: &Options) -> Option<String> {
    if w.text.chars().count() != 1 {
        return None;
    }
    let letter = letter_of(options, w.text)?;
    match w.next {
        None => Some(letter),
        Some('-') => None,
        Some(c) if c.is_whitespace() => {
            let rest = tokens(&answer[w.start..]);
            if let Some((named, _)) = options
                .iter()
                .find(|(_, t)| !t.is_empty() && rest.starts_with(t))
            {
                return Some(named.clone());
            }
            let upper = w.text.chars().all(|c| c.is_ascii_uppercase());
            let more_words = answer[w.start + 1..]
                .trim_start()
                .starts_with(char::is_alphanumeric);
            (upper || !more_words).then_some(letter)
        }
        Some(_) => Some(letter),
    }
}

/// "Answer: C", "the correct answer is (b).", "Option D" — the last one in the text.
fn labelled_letter(answer: &str, words: &[Word<'_>], options: &Options) -> Option<String> {
    const BRIDGE: &[&str] = &[
        "is", "would", "be", "the", "correct", "final", "best", "option", "choice", "letter",
    ];
    let mut found = None;
    for (i, w) in words.iter().enumerate() {
        let label = w.text.to_ascii_lowercase();
        if !matches!(label.as_str(), "answer" | "option" | "choice") {
            continue;
        }
        let next = words[i + 1..]
            .iter()
            .find(|n| !BRIDGE.contains(&n.text.to_ascii_lowercase().as_str()));
        if let Some(l) = next.and_then(|n| letter_at(answer, n, options)) {
            found = Some(l);
        }
    }
    found
}

/// "C. Glioma", "C) ...", "**C**", or an answer that is a single letter.
fn leading_letter(answer: &str, words: &[Word<'_>], options: &Options) -> Option<String> {
    let first = words.first()?;
    if words.len() == 1 {
        return letter_at(answer, first, options);
    }
    let upper = first.text.chars().all(|c| c.is_ascii_uppercase());
    let separated = first
        .next
        .is_some_and(|c| matches!(c, '.' | ')' | ':' | '*' | ']' | '\n'));
    (upper && separated)
        .then(|| letter_at(answer, first, options))
        .flatten()
}

/// "(C)" standing on its own (not "Rh(D)"), when the text names exactly one letter that way.
fn parenthesised_letter(answer: &str, options: &Options) -> Option<String> {
    let mut seen: Vec<String> = Vec::new();
    let chars: Vec<char> = answer.chars().collect();
    for (i, w) in chars.windows(3).enumerate() {
        let free = i == 0 || !chars[i - 1].is_alphanumeric();
        if free && w[0] == '(' && w[2] == ')' {
            if let Some(l) = letter_of(options, &w[1].to_string()) {
                if !seen.contains(&l) {
                    seen.push(l);
                }
            }
        }
    }
    match seen.as_slice() {
        [only] => Some(only.clone()),
        _ => None,
    }
}

/// The one option whose whole normalised text the answer contains. When one matched option's text is part of
/// another matched option's text ("Stroke" in "Hemorrhagic stroke"), the longer one is meant.
fn named_option(answer: &str, options: &Options) -> Option<String> {
    let answer_tokens = tokens(answer);
    let matched: Vec<&(String, Vec<String>)> = options
        .iter()
        .filter(|(_, t)| !find_runs(&answer_tokens, t).is_empty())
        .collect();
    let maximal: Vec<&&(String, Vec<String>)> = matched
        .iter()
        .filter(|(_, t)| {
            !matched
                .iter()
                .any(|(_, other)| other.len() > t.len() && !find_runs(other, t).is_empty())
        })
        .collect();
    match maximal.as_slice() {
        [(letter, _)] => Some(letter.clone()),
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
            ("D", "Hemorrhagic stroke"),
        ]
        .iter()
        .map(|(l, t)| (l.to_string(), t.to_string()))
        .collect()
    }

    fn letter(answer: &str) -> Option<String> {
        score_choice(answer, &opts(), "B").extracted
    }

    #[test]
    fn choice_from_label_letter_or_text() {
        assert_eq!(letter("Answer: B").as_deref(), Some("B"));
        assert_eq!(letter("c").as_deref(), Some("C"));
        assert_eq!(letter("I think it is a glioma.").as_deref(), Some("C"));
        assert_eq!(letter("**D**").as_deref(), Some("D"));
        assert_eq!(letter("The correct answer is (b).").as_deref(), Some("B"));
        assert_eq!(
            letter("Reasoning... A is unlikely.\nAnswer: C").as_deref(),
            Some("C")
        );
        assert_eq!(letter("C. Glioma").as_deref(), Some("C"));
        assert_eq!(letter("Option A").as_deref(), Some("A"));
        assert_eq!(letter("B. Stroke, not (C)").as_deref(), Some("B"));
        assert_eq!(letter("Rh(D) is irrelevant; glioma"), Some("C".into()));
        // The longer option wins over the one inside it.
        assert_eq!(letter("a hemorrhagic stroke").as_deref(), Some("D"));
        // "a" as an article is not a letter.
        assert_eq!(letter("a disease of the brain"), None);
        let none = score_choice("I am not sure.", &opts(), "A");
        assert!(none.extraction_failed && !none.correct);
        // Two options named: ambiguous.
        assert_eq!(letter("glioma or multiple sclerosis"), None);
    }

    #[test]
    fn closed_yes_no() {
        assert!(score_closed("Yes, there is.", "yes").correct);
        assert!(score_closed("There is no fracture.", "No").correct);
        assert!(!score_closed("No", "yes").correct);
        assert!(score_closed("Not sure", "no").extraction_failed);
        let v = score_closed("The image shows the brain.", "yes");
        assert!(v.extraction_failed && !v.correct);
    }

    #[test]
    fn closed_content_with_rivals_and_negation() {
        let q = "Was this MRI taken with or without contrast?";
        assert!(score_closed_for(q, "With contrast.", "with contrast").correct);
        assert!(!score_closed_for(q, "Without contrast", "with contrast").correct);
        let q = "Is the lesion on the right or left side of the brain?";
        assert!(score_closed_for(q, "The right side of the brain.", "Right").correct);
        assert!(!score_closed_for(q, "Left or right, unclear.", "Right").correct);
        assert!(!score_closed_for(q, "left, then right", "Right").correct);
        assert!(score_closed_for(q, "Right, not left", "Right").correct);
        let q = "Does this CT have contrast or no contrast?";
        assert!(!score_closed_for(q, "Non-contrast", "contrast").correct);
        assert!(!score_closed_for(q, "No contrast", "contrast").correct);
        assert!(score_closed_for("", "Left", "Left side").correct);
    }

    #[test]
    fn open_exact_and_recall() {
        let v = score_open("left frontal lobe", "Frontal lobe");
        assert_eq!(v.token_recall, Some(1.0));
        assert_eq!(v.exact_match, Some(false));
        assert!(score_open("The right temporal lobe.", "right temporal lobe").correct);
        assert!(score_open("Answer: Axial. It is an axial slice.", "axial").correct);
        let half = score_open("right", "Right lung");
        assert_eq!(half.token_recall, Some(0.5));
    }
}
