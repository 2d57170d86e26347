//! Prompt sensitivity: two models, each run on a breadth suite (multiple choice) and a depth suite (the sample
//! suite) under the built-in templates and under the bundled `no-persona` variant, over loopback. The scripted
//! model `alpha` is strong with the persona and weak without it; `beta` is the same under both. The report must
//! hold one sweep per suite (accuracy for breadth, pass@1 (a) for depth, the numbers the headline shows), alpha's
//! spread, the flip of the two models and Kendall's W, and pair models only under the same template.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_fake_server::{ReceivedPart, ReceivedRequest};
use nmb_plan::Template;
use nmb_report::sweep::SweepMetric;
use nmb_report::{build, load_run, write_report, Prices, ReportOptions, RunData};
use nmb_store::Store;

/// The system message names a role ("... expert"): the built-in templates do, `no-persona` does not.
fn has_persona(req: &ReceivedRequest) -> bool {
    req.messages
        .iter()
        .filter(|m| m.role == "system")
        .flat_map(|m| &m.parts)
        .any(|p| matches!(p, ReceivedPart::Text { text } if text.contains("expert")))
}

#[test]
fn a_sweep_over_two_templates_gives_scores_spreads_flips_and_w() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open_dir(dir.path().join("runs")).unwrap());
    let depth_suite = nmb_suite::sample::build();
    let breadth_suite = common::load_suite(&common::mcq_file(dir.path(), 40));
    let book =
        common::AnswerBook::depth(&depth_suite).merge(common::AnswerBook::choice(&breadth_suite));
    // Skills by model and prompt: alpha loses most of its skill without the persona, beta keeps its own.
    let skill: BTreeMap<String, f64> = [
        ("alpha/breadth", 0.95),
        ("alpha/depth", 0.9),
        ("alpha-plain/breadth", 0.1),
        ("alpha-plain/depth", 0.05),
        ("beta/breadth", 0.5),
        ("beta/depth", 0.5),
        ("beta-plain/breadth", 0.5),
        ("beta-plain/depth", 0.5),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let scripted = common::scripted_model(Arc::new(book), skill);
    let server = common::server(Arc::new(move |req: &ReceivedRequest| {
        let mut seen = req.clone();
        if !has_persona(req) && !req.model.starts_with("judge") {
            seen.model = format!("{}-plain", req.model);
        }
        scripted(&seen)
    }));
    let cfg = nmb_stats::BootstrapConfig {
        resamples: 1000,
        ..Default::default()
    };
    let variants = [
        ("default", None),
        ("no-persona", Template::variant("no-persona")),
    ];
    let mut runs: Vec<RunData> = Vec::new();
    for model in ["alpha", "beta"] {
        for (suite, samples) in [(&breadth_suite, 1), (&depth_suite, 3)] {
            for (label, template) in &variants {
                // A name with markup: it must reach every page escaped.
                let name = format!("<b>{model}</b> [{label}]");
                let id = common::run_model_with(
                    &store,
                    &server,
                    suite,
                    model,
                    samples,
                    template.clone(),
                    Some(name),
                );
                let scores = common::judge::score(&store, &server.url(), &id, suite, cfg.resamples);
                runs.push(load_run(&store, &id, Some(scores)).unwrap());
            }
        }
    }

    let analysis = build(
        &runs,
        &Prices::default(),
        &cfg,
        nmb_results::multiplicity::DEFAULT_ALPHA,
    );
    assert_eq!(analysis.sweep.len(), 2, "one sweep per suite");
    for g in &analysis.sweep {
        let labels: Vec<&str> = g.variants.iter().map(|v| v.label.as_str()).collect();
        assert_eq!(labels, ["default", "no-persona"]);
        let names: Vec<&str> = g.models.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            ["<b>alpha</b>", "<b>beta</b>"],
            "names without the variant"
        );
        let want_metric = if g.suite_id == depth_suite.id {
            SweepMetric::PassAt1
        } else {
            SweepMetric::Accuracy
        };
        assert_eq!(g.metric, want_metric);
        // Each score is the run's own headline number.
        for m in &g.models {
            for (run_id, score) in m.runs.iter().zip(&m.scores) {
                let run = runs
                    .iter()
                    .find(|r| Some(&r.info.run_id) == run_id.as_ref())
                    .unwrap();
                let overall = &run.scores.as_ref().unwrap().overall;
                let headline = match g.metric {
                    SweepMetric::Accuracy => overall.accuracy.as_ref(),
                    SweepMetric::PassAt1 => overall.pass_at_1.unbiased_estimator.as_ref(),
                }
                .unwrap();
                let score = score.as_ref().unwrap();
                assert!((score.value - headline.value).abs() < 1e-12, "{run_id:?}");
                assert!(score.ci_low <= score.value && score.value <= score.ci_high);
            }
        }
        let alpha = &g.models[0];
        let (with, without) = (
            alpha.scores[0].as_ref().unwrap().value,
            alpha.scores[1].as_ref().unwrap().value,
        );
        assert!(with > without + 0.3, "{}: {with} vs {without}", g.suite_id);
        let range = alpha.range.as_ref().unwrap();
        assert!((range.value - (with - without)).abs() < 1e-12);
        assert!(
            range.ci_low > 0.0,
            "a gap this size survives resampling: {range:?}"
        );
        let sd = alpha.sd.as_ref().unwrap();
        assert!(
            (sd.value - range.value / 2f64.sqrt()).abs() < 1e-12,
            "SD of two values"
        );
        // alpha leads with the persona and trails without it.
        let beta = &g.models[1];
        assert!(with > beta.scores[0].as_ref().unwrap().value);
        assert!(without < beta.scores[1].as_ref().unwrap().value);
        assert_eq!(g.rank_flips.len(), 1, "{:?}", g.rank_flips);
        let flip = &g.rank_flips[0];
        assert_eq!(
            (flip.a_ahead.as_slice(), flip.b_ahead.as_slice()),
            (
                &["default".to_string()][..],
                &["no-persona".to_string()][..]
            )
        );
        // Two variants ranking two models in opposite orders: equal rank sums, W = 0.
        let w = g.kendall_w.as_ref().unwrap();
        assert_eq!(w.value, 0.0);
        assert!(0.0 <= w.ci_low && w.ci_high <= 1.0);
    }
    assert_eq!(
        analysis.paired.len(),
        4,
        "alpha vs beta on each suite under each template, never across templates"
    );

    let opts = ReportOptions::new(dir.path().join("report"));
    let written = write_report(&runs, &opts).unwrap();
    let html = std::fs::read_to_string(written.html.as_ref().unwrap()).unwrap();
    assert!(html.contains("id=\"prompt-sensitivity\""));
    assert!(html.contains("Kendall&#39;s W"));
    assert!(!html.contains("<b>alpha</b>") && html.contains("&lt;b&gt;alpha&lt;/b&gt;"));
    let md = std::fs::read_to_string(written.markdown.as_ref().unwrap()).unwrap();
    assert!(md.contains("## Prompt sensitivity") && md.contains("no-persona"));
    let csv = std::fs::read_to_string(written.sweep_csv.as_ref().unwrap()).unwrap();
    let statistics: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(3).unwrap())
        .collect();
    for (statistic, count) in [
        ("score", 8),
        ("range", 4),
        ("sd", 4),
        ("kendall_w", 2),
        ("rank_flip", 2),
    ] {
        assert_eq!(
            statistics.iter().filter(|s| **s == statistic).count(),
            count,
            "{statistic} rows in {csv}"
        );
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(written.json.as_ref().unwrap()).unwrap())
            .unwrap();
    assert_eq!(json["analysis"]["sweep"].as_array().unwrap().len(), 2);
}
