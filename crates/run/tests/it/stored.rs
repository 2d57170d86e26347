//! Models whose answers are stored: a person's (`human:NAME`, answers read by the import module and kept in the
//! store) and an imported run's (`imported:MODEL`, answers brought by the invocation), each run by the ordinary
//! evaluation without asking any server.

use std::sync::Arc;
use std::time::Duration;

use nmb_requests::{ModelSpec, Usage};
use nmb_run::import::{human, ImportError};
use nmb_run::{EvalError, Invocation, Replay, Resume, RunError, StoredAnswer};
use nmb_store::Store;
use nmb_suite::Suite;

use crate::common::{model_config, run, store};

fn sample_suite() -> Suite {
    let source = nmb_suite::Source::new("sample");
    source.load_checked(false).expect("the sample suite").suite
}

/// The ids of the suite's first three single-turn tasks.
fn single_turn_tasks(suite: &Suite) -> Vec<String> {
    let tasks = suite.tasks().filter(|(_, t)| t.turns.is_empty());
    tasks.map(|(_, t)| t.id.clone()).take(3).collect()
}

/// The final answer stored for a task's first sample.
fn final_text(store: &Store, run_id: &str, task: &str) -> Option<String> {
    let samples = store.run_samples(run_id).unwrap();
    let sample = samples.into_iter().find(|s| s.task_id == task)?;
    sample.final_text
}

/// Imports `lines` (task id, answer) for `human:lee` as `nmb import` does; returns how many were added.
fn import(
    dir: &std::path::Path,
    store: &Store,
    suite: &Suite,
    lines: &[(&str, &str)],
) -> Result<usize, ImportError> {
    let path = dir.join("answers.jsonl");
    let text: Vec<String> = (lines.iter())
        .map(|(task, answer)| serde_json::json!({ "task_id": task, "answer": answer }).to_string())
        .collect();
    std::fs::write(&path, text.join("\n")).unwrap();
    let checked = human::read(&path, suite, |_, _| None)?;
    let answers = checked.answers()?;
    let spec = human::human_spec("human:lee")?;
    let suite_hash = nmb_suite::suite_hash(suite).unwrap();
    Ok(human::record_answers(store, &spec, &suite_hash, answers, &checked.source).unwrap())
}

#[test]
fn a_persons_answers_are_a_run_that_takes_later_answers_and_refuses_changed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir.path().join("runs"));
    let suite = sample_suite();
    let tasks = single_turn_tasks(&suite);
    let added = import(
        dir.path(),
        &store,
        &suite,
        &[
            (&tasks[0], "Left frontal glioma"),
            (&tasks[1], "Multiple sclerosis"),
        ],
    );
    assert_eq!(added.unwrap(), 2);

    let config = model_config("human:lee", 1);
    let first = run(&config, &Invocation::default(), &store)
        .unwrap()
        .outcome;
    let s = &first.summary;
    assert_eq!(s.samples_ok, 2, "{s:?}");
    // The unanswered tasks are errored, never wrong, and kept for a later answer.
    assert_eq!(s.samples_errored, s.samples_total - 2);
    assert_eq!(
        s.errors_by_class.get("no_answer"),
        Some(&(s.samples_total - 2))
    );
    let answered = final_text(&store, &first.run_id, &tasks[0]);
    assert_eq!(answered.as_deref(), Some("Left frontal glioma"));

    // An answer added later is taken by the resumed run.
    assert_eq!(
        import(dir.path(), &store, &suite, &[(&tasks[2], "Glioblastoma")]).unwrap(),
        1
    );
    let resume = Invocation {
        resume: Resume::Run(first.run_id.clone()),
        ..Invocation::default()
    };
    let resumed = run(&config, &resume, &store).unwrap().outcome;
    assert!(resumed.resumed);
    assert_eq!(resumed.summary.samples_ok, 3);
    let answered = final_text(&store, &first.run_id, &tasks[2]);
    assert_eq!(answered.as_deref(), Some("Glioblastoma"));

    // An answer changed since the run recorded it is another identity: the old run refuses it.
    assert_eq!(
        import(
            dir.path(),
            &store,
            &suite,
            &[(&tasks[0], "Right frontal glioma")]
        )
        .unwrap(),
        1
    );
    match run(&config, &resume, &store) {
        Err(EvalError::Run(RunError::ConfigMismatch { differs, .. })) => {
            assert_eq!(differs, "model_identity");
        }
        other => panic!("expected a configuration mismatch, got {:?}", other.err()),
    }
    let fresh = run(&config, &Invocation::default(), &store)
        .unwrap()
        .outcome;
    assert_ne!(fresh.run_id, first.run_id);
    let answered = final_text(&store, &fresh.run_id, &tasks[0]);
    assert_eq!(answered.as_deref(), Some("Right frontal glioma"));
}

#[test]
fn a_file_with_a_problem_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(&dir.path().join("runs"));
    let suite = sample_suite();
    let tasks = single_turn_tasks(&suite);
    let lines = [
        (tasks[0].as_str(), "Left frontal glioma"),
        ("no/such/task", "Stroke"),
    ];
    match import(dir.path(), &store, &suite, &lines) {
        Err(ImportError::Problems {
            file,
            problems,
            kept,
        }) => {
            assert!(file.ends_with("answers.jsonl"), "{file}");
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(
                problems[0].contains("answers.jsonl:2: task_id"),
                "{}",
                problems[0]
            );
            assert_eq!(kept, "stored");
        }
        other => panic!("expected the file's problems, got {other:?}"),
    }
    let suite_hash = nmb_suite::suite_hash(&suite).unwrap();
    assert!(store.human_answers("lee", &suite_hash).unwrap().is_empty());
}

fn stored_answer(task: &str, outcome: Result<&str, &str>) -> StoredAnswer {
    StoredAnswer {
        task_id: task.to_string(),
        turn: 0,
        outcome: outcome.map(String::from).map_err(String::from),
        usage: Usage {
            input_tokens: 100,
            output_tokens: 7,
            ..Usage::default()
        },
        latency: Duration::from_millis(5),
        raw: format!("{{\"line\": {task:?}}}"),
    }
}

#[test]
fn an_imports_answers_are_a_run_and_other_answers_another_run() {
    let dir = tempfile::tempdir().unwrap();
    let store = store(dir.path());
    let suite = sample_suite();
    let tasks = single_turn_tasks(&suite);
    let replay = Replay {
        answers: vec![
            stored_answer(&tasks[0], Ok("Multiple sclerosis")),
            stored_answer(&tasks[1], Err("timeout")),
        ],
        ..Replay::default()
    };
    let config = model_config("imported:openai/gpt-4o", 1);
    assert_eq!(
        config.model,
        ModelSpec::parse("imported:openai/gpt-4o").unwrap()
    );

    // Without its answers an imported model cannot be asked.
    match run(&config, &Invocation::default(), &store) {
        Err(e @ EvalError::Connect { .. }) => {
            assert!(e.to_string().contains("nmb import FILE"), "{e}");
        }
        other => panic!("expected a refusal, got {:?}", other.err()),
    }

    let with = |replay: &Replay| Invocation {
        replay: Some(Arc::new(replay.clone())),
        ..Invocation::default()
    };
    let first = run(&config, &with(&replay), &store).unwrap().outcome;
    let s = &first.summary;
    assert_eq!(s.samples_ok, 1, "{s:?}");
    // The error the other program recorded and the tasks it has no line for are errored apart.
    assert_eq!(s.errors_by_class.get("other"), Some(&1));
    assert_eq!(
        s.errors_by_class.get("no_answer"),
        Some(&(s.samples_total - 2))
    );
    assert_eq!(s.tokens_in, 100);
    let answered = final_text(&store, &first.run_id, &tasks[0]);
    assert_eq!(answered.as_deref(), Some("Multiple sclerosis"));

    // Other answers are another configuration, never mixed into the first run.
    let mut changed = replay.clone();
    changed.answers[0] = stored_answer(&tasks[0], Ok("Glioblastoma"));
    let other = run(&config, &with(&changed), &store).unwrap().outcome;
    assert_ne!(other.run_id, first.run_id);
    assert_ne!(other.summary.config_hash, first.summary.config_hash);
    let kept = final_text(&store, &first.run_id, &tasks[0]);
    assert_eq!(kept.as_deref(), Some("Multiple sclerosis"));
}
