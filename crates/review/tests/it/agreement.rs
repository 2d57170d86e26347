//! Judges measured against the clinicians of a review set (`run_calibrations`, what the report and the run
//! page show), and the plan of further reviews (`review_plan`, what `nmb review plan` prints). The expected
//! rates are worked out here from the stored grades and the stored score report.

use std::collections::{BTreeMap, BTreeSet};

use nmb_calibration::AgreementOptions;
use nmb_review::{
    create_set, review_plan, run_calibrations, AssignOptions, NewSet, ReviewError, GRADER,
};
use serde_json::Value;

use crate::common::{
    assigned, decisions, eval, grade_all, judge, judge_annotator, model, score, store,
};

fn new_set(run: &str, per_reviewer: Option<usize>, overlap: f64, seed: u64) -> NewSet {
    NewSet {
        runs: vec![run.to_string()],
        assign: AssignOptions {
            reviewers: vec!["lee".into(), "park".into()],
            per_reviewer,
            overlap,
            seed,
        },
        rubric: None,
        show_thinking: false,
        pairwise: false,
        criteria: None,
    }
}

fn options() -> AgreementOptions {
    AgreementOptions {
        bootstrap: nmb_stats::BootstrapConfig {
            resamples: 200,
            ..Default::default()
        },
        ..AgreementOptions::default()
    }
}

/// The clinicians follow the scoring's decision except on every third item each sees.
fn verdict(truth: &BTreeMap<String, bool>) -> impl Fn(usize, &str) -> &'static str + '_ {
    move |position, key| {
        let flip = position % 3 == 0;
        if truth[key] != flip {
            "correct"
        } else {
            "incorrect"
        }
    }
}

#[test]
fn the_graders_sensitivity_and_specificity_are_the_clinicians_verdicts_on_its_decisions() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let (server, judge) = (model(""), judge());
    let run = eval(&store, &server, "model-a", 2, None);
    let report = score(&store, &run, &judge);
    let truth = decisions(&report);
    assert!(truth.len() > 20, "too few judged samples: {}", truth.len());
    // A set nobody graded yet is left out.
    create_set(&store, new_set(&run, Some(2), 0.0, 9)).unwrap();
    assert!(run_calibrations(&store, &run, None, &options())
        .unwrap()
        .is_empty());

    let set = create_set(&store, new_set(&run, None, 0.5, 5))
        .unwrap()
        .set_id;
    grade_all(&store, &set, "lee", verdict(&truth));
    grade_all(&store, &set, "park", verdict(&truth));
    let calibrations = run_calibrations(&store, &run, Some(&report), &options()).unwrap();
    assert_eq!(calibrations.len(), 1);
    let c = &calibrations[0];
    assert_eq!(
        (c.set_id.as_str(), c.run_id.as_str()),
        (set.as_str(), run.as_str())
    );
    assert_eq!(c.report.clinicians, ["lee", "park"]);
    let json = serde_json::to_value(&c.report).unwrap();
    let verdicts = (json["dimensions"].as_array().unwrap().iter())
        .find(|d| d["dimension"] == "verdict")
        .expect("the verdict dimension");
    let grader = (verdicts["corrected_pass_rates"].as_array().unwrap().iter())
        .find(|r| r["judge"] == GRADER)
        .expect("the grader's corrected rate");
    assert_eq!(grader["run_items"].as_u64().unwrap() as usize, truth.len());

    // Worked out here: the clinicians' consensus on each reviewed item against the grader's decision.
    let keys: BTreeMap<u32, String> = (store.review_items(&set).unwrap().into_iter())
        .map(|i| {
            (
                i.item_no,
                nmb_review::item_key(&i.run_id, &i.task_id, i.sample_index),
            )
        })
        .collect();
    let mut consensus: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for g in store.latest_grades(&set).unwrap() {
        let v = if g.grade.verdict.as_deref() == Some("correct") {
            2.0
        } else {
            0.0
        };
        consensus
            .entry(keys[&g.item_no].as_str())
            .or_default()
            .push(v);
    }
    let pairs: Vec<(bool, bool)> = (consensus.iter())
        .map(|(k, v)| (truth[*k], v.iter().sum::<f64>() / v.len() as f64 >= 2.0))
        .collect();
    let share = |v: Vec<bool>| v.iter().filter(|b| **b).count() as f64 / v.len() as f64;
    let observed = share(truth.values().copied().collect());
    let sensitivity = share(pairs.iter().filter(|p| p.1).map(|p| p.0).collect());
    let specificity = share(pairs.iter().filter(|p| !p.1).map(|p| !p.0).collect());
    let near = |got: &Value, want: f64| (got.as_f64().unwrap() - want).abs() < 1e-12;
    match grader.get("result") {
        Some(r) => {
            assert!(near(&r["observed"], observed), "{r} vs {observed}");
            assert!(near(&r["sensitivity"], sensitivity), "{r} vs {sensitivity}");
            assert!(near(&r["specificity"], specificity), "{r} vs {specificity}");
        }
        None => assert!(sensitivity + specificity <= 1.0, "undefined: {grader}"),
    }
    // The judge's rubric scores are rated too, on the rubric's dimensions.
    assert!(
        c.report.judges.contains(&judge_annotator(&report)),
        "{:?}",
        c.report.judges
    );
}

#[test]
fn the_plan_says_how_many_reviews_reach_the_width_and_which_unreviewed_items_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let (server, judge) = (model(""), judge());
    let run = eval(&store, &server, "model-a", 2, None);
    let report = score(&store, &run, &judge);
    let truth = decisions(&report);

    let refused = review_plan(&store, &run, 0.05, 5, &options()).unwrap_err();
    assert!(
        refused.to_string().contains("nmb review create --runs"),
        "{refused}"
    );
    let set = create_set(&store, new_set(&run, Some(8), 0.5, 5))
        .unwrap()
        .set_id;
    grade_all(&store, &set, "lee", verdict(&truth));
    grade_all(&store, &set, "park", verdict(&truth));
    let reviewed: BTreeSet<String> = (["lee", "park"].iter())
        .flat_map(|r| assigned(&store, &set, r).into_iter().map(|(_, k)| k))
        .collect();
    assert_eq!(reviewed.len(), 4 + 2 * 4);

    let plan = review_plan(&store, &run, 0.05, 5, &options()).unwrap();
    assert_eq!(plan.run_id, run);
    assert_eq!(plan.review_first.len(), 5);
    let first: BTreeSet<&String> = plan.review_first.iter().collect();
    assert_eq!(first.len(), 5, "no item twice: {:?}", plan.review_first);
    for item in &plan.review_first {
        assert!(
            truth.contains_key(item),
            "{item} is a scored sample of the run"
        );
        assert!(!reviewed.contains(item), "{item} was reviewed already");
    }
    let all = review_plan(&store, &run, 0.05, usize::MAX, &options()).unwrap();
    assert_eq!(all.review_first.len(), truth.len() - reviewed.len());
    assert_eq!(all.review_first[..5], plan.review_first[..]);
    assert!(!plan.judges.is_empty());
    for j in &plan.judges {
        assert_eq!(j.set_id, set);
        assert_eq!(j.reviewed, reviewed.len());
        assert!(j.sentence.starts_with(&j.judge), "{}", j.sentence);
        let says = match j.needed {
            Some(_) => "0.05",
            None => "no interval width",
        };
        assert!(j.sentence.contains(says), "{}", j.sentence);
    }

    for bad in [0.0, 1.0, f64::NAN] {
        let e = review_plan(&store, &run, bad, 5, &options()).unwrap_err();
        assert!(
            matches!(&e, ReviewError::Invalid(m) if m.contains("--target-ci")),
            "{e}"
        );
    }
}
