//! A judge with known leanings, for tests that check nmb recovers them: [`SimJudge`] answers nmb's judge
//! prompts (never equivalent, a knowledge gap for the taxonomy, and a rubric grade) with an overall grade built
//! from parts the test chose:
//!
//! - the answer's true grade, [`true_grade`] of its text (2 or 3), which simulated clinicians give too;
//! - noise of up to `noise` points either way, from a hash of the conversation and the judge's model name (so
//!   asking the same prompt again gives the same grade, as the response cache would, and a different prompt or
//!   another judge an independent one);
//! - `length_per_doubling` points per doubling of the answer's words from [`LENGTH_REFERENCE`] (fewer words take
//!   points off), rounded;
//! - `thinking_effect` points when the prompt shows the model's thinking ([`THINKING_MARKER`]).
//!
//! The grade is clamped to the rubric's 1 to 5; tests choose parts that stay inside it.
//!
//! Asked which way a rubric criterion points (`nmb rubric lint --judge`), it reads the criterion as harmful when
//! its text holds one of [`HARMFUL_PHRASES`], as wanted otherwise: a reading the test knows in advance.

use std::sync::Arc;

use crate::{ReceivedRequest, Reply, Responder};

/// How nmb's judge prompts mark a model's thinking shown before its answer.
pub const THINKING_MARKER: &str = "[the model's thinking before its answer]";

/// What follows the thinking in such a prompt: the answer itself.
const ANSWER_MARKER: &str = "[its answer]";

/// What marks nmb's question about which way a criterion points, and ends the criterion's text.
const CRITERION_MARKER: &str = "<<<CRITERION\n";
const CRITERION_END: &str = "\nCRITERION>>>";

/// Phrases the simulated judge reads as a harm in a criterion (case-insensitive).
pub const HARMFUL_PHRASES: &[&str] =
    &["before imaging", "without excluding", "withholds", "delays"];

/// Answers this long get no length points.
pub const LENGTH_REFERENCE: f64 = 16.0;

/// A judge with injected leanings.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SimJudge {
    /// Points added to the overall grade when the prompt shows the model's thinking.
    pub thinking_effect: i64,
    /// Points per doubling of the answer's words from [`LENGTH_REFERENCE`].
    pub length_per_doubling: f64,
    /// Largest number of points the noise moves a grade, either way.
    pub noise: u8,
}

/// The grade a perfect grader gives an answer: 2 or 3, from a hash of its trimmed text.
pub fn true_grade(answer: &str) -> i64 {
    2 + (fnv(answer.trim()) % 2) as i64
}

/// FNV-1a: small, fixed, and the same on every platform.
fn fnv(text: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

impl SimJudge {
    /// This judge as a fake server's responder.
    pub fn responder(self) -> Responder {
        Arc::new(move |req: &ReceivedRequest| self.reply(req))
    }

    pub fn reply(&self, req: &ReceivedRequest) -> Reply {
        let text = req.all_text();
        let answer = if text.contains("Candidate") && text.contains("\"equivalent\"") {
            r#"{"equivalent": false, "rationale": "simulated"}"#.to_string()
        } else if let Some(criterion) = criterion_of(&text) {
            let lower = criterion.to_lowercase();
            let harmful = HARMFUL_PHRASES.iter().any(|p| lower.contains(p));
            let direction = if harmful { "harmful" } else { "wanted" };
            format!(r#"{{"direction": "{direction}", "explanation": "simulated"}}"#)
        } else if text.contains("Grade the MODEL ANSWER") {
            let g = self.grade(&text, &format!("{} {}", req.model, req.conversation_sha256));
            format!(
                r#"{{"scores": {{"diagnostic_correctness": {g}, "multimodal_integration": {g}, "differential_reasoning": {g}, "lesion_localisation": {g}, "clinical_safety": {g}}}, "overall": {g}, "rationale": "simulated"}}"#
            )
        } else {
            r#"{"category": "knowledge_gap", "justification": "simulated"}"#.to_string()
        };
        Reply::Texts(vec![answer])
    }

    /// The overall grade of the last answer in a rubric prompt; `asking` (judge and conversation) draws the
    /// noise.
    fn grade(&self, prompt: &str, asking: &str) -> i64 {
        let blocks = answer_blocks(prompt);
        let shown = blocks.iter().any(|b| b.contains(THINKING_MARKER));
        let last = blocks.last().copied().unwrap_or_default();
        let answer = match last.split_once(ANSWER_MARKER) {
            Some((_, a)) if last.contains(THINKING_MARKER) => a,
            _ => last,
        };
        let words = answer.split_whitespace().count().max(1) as f64;
        let length = (self.length_per_doubling * (words / LENGTH_REFERENCE).log2()).round() as i64;
        let thinking = if shown { self.thinking_effect } else { 0 };
        let grade = true_grade(answer) + noise(asking, self.noise) + length + thinking;
        grade.clamp(1, 5)
    }
}

/// The criterion of a question about which way one points.
fn criterion_of(prompt: &str) -> Option<&str> {
    let (_, rest) = prompt.split_once(CRITERION_MARKER)?;
    rest.split_once(CRITERION_END).map(|(c, _)| c)
}

/// The text of every `<<<ANSWER ... ANSWER>>>` block of a judge prompt, in order.
fn answer_blocks(prompt: &str) -> Vec<&str> {
    prompt
        .split("<<<ANSWER\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("\nANSWER>>>").map(|(a, _)| a))
        .collect()
}

/// Uniform on `-most..=most`, from a hash of `asking`.
fn noise(asking: &str, most: u8) -> i64 {
    if most == 0 {
        return 0;
    }
    // The high bits: FNV's low bits mix poorly for short inputs.
    let h = fnv(asking) >> 32;
    let width = 2 * u64::from(most) + 1;
    (h % width) as i64 - i64::from(most)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(answer: &str) -> String {
        format!("Grade the MODEL ANSWER with the rubric.\nMODEL ANSWER\n<<<ANSWER\n{answer}\nANSWER>>>\n")
    }

    #[test]
    fn thinking_shown_adds_the_effect_and_length_its_slope() {
        let judge = SimJudge {
            thinking_effect: 1,
            length_per_doubling: 0.5,
            noise: 0,
        };
        // 16 words: no length points.
        let answer = "Multiple sclerosis: periventricular and juxtacortical lesions, an earlier optic neuritis and \
                      oligoclonal bands fit it best here";
        let hidden = judge.grade(&prompt(answer), "0");
        let shown = judge.grade(
            &prompt(&format!(
                "{THINKING_MARKER}\nPerhaps a tumour? No.\n{ANSWER_MARKER}\n{answer}"
            )),
            "0",
        );
        assert_eq!(hidden, true_grade(answer));
        assert_eq!(shown, hidden + 1);
        // 64 words are two doublings past 16: one point at a half per doubling.
        let long = vec!["word"; 64].join(" ");
        assert_eq!(judge.grade(&prompt(&long), "0"), true_grade(&long) + 1);
    }

    #[test]
    fn noise_stays_within_its_bound_and_hits_every_value() {
        let seen: std::collections::BTreeSet<i64> = (0..200u32)
            .map(|i| noise(&format!("judge {i}"), 1))
            .collect();
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), [-1, 0, 1]);
    }
}
