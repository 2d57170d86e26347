//! The sample suite's report, rendered in headless Chromium: two models run over loopback, scored by nmb-score's
//! engine with the deterministic test judge (rubric, taxonomy, inconclusive matches) and MiniLM BERTScore; the
//! screenshot must show the charts drawn (SVG in the DOM, coloured bar pixels in the image). Also: the
//! leaderboard export's shape and CSV row counts.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_report::{load_run, write_report, ReportOptions, RunData};
use nmb_store::Store;
use nmb_test_support::browser;

fn sample_runs(dir: &std::path::Path) -> Vec<RunData> {
    let store = Arc::new(Store::open_dir(dir.join("runs")).unwrap());
    let suite = nmb_suite::sample::build();
    let skill = BTreeMap::from([("model-a".to_string(), 0.35), ("model-b".to_string(), 0.7)]);
    let server = common::server(common::scripted_model(
        Arc::new(common::AnswerBook::depth(&suite)),
        skill,
    ));
    ["model-a", "model-b"]
        .iter()
        .map(|m| {
            let id = common::run_model(&store, &server, &suite, m, 5);
            let scores = common::judge::score(&store, &server.url(), &id, &suite, 1000);
            load_run(&store, &id, Some(scores)).unwrap()
        })
        .collect()
}

/// Share of pixels in the image that carry one of the chart palette's saturated colours.
fn palette_pixels(png: &std::path::Path) -> f64 {
    let img = image::open(png).unwrap().to_rgb8();
    let palette: Vec<[u8; 3]> = [
        [0x00, 0x72, 0xB2],
        [0xE6, 0x9F, 0x00],
        [0x00, 0x9E, 0x73],
        [0xD5, 0x5E, 0x00],
    ]
    .to_vec();
    let hits = img
        .pixels()
        .filter(|p| {
            palette
                .iter()
                .any(|c| c.iter().zip(p.0.iter()).all(|(a, b)| a.abs_diff(*b) < 12))
        })
        .count();
    hits as f64 / (img.width() * img.height()) as f64
}

#[test]
fn sample_suite_report_renders_its_charts_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let runs = sample_runs(dir.path());
    let mut opts = ReportOptions::new(dir.path().join("report"));
    opts.leaderboard = true;
    opts.bootstrap.resamples = 1000;
    let written = write_report(&runs, &opts).unwrap();
    let html_path = written.html.clone().unwrap();
    let html = std::fs::read_to_string(&html_path).unwrap();
    // pass@1 and pass@5 by level, the rubric profile and the error taxonomy from the judge, and BERTScore when
    // MiniLM is installed (otherwise the chart's place says why it is missing); worst-at-k beside pass@k.
    let charts = if common::judge::minilm().is_some() {
        6
    } else {
        5
    };
    assert_eq!(html.matches("<svg").count(), charts, "one SVG per chart");
    assert!(
        html.contains("id=\"levels\""),
        "a depth suite has its level × family table"
    );
    for title in [
        "pass@1 by level",
        "pass@5 by level",
        "Rubric profile",
        "Error taxonomy",
    ] {
        assert!(html.contains(title), "chart {title}");
    }
    assert_eq!(
        html.matches("<details class=\"case\"").count(),
        13,
        "one section per case"
    );
    assert!(
        html.matches("data:image/png;base64,").count() >= 13,
        "thumbnails"
    );

    // Leaderboard in the site's shape: modelData["1.0"][dataset], every field the site reads.
    let data: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(written.leaderboard_json.as_ref().unwrap()).unwrap(),
    )
    .unwrap();
    for split in ["verified", "lite", "multimodal"] {
        let list = data["1.0"][split]
            .as_array()
            .unwrap_or_else(|| panic!("{split} list"));
        assert_eq!(list.len(), 2, "{split}: one record per model");
        for rec in list {
            for key in nmb_report::leaderboard::SITE_FIELDS {
                assert!(rec.get(key).is_some(), "{split} record has {key}: {rec}");
            }
            for key in ["name", "Accuracy_Pass5", "version"] {
                assert!(rec[key].is_string(), "the site lowercases {key}: {rec}");
            }
            let resolved = rec["resolved"].as_f64().unwrap();
            assert!((0.0..=100.0).contains(&resolved), "percent");
        }
    }
    let js = std::fs::read_to_string(written.leaderboard_js.as_ref().unwrap()).unwrap();
    assert!(
        js.contains("const modelData = {") && js.contains("\"verified\"") && js.contains("\"1.0\"")
    );

    // CSV: one row per sample of both runs, one aggregate row per group.
    let samples: usize = runs.iter().map(|r| r.samples.len()).sum();
    let csv = std::fs::read_to_string(written.csv_samples.as_ref().unwrap()).unwrap();
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    assert_eq!(reader.records().count(), samples);

    let Some(chromium) = browser::chromium() else {
        return;
    };
    let (dom, _) = browser::dump_dom(&chromium, &html_path);
    assert_eq!(
        dom.matches("<svg").count(),
        charts,
        "the charts are in the rendered DOM"
    );
    let png = browser::screenshot_dir().join("sample-report.png");
    browser::screenshot(&chromium, &html_path, &png, 1280, 2800);
    let share = palette_pixels(&png);
    assert!(
        share > 0.005,
        "the charts' coloured bars are visible in the screenshot ({share:.4} of pixels)"
    );
    println!("screenshot: {} (palette pixels {share:.4})", png.display());
}
