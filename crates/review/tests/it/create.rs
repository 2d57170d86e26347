//! Building a review set: the runs' answered samples drawn with a seed, a share graded by every reviewer and
//! the rest by one each, and a token per reviewer of which the store keeps only the hash.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use nmb_requests::{ModelSpec, Usage};
use nmb_review::{candidates, create_set, hash_token, AssignOptions, NewSet, ReviewError};
use nmb_run::{Invocation, Replay, StoredAnswer};

use crate::common::{assigned, eval, model, store};

fn new_set(runs: &[&str], reviewers: &[&str], overlap: f64, seed: u64) -> NewSet {
    NewSet {
        runs: runs.iter().map(|r| r.to_string()).collect(),
        assign: AssignOptions {
            reviewers: reviewers.iter().map(|r| r.to_string()).collect(),
            per_reviewer: None,
            overlap,
            seed,
        },
        rubric: None,
        show_thinking: false,
        pairwise: false,
        criteria: None,
    }
}

#[test]
fn every_answer_is_shared_out_blind_and_only_token_hashes_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let server = model("");
    let run = eval(&store, &server, "model-a", 2, None);
    let answered = store.sample_states(&run).unwrap().len();

    let created = create_set(&store, new_set(&[&run], &["lee", "park"], 0.5, 5)).unwrap();
    assert_eq!(created.items, answered, "every answered sample, once");
    assert_eq!(created.shared, (answered as f64 * 0.5).round() as usize);
    let set = store
        .review_set(&created.set_id)
        .unwrap()
        .expect("the set is stored");
    assert_eq!(set.runs, std::slice::from_ref(&run));
    assert_eq!(set.rubric_hash, nmb_results::Rubric::builtin().hash);
    let items = store.review_items(&created.set_id).unwrap();
    assert_eq!(items.len(), answered);
    let shared: BTreeSet<u32> = (items.iter())
        .filter(|i| i.shared)
        .map(|i| i.item_no)
        .collect();
    assert_eq!(shared.len(), created.shared);

    // Every reviewer grades the shared items; every other item goes to exactly one of them.
    let mut own = Vec::new();
    for (name, count, _) in &created.invites {
        let theirs: BTreeSet<u32> = assigned(&store, &created.set_id, name)
            .iter()
            .map(|(n, _)| *n)
            .collect();
        assert_eq!(theirs.len(), *count, "{name}");
        assert!(shared.is_subset(&theirs), "{name} misses a shared item");
        own.extend(theirs.difference(&shared).copied());
    }
    let distinct: BTreeSet<u32> = own.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        own.len(),
        "an unshared item went to two reviewers"
    );
    assert_eq!(distinct.len() + shared.len(), answered);

    // The store keeps each token's hash, never the token.
    for (name, _, token) in &created.invites {
        assert!(token.len() >= 43, "a 256-bit token: {token}");
        assert_eq!(store.reviewer_by_token(token).unwrap(), None);
        let found = store.reviewer_by_token(&hash_token(token)).unwrap();
        assert_eq!(found, Some((created.set_id.clone(), name.clone())));
    }
    let text = created.text("http://127.0.0.1:8686");
    assert!(
        text.contains(&format!("/review/{}?token=", created.set_id)),
        "{text}"
    );

    // The seed decides which answers come in which order; the tokens are new every time.
    let order = |seed: u64| {
        let c = create_set(&store, new_set(&[&run], &["lee", "park"], 0.5, seed)).unwrap();
        let items = store.review_items(&c.set_id).unwrap();
        let keys: Vec<(String, u32)> = items
            .into_iter()
            .map(|i| (i.task_id, i.sample_index))
            .collect();
        (keys, c.invites[0].2.clone())
    };
    let (again, token) = order(5);
    let in_order: Vec<(String, u32)> = items
        .iter()
        .map(|i| (i.task_id.clone(), i.sample_index))
        .collect();
    assert_eq!(again, in_order);
    assert_ne!(token, created.invites[0].2);
    assert_ne!(order(6).0, in_order);
}

fn stored_answer(task: &str, outcome: Result<&str, &str>) -> StoredAnswer {
    StoredAnswer {
        task_id: task.to_string(),
        turn: 0,
        outcome: outcome.map(String::from).map_err(String::from),
        usage: Usage::default(),
        latency: Duration::from_millis(1),
        raw: "{}".into(),
    }
}

/// Errored and unanswered samples have no answer to grade: only the answered ones are candidates.
#[test]
fn only_answered_samples_are_reviewed() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let suite = nmb_suite::Source::new("sample")
        .load_checked(false)
        .unwrap()
        .suite;
    let tasks: Vec<String> = (suite.tasks())
        .filter(|(_, t)| t.turns.is_empty())
        .map(|(_, t)| t.id.clone())
        .take(3)
        .collect();
    let replay = Replay {
        answers: vec![
            stored_answer(&tasks[0], Ok("Multiple sclerosis")),
            stored_answer(&tasks[1], Ok("Glioblastoma")),
            stored_answer(&tasks[2], Err("timeout")),
        ],
        ..Replay::default()
    };
    let spec = ModelSpec::parse("imported:openai/gpt-4o").unwrap();
    let mut config = nmb_run::EvalConfig::new(nmb_suite::Source::new("sample"), spec);
    config.samples = Some(1);
    let invocation = Invocation {
        replay: Some(Arc::new(replay)),
        ..Invocation::default()
    };
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let scheduler = config.scheduler(&store, None);
    let progress = Arc::new(nmb_run::Progress::default());
    let done = runtime
        .block_on(nmb_run::evaluate(
            &config,
            &invocation,
            store.clone(),
            &scheduler,
            progress,
        ))
        .unwrap();
    let run = done.outcome.run_id;
    assert!(done.outcome.summary.samples_total > 3);

    let found = candidates(&store, std::slice::from_ref(&run)).unwrap();
    let found: BTreeSet<&str> = found.iter().map(|c| c.task_id.as_str()).collect();
    assert_eq!(
        found,
        BTreeSet::from([tasks[0].as_str(), tasks[1].as_str()])
    );
    let created = create_set(&store, new_set(&[&run], &["lee"], 0.0, 1)).unwrap();
    assert_eq!(created.items, 2);
}

#[test]
fn a_bad_set_is_refused_naming_what_is_wrong_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir.path().join("runs"));
    let server = model("");
    let run = eval(&store, &server, "model-a", 1, Some(4));

    let e = create_set(&store, new_set(&["no-such-run"], &["lee"], 0.5, 1))
        .err()
        .expect("refused");
    assert!(
        matches!(&e, ReviewError::Run { run_id, .. } if run_id == "no-such-run"),
        "{e}"
    );
    assert!(e.to_string().contains("no-such-run"), "{e}");
    let e = create_set(&store, new_set(&[&run], &["lee", "lee"], 0.5, 1))
        .err()
        .expect("refused");
    assert!(e.to_string().contains("\"lee\" is named twice"), "{e}");
    let e = create_set(&store, new_set(&[&run], &["lee"], 1.5, 1))
        .err()
        .expect("refused");
    assert!(e.to_string().contains("--overlap 1.5"), "{e}");
    let mut too_many = new_set(&[&run], &["lee", "park"], 0.0, 1);
    too_many.assign.per_reviewer = Some(3);
    let e = create_set(&store, too_many).err().expect("refused");
    assert!(
        e.to_string().contains("need 6 answers; the runs have 4"),
        "{e}"
    );

    // A rubric file that is not there, and one that is not a rubric: each error names the file.
    let missing = dir.path().join("missing.toml");
    let mut with = new_set(&[&run], &["lee"], 0.5, 1);
    with.rubric = Some(missing.clone());
    let e = create_set(&store, with).err().expect("refused");
    assert!(
        matches!(&e, ReviewError::RubricRead { path, .. } if *path == missing),
        "{e}"
    );
    let bad = dir.path().join("bad-rubric.toml");
    std::fs::write(&bad, "id = \"x\"\nversion = \"1\"\nmin = 3\nmax = 1\n").unwrap();
    let mut with = new_set(&[&run], &["lee"], 0.5, 1);
    with.rubric = Some(bad.clone());
    let e = create_set(&store, with).err().expect("refused");
    assert!(
        matches!(&e, ReviewError::Rubric { path, .. } if *path == bad),
        "{e}"
    );
    assert!(e.to_string().contains("bad-rubric.toml"), "{e}");

    assert!(
        store.list_review_sets().unwrap().is_empty(),
        "nothing was stored"
    );
}
