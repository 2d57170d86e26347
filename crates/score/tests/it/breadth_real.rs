//! Breadth scoring against the real answer vocabularies in ../shared/data (VQA-RAD train and test, all organs
//! and the HEAD slice; SLAKE closed questions in English and Chinese; MedQA; MedMCQA). Skipped with a message when ../shared is absent.
//!
//! Three checks per dataset: every reference scored against itself is correct; paraphrases a model would write
//! ("Yes, there is.", "The left side.", "Answer: (C)") are correct; and the reference answers of *other* items
//! with a different answer are almost never correct.

use std::path::PathBuf;

use nmb_results::BreadthVerdict;
use nmb_score::breadth::{normalise, score_answer, text};
use nmb_suite::{load, Family, LoadOptions, Task};

fn shared() -> Option<PathBuf> {
    nmb_test_support::assets::shared_dir()
}

fn tasks(rel: &str, filters: &[&str]) -> Option<Vec<Task>> {
    let path = shared()?.join(rel);
    let opts = LoadOptions {
        filters: filters.iter().map(|f| f.parse().unwrap()).collect(),
        ..LoadOptions::default()
    };
    let loaded = load(&path.display().to_string(), &opts).expect("dataset loads");
    Some(
        loaded
            .suite
            .tasks()
            .map(|(_, t)| t.clone())
            .filter(|t| t.reference.is_some())
            .collect(),
    )
}

fn reference_text(t: &Task) -> String {
    let r = t.reference.as_ref().unwrap();
    match t.family {
        Family::MultipleChoice => r.choice.clone().unwrap(),
        _ => r.answer.clone().unwrap(),
    }
}

fn option_text(t: &Task) -> String {
    let key = reference_text(t);
    t.options
        .iter()
        .find(|(l, _)| *l == key)
        .map(|(_, text)| text.clone())
        .unwrap()
}

/// What a model might write when it means the reference.
fn paraphrases(t: &Task) -> Vec<String> {
    let r = reference_text(t);
    let r = r.trim();
    match t.family {
        Family::MultipleChoice => {
            let text = option_text(t);
            vec![
                r.to_string(),
                format!("Answer: {r}"),
                format!("The correct answer is ({r})."),
                format!("{r}. {text}"),
                format!("**{r}**"),
                format!("Let me think step by step about the options.\nAnswer: {r}"),
                format!("I choose option {}", r.to_lowercase()),
                text.clone(),
                format!("The answer is {text}."),
            ]
        }
        Family::ClosedVqa if matches!(normalise(r).as_str(), "yes" | "no") => {
            let lower = r.to_lowercase();
            vec![
                format!("{r}."),
                r.to_uppercase(),
                format!("{}, it is.", capitalise(&lower)),
                format!("Answer: {lower}"),
                format!("{} - based on the image.", capitalise(&lower)),
            ]
        }
        Family::ClosedVqa => vec![
            format!("{r}."),
            r.to_uppercase(),
            format!("The {}.", r.to_lowercase()),
            format!("{r}, as seen in the image."),
            format!("Answer: {r}"),
            format!("{r}. The finding is clearly visible."),
        ],
        _ => vec![
            format!("{r}."),
            r.to_uppercase(),
            format!("The {r}"),
            format!("Answer: {r}"),
            format!("{r}. This is visible on the image."),
        ],
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

fn verdict(t: &Task, answer: &str) -> BreadthVerdict {
    score_answer(t, answer).expect("breadth task with a reference")
}

struct Tally {
    name: String,
    n: usize,
    misses: Vec<String>,
}

impl Tally {
    fn new(name: &str) -> Tally {
        Tally {
            name: name.into(),
            n: 0,
            misses: Vec::new(),
        }
    }

    fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        self.n += 1;
        if !ok {
            self.misses.push(what());
        }
    }

    fn rate(&self) -> f64 {
        self.misses.len() as f64 / self.n.max(1) as f64
    }

    /// Prints a machine-readable line and the first few misses.
    fn print(&self) {
        println!(
            "{{\"check\":{:?},\"n\":{},\"misses\":{},\"rate\":{:.4}}}",
            self.name,
            self.n,
            self.misses.len(),
            self.rate()
        );
        for m in self.misses.iter().take(8) {
            println!("  miss: {m}");
        }
    }
}

/// Self, paraphrases and others' answers for one dataset. Returns (self+paraphrase tally, others tally).
fn check_dataset(name: &str, tasks: &[Task]) -> (Tally, Tally) {
    assert!(!tasks.is_empty(), "{name}: no tasks with references");
    let mut same = Tally::new(&format!("{name}: reference and paraphrases are correct"));
    for t in tasks {
        for answer in std::iter::once(reference_text(t)).chain(paraphrases(t)) {
            let v = verdict(t, &answer);
            same.check(v.correct, || {
                format!(
                    "{} {:?}: {:?} -> {:?}",
                    t.id, t.question, answer, v.extracted
                )
            });
        }
        if let Some(recall) = verdict(t, &reference_text(t)).token_recall {
            assert_eq!(recall, 1.0, "{}: a reference recalls all of itself", t.id);
        }
    }
    let mut others = Tally::new(&format!("{name}: other items' answers are correct"));
    for (i, t) in tasks.iter().enumerate() {
        // The next item whose answer means something else.
        let Some(other) = tasks[i + 1..]
            .iter()
            .chain(&tasks[..i])
            .find(|o| different_answers(t, o))
        else {
            continue;
        };
        let answer = match other.family {
            Family::MultipleChoice => option_text(other),
            _ => reference_text(other),
        };
        let v = verdict(t, &answer);
        others.check(!v.correct, || {
            format!(
                "{} {:?} ref {:?}: {:?} scored correct",
                t.id,
                t.question,
                reference_text(t),
                answer
            )
        });
    }
    same.print();
    others.print();
    (same, others)
}

fn different_answers(a: &Task, b: &Task) -> bool {
    let key = |t: &Task| match t.family {
        Family::MultipleChoice => normalise(&option_text(t)),
        // "Left side" and "Left" mean the same answer.
        _ => text::content_tokens(&reference_text(t)).join(" "),
    };
    a.family == b.family && key(a) != key(b)
}

fn vqa_rad(file: &str, filters: &[&str]) {
    let Some(all) = tasks(&format!("data/vqa-rad/{file}"), filters) else {
        return;
    };
    for family in [Family::ClosedVqa, Family::OpenVqa] {
        let subset: Vec<Task> = all.iter().filter(|t| t.family == family).cloned().collect();
        let label = format!("vqa-rad {file} {filters:?} {family}");
        let (same, others) = check_dataset(&label, &subset);
        assert!(
            same.misses.is_empty(),
            "{label}: {:?}",
            &same.misses[..same.misses.len().min(10)]
        );
        assert!(
            others.rate() < 0.02,
            "{label}: {} of {} other answers scored correct: {:?}",
            others.misses.len(),
            others.n,
            &others.misses[..others.misses.len().min(10)]
        );
    }
}

#[test]
fn vqa_rad_head_slice_train() {
    vqa_rad("trainset.json", &["image_organ=HEAD"]);
}

#[test]
fn vqa_rad_head_slice_test() {
    vqa_rad("testset.json", &["image_organ=HEAD"]);
}

#[test]
fn vqa_rad_all_organs_train() {
    vqa_rad("trainset.json", &[]);
}

#[test]
fn vqa_rad_all_organs_test() {
    vqa_rad("testset.json", &[]);
}

fn mcq(rel: &str) {
    let Some(all) = tasks(rel, &[]) else { return };
    let (same, others) = check_dataset(rel, &all);
    // Duplicate option texts (MedMCQA has a few) make the text alone ambiguous, so allow a sliver.
    assert!(
        same.rate() < 0.005,
        "{rel}: {:?}",
        &same.misses[..same.misses.len().min(10)]
    );
    assert!(
        others.rate() < 0.05,
        "{rel}: {} of {} other answers scored correct: {:?}",
        others.misses.len(),
        others.n,
        &others.misses[..others.misses.len().min(10)]
    );
}

#[test]
fn medqa() {
    mcq("data/medqa/medagentsbench/test.jsonl");
}

#[test]
fn medqa_five_options() {
    mcq("data/medqa/medagentsbench/test_5options.jsonl");
}

#[test]
fn medmcqa() {
    mcq("data/medmcqa/medagentsbench/test.jsonl");
}

/// Wrong letters are wrong and unreadable answers are failures, on real items.
#[test]
fn medqa_wrong_letters_and_failures() {
    let Some(all) = tasks("data/medqa/medagentsbench/test.jsonl", &[]) else {
        return;
    };
    for t in all.iter().take(200) {
        let key = reference_text(t);
        let wrong = t.options.iter().find(|(l, _)| *l != key).unwrap();
        let v = verdict(t, &format!("Answer: {}", wrong.0));
        assert!(!v.correct && !v.extraction_failed, "{}", t.id);
        let v = verdict(t, "I cannot answer this question without more information.");
        assert!(
            v.extraction_failed && !v.correct,
            "{}: {:?}",
            t.id,
            v.extracted
        );
    }
}

/// The typical wrong closed answer is the question's other alternative ("Is it left or right?" answered "right"
/// when the key is left), or the opposite polarity.
#[test]
fn vqa_rad_closed_rivals_and_opposites_are_wrong() {
    let Some(all) = tasks("data/vqa-rad/trainset.json", &[]) else {
        return;
    };
    let mut tally = Tally::new("vqa-rad closed: the other alternative or polarity is wrong");
    for t in all.iter().filter(|t| t.family == Family::ClosedVqa) {
        let reference = reference_text(t);
        let want = text::content_tokens(&reference);
        let wrong: Vec<String> = match normalise(&reference).as_str() {
            "yes" => vec!["No.".into(), "No, there is not.".into()],
            "no" => vec!["Yes.".into(), "Yes, there is.".into()],
            _ => rival_words(&t.question)
                .into_iter()
                .filter(|w| !want.contains(w))
                .collect(),
        };
        for answer in wrong {
            let v = verdict(t, &answer);
            tally.check(!v.correct, || {
                format!(
                    "{} {:?} ref {reference:?}: {answer:?} scored correct",
                    t.id, t.question
                )
            });
        }
    }
    tally.print();
    assert!(tally.n > 1000);
    assert!(tally.misses.is_empty(), "{:?}", tally.misses);
}

/// The words next to " or " in a question, as a test-side reading independent of the scorer's.
fn rival_words(question: &str) -> Vec<String> {
    let t = text::content_tokens(question);
    let mut out = Vec::new();
    for (i, w) in t.iter().enumerate() {
        if w == "or" {
            out.extend(i.checked_sub(1).map(|j| t[j].clone()));
            out.extend(t.get(i + 1).cloned());
        }
    }
    out.retain(|w| !matches!(w.as_str(), "not" | "no" | "without"));
    out
}

/// SLAKE's closed questions (its images are not at hand, so the suite loads as text): English through the same
/// checks as VQA-RAD, and Chinese through the phrase rules. A Chinese reference is right as written and in the
/// forms a model writes; a yes reference is wrong when the answer negates it and a no reference when it
/// affirms; a content reference is wrong when negated or when another item's different answer is given.
#[test]
fn slake_closed_english_and_chinese() {
    let Some(shared) = shared() else { return };
    let opts = LoadOptions {
        text_only: true,
        ..LoadOptions::default()
    };
    let path = shared.join("data/slake/test.json");
    let loaded = load(&path.display().to_string(), &opts).expect("SLAKE loads");
    let closed = |lang: &str| -> Vec<Task> {
        loaded
            .suite
            .tasks()
            .filter(|(_, t)| t.family == Family::ClosedVqa)
            .filter(|(_, t)| t.metadata.get("language").map(String::as_str) == Some(lang))
            .map(|(_, t)| t.clone())
            .collect()
    };
    let (same, others) = check_dataset("slake test en closed", &closed("en"));
    assert!(
        same.misses.is_empty(),
        "{:?}",
        &same.misses[..same.misses.len().min(10)]
    );
    assert!(
        others.rate() < 0.02,
        "{:?}",
        &others.misses[..others.misses.len().min(10)]
    );

    let zh = closed("zh");
    assert!(zh.len() > 300, "{}", zh.len());
    let mut right = Tally::new("slake zh: reference and paraphrases are correct");
    let mut wrong = Tally::new("slake zh: negated or other answers are wrong");
    for (i, t) in zh.iter().enumerate() {
        let r = reference_text(t);
        for answer in [
            r.clone(),
            format!("{r}。"),
            format!("答案：{r}"),
            format!("{r}，如图所示。"),
        ] {
            let v = verdict(t, &answer);
            right.check(v.correct, || {
                format!("{} {:?}: {answer:?}", t.id, t.question)
            });
        }
        let yes_no = nmb_score::breadth::chinese::yes_no(&r);
        let negations: Vec<String> = match yes_no {
            Some(true) => vec!["不是。".into(), format!("不{r}"), "没有。".into()],
            Some(false) => vec!["是的。".into(), "有。".into()],
            None => {
                let other = zh[i + 1..]
                    .iter()
                    .chain(&zh[..i])
                    .map(reference_text)
                    .find(|o| {
                        nmb_score::breadth::chinese::yes_no(o).is_none()
                            && !o.contains(&r)
                            && !r.contains(o.as_str())
                    });
                [Some(format!("不是{r}")), other]
                    .into_iter()
                    .flatten()
                    .collect()
            }
        };
        for answer in negations {
            let v = verdict(t, &answer);
            wrong.check(!v.correct, || {
                format!("{} ref {r:?}: {answer:?} scored correct", t.id)
            });
        }
    }
    right.print();
    wrong.print();
    assert!(
        right.misses.is_empty(),
        "{:?}",
        &right.misses[..right.misses.len().min(10)]
    );
    assert!(
        wrong.misses.is_empty(),
        "{:?}",
        &wrong.misses[..wrong.misses.len().min(10)]
    );
}
