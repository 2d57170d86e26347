//! A pairwise set: two runs' answers to the same task side by side in a recorded random order, clinicians'
//! votes checked and appended (the newest counts), and the Bradley–Terry ranking of the runs from them.

use nmb_review::{
    check_vote, create_set, run_calibrations, run_pairwise, AssignOptions, NewSet, VoteForm,
};
use nmb_stats::BootstrapConfig;

use crate::common::{eval, model, store};

const TASKS: u64 = 6;

/// Which model each reviewer prefers at each position of their list: mostly the careful one.
fn prefers(reviewer: &str, position: usize) -> &'static str {
    match (reviewer, position) {
        ("ann", 6) => "tie",
        ("bob", 3) => "terse",
        ("bob", 5) => "neither",
        _ => "careful",
    }
}

/// The vote for the `wants` model's answer (`a` or `b` as the pair shows it), or `wants` itself (tie, neither).
fn side(careful_first: &[bool], item_no: u32, wants: &'static str) -> &'static str {
    match (wants, careful_first[item_no as usize - 1]) {
        ("careful", true) | ("terse", false) => "a",
        ("careful", false) | ("terse", true) => "b",
        (other, _) => other,
    }
}

#[test]
fn clinicians_votes_rank_the_runs_they_prefer_first() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let (careful_fake, terse_fake) = (model("Careful: "), model("Terse:   "));
    let careful = eval(&store, &careful_fake, "careful-model", 1, Some(TASKS));
    let terse = eval(&store, &terse_fake, "terse-model", 1, Some(TASKS));
    let created = create_set(
        &store,
        NewSet {
            runs: vec![careful.clone(), terse.clone()],
            assign: AssignOptions {
                reviewers: vec!["ann".into(), "bob".into()],
                per_reviewer: None,
                overlap: 1.0,
                seed: 5,
            },
            rubric: None,
            show_thinking: false,
            pairwise: true,
            criteria: None,
        },
    )
    .unwrap();
    let set = created.set_id;
    assert!(created.pairwise);
    assert_eq!(created.items as u64, TASKS, "one pair per task");
    let items = store.review_items(&set).unwrap();
    let pairs = store.review_pairs(&set).unwrap();
    for (item, pair) in items.iter().zip(&pairs) {
        assert_eq!(item.item_no, pair.item_no);
        assert_ne!(item.run_id, pair.run_id, "a pair is two runs' answers");
    }
    let careful_first: Vec<bool> = items.iter().map(|i| i.run_id == careful).collect();
    assert!(
        careful_first.contains(&true) && careful_first.contains(&false),
        "each run is shown first in some pairs: {careful_first:?}"
    );

    // A vote is one of the choices; bob first votes for the terse answer everywhere, then votes again.
    assert!(check_vote(&VoteForm {
        choice: "maybe".into(),
        comment: String::new()
    })
    .is_err());
    let vote = |reviewer: &str, item_no: u32, choice: &str| {
        let form = VoteForm {
            choice: choice.into(),
            comment: String::new(),
        };
        let v = check_vote(&form).unwrap().expect("a choice");
        store.append_vote(&set, reviewer, item_no, &v).unwrap();
    };
    let side = |item_no: u32, wants: &'static str| side(&careful_first, item_no, wants);
    for i in &items {
        vote("bob", i.item_no, side(i.item_no, "terse"));
    }
    for reviewer in ["ann", "bob"] {
        let mut position = 1;
        while let Some(a) = store.assigned_item(&set, reviewer, position).unwrap() {
            let n = a.item.item_no;
            vote(reviewer, n, side(n, prefers(reviewer, position as usize)));
            position += 1;
        }
    }

    let model_of = |run: &str| {
        if run == careful {
            "careful".to_string()
        } else {
            "terse".to_string()
        }
    };
    let cfg = BootstrapConfig {
        resamples: 200,
        ..BootstrapConfig::default()
    };
    let rankings = run_pairwise(&store, &terse, &model_of, &cfg).unwrap();
    assert_eq!(rankings.len(), 1);
    let r = &rankings[0];
    assert_eq!(r.set_id, set);
    assert_eq!(r.reviewers, ["ann", "bob"]);
    assert_eq!((r.votes, r.neither), (2 * TASKS as usize - 1, 1));
    let first = &r.models[0];
    assert_eq!(
        (first.run_id.as_str(), first.model.as_str()),
        (careful.as_str(), "careful")
    );
    // careful: 9 wins, 1 tie, 1 loss and 1 "neither"; terse the other way round.
    assert_eq!(
        (first.wins, first.ties, first.losses, first.neither),
        (9, 1, 1, 1)
    );
    let second = &r.models[1];
    assert_eq!(
        (second.wins, second.ties, second.losses, second.neither),
        (1, 1, 9, 1)
    );
    let rate = r.win_rate[0][1].expect("the two met");
    assert!((rate - 9.5 / 11.0).abs() < 1e-12, "{rate}");
    if let (Some(a), Some(b)) = (&first.rating, &second.rating) {
        assert!(a.value > b.value, "{a:?} {b:?}");
    }
    // A pairwise set grades no answer: it is no calibration of the judges.
    assert!(
        run_calibrations(&store, &careful, None, &Default::default())
            .unwrap()
            .is_empty()
    );
}
