//! Recording grades: a form checked against the rubric, grades appended and never updated (the newest counts),
//! and a set's grades beside the scoring's own decisions and the judges' rubric scores as ratings.

use std::collections::{BTreeMap, BTreeSet};

use nmb_results::Rubric;
use nmb_review::{
    check_grade, create_set, review_ratings, AssignOptions, GradeForm, NewSet, GRADER,
    VERDICT_DIMENSION,
};

use crate::common::{
    assigned, decisions, eval, grade, judge, judge_annotator, judged, model, score, store,
};

fn new_set(run: &str, rubric: Option<std::path::PathBuf>) -> NewSet {
    NewSet {
        runs: vec![run.to_string()],
        assign: AssignOptions {
            reviewers: vec!["lee".into(), "park".into()],
            per_reviewer: None,
            overlap: 1.0,
            seed: 3,
        },
        rubric,
        show_thinking: false,
        pairwise: false,
        criteria: None,
    }
}

#[test]
fn a_form_is_checked_against_the_set_rubric() {
    let rubric = Rubric::builtin();
    let form = |verdict: &str, overall: &str| GradeForm {
        verdict: verdict.into(),
        scores: [("overall".to_string(), overall.to_string())].into(),
        comment: "  seen  ".into(),
        ..GradeForm::default()
    };
    let g = check_grade(&rubric, &[], &form("partly", "4")).unwrap();
    assert_eq!(g.verdict.as_deref(), Some("partly"));
    assert_eq!(g.scores["overall"], 4);
    assert_eq!(g.comment.as_deref(), Some("seen"));
    // Autosave sends what is there so far.
    let partial = check_grade(&rubric, &[], &form("", "")).unwrap();
    assert_eq!((partial.verdict, partial.scores.len()), (None, 0));
    let above = (rubric.max + 1).to_string();
    let problems = check_grade(&rubric, &[], &form("probably", &above)).unwrap_err();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems[0].contains("\"probably\""), "{problems:?}");
    assert!(
        problems[1].contains(&format!("from {} to {}", rubric.min, rubric.max)),
        "{problems:?}"
    );
}

#[test]
fn the_newest_grade_counts_and_judges_are_rated_beside_the_clinicians() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let (server, judge) = (model(""), judge());
    let run = eval(&store, &server, "model-a", 1, Some(6));
    let set = create_set(&store, new_set(&run, None)).unwrap().set_id;
    let hash = store.review_set(&set).unwrap().unwrap().rubric_hash;
    let items = assigned(&store, &set, "lee");
    assert_eq!(items.len(), 6);

    // lee grades every item, then changes their mind on the first; park skips one and grades another.
    for (item_no, _) in &items {
        store
            .append_grade(&set, "lee", *item_no, &hash, &grade("correct", 4))
            .unwrap();
    }
    let (first, first_key) = &items[0];
    store
        .append_grade(&set, "lee", *first, &hash, &grade("incorrect", 1))
        .unwrap();
    store
        .append_grade(&set, "park", items[1].0, &hash, &grade("skip", 2))
        .unwrap();
    store
        .append_grade(&set, "park", items[2].0, &hash, &grade("partly", 2))
        .unwrap();

    // Unscored: the clinicians' ratings alone, and a note saying how to compare the judges.
    let before = review_ratings(&store, &set, None).unwrap();
    assert!(before.scored_runs.is_empty());
    assert!(
        before
            .notes
            .iter()
            .any(|n| n.contains(&format!("nmb score {run}"))),
        "{:?}",
        before.notes
    );
    let rows = &before.ratings.rows;
    let verdict = |annotator: &str, item: &str| {
        (rows.iter())
            .find(|r| {
                r.annotator == annotator && r.item == item && r.dimension == VERDICT_DIMENSION
            })
            .map(|r| r.score)
    };
    assert_eq!(
        verdict("lee", first_key),
        Some(0.0),
        "the newest grade counts"
    );
    assert_eq!(verdict("lee", &items[1].1), Some(2.0));
    assert_eq!(verdict("park", &items[1].1), None, "a skip is not a grade");
    assert_eq!(verdict("park", &items[2].1), Some(1.0));
    let annotators: BTreeSet<&str> = rows.iter().map(|r| r.annotator.as_str()).collect();
    assert_eq!(annotators, BTreeSet::from(["lee", "park"]));
    // lee: 6 verdicts and 6 overall scores; park: one of each.
    assert_eq!(rows.len(), 2 * 6 + 2);
    let csv = before.csv();
    assert!(csv.starts_with("annotator,item,dimension,score\n"), "{csv}");
    assert_eq!(csv.lines().count(), rows.len() + 1);
    // Appended, never updated: both of lee's grades of the first item are kept, the newest read as theirs.
    assert_eq!(store.latest_grades(&set).unwrap().len(), 6 + 2);
    let history = store.grade_history(&set, "lee", *first).unwrap();
    let verdicts: Vec<_> = history.iter().map(|g| g.grade.verdict.as_deref()).collect();
    assert_eq!(verdicts, [Some("correct"), Some("incorrect")]);

    // Scored: the scoring's decision on every scored sample, and the judge's rubric scores on the set's rubric.
    let report = score(&store, &run, &judge);
    let truth = judged(&report);
    assert!(!truth.is_empty());
    let after = review_ratings(&store, &set, None).unwrap();
    assert_eq!(after.scored_runs, std::slice::from_ref(&run));
    assert!(after.notes.is_empty(), "{:?}", after.notes);
    let of = |annotator: &str, dimension: &str| -> BTreeMap<String, f64> {
        (after.ratings.rows.iter())
            .filter(|r| r.annotator == annotator && r.dimension == dimension)
            .map(|r| (r.item.clone(), r.score))
            .collect()
    };
    let grader = of(GRADER, VERDICT_DIMENSION);
    let expected: BTreeMap<String, f64> = (decisions(&report).into_iter())
        .map(|(k, correct)| (k, if correct { 2.0 } else { 0.0 }))
        .collect();
    assert_eq!(grader.len(), 6, "every sample of the run, reviewed or not");
    assert_eq!(grader, expected);
    let judge_overall = of(&judge_annotator(&report), "overall");
    let expected: BTreeMap<String, f64> = (truth.iter())
        .map(|(k, (_, o))| (k.clone(), f64::from(*o)))
        .collect();
    assert_eq!(judge_overall, expected);
    assert_eq!(of("lee", VERDICT_DIMENSION)[first_key], 0.0);
}

#[test]
fn judges_who_graded_with_another_rubric_are_compared_on_correctness_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir.path().join("runs"));
    let (server, judge) = (model(""), judge());
    let run = eval(&store, &server, "model-a", 1, Some(4));
    score(&store, &run, &judge);
    // The bundled rubric with another version is another rubric (another hash).
    let other = dir.path().join("neurology-v2.toml");
    let text =
        nmb_results::rubric::BUILTIN_NEUROLOGY_V1.replace("version = \"1\"", "version = \"2\"");
    std::fs::write(&other, text).unwrap();
    let set = create_set(&store, new_set(&run, Some(other)))
        .unwrap()
        .set_id;
    let hash = store.review_set(&set).unwrap().unwrap().rubric_hash;
    assert_ne!(hash, Rubric::builtin().hash);
    let items = assigned(&store, &set, "lee");
    store
        .append_grade(&set, "lee", items[0].0, &hash, &grade("correct", 5))
        .unwrap();

    let r = review_ratings(&store, &set, None).unwrap();
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("graded with another rubric")),
        "{:?}",
        r.notes
    );
    let annotators: BTreeSet<&str> = r
        .ratings
        .rows
        .iter()
        .map(|r| r.annotator.as_str())
        .collect();
    assert_eq!(annotators, BTreeSet::from(["lee", GRADER]));
}
