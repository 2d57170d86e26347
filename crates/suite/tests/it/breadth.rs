//! Breadth datasets from ../shared/data: VQA-RAD, MedQA / MedMCQA, PubMedQA and SLAKE. Skipped when ../shared is absent.

use crate::common;

use common::*;
use std::path::Path;

use nmb_suite::{check_images, load, Family, LoadOptions};

fn vqa_rad(filters: &[&str]) -> Option<nmb_suite::Loaded> {
    let path = shared()?.join("data/vqa-rad/trainset.json");
    let filters = filters.iter().map(|f| f.parse().unwrap()).collect();
    let opts = LoadOptions {
        filters,
        ..LoadOptions::default()
    };
    Some(load(&path.display().to_string(), &opts).expect("trainset loads"))
}

#[test]
fn vqa_rad_trainset_has_3064_tasks_and_every_image_resolves() {
    let Some(loaded) = vqa_rad(&[]) else { return };
    assert!(
        loaded.problems.is_empty(),
        "{:?}",
        &loaded.problems[..loaded.problems.len().min(5)]
    );
    let suite = &loaded.suite;
    assert_eq!(suite.format, "vqa-rad");
    assert_eq!(suite.task_count(), 3064);
    assert_eq!(suite.cases.len(), 314, "one case per distinct image_name");
    let report = check_images(suite);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.images, suite.cases.len());
    assert_eq!(report.formats.get("jpeg"), Some(&suite.cases.len()));
    // "CLOSED " with a trailing space still counts as closed.
    let closed = suite
        .tasks()
        .filter(|(_, t)| t.family == Family::ClosedVqa)
        .count();
    let open = suite
        .tasks()
        .filter(|(_, t)| t.family == Family::OpenVqa)
        .count();
    assert_eq!(closed + open, 3064);
    let first = suite.tasks().next().unwrap().1;
    assert_eq!(first.metadata.get("qid").map(String::as_str), Some("1"));
    assert_eq!(
        first.reference.as_ref().and_then(|r| r.answer.as_deref()),
        Some("Yes")
    );
}

#[test]
fn vqa_rad_head_filter_gives_977_tasks() {
    let Some(loaded) = vqa_rad(&["image_organ=HEAD"]) else {
        return;
    };
    assert_eq!(loaded.suite.task_count(), 977);
    assert!(loaded
        .suite
        .cases
        .iter()
        .all(|c| c.metadata.get("image_organ").map(String::as_str) == Some("HEAD")));
    let Some(not_head) = vqa_rad(&["image_organ!=head"]) else {
        return;
    };
    assert_eq!(not_head.suite.task_count(), 3064 - 977);
}

#[test]
fn medqa_test_has_1273_multiple_choice_tasks() {
    let Some(shared) = shared() else { return };
    let path = shared.join("data/medqa/medagentsbench/test.jsonl");
    let loaded = load(&path.display().to_string(), &LoadOptions::default()).unwrap();
    assert_eq!(loaded.error_count(), 0, "{:?}", loaded.problems.first());
    let suite = &loaded.suite;
    assert_eq!(
        (suite.format.as_str(), suite.id.as_str()),
        ("mcq", "medqa-test")
    );
    assert_eq!(suite.task_count(), 1273);
    let (_, task) = suite.tasks().next().unwrap();
    assert_eq!(task.family, Family::MultipleChoice);
    let letters: Vec<&str> = task.options.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(letters, vec!["A", "B", "C", "D"]);
    let reference = task.reference.as_ref().unwrap();
    assert_eq!(reference.choice.as_deref(), Some("B"));
    assert_eq!(
        reference.answer.as_deref(),
        Some("Tell the attending that he cannot fail to disclose this mistake")
    );
}

#[test]
fn medmcqa_loads_through_the_same_loader() {
    let Some(shared) = shared() else { return };
    let path = shared.join("data/medmcqa/medagentsbench/test.jsonl");
    let loaded = load(&format!("mcq:{}", path.display()), &LoadOptions::default()).unwrap();
    assert_eq!(loaded.error_count(), 0, "{:?}", loaded.problems.first());
    assert_eq!(loaded.suite.task_count(), 2816);
    assert_eq!(loaded.suite.id, "medmcqa-test");
}

fn label_counts(suite: &nmb_suite::Suite) -> [usize; 3] {
    let mut counts = [0; 3];
    for (_, t) in suite.tasks() {
        let answer = t.reference.as_ref().and_then(|r| r.answer.as_deref());
        let i = ["yes", "no", "maybe"]
            .iter()
            .position(|l| Some(*l) == answer)
            .expect("a label");
        counts[i] += 1;
    }
    counts
}

/// PubMedQA's `ori_pqal.json` with `test_ground_truth.json` beside it is the official 500-item test split, and
/// every label agrees with MedAgentsBench's copy of the same questions (loaded through the mcq format).
#[test]
fn pubmedqa_test_split_loads_and_agrees_with_medagentsbench() {
    let Some(shared) = shared() else { return };
    let dir = shared.join("data/pubmedqa");
    let loaded = load(
        &dir.join("ori_pqal.json").display().to_string(),
        &LoadOptions::default(),
    )
    .unwrap();
    assert!(loaded.problems.is_empty(), "{:?}", loaded.problems);
    let suite = &loaded.suite;
    assert_eq!(
        (suite.format.as_str(), suite.id.as_str()),
        ("pubmedqa", "pubmedqa-test")
    );
    assert_eq!(suite.cases.len(), 500);
    assert_eq!(label_counts(suite), [276, 169, 55], "SOURCE.md's split");
    let mab = load(
        &dir.join("medagentsbench/test.jsonl").display().to_string(),
        &LoadOptions::default(),
    )
    .unwrap();
    let theirs: std::collections::BTreeMap<&str, Option<&str>> = mab
        .suite
        .cases
        .iter()
        .map(|c| {
            (
                c.id.as_str(),
                c.tasks[0]
                    .reference
                    .as_ref()
                    .and_then(|r| r.choice.as_deref()),
            )
        })
        .collect();
    for case in &suite.cases {
        let task = &case.tasks[0];
        assert_eq!(task.options.len(), 3);
        let ours = task.reference.as_ref().and_then(|r| r.choice.as_deref());
        assert_eq!(
            theirs.get(case.id.as_str()).copied().flatten(),
            ours,
            "PMID {}",
            case.id
        );
        assert!(
            task.question.len() > 200,
            "the abstract comes with the question"
        );
    }
}

/// Without the test split beside it, the whole expert-labelled set loads; a label that disagrees with the split
/// file is an error naming the PMID and field.
#[test]
fn pubmedqa_pqal_loads_whole_and_a_disagreeing_split_is_named() {
    let Some(shared) = shared() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("ori_pqal.json");
    std::fs::copy(shared.join("data/pubmedqa/ori_pqal.json"), &copy).unwrap();
    let loaded = load(
        &format!("pubmedqa:{}", copy.display()),
        &LoadOptions::default(),
    )
    .unwrap();
    assert!(loaded.problems.is_empty());
    assert_eq!(loaded.suite.cases.len(), 1000);
    assert_eq!(
        label_counts(&loaded.suite),
        [552, 338, 110],
        "SOURCE.md's PQA-L"
    );
    let first = &loaded.suite.cases[0];
    let flipped = match first.tasks[0]
        .reference
        .as_ref()
        .and_then(|r| r.answer.as_deref())
    {
        Some("yes") => "no",
        _ => "yes",
    };
    std::fs::write(
        tmp.path().join("test_ground_truth.json"),
        serde_json::json!({first.id.clone(): flipped, "999": "yes"}).to_string(),
    )
    .unwrap();
    let loaded = load(&copy.display().to_string(), &LoadOptions::default()).unwrap();
    let problems: Vec<String> = loaded.problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(loaded.suite.cases.len(), 0, "{problems:?}");
    assert!(
        problems.iter().any(|p| p.contains(&first.id)
            && p.contains("final_decision")
            && p.contains("disagrees")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("999") && p.contains("not in this file")),
        "{problems:?}"
    );
}

fn slake(file: &Path, text_only: bool) -> nmb_suite::Loaded {
    let opts = LoadOptions {
        text_only,
        ..LoadOptions::default()
    };
    load(&file.display().to_string(), &opts).expect("SLAKE loads")
}

/// SLAKE's real test file without its images: every question is skipped with warnings (never errors) that say
/// why and how to ask them as text; loaded for text-only asking, all 2,094 English and Chinese questions are
/// there, with the counts its SOURCE.md gives.
#[test]
fn slake_test_without_images_skips_or_asks_as_text() {
    let Some(shared) = shared() else { return };
    let file = shared.join("data/slake/test.json");
    let skipped = slake(&file, false);
    assert_eq!(skipped.suite.format, "slake");
    assert_eq!(skipped.suite.task_count(), 0);
    assert_eq!(skipped.error_count(), 0, "{:?}", skipped.problems);
    let messages: Vec<String> = skipped.problems.iter().map(|p| p.to_string()).collect();
    assert!(
        messages
            .iter()
            .any(|m| m.contains("imgs/") && m.contains("--inputs text")),
        "{messages:?}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m.contains("2094 question(s) skipped")),
        "{messages:?}"
    );

    let loaded = slake(&file, true);
    assert_eq!(loaded.error_count(), 0);
    let suite = &loaded.suite;
    assert_eq!(suite.task_count(), 2094);
    let count =
        |pred: &dyn Fn(&nmb_suite::Task) -> bool| suite.tasks().filter(|(_, t)| pred(t)).count();
    let lang =
        |t: &nmb_suite::Task, l: &str| t.metadata.get("language").map(String::as_str) == Some(l);
    assert_eq!(count(&|t| lang(t, "en")), 1061);
    assert_eq!(count(&|t| lang(t, "zh")), 1033);
    assert_eq!(count(&|t| t.family == Family::ClosedVqa), 836);
    assert!(suite
        .cases
        .iter()
        .all(|c| c.images.is_empty() && !c.id.ends_with(".jpg")));
    // SOURCE.md's neuro subset: English, location Brain / Brain_Tissue / Brain_Face.
    let neuro: Vec<(&nmb_suite::Case, &nmb_suite::Task)> = suite
        .tasks()
        .filter(|(c, t)| {
            lang(t, "en")
                && ["Brain", "Brain_Tissue", "Brain_Face"]
                    .contains(&c.metadata.get("location").map_or("", String::as_str))
        })
        .collect();
    assert_eq!(neuro.len(), 237);
    let images: std::collections::BTreeSet<&str> =
        neuro.iter().map(|(c, _)| c.id.as_str()).collect();
    assert_eq!(images.len(), 25);
    assert_eq!(
        neuro
            .iter()
            .filter(|(_, t)| t.family == Family::ClosedVqa)
            .count(),
        91
    );
}

/// With an `imgs/` folder that holds some of the images, their questions carry them; each missing image is a
/// warning naming its case, and its questions are skipped.
#[test]
fn slake_with_some_images_names_each_missing_one() {
    let Some(shared) = shared() else { return };
    let rows: Vec<serde_json::Value> =
        serde_json::from_slice(&std::fs::read(shared.join("data/slake/test.json")).unwrap())
            .unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let first = rows[0]["img_name"].as_str().unwrap().to_string();
    let other = rows
        .iter()
        .map(|r| r["img_name"].as_str().unwrap())
        .find(|n| *n != first)
        .unwrap()
        .to_string();
    let keep: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["img_name"] == first.as_str() || r["img_name"] == other.as_str())
        .collect();
    let file = write_json(tmp.path(), "test.json", &serde_json::json!(keep));
    write(&tmp.path().join("imgs"), &first, png(16, 16, 3));
    let loaded = slake(&file, false);
    let with_first = keep
        .iter()
        .filter(|r| r["img_name"] == first.as_str())
        .count();
    assert_eq!(loaded.suite.task_count(), with_first);
    assert_eq!(loaded.suite.cases.len(), 1);
    assert_eq!(loaded.suite.cases[0].images.len(), 1);
    let missing_case = other.trim_end_matches("/source.jpg");
    let warning = loaded
        .problems
        .iter()
        .find(|p| p.case_id.as_deref() == Some(missing_case))
        .expect("the missing image is named");
    assert!(
        !warning.is_error() && warning.field.as_deref() == Some("img_name"),
        "{warning}"
    );
}
