//! The table sections (`sections::under_headline`), one group of tests per section, each on real runs over
//! loopback.
//!
//! Errored samples by family: a run whose first calls fail (not retried) has errored samples; the report shows,
//! per family, errored samples over all samples with a Wilson interval, counting no wrong answer as errored. A
//! run with no errored sample has no such section.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_report::{load_run, write_report, Format, ReportOptions, RunData};
use nmb_results::SampleStatus;
use nmb_store::Store;

/// One run of the sample suite by a half-skilled model, its first `faults` calls failing with a 400 that the
/// scheduler does not retry.
fn run(dir: &std::path::Path, faults: usize) -> RunData {
    let store = Arc::new(Store::open_dir(dir.join("runs")).unwrap());
    let suite = nmb_suite::sample::build();
    let skill = BTreeMap::from([("model-e".to_string(), 0.5)]);
    let server = common::server(common::scripted_model(
        Arc::new(common::AnswerBook::depth(&suite)),
        skill,
    ));
    let schedule = vec!["noretry:400"; faults].join(",");
    server.push_faults(nmb_fake_server::parse_schedule(&schedule).unwrap());
    let id = common::run_model(&store, &server, &suite, "model-e", 2);
    let scores = common::judge::score(&store, &server.url(), &id, &suite, 200);
    load_run(&store, &id, Some(scores)).unwrap()
}

fn report(dir: &std::path::Path, run: RunData) -> (serde_json::Value, String, String) {
    let mut opts = ReportOptions::new(dir.join("report"));
    opts.formats = [Format::Html, Format::Markdown, Format::Json].into();
    opts.bootstrap.resamples = 200;
    let w = write_report(&[run], &opts).unwrap();
    let json = std::fs::read_to_string(w.json.unwrap()).unwrap();
    (
        serde_json::from_str(&json).unwrap(),
        std::fs::read_to_string(w.markdown.unwrap()).unwrap(),
        std::fs::read_to_string(w.html.unwrap()).unwrap(),
    )
}

#[test]
fn errored_samples_by_family_have_their_share_and_wilson_interval_apart_from_wrong_answers() {
    let dir = tempfile::tempdir().unwrap();
    let run = run(dir.path(), 7);
    let samples = run.scores.as_ref().unwrap().samples.clone();
    // What the section must say, counted here from the score report's samples.
    let mut expected: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for s in &samples {
        let e = expected.entry(s.family.as_str().to_string()).or_default();
        e.0 += 1;
        e.1 += u64::from(s.status == SampleStatus::Errored);
        e.2 += u64::from(s.correct == Some(false));
    }
    let errored: u64 = expected.values().map(|e| e.1).sum();
    let wrong: u64 = expected.values().map(|e| e.2).sum();
    assert!(errored > 0, "the failed calls left errored samples");
    assert_eq!(
        errored, run.summary.samples_errored,
        "the store counts the same"
    );
    assert!(wrong > 0, "the half-skilled model answers some wrong");

    let (json, md, html) = report(dir.path(), run);
    let rows = json["sections"]["errored-by-family"].as_array().unwrap();
    assert_eq!(rows.len(), expected.len(), "one row per family: {rows:?}");
    for row in rows {
        let family = row["family"].as_str().unwrap();
        let (n, e, _) = expected[family];
        assert_eq!(row["samples"].as_u64(), Some(n), "{family}");
        assert_eq!(
            row["errored"].as_u64(),
            Some(e),
            "{family}: wrong answers are not errored"
        );
        let want = nmb_stats::wilson(e, n, 0.95).unwrap();
        let share = &row["share"];
        assert_eq!(
            share["value"].as_f64(),
            Some(e as f64 / n as f64),
            "{family}"
        );
        assert_eq!(share["ci_low"].as_f64(), Some(want.ci_low), "{family}");
        assert_eq!(share["ci_high"].as_f64(), Some(want.ci_high), "{family}");
        assert!(want.ci_low < want.ci_high);
    }
    assert!(md.contains("### Errored samples by family"), "{md}");
    assert!(html.contains("<h3 id=\"errored-by-family\">Errored samples by family</h3>"));
}

#[test]
fn a_run_without_errored_samples_has_no_errored_by_family_section() {
    let dir = tempfile::tempdir().unwrap();
    let (json, md, html) = report(dir.path(), run(dir.path(), 0));
    assert!(json.get("sections").is_none(), "{}", json["sections"]);
    assert!(!md.contains("Errored samples by family"));
    assert!(!html.contains("errored-by-family"));
}
