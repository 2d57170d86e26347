//! The bundled prompt variants (`templates/variants/`): each renders every task of every family (the sample
//! suite's depth cases and consults, NeuroVLM-Bench's structured sample, closed and open VQA and multiple choice,
//! in every input mode) with each image placed once; `no-persona` gives no role and otherwise the built-ins' words;
//! the paraphrases differ in text but ask for the same JSON keys and answer lines; `order` asks before it shows.

use crate::common::*;

use std::collections::BTreeSet;

use nmb_plan::{
    plan, variant_names, InputMode, Message, Part, PlanOptions, PlannedTask, Role, Template,
};
use nmb_suite::{Family, Suite};

/// Tasks of every family: the sample suite (depth, with consults), the structured sample, and a breadth case.
fn suites() -> Vec<Suite> {
    let mut mcq = task("b/mcq", Family::MultipleChoice, "Which nerve is affected?");
    mcq.options = [("A", "Facial"), ("B", "Trigeminal"), ("C", "Abducens")]
        .iter()
        .map(|(l, t)| (l.to_string(), t.to_string()))
        .collect();
    let breadth = suite(vec![case(
        "b",
        vec![inline_image("i", 3), inline_image("j", 4)],
        vec![
            task("b/yn", Family::ClosedVqa, "Is there a midline shift?"),
            task("b/closed", Family::ClosedVqa, "Is this a T1 or a T2 image?"),
            task("b/open", Family::OpenVqa, "Where is the lesion?"),
            mcq,
        ],
    )]);
    vec![
        nmb_suite::sample::build(),
        nmb_suite::sample::structured::build(),
        depth_suite(),
        multi_turn_suite(),
        breadth,
    ]
}

fn planned(suite: &Suite, template: Option<&Template>, mode: InputMode) -> Vec<PlannedTask> {
    let options = PlanOptions {
        template: template.cloned(),
        input_mode: mode,
        ..PlanOptions::default()
    };
    plan(suite, &options)
        .collect::<Result<Vec<_>, _>>()
        .unwrap_or_else(|e| panic!("{:?}: {e}", template.map(Template::id)))
}

fn variants() -> Vec<Template> {
    variant_names()
        .map(|n| Template::variant(n).unwrap())
        .collect()
}

/// Every message of a planned task: system (if any), then each turn's user message.
fn messages(t: &PlannedTask) -> Vec<&Message> {
    t.system
        .iter()
        .chain(t.turns.iter().map(|turn| &turn.user))
        .collect()
}

fn image_shas(m: &Message) -> Vec<&str> {
    m.parts
        .iter()
        .filter_map(|p| match p {
            Part::Image(i) => Some(i.sha256.as_str()),
            Part::Text(_) => None,
        })
        .collect()
}

fn all_text(t: &PlannedTask) -> String {
    messages(t)
        .iter()
        .map(|m| text_of(m))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `"key":` names a prompt asks an answer to use.
fn json_keys(text: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find('"') {
        let after = &rest[start + 1..];
        let Some(end) = after.find('"') else { break };
        let word = &after[..end];
        if after[end + 1..].starts_with(':')
            && !word.is_empty()
            && word.chars().all(|c| c.is_ascii_lowercase() || c == '_')
        {
            keys.insert(word.to_string());
        }
        rest = &after[end + 1..];
    }
    keys
}

/// The answer shapes a prompt names outside JSON: fallback lines and the letter form.
fn answer_lines(text: &str) -> Vec<&'static str> {
    [
        "\"1. diagnosis: evidence\"",
        "\"Final diagnosis: ...\"",
        "\"Lesion type: ...\"",
        "\"Location: ...\"",
        "\"Findings: ...\"",
        "\"Answer: X\"",
    ]
    .into_iter()
    .filter(|l| text.contains(l))
    .collect()
}

const PERSONA: [&str; 8] = [
    "expert",
    "You are",
    "neurologist",
    "radiologist",
    "physician",
    "doctor",
    "specialist",
    "Act as",
];

#[test]
fn every_variant_renders_every_family_with_each_image_once() {
    let suites = suites();
    let families: BTreeSet<Family> = suites
        .iter()
        .flat_map(|s| {
            s.cases
                .iter()
                .flat_map(|c| c.tasks.iter().map(|t| t.family))
        })
        .collect();
    assert_eq!(
        families.len(),
        Family::ALL.len(),
        "the fixture covers every family"
    );
    for suite in &suites {
        for mode in InputMode::ALL {
            let builtin = planned(suite, None, *mode);
            for v in variants() {
                let got = planned(suite, Some(&v), *mode);
                assert_eq!(got.len(), builtin.len());
                for (a, b) in got.iter().zip(&builtin) {
                    assert_eq!(a.template_id, v.id(), "{}", a.task_id);
                    assert_eq!(a.turns.len(), b.turns.len(), "{}", a.task_id);
                    assert_eq!(a.output, b.output, "{}: the same answer format", a.task_id);
                    for (ta, tb) in a.turns.iter().zip(&b.turns) {
                        // The renderer refuses a missing or repeated image; the same images in the same order
                        // as the built-in template also means none moved between turns.
                        assert_eq!(
                            image_shas(&ta.user),
                            image_shas(&tb.user),
                            "{} {}: images",
                            v.id(),
                            a.task_id
                        );
                        assert_eq!(ta.user.role, Role::User);
                        assert!(
                            text_of(&ta.user).contains(ta.question.trim()),
                            "{} {}: the question is asked verbatim",
                            v.id(),
                            a.task_id
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn no_persona_drops_the_role_and_keeps_everything_else() {
    let v = Template::variant("no-persona").unwrap();
    for suite in suites() {
        let builtin = planned(&suite, None, InputMode::Full);
        for (a, b) in planned(&suite, Some(&v), InputMode::Full)
            .iter()
            .zip(&builtin)
        {
            let system = a.system.as_ref().map(text_of).unwrap_or_default();
            // Case text may say "physician"; the templates put a role only in the system message, and the user
            // messages are compared with the built-ins' below.
            for word in PERSONA {
                assert!(
                    !system.contains(word),
                    "{}: no-persona says {word:?}: {system}",
                    a.task_id
                );
            }
            let had = b.system.as_ref().map(text_of).unwrap_or_default();
            assert!(had.contains("expert"), "{}: {had}", b.task_id);
            for (ta, tb) in a.turns.iter().zip(&b.turns) {
                assert_eq!(
                    ta.user, tb.user,
                    "{}: only the system message changes",
                    a.task_id
                );
            }
        }
    }
}

#[test]
fn paraphrases_differ_in_text_and_ask_for_the_same_answers() {
    let paraphrases: Vec<Template> = ["paraphrase-1", "paraphrase-2", "paraphrase-3"]
        .iter()
        .map(|n| Template::variant(n).unwrap())
        .collect();
    for suite in suites() {
        let builtin = planned(&suite, None, InputMode::Full);
        let rendered: Vec<Vec<PlannedTask>> = paraphrases
            .iter()
            .map(|p| planned(&suite, Some(p), InputMode::Full))
            .collect();
        for (i, b) in builtin.iter().enumerate() {
            let base = all_text(b);
            let texts: Vec<String> = rendered.iter().map(|r| all_text(&r[i])).collect();
            for (p, text) in paraphrases.iter().zip(&texts) {
                assert_eq!(
                    json_keys(text),
                    json_keys(&base),
                    "{} {}: JSON keys",
                    p.id(),
                    b.task_id
                );
                assert_eq!(
                    answer_lines(text),
                    answer_lines(&base),
                    "{} {}: answer lines",
                    p.id(),
                    b.task_id
                );
                if b.family == Family::Structured {
                    assert_eq!(text, &base, "structured tasks keep neurovlm-v1's prompt");
                } else {
                    assert_ne!(text, &base, "{} {}", p.id(), b.task_id);
                    assert!(
                        text.contains("expert"),
                        "{} {}: a paraphrase keeps a persona",
                        p.id(),
                        b.task_id
                    );
                }
            }
            if b.family != Family::Structured {
                let distinct: BTreeSet<&String> = texts.iter().collect();
                assert_eq!(distinct.len(), 3, "{}: three different texts", b.task_id);
            }
            if b.family == Family::Differential {
                let keys = json_keys(&base);
                for k in [
                    "differential",
                    "diagnosis",
                    "evidence",
                    "final_diagnosis",
                    "rationale",
                ] {
                    assert!(keys.contains(k), "{}: {k} in {keys:?}", b.task_id);
                }
            }
        }
    }
}

#[test]
fn order_gives_the_instruction_then_the_question_then_the_evidence() {
    let v = Template::variant("order").unwrap();
    for suite in suites() {
        let builtin = planned(&suite, None, InputMode::Full);
        for (a, b) in planned(&suite, Some(&v), InputMode::Full)
            .iter()
            .zip(&builtin)
        {
            assert_eq!(
                a.system, b.system,
                "{}: the built-in system message",
                a.task_id
            );
            if a.family == Family::Structured {
                assert_eq!(a.turns[0].user, b.turns[0].user);
                continue;
            }
            for turn in &a.turns {
                // The instruction's first line, as the built-in template words it.
                let instruction = match a.family {
                    Family::Differential => "Give a ranked differential diagnosis",
                    Family::Lesion => "Identify the lesion",
                    Family::Rationale => "Give the most likely diagnosis",
                    Family::ClosedVqa => "Answer with ",
                    Family::OpenVqa => "Answer briefly",
                    Family::MultipleChoice => "Choose the single best option",
                    Family::Structured => unreachable!(),
                };
                let first = match turn.user.parts.first() {
                    Some(Part::Text(t)) => t.clone(),
                    other => panic!("{}: starts with {other:?}", a.task_id),
                };
                let user = text_of(&turn.user);
                let at = |s: &str| user.find(s);
                let question = at(&format!("Question: {}", turn.question.trim()))
                    .unwrap_or_else(|| panic!("{}: {user}", a.task_id));
                assert!(
                    first.contains(instruction) && at(instruction).unwrap() < question,
                    "{}: the instruction first: {user}",
                    a.task_id
                );
                for evidence in [
                    "Electronic health record:",
                    "Context:",
                    "Age: 77",
                    "New information:",
                ] {
                    if let Some(e) = at(evidence) {
                        assert!(e > question, "{}: {evidence} after the question", a.task_id);
                    }
                }
            }
            assert_ne!(all_text(a), all_text(b));
        }
    }
}
