//! The agreement report on fixtures/ratings.csv against values computed independently with SciPy, scikit-learn,
//! krippendorff and pingouin (fixtures/make_reference.py), and checks on the bootstrap intervals.

use std::path::PathBuf;

use nmb_calibration::{analyse, AgreementOptions, AgreementReport, MeasureResult, Ratings};
use nmb_stats::BootstrapConfig;
use serde_json::Value;

const TOL: f64 = 1e-9;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name)
}

fn report(resamples: usize) -> (AgreementReport, Value) {
    let reference: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("reference.json")).unwrap()).unwrap();
    let ratings = Ratings::read_csv(&fixture("ratings.csv")).unwrap();
    let options = AgreementOptions {
        pass_threshold: reference["threshold"].as_f64(),
        bootstrap: BootstrapConfig {
            resamples,
            ..BootstrapConfig::default()
        },
        ..AgreementOptions::default()
    };
    (analyse(&ratings, &options).unwrap(), reference)
}

fn value_of(measures: &[MeasureResult], name: &str) -> Result<f64, String> {
    let m = measures
        .iter()
        .find(|m| serde_json::to_value(m.measure).unwrap() == name)
        .ok_or_else(|| format!("no measure {name}"))?;
    match (&m.estimate, &m.undefined) {
        (Some(e), _) => Ok(e.value),
        (None, why) => Err(format!("undefined: {why:?}")),
    }
}

fn close(what: &str, got: Result<f64, String>, want: &Value) {
    let want = want
        .as_f64()
        .unwrap_or_else(|| panic!("{what}: no reference"));
    let got = got.unwrap_or_else(|e| panic!("{what}: nmb gave no value: {e}"));
    assert!(
        (got - want).abs() < TOL,
        "{what}: nmb {got}, reference {want}"
    );
}

#[test]
fn point_values_match_the_reference_implementations() {
    let (report, reference) = report(200);
    assert_eq!(report.judges, ["judge:alpha", "judge:beta"]);
    assert_eq!(report.clinicians, ["dr_a", "dr_b", "dr_c"]);
    let mut checked = 0;
    for d in &report.dimensions {
        let r = &reference["dimensions"][&d.dimension];
        for p in &d.pairs {
            let want = &r["pairs"][format!("{}|{}", p.a, p.b)];
            for (name, v) in want.as_object().unwrap() {
                close(
                    &format!("{} {}~{} {name}", d.dimension, p.a, p.b),
                    value_of(&p.measures, name),
                    v,
                );
                checked += 1;
            }
        }
        for g in &d.groups {
            for (name, v) in r["groups"][&g.group].as_object().unwrap() {
                close(
                    &format!("{} group {} {name}", d.dimension, g.group),
                    value_of(&g.measures, name),
                    v,
                );
                checked += 1;
            }
        }
        for j in &d.judge_vs_clinicians {
            let want = &r["judge_vs_clinicians"][&j.judge];
            assert_eq!(j.items as u64, want["items"].as_u64().unwrap());
            for (name, v) in want
                .as_object()
                .unwrap()
                .iter()
                .filter(|(k, _)| *k != "items")
            {
                close(
                    &format!("{} {} vs clinicians {name}", d.dimension, j.judge),
                    value_of(&j.measures, name),
                    v,
                );
                checked += 1;
            }
        }
        for c in &d.corrected_pass_rates {
            let want = &r["rogan_gladen"][&c.judge];
            let got = c.result.as_ref().expect("defined on the fixture");
            assert_eq!(c.run_items as u64, want["run_items"].as_u64().unwrap());
            assert_eq!(
                c.calibration_items as u64,
                want["calibration_items"].as_u64().unwrap()
            );
            close("observed", Ok(got.observed), &want["observed"]);
            close("sensitivity", Ok(got.sensitivity), &want["sensitivity"]);
            close("specificity", Ok(got.specificity), &want["specificity"]);
            close("corrected", Ok(got.corrected.value), &want["corrected"]);
            checked += 4;
        }
    }
    // 2 dimensions x (10 pairs x 4 + 3 groups x 3 + 2 judges x 7 + 2 judges x 4).
    assert_eq!(checked, 2 * (10 * 4 + 3 * 3 + 2 * 7 + 2 * 4));
}

#[test]
fn intervals_hold_the_estimate_and_are_reproducible() {
    let (a, _) = report(500);
    let (b, _) = report(500);
    let json = |r: &AgreementReport| serde_json::to_string(r).unwrap();
    assert_eq!(json(&a), json(&b), "same seed, same report");
    for d in &a.dimensions {
        let all = d
            .pairs
            .iter()
            .flat_map(|p| &p.measures)
            .chain(d.groups.iter().flat_map(|g| &g.measures))
            .chain(d.judge_vs_clinicians.iter().flat_map(|j| &j.measures));
        for m in all {
            let e = m.estimate.as_ref().expect("defined on the fixture");
            assert!(e.ci_low <= e.value && e.value <= e.ci_high, "{m:?}");
            assert!(e.ci_low < e.ci_high, "a degenerate interval: {m:?}");
            assert_eq!(e.resamples, Some(500));
        }
    }
}

#[test]
fn undefined_statistics_are_reported_with_a_reason() {
    let csv = "annotator,item,dimension,score\n\
               dr_a,i1,overall,3\ndr_a,i2,overall,3\ndr_a,i3,overall,3\n\
               judge:x,i1,overall,1\njudge:x,i2,overall,4\njudge:x,i3,overall,5\n";
    let ratings = Ratings::from_reader(std::path::Path::new("c.csv"), csv.as_bytes()).unwrap();
    let report = analyse(&ratings, &AgreementOptions::default()).unwrap();
    let pearson = &report.dimensions[0].pairs[0].measures[0];
    assert!(pearson.estimate.is_none());
    assert!(pearson.undefined.is_some(), "{pearson:?}");
    let unknown = analyse(
        &ratings,
        &AgreementOptions {
            dimensions: vec!["safety".into()],
            ..AgreementOptions::default()
        },
    )
    .unwrap_err();
    assert!(
        unknown.contains("no ratings on dimension \"safety\"") && unknown.contains("overall"),
        "{unknown}"
    );
}

/// Criterion marks, judge against clinicians and each clinician against the others, as HealthBench's balanced
/// F1, against scikit-learn's macro F1 in `fixtures/make_criteria.py`.
#[test]
fn criterion_balanced_f1_matches_scikit_learn() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");
    let ratings =
        Ratings::read_csv(&std::path::Path::new(dir).join("criteria_ratings.csv")).unwrap();
    let text = std::fs::read_to_string(format!("{dir}/criteria_reference.json")).unwrap();
    let want: Value = serde_json::from_str(&text).unwrap();
    let options = AgreementOptions {
        bootstrap: BootstrapConfig {
            resamples: 300,
            ..BootstrapConfig::default()
        },
        ..AgreementOptions::default()
    };
    let report = analyse(&ratings, &options).unwrap();
    // Criterion marks are not analysed as rubric dimensions unless named.
    assert!(report.dimensions.is_empty(), "{:?}", report.dimensions);
    let c = report.criteria.as_ref().expect("criteria section");
    assert_eq!((c.criteria, c.items), (4, 40));
    let check = |r: &nmb_calibration::criteria::RaterF1, want: &Value| {
        assert_eq!(
            r.pairs as u64,
            want["pairs"].as_u64().unwrap(),
            "{}",
            r.rater
        );
        let e = r.balanced_f1.as_ref().unwrap();
        let w = want["balanced_f1"].as_f64().unwrap();
        assert!(
            (e.value - w).abs() <= 1e-9,
            "{}: {} vs {w}",
            r.rater,
            e.value
        );
        assert!(e.ci_low <= e.value && e.value <= e.ci_high, "{e:?}");
    };
    assert_eq!(c.judges.len(), 2);
    for r in &c.judges {
        check(r, &want["judges"][&r.rater]);
    }
    assert_eq!(c.clinicians.len(), 3);
    for r in &c.clinicians {
        check(r, &want["clinicians"][&r.rater]);
    }
    assert_eq!(c.by_criterion.len(), 8);
    for r in &c.by_criterion {
        let w = &want["by_criterion"][&r.criterion][&r.judge];
        assert_eq!(r.pairs as u64, w["pairs"].as_u64().unwrap());
        let got = r.balanced_f1.as_ref().unwrap().value;
        assert!(
            (got - w["balanced_f1"].as_f64().unwrap()).abs() <= 1e-9,
            "{} {}",
            r.criterion,
            r.judge
        );
    }
    let shown = nmb_calibration::render_text(&report);
    assert!(
        shown.contains("judge judge:good marks criteria like the clinicians with balanced F1"),
        "{shown}"
    );

    // A mark that is not 0 or 1 is refused with its place.
    let bad = Ratings::from_reader(
        std::path::Path::new("bad.csv"),
        "annotator,item,dimension,score\ndr_a,i1,criterion:x,2\n".as_bytes(),
    )
    .unwrap();
    let e = analyse(&bad, &AgreementOptions::default()).unwrap_err();
    assert!(e.contains("bad.csv") && e.contains("criterion:x"), "{e}");
}
