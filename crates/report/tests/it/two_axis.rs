//! The two-axis view: three models, each with a breadth run (multiple choice) and a depth run (the sample
//! suite), all made over loopback against the fake server. The report must show the scatter, one point per
//! model, and the rank correlation with its interval; the three depth runs share a suite, so paired comparisons
//! appear too.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_report::{build, load_run, write_report, Format, Prices, ReportOptions, RunData};
use nmb_store::Store;
use nmb_test_support::browser;

const MODELS: [(&str, f64, f64); 3] = [
    ("alpha", 0.9, 0.25),
    ("beta", 0.6, 0.5),
    ("gamma", 0.3, 0.8),
];

#[test]
fn breadth_and_depth_runs_of_three_models_give_the_scatter_and_the_correlation() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_dir(dir.path().join("runs")).unwrap());
    let depth_suite = nmb_suite::sample::build();
    let breadth_suite = common::load_suite(&common::mcq_file(dir.path(), 40));
    let book =
        common::AnswerBook::depth(&depth_suite).merge(common::AnswerBook::choice(&breadth_suite));
    let mut skill = BTreeMap::new();
    for (m, breadth, depth) in MODELS {
        skill.insert(format!("{m}/breadth"), breadth);
        skill.insert(format!("{m}/depth"), depth);
    }
    let server = common::server(common::scripted_model(Arc::new(book), skill));
    let cfg = nmb_stats::BootstrapConfig {
        resamples: 2000,
        ..Default::default()
    };
    let mut runs: Vec<RunData> = Vec::new();
    for (m, _, _) in MODELS {
        for (suite, samples) in [(&breadth_suite, 1), (&depth_suite, 5)] {
            let id = common::run_model(&store, &server, suite, m, samples);
            let scores = common::judge::score(&store, &server.url(), &id, suite, cfg.resamples);
            runs.push(load_run(&store, &id, Some(scores)).unwrap());
        }
    }

    let analysis = build(
        &runs,
        &Prices::default(),
        &cfg,
        nmb_results::multiplicity::DEFAULT_ALPHA,
    );
    let two = analysis
        .two_axis
        .as_ref()
        .expect("breadth and depth runs for the same models give a two-axis view");
    assert_eq!(two.points.len(), 3, "one point per model");
    let rho = two
        .correlation
        .as_ref()
        .expect("three models give a rank correlation");
    assert_eq!(rho.rho.n, 3);
    assert!(rho.rho.ci_low <= rho.rho.value && rho.rho.value <= rho.rho.ci_high);
    // The scripted skills order the models on each axis; the measured points must follow them.
    let by_model: BTreeMap<&str, (f64, f64)> = two
        .points
        .iter()
        .map(|p| {
            (
                p.model.rsplit(':').next().unwrap(),
                (p.breadth.value, p.depth.value),
            )
        })
        .collect();
    assert!(
        by_model["alpha"].0 > by_model["beta"].0 && by_model["beta"].0 > by_model["gamma"].0,
        "{by_model:?}"
    );
    assert!(
        by_model["alpha"].1 < by_model["beta"].1 && by_model["beta"].1 < by_model["gamma"].1,
        "{by_model:?}"
    );
    assert!(
        rho.rho.value < 0.0,
        "breadth and depth ranks disagree here: {}",
        rho.rho.value
    );
    assert_eq!(
        analysis.paired.len(),
        3 + 3,
        "every pair of models, on each suite"
    );

    let mut opts = ReportOptions::new(dir.path().join("report"));
    opts.bootstrap = cfg;
    opts.formats = [Format::Html, Format::Markdown].into_iter().collect();
    let written = write_report(&runs, &opts).unwrap();
    let html = std::fs::read_to_string(written.html.as_ref().unwrap()).unwrap();
    assert!(html.contains("id=\"two-axis\""), "the two-axis section");
    assert!(
        html.contains("Breadth accuracy vs depth pass@1"),
        "the scatter's title"
    );
    assert_eq!(
        html.matches("class=\"point\"").count(),
        3,
        "three points in the scatter"
    );
    let shown = format!(
        "Spearman rho = {:.2} [95% CI {:.2} to {:.2}]",
        rho.rho.value, rho.rho.ci_low, rho.rho.ci_high
    );
    assert!(
        html.contains(&shown),
        "the correlation with its CI: {shown}"
    );
    assert!(html.contains("id=\"paired\""), "paired comparisons");
    let md = std::fs::read_to_string(written.markdown.as_ref().unwrap()).unwrap();
    assert!(md.contains("## Breadth vs depth") && md.contains(&shown));

    let Some(chromium) = browser::chromium() else {
        return;
    };
    let png = browser::screenshot_dir().join("two-axis-report.png");
    browser::screenshot(&chromium, written.html.as_ref().unwrap(), &png, 1280, 3600);
    println!("screenshot: {}", png.display());
}
