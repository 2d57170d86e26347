//! A study run through its library: every cell asked and scored once (a second pass asks nothing), the state
//! file, the study report with its breadth-vs-depth comparison, and a cost cap that stops the study before it
//! would be passed.

use std::sync::Arc;

use nmb_fake_server::{Config, FakeServer};
use nmb_run::Limits;
use nmb_store::Store;
use nmb_study::job::Unwatched;
use nmb_study::{read, record, report, run_cells, scoring_config, spent, Running, Study};

use crate::common::{text, write};

fn server() -> FakeServer {
    FakeServer::start_in_background(Config::default(), 2).expect("fake server starts")
}

fn running(study: &Study, cap: Option<f64>) -> Running {
    Running {
        fresh: false,
        limits: Limits::default(),
        claiming: None,
        scoring: Some(scoring_config(study, &study.cells()).unwrap()),
        cap,
    }
}

/// The markdown table's row that starts with `| name |`.
fn row<'a>(section: &'a str, name: &str) -> &'a str {
    let start = format!("| {name} |");
    (section.lines())
        .find(|l| l.starts_with(&start))
        .unwrap_or_else(|| panic!("no row for {name}: {section}"))
}

#[test]
fn every_cell_runs_once_and_the_report_compares_breadth_with_depth() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server();
    let study = read(&write(dir.path(), &text(&srv.url(), ""))).unwrap();
    let cells = study.cells();
    let store = Arc::new(Store::open_dir(dir.path().join("runs")).unwrap());
    let how = running(&study, None);

    let ran = run_cells(&study, &cells, &how, &store, &Unwatched).unwrap();
    assert_eq!(
        ran.models_at_once, 2,
        "without a cap the two models run at once"
    );
    assert!(ran.stopped.is_none() && ran.spent.is_none());
    assert_eq!(ran.runs.len(), 4);
    let asked = srv.request_count();
    assert!(asked > 0);
    for (i, (cell, run_id)) in ran.runs.iter().enumerate() {
        assert_eq!(cell.index, i + 1, "in the matrix's order");
        let run = store.run(run_id).unwrap();
        assert_eq!(run.manifest.study.as_deref(), Some("two-axis"));
        assert_eq!(
            run.manifest.display_name.as_deref(),
            Some(cell.name.as_str())
        );
        let scores = nmb_results::stored::latest(&store, run_id).unwrap();
        assert!(scores.is_some(), "cell {} was scored", cell.index);
    }

    // Run again: every cell answered from the store, nothing asked twice.
    let again = run_cells(&study, &cells, &how, &store, &Unwatched).unwrap();
    assert_eq!(again.runs.len(), 4);
    assert_eq!(srv.request_count(), asked);

    // The state file lists every cell's run.
    let state = record(
        &dir.path().join("runs"),
        &study,
        None,
        None,
        None,
        &ran.runs,
    )
    .unwrap();
    assert_eq!(state, dir.path().join("runs/studies/two-axis.json"));
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(state).unwrap()).unwrap();
    assert_eq!(state["runs"].as_array().unwrap().len(), 4);
    assert_eq!(state["runs"][2]["run_id"], ran.runs[2].1.as_str());

    // One report over every run, in the formats the run file asks for, relative to the run file.
    let html = report(&store, &study, &cells, &ran.runs).unwrap();
    assert_eq!(html, dir.path().join("out/report.html"));
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("id=\"two-axis\""));
    assert!(
        !dir.path().join("out/report.json").exists(),
        "only the formats asked for"
    );
    let md = std::fs::read_to_string(dir.path().join("out/report.md")).unwrap();
    let section = md
        .split("## Breadth vs depth")
        .nth(1)
        .expect("the breadth-vs-depth section");
    // Each model's row pairs its own breadth run (the multiple-choice suite) with its own depth run (sample).
    for (model, depth, breadth) in [("A", 0, 2), ("B", 1, 3)] {
        let row = row(section, model);
        let (depth_run, breadth_run) = (&ran.runs[depth].1, &ran.runs[breadth].1);
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(
            cells[4..6],
            [breadth_run.as_str(), depth_run.as_str()],
            "{row}"
        );
    }
}

#[test]
fn a_cap_stops_the_study_before_its_spending_could_pass_it() {
    let dir = tempfile::tempdir().unwrap();
    let srv = server();
    // $1,000 per million tokens: one request (its prompt and up to 1,024 tokens out) may cost about $1.5.
    let priced = text(&srv.url(), "")
        .replace("price = [1.0, 4.0]", "price = [1000.0, 1000.0]")
        .replace("name = \"B\"", "name = \"B\"\nprice = [1000.0, 1000.0]");
    let study = read(&write(dir.path(), &priced)).unwrap();
    let cells = study.cells();
    let store = Arc::new(Store::open_dir(dir.path().join("runs")).unwrap());
    let cap = 5.0;

    let ran = run_cells(
        &study,
        &cells,
        &running(&study, Some(cap)),
        &store,
        &Unwatched,
    )
    .unwrap();
    assert_eq!(ran.models_at_once, 1, "under a cap the cells run in turn");
    let stopped = ran.stopped.expect("the study stopped");
    assert_eq!(
        stopped.cell, 1,
        "the first cell needs more than the cap allows"
    );
    assert!(stopped.reason.contains("cap"), "{}", stopped.reason);
    assert_eq!(ran.runs.len(), 1);
    let spent_now = spent(&store, &study, &cells).unwrap();
    assert_eq!(ran.spent, Some(spent_now));
    assert!(spent_now > 0.0 && spent_now <= cap, "{spent_now}");
    assert!(srv.request_count() > 0);
}
