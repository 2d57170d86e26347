//! The whole tool on a PostgreSQL store (`--store postgres://…` or `NMB_STORE_URL`): eval, resume, runs, score,
//! report and compare work as on SQLite, give the same scores, and never print the password.

use crate::common;

use std::process::{Child, Output, Stdio};

use common::*;
use nmb_fake_server::{Config, Wire};
use nmb_test_support::postgres::cluster;
use serde_json::Value;

fn eval_args(model: &str) -> Vec<String> {
    [
        "eval",
        "--suite",
        "sample",
        "--model",
        model,
        "--samples",
        "2",
        "--limit",
        "6",
        "--no-bertscore",
        "--json",
        "-q",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// `nmb` with the store given by `--store` (SQLite runs in `dir` stay empty).
fn on_pg(dir: &std::path::Path, url: &str, args: &[String]) -> Output {
    let out = nmb_command(dir)
        .arg("--store")
        .arg(url)
        .args(args)
        .output()
        .expect("running nmb");
    let password = cluster()
        .map(|pg| pg.password().to_string())
        .unwrap_or_default();
    for stream in [&out.stdout, &out.stderr] {
        assert!(
            !text(stream).contains(&password),
            "the password was printed: {}",
            text(stream).replace(&password, "<PASSWORD>")
        );
    }
    out
}

#[test]
fn eval_resume_score_report_and_compare_work_on_postgres_with_the_scores_of_sqlite() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let server = server(Config::default());
    let model = model_spec(Wire::OpenAi, &server);

    let first = json_of(&on_pg(dir.path(), &url, &eval_args(&model)));
    assert_eq!(first["summary"]["status"], "finished");
    assert_eq!(first["summary"]["samples_ok"], 12);
    assert!(
        !dir.path().join("nmb-runs").exists() && !dir.path().join(nmb_store::DB_FILE_NAME).exists(),
        "nothing went to SQLite"
    );
    let run_id = first["run_id"].as_str().unwrap().to_string();
    let sent = server.request_count();
    assert_eq!(sent, first["summary"]["requests_sent"].as_u64().unwrap());

    // Resuming pays for nothing twice; a new run of the same configuration is answered from the shared cache.
    let mut resume = eval_args(&model);
    resume.extend(["--resume".to_string(), run_id.clone()]);
    let again = json_of(&on_pg(dir.path(), &url, &resume));
    assert_eq!(again["invocation"]["requests"], 0);
    let rerun = json_of(&on_pg(dir.path(), &url, &eval_args(&model)));
    assert_eq!(rerun["summary"]["cache_hits"], 12);
    assert_eq!(
        server.request_count(),
        sent,
        "no request reached the server"
    );

    // The same run on SQLite scores the same.
    let sqlite_dir = tempfile::tempdir().unwrap();
    let on_sqlite = json_of(&nmb(sqlite_dir.path(), &as_strs(&eval_args(&model))));
    let score = |out: &Output| -> Value {
        let mut v = json_of(out);
        normalise(&mut v);
        v
    };
    let sqlite_id = on_sqlite["run_id"].as_str().unwrap();
    let pg_score = score(&on_pg(
        dir.path(),
        &url,
        &strings(&["score", &run_id, "--json"]),
    ));
    let sqlite_score = score(&nmb(sqlite_dir.path(), &["score", sqlite_id, "--json"]));
    assert_eq!(pg_score, sqlite_score);
    assert!(pg_score.to_string().contains("pass"), "{pg_score}");

    // runs list/show, report and compare read the PostgreSQL store; NMB_STORE_URL works like --store.
    let list = nmb_command(dir.path())
        .env("NMB_STORE_URL", &url)
        .args(["runs", "list"])
        .output()
        .unwrap();
    assert!(list.status.success(), "{}", text(&list.stderr));
    assert!(
        text(&list.stdout).contains(&run_id),
        "{}",
        text(&list.stdout)
    );
    assert!(!text(&list.stdout).contains(pg.password()));
    let show = json_of(&on_pg(
        dir.path(),
        &url,
        &strings(&["runs", "show", &run_id, "--json"]),
    ));
    assert_eq!(show["samples_ok"], 12);
    let out_dir = dir.path().join("report");
    let report = on_pg(
        dir.path(),
        &url,
        &strings(&["report", &run_id, "--out", &out_dir.display().to_string()]),
    );
    assert!(report.status.success(), "{}", text(&report.stderr));
    assert!(out_dir.join("report.html").is_file());
    let rerun_id = rerun["run_id"].as_str().unwrap();
    let compare = on_pg(dir.path(), &url, &strings(&["compare", &run_id, rerun_id]));
    assert!(compare.status.success(), "{}", text(&compare.stderr));
}

#[test]
fn a_wrong_password_or_a_bad_url_is_a_clear_error_without_the_password() {
    let Some(pg) = cluster() else { return };
    let dir = tempfile::tempdir().unwrap();
    let wrong = pg.fresh_database().replace(pg.password(), "hunter2-wrong");
    let out = nmb_command(dir.path())
        .args(["--store", &wrong, "runs", "list"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("cannot open the run store") && err.contains("***"),
        "{err}"
    );
    assert!(!err.contains("hunter2-wrong"), "{err}");

    let out = nmb_command(dir.path())
        .args(["--store", "mysql://u:pw@h/db", "runs", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("postgres://"),
        "{}",
        text(&out.stderr)
    );
    assert!(!text(&out.stderr).contains(":pw@"), "{}", text(&out.stderr));
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn as_strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

/// Run ids and clock times differ between two runs of the same thing; nothing else may.
fn normalise(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| {
                !(k == "run_id"
                    || k.ends_with("_ms")
                    || k.ends_with("_at")
                    || k == "created"
                    || k == "scored_at")
            });
            map.values_mut().for_each(normalise);
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        _ => {}
    }
}

/// `nmb eval --plan-only`, then three `nmb worker` processes, one SIGKILLed mid-run: the survivors reclaim its
/// samples when its lease runs out, the run finishes, nothing is asked twice but what the killed worker had in
/// flight, and the scores equal those of the same evaluation in one process on SQLite.
#[test]
fn three_workers_one_killed_finish_the_run_with_the_scores_of_one_process() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let server = server(Config {
        latency: std::time::Duration::from_millis(150),
        ..Config::default()
    });
    let model = model_spec(Wire::OpenAi, &server);
    // A killed worker's fleet slots are held for the recorded timeout + 10 s: 30 s here, not the default 310.
    let limits = ["--timeout", "20"];
    let planned = plan_whole_suite(dir.path(), &url, &model, &limits);
    let run_id = planned["run_id"].as_str().unwrap().to_string();
    assert_eq!(planned["summary"]["samples_pending"], 50);
    assert_eq!(server.request_count(), 0, "planning asks nothing");

    let worker = |name: &str| {
        let log = std::fs::File::create(dir.path().join(name)).unwrap();
        spawn_worker(
            dir.path(),
            &url,
            &run_id,
            // A lease of 5 s, renewed every 1.7 s: with 2 s a survivor's renewal came late once on the loaded
            // 2-core machine during the whole suite, its sample was reclaimed while in flight and asked twice.
            &["--lease-secs", "5", "--concurrency", "2"],
            log.into(),
        )
    };
    let mut doomed = worker("w0.log");
    let survivors = [worker("w1.log"), worker("w2.log")];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while server.request_count() < 12 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    doomed.kill().expect("SIGKILL a worker");
    doomed.wait().unwrap();

    let show = finished_after(survivors, dir.path(), &url, &run_id);
    assert_eq!(
        (
            show["samples_ok"].as_u64(),
            show["samples_pending"].as_u64()
        ),
        (Some(50), Some(0))
    );
    let calls = show["calls"].as_u64().unwrap();
    let sent = server.request_count();
    // The killed worker had at most its 2 requests in flight; everything else reached the store once.
    assert!(
        sent >= calls && sent <= calls + 2,
        "{sent} requests for {calls} stored calls"
    );
    // No stored answer was thrown away either: every stored call is the answer of some sample's turn.
    let store = nmb_store::Store::connect(&url).unwrap();
    let used: std::collections::HashSet<i64> = store
        .run_samples(&run_id)
        .unwrap()
        .iter()
        .flat_map(|s| s.turns.iter().map(|t| t.call.call_id))
        .collect();
    let stored = store.run_calls(&run_id).unwrap();
    for c in &stored {
        assert!(used.contains(&c.call_id), "an answer no sample kept: {c:?}");
    }

    let (a, b) = scores_beside_one_sqlite_process(dir.path(), &url, &run_id, &model, &limits);
    assert_eq!(a, b);
}

/// `nmb eval --plan-only` of the whole sample suite (2 samples a task) on PostgreSQL, with `extra`; its JSON.
fn plan_whole_suite(dir: &std::path::Path, url: &str, model: &str, extra: &[&str]) -> Value {
    let mut plan = whole_suite_args(model, extra);
    plan.push("--plan-only".into());
    json_of(&on_pg(dir, url, &plan))
}

/// `nmb eval` of the whole sample suite (2 samples a task), with `extra`.
fn whole_suite_args(model: &str, extra: &[&str]) -> Vec<String> {
    let mut args = eval_args(model);
    args.retain(|a| a != "--limit" && a != "6");
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// The scores of run `run_id` on PostgreSQL and of the same evaluation (`extra` its flags) run by one process
/// on SQLite, each with run ids and clock times taken out.
fn scores_beside_one_sqlite_process(
    dir: &std::path::Path,
    url: &str,
    run_id: &str,
    model: &str,
    extra: &[&str],
) -> (Value, Value) {
    let sqlite_dir = tempfile::tempdir().unwrap();
    let alone = whole_suite_args(model, extra);
    let on_sqlite = json_of(&nmb(sqlite_dir.path(), &as_strs(&alone)));
    let mut a = json_of(&on_pg(dir, url, &strings(&["score", run_id, "--json"])));
    let sqlite_id = on_sqlite["run_id"].as_str().unwrap();
    let mut b = json_of(&nmb(sqlite_dir.path(), &["score", sqlite_id, "--json"]));
    normalise(&mut a);
    normalise(&mut b);
    (a, b)
}

/// A quiet `nmb worker --run RUN_ID` on PostgreSQL with `args`, its stdout discarded.
fn spawn_worker(
    dir: &std::path::Path,
    url: &str,
    run_id: &str,
    args: &[&str],
    stderr: Stdio,
) -> Child {
    nmb_command(dir)
        .args(["--store", url, "worker", "--run", run_id, "-q"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .expect("start a worker")
}

/// Waits for the surviving workers, each of which must succeed, and returns `nmb runs show RUN --json` for a run
/// that must have finished.
fn finished_after(
    survivors: impl IntoIterator<Item = Child>,
    dir: &std::path::Path,
    url: &str,
    run_id: &str,
) -> Value {
    for mut w in survivors {
        let status = w.wait().unwrap();
        assert!(status.success(), "a worker failed: {}", log_of(dir));
    }
    let show = json_of(&on_pg(
        dir,
        url,
        &strings(&["runs", "show", run_id, "--json"]),
    ));
    assert_eq!(show["status"], "finished", "{show}");
    show
}

fn log_of(dir: &std::path::Path) -> String {
    ["w1.log", "w2.log"]
        .iter()
        .map(|f| std::fs::read_to_string(dir.join(f)).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Three workers with 4 requests in flight each, and a fleet-wide limit of 3: the server never sees more than 3
/// at once (without the fleet it would see up to 12).
#[test]
fn the_concurrency_limit_holds_across_the_fleet() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let server = server(Config {
        latency: std::time::Duration::from_millis(100),
        ..Config::default()
    });
    let model = model_spec(Wire::OpenAi, &server);
    let run_id = plan_whole_suite(dir.path(), &url, &model, &["--no-n"])["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let workers: Vec<_> = (0..3)
        .map(|_| {
            let args = ["--concurrency", "4", "--fleet-limit", "3"];
            spawn_worker(dir.path(), &url, &run_id, &args, Stdio::inherit())
        })
        .collect();
    for mut w in workers {
        assert!(w.wait().unwrap().success());
    }
    let show = json_of(&on_pg(
        dir.path(),
        &url,
        &strings(&["runs", "show", &run_id, "--json"]),
    ));
    assert_eq!(show["samples_ok"], 50, "{show}");
    let peak = server.peak_in_flight();
    assert!(peak <= 3, "the server saw {peak} requests at once");
    assert!(peak >= 2, "the workers did run side by side (peak {peak})");
}

/// A worker given no run finds every unfinished run that recorded its configuration, and finishes them all; a
/// run made without `nmb eval` (no recorded configuration) is named in a clear error when asked for by id.
#[test]
fn a_worker_without_a_run_works_on_every_unfinished_one() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let server = server(Config::default());
    let model = model_spec(Wire::OpenAi, &server);
    let mut ids = Vec::new();
    for samples in ["1", "2"] {
        let mut plan = eval_args(&model);
        plan[6] = samples.to_string();
        plan.push("--plan-only".into());
        ids.push(
            json_of(&on_pg(dir.path(), &url, &plan))["run_id"]
                .as_str()
                .unwrap()
                .to_string(),
        );
    }
    let out = on_pg(dir.path(), &url, &strings(&["worker", "-q"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    for (id, want) in ids.iter().zip([6, 12]) {
        let show = json_of(&on_pg(
            dir.path(),
            &url,
            &strings(&["runs", "show", id, "--json"]),
        ));
        assert_eq!(
            (show["status"].as_str(), show["samples_ok"].as_u64()),
            (Some("finished"), Some(want))
        );
    }
    let again = on_pg(dir.path(), &url, &strings(&["worker"]));
    assert!(again.status.success());
    assert!(
        text(&again.stderr).contains("no run"),
        "{}",
        text(&again.stderr)
    );

    let store = nmb_store::Store::connect(&url).unwrap();
    let bare = store
        .create_run("cfg", &nmb_store::Manifest::default())
        .unwrap();
    let out = on_pg(
        dir.path(),
        &url,
        &strings(&["worker", "--run", &bare.run_id]),
    );
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("did not record its configuration"),
        "{}",
        text(&out.stderr)
    );
}

/// A 429 with `Retry-After: 2` to one worker pauses that server for the whole fleet: after it, no worker sends
/// it anything until the two seconds are over.
#[test]
fn a_429_pauses_the_server_for_every_worker() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let arrivals: std::sync::Arc<std::sync::Mutex<Vec<(std::time::Instant, bool)>>> =
        Default::default();
    let seen = arrivals.clone();
    let responder: nmb_fake_server::Responder = std::sync::Arc::new(move |req| {
        let mut seen = seen.lock().unwrap();
        // The fourth request is refused; every other one is answered as usual.
        let refuse = seen.len() == 3;
        seen.push((std::time::Instant::now(), refuse));
        if refuse {
            return nmb_fake_server::Reply::Raw {
                status: 429,
                headers: vec![("retry-after".into(), "2".into())],
                body: r#"{"error":{"message":"slow down","type":"rate_limit"}}"#.into(),
            };
        }
        nmb_fake_server::default_reply(req)
    });
    let server = server(Config {
        latency: std::time::Duration::from_millis(100),
        responder,
        ..Config::default()
    });
    let model = model_spec(Wire::OpenAi, &server);
    // The whole suite, one request per sample: enough work left after the 429 to fill the pause.
    let run_id = plan_whole_suite(dir.path(), &url, &model, &["--no-n"])["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            spawn_worker(
                dir.path(),
                &url,
                &run_id,
                &["--concurrency", "2"],
                Stdio::inherit(),
            )
        })
        .collect();
    for mut w in workers {
        assert!(w.wait().unwrap().success());
    }
    let arrivals = arrivals.lock().unwrap().clone();
    let refused_at = arrivals
        .iter()
        .find(|(_, refused)| *refused)
        .expect("the 429 was sent")
        .0;
    let during: Vec<f64> = arrivals
        .iter()
        .map(|(t, _)| t.saturating_duration_since(refused_at).as_secs_f64())
        // A request another worker decided on before the pause was stored may still arrive just after the 429.
        .filter(|s| *s > 0.8 && *s < 1.9)
        .collect();
    assert!(
        during.is_empty(),
        "requests during the pause, seconds after the 429: {during:?}"
    );
    assert!(arrivals.len() > 4, "the run went on after the pause");
    let show = json_of(&on_pg(
        dir.path(),
        &url,
        &strings(&["runs", "show", &run_id, "--json"]),
    ));
    assert_eq!(show["samples_ok"], 50, "{show}");
}

/// One `nmb worker` of three on PostgreSQL SIGKILLed at 20 seeded moments and started again after each: the run
/// finishes, each kill costs at most the one request the worker had in flight, and the scores equal those of the
/// same evaluation in one process on SQLite.
#[test]
fn one_worker_of_three_killed_twenty_times_loses_nothing() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let server = server(Config {
        latency: std::time::Duration::from_millis(60),
        ..Config::default()
    });
    let model = model_spec(Wire::OpenAi, &server);
    // One request per sample, so that the run is long enough for twenty kills.
    let planned = plan_whole_suite(dir.path(), &url, &model, &["--no-n"]);
    let run_id = planned["run_id"].as_str().unwrap().to_string();
    let worker = |name: &str| {
        let log = std::fs::File::create(dir.path().join(name)).unwrap();
        // A killed worker's share of a server's fleet-wide limit comes back only after the request timeout:
        // room for every kill.
        let args = [
            "--lease-secs",
            "5",
            "--concurrency",
            "1",
            "--fleet-limit",
            "64",
        ];
        spawn_worker(dir.path(), &url, &run_id, &args, log.into())
    };
    let survivors = [worker("w1.log"), worker("w2.log")];
    let points = kill_points(0x6b69_6c6c_2d70_6731, 20, 50);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    for (k, point) in points.iter().enumerate() {
        let mut doomed = worker(&format!("w0-{k}.log"));
        while server.request_count() < *point && doomed.try_wait().unwrap().is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "kill {k}: no progress"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            doomed.try_wait().unwrap().is_none(),
            "kill {k} came after the run's end"
        );
        doomed.kill().expect("SIGKILL");
        doomed.wait().unwrap();
    }
    let show = finished_after(survivors, dir.path(), &url, &run_id);
    assert_eq!(show["samples_ok"].as_u64(), Some(50), "{show}");
    let (calls, sent) = (show["calls"].as_u64().unwrap(), server.request_count());
    assert!(
        sent >= calls && sent <= calls + 20,
        "{sent} requests for {calls} stored calls over 20 kills"
    );
    eprintln!("20 kills at requests {points:?}: {sent} requests, {calls} stored calls");

    let (a, b) = scores_beside_one_sqlite_process(dir.path(), &url, &run_id, &model, &["--no-n"]);
    assert!(
        a == b,
        "the scores differ from those of one process on SQLite"
    );
}

/// A batched run planned on PostgreSQL and worked on by two workers, one SIGKILLed once its first batch is
/// submitted: the survivor claims the dead worker's samples when their lease runs out, finds their requests in
/// the dead worker's stored batches and polls those, so no request is submitted twice; the run finishes with the
/// scores of the same batched evaluation in one process on SQLite.
#[test]
fn workers_share_a_batched_run_and_submit_nothing_twice() {
    let Some(pg) = cluster() else { return };
    let url = pg.fresh_database();
    let dir = tempfile::tempdir().unwrap();
    let server = server(Config {
        batch: nmb_fake_server::batch::BatchConfig {
            polls: 20,
            ..Default::default()
        },
        ..Config::default()
    });
    let model = model_spec(Wire::OpenAi, &server);
    let batched = ["--batch", "--batch-poll", "0.05"];
    let planned = plan_whole_suite(dir.path(), &url, &model, &batched);
    let run_id = planned["run_id"].as_str().unwrap().to_string();
    let worker = |name: &str| {
        let log = std::fs::File::create(dir.path().join(name)).unwrap();
        spawn_worker(
            dir.path(),
            &url,
            &run_id,
            &["--lease-secs", "3"],
            log.into(),
        )
    };
    let mut doomed = worker("w0.log");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while server.batches_created() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "no batch was submitted"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let survivor = worker("w1.log");
    std::thread::sleep(std::time::Duration::from_millis(200));
    doomed.kill().expect("SIGKILL a worker");
    doomed.wait().unwrap();

    let show = finished_after([survivor], dir.path(), &url, &run_id);
    assert_eq!(show["samples_pending"].as_u64(), Some(0), "{show}");
    let submissions = server.batch_submissions();
    assert!(
        submissions.values().all(|n| *n == 1),
        "submitted twice: {submissions:?}"
    );
    assert!(server.requests().iter().all(|r| r.batch.is_some()));

    let (a, b) = scores_beside_one_sqlite_process(dir.path(), &url, &run_id, &model, &batched);
    assert_eq!(a, b);
}
