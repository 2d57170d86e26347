//! `Store::copy_runs_to`: a run with images, several turns, an error, a cache hit from another run and a score
//! report goes from SQLite to PostgreSQL and back to a new SQLite file without a change anyone can read (only
//! call ids are the target's own), copying again changes nothing, and a clash of run ids is refused.

use crate::common;

use common::*;
use nmb_store::{
    cache_key, RenderView, RunStatus, SampleScoreRow, ScoreReportRecord, Store, StoreError,
};
use nmb_test_support::postgres::cluster;
use serde_json::{json, Value};

const SCORE_CONFIG: &str = "score-cfg-1";
/// Spacing, key order and number spelling that re-serialising would change.
const REPORT: &str =
    "{\"run\":\"x\",  \"pass@1\":0.50, \"é\":[1.0,2.50e0],\n \"note\":\"kept byte for byte\"}";

/// What the fixture's runs hold, and the image hashes its prompts reference.
struct Fixture {
    run: String,
    origin: String,
    judge: String,
    images: Vec<String>,
}

impl Fixture {
    fn runs(&self) -> [&str; 3] {
        [&self.run, &self.origin, &self.judge]
    }
}

/// An origin run with one answer, and the run under test: two images, a two-turn sample, an errored sample, a
/// sample answered from the origin run's cache, one never answered, and a score report with its judge's run.
fn build(store: &Store) -> Fixture {
    let origin = store.create_run("cfg-origin", &manifest()).unwrap().run_id;
    record_ok(store, &origin, "shared", 0, "an answer from another run");
    let run = store.create_run("cfg-main", &manifest()).unwrap().run_id;
    let tasks = [
        ("img", 1),
        ("multi", 1),
        ("bad", 1),
        ("shared", 1),
        ("never", 1),
    ];
    store.plan_samples(&run, &tasks).unwrap();
    let pngs = vec![fake_png(1, 3000), fake_png(2, 5000)];
    let p = put_image_prompt(store, "img", &pngs);
    store
        .record_call(&call(&run, "img", 0, &p), &[ok_choice(0, "a stroke", true)])
        .unwrap();
    two_turns(store, &run);
    let bad = put_image_prompt(store, "bad", &pngs[1..]);
    let mut failed = call(&run, "bad", 0, &bad);
    failed.error = error("server_error", "503 from upstream");
    store.record_call(&failed, &[failed_choice(0)]).unwrap();
    let shared = put_text_prompt(store, "shared", 0);
    let hit = store
        .lookup_cache(&cache_key(MODEL, PARAMS, &shared, 0))
        .unwrap()
        .expect("the origin run's answer");
    assert!(store
        .record_cache_hit(&run, "shared", 0, 0, &hit, true)
        .unwrap());
    save_report(store, &run);
    store.set_status(&run, RunStatus::Finished).unwrap();
    let judge = judge_run(store, &run);
    Fixture {
        run,
        origin,
        judge,
        images: pngs.iter().map(|b| sha(b)).collect(),
    }
}

/// On SQLite its second turn is stored as older versions stored it: body and raw response as plain TEXT.
fn two_turns(store: &Store, run: &str) {
    let p0 = put_text_prompt(store, "multi", 0);
    store
        .record_call(&call(run, "multi", 0, &p0), &[ok_choice(0, "first", false)])
        .unwrap();
    let p1 = put_text_prompt(store, "multi", 1);
    let mut second = call(run, "multi", 1, &p1);
    second.raw = Some(r#"{"id":"y","choices":[{"message":{"content":"second"}}]}"#);
    let id = store
        .record_call(&second, &[ok_choice(0, "second", true)])
        .unwrap();
    if store.engine_name() != "sqlite" {
        return;
    }
    let body = store.prompt_body(&p1).unwrap().unwrap();
    store
        .with_conn("store old plain-text rows", |c| {
            c.execute(
                "UPDATE prompts SET body = ?1 WHERE prompt_hash = ?2",
                rusqlite::params![body, p1],
            )?;
            c.execute(
                "UPDATE calls SET raw = ?1 WHERE id = ?2",
                rusqlite::params![second.raw, id],
            )
        })
        .unwrap();
}

/// The run of a judge that scored `scored`, with one verdict.
fn judge_run(store: &Store, scored: &str) -> String {
    let manifest = serde_json::from_value(json!({
        "kind": "judge", "scored_run_id": scored, "nmb_version": "0.1.0", "suite_id": "sample",
        "suite_hash": "abc", "template_id": "judge", "template_hash": "", "model": MODEL,
        "params": {"temperature": 0.0}, "input_mode": "text", "samples": 1, "dropped_inputs": []
    }))
    .unwrap();
    let judge = store.create_run("cfg-judge", &manifest).unwrap().run_id;
    record_ok(store, &judge, "verdict", 0, r#"{"correct":true}"#);
    judge
}

fn save_report(store: &Store, run: &str) {
    let row = |task: &str, correct: Option<bool>| SampleScoreRow {
        task_id: task.into(),
        case_id: format!("case-{task}"),
        family: "differential".into(),
        level: "direct".into(),
        status: if correct.is_some() { "ok" } else { "errored" }.into(),
        correct,
        matched_rank: correct.map(|_| 1),
        match_method: Some("exact".into()),
        rubric_overall: Some(0.75),
        bertscore_f: Some(0.125),
        ..SampleScoreRow::default()
    };
    let rows = [
        row("bad", None),
        row("img", Some(true)),
        row("multi", Some(false)),
    ];
    store
        .save_score_report(&ScoreReportRecord {
            run_id: run,
            config_hash: SCORE_CONFIG,
            schema_version: 3,
            report_json: REPORT,
            samples: &rows,
        })
        .unwrap();
}

/// Everything the store answers about the fixture's runs, with call ids (the target's own) left out.
fn view(store: &Store, f: &Fixture) -> Value {
    let mut runs = Vec::new();
    for run in f.runs() {
        let samples = store.run_samples(run).unwrap();
        let (mut raws, mut bodies, mut hits) = (vec![], vec![], vec![]);
        for t in samples.iter().flat_map(|s| &s.turns) {
            raws.push(store.raw_response(t.call.call_id).unwrap());
            bodies.push(store.prompt_body(&t.call.prompt_hash).unwrap());
            hits.push(store.lookup_cache(&t.cache_key).unwrap());
        }
        runs.push(json!({
            "info": store.run(run).unwrap(),
            "summary": store.summary(run).unwrap(),
            "samples": samples,
            "states": store.sample_states(run).unwrap(),
            "calls": store.run_calls(run).unwrap(),
            "raws": raws,
            "bodies": bodies,
            "cache": hits,
            "report": store.latest_score_report(run).unwrap(),
            "scores": format!("{:?}", store.sample_score_rows(run, SCORE_CONFIG).unwrap()),
        }));
    }
    let images: Vec<Value> = f
        .images
        .iter()
        .map(|h| {
            let i = store.image(h).unwrap().expect("the image was copied");
            json!([i.mime, hex::encode(i.bytes)])
        })
        .collect();
    let mut v = json!({ "runs": runs, "images": images });
    drop_call_ids(&mut v);
    v
}

fn drop_call_ids(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("call_id");
            map.values_mut().for_each(drop_call_ids);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_call_ids),
        _ => {}
    }
}

#[test]
fn a_run_goes_to_postgres_and_back_to_sqlite_unchanged() {
    let Some(pg) = cluster() else { return };
    let (_dir, source) = temp_store();
    let f = build(&source);
    let before = view(&source, &f);
    assert!(before.to_string().contains("kept byte for byte"));

    let pg_store = Store::connect(&pg.fresh_database()).unwrap();
    let stats = source
        .copy_runs_to(&pg_store, std::slice::from_ref(&f.run))
        .unwrap();
    assert_eq!((stats.runs, stats.runs_skipped), (3, 0));
    assert_eq!(stats.runs_added_for_cache_hits, 1, "{stats:?}");
    assert_eq!(stats.cache_origin_run_ids, vec![f.origin.clone()]);
    assert_eq!(stats.runs_added_for_judges, 1, "{stats:?}");
    assert_eq!(stats.judge_run_ids, vec![f.judge.clone()]);
    assert_eq!(stats.copied_run_ids[0], f.origin, "the cache origin first");
    assert_eq!((stats.samples, stats.calls, stats.turns), (7, 6, 7));
    assert_eq!((stats.prompts, stats.contexts, stats.images), (6, 1, 2));
    assert_eq!((stats.score_reports, stats.sample_scores), (1, 3));
    assert_eq!(view(&pg_store, &f), before);

    let (_dir2, back) = temp_store();
    let stats = pg_store.copy_runs_to(&back, &[]).unwrap();
    assert_eq!((stats.runs, stats.runs_added_for_cache_hits), (3, 0));
    assert_eq!(view(&back, &f), before);
    assert_eq!(
        back.latest_score_report(&f.run).unwrap().as_deref(),
        Some(REPORT)
    );
    assert_eq!(back.image_count().unwrap(), 2);
    assert_eq!(back.prompt_count().unwrap(), 6);

    // Again: everything is there already, so nothing is written.
    let again = source
        .copy_runs_to(&pg_store, std::slice::from_ref(&f.run))
        .unwrap();
    assert_eq!((again.runs, again.runs_skipped), (0, 3), "{again:?}");
    assert_eq!(
        (again.calls, again.turns, again.prompts, again.images),
        (0, 0, 0, 0)
    );
    assert_eq!(
        (
            pg_store.image_count().unwrap(),
            pg_store.prompt_count().unwrap()
        ),
        (2, 6)
    );
    assert_eq!(view(&pg_store, &f), before);
}

#[test]
fn every_run_and_the_renders_copy_between_stores_of_one_engine() {
    on_each_engine(|| {
        let (_d1, source) = temp_store();
        let f = build(&source);
        let png = fake_png(9, 700);
        let views = [RenderView {
            sha256: sha(&png),
            bytes: png,
            width: 16,
            height: 16,
            label: "axial 1/1".into(),
        }];
        source.put_render("render-key", &views).unwrap();
        let (_d2, target) = temp_store();
        let stats = source.copy_runs_to(&target, &[]).unwrap();
        assert_eq!((stats.runs, stats.renders, stats.images), (3, 1, 3));
        assert_eq!(view(&target, &f), view(&source, &f));
        assert_eq!(target.render("render-key").unwrap(), Some(views.to_vec()));
        let again = source.copy_runs_to(&target, &[]).unwrap();
        assert_eq!((again.runs, again.runs_skipped, again.renders), (0, 3, 0));
    });
}

#[test]
fn runs_that_took_answers_from_each_other_are_copied_together() {
    on_each_engine(|| {
        let (_d1, source) = temp_store();
        let a = source.create_run("cfg-a", &manifest()).unwrap().run_id;
        let b = source.create_run("cfg-b", &manifest()).unwrap().run_id;
        record_ok(&source, &a, "from-a", 0, "A");
        record_ok(&source, &b, "from-b", 0, "B");
        for (run, task) in [(&a, "from-b"), (&b, "from-a")] {
            let prompt = put_text_prompt(&source, task, 0);
            let hit = source
                .lookup_cache(&cache_key(MODEL, PARAMS, &prompt, 0))
                .unwrap()
                .unwrap();
            assert!(source
                .record_cache_hit(run, task, 0, 0, &hit, true)
                .unwrap());
        }
        let (_d2, target) = temp_store();
        let stats = source
            .copy_runs_to(&target, std::slice::from_ref(&a))
            .unwrap();
        assert_eq!((stats.runs, stats.runs_added_for_cache_hits), (2, 1));
        for run in [&a, &b] {
            let text = |s: &Store| -> Vec<Option<String>> {
                let samples = s.run_samples(run).unwrap();
                samples.into_iter().map(|s| s.final_text).collect()
            };
            assert_eq!(text(&target), text(&source));
            assert_eq!(target.summary(run).unwrap(), source.summary(run).unwrap());
        }
    });
}

#[test]
fn a_run_id_held_with_another_configuration_is_an_error_naming_it() {
    let (_d1, source) = temp_store();
    let f = build(&source);
    let (_d2, target) = temp_store();
    source
        .copy_runs_to(&target, std::slice::from_ref(&f.origin))
        .unwrap();
    target
        .with_conn("change a configuration", |c| {
            c.execute(
                "UPDATE runs SET config_hash = 'another' WHERE run_id = ?1",
                [&f.origin],
            )
        })
        .unwrap();
    let err = source.copy_runs_to(&target, &[]).unwrap_err();
    assert!(matches!(err, StoreError::RunConflict { .. }), "{err:?}");
    assert!(err.to_string().contains(&f.origin), "{err}");
    assert!(
        target.get_run(&f.run).unwrap().is_none(),
        "nothing was copied"
    );

    let err = source
        .copy_runs_to(&target, &["no-such-run".into()])
        .unwrap_err();
    assert!(matches!(err, StoreError::UnknownRun { .. }), "{err:?}");
    assert!(
        source.copy_runs_to(&source, &[]).is_err(),
        "not into itself"
    );
}
