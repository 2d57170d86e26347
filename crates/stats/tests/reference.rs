//! Point estimates against reference values computed by independent implementations (SciPy, scikit-learn,
//! statsmodels, krippendorff, pingouin, exact fractions) in `fixtures/make_reference.py`, and by the other
//! scripts in `fixtures/` (Kendall's W: `make_concordance.py`).
//!
//! Tolerance is |Δ| ≤ 1e-9 for every closed-form statistic: both sides are a few dozen floating-point
//! operations on small data, so any real disagreement (a wrong formula, tie handling, a dropped item) shows up
//! orders of magnitude above it. p-values and normal quantiles are compared relatively, because they range
//! down to 1e-300 where an absolute bound says nothing.

use nmb_stats::*;
use serde_json::Value;

#[path = "reference/simulation.rs"]
mod simulation;

const ABS: f64 = 1e-9;

fn reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/reference.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"))
}

fn cases<'a>(r: &'a Value, key: &str) -> &'a Vec<Value> {
    let list = r[key]
        .as_array()
        .unwrap_or_else(|| panic!("reference.json has no list {key}"));
    assert!(!list.is_empty(), "reference.json list {key} is empty");
    list
}

fn f(v: &Value) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("expected a number, got {v}"))
}

fn u(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("expected an unsigned integer, got {v}"))
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(f).collect()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_i64().unwrap())
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap().to_string())
        .collect()
}

fn ratings(v: &Value) -> Vec<Vec<Option<f64>>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|row| row.as_array().unwrap().iter().map(Value::as_f64).collect())
        .collect()
}

fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol,
        "{what}: got {got}, reference {want} (|Δ| = {:e})",
        (got - want).abs()
    );
}

fn close_rel(got: f64, want: f64, rel: f64, what: &str) {
    assert!(
        (got - want).abs() <= rel * want.abs() + f64::MIN_POSITIVE,
        "{what}: got {got:e}, reference {want:e}"
    );
}

#[test]
fn records_versions() {
    let r = reference();
    for name in ["scipy", "scikit-learn", "krippendorff", "pingouin", "numpy"] {
        assert!(
            r["versions"][name].is_string(),
            "reference.json does not record the {name} version"
        );
    }
}

#[test]
fn pass_at_k_matches_exact_fractions() {
    let r = reference();
    for c in cases(&r, "pass_at_k") {
        let (n, correct, k) = (
            u(&c["n"]) as usize,
            u(&c["c"]) as usize,
            u(&c["k"]) as usize,
        );
        close(
            pass_at_k(n, correct, k).unwrap(),
            f(&c["value"]),
            1e-12,
            &format!("pass@{k} n={n} c={correct}"),
        );
    }
}

#[test]
fn mcnemar_matches_scipy_binomtest() {
    let r = reference();
    for c in cases(&r, "mcnemar") {
        let (b, cc) = (u(&c["only_a"]), u(&c["only_b"]));
        close_rel(
            mcnemar_exact(b, cc),
            f(&c["p_value"]),
            1e-9,
            &format!("McNemar b={b} c={cc}"),
        );
    }
}

#[test]
fn normal_quantile_matches_scipy() {
    let r = reference();
    for c in cases(&r, "normal_quantile") {
        let p = f(&c["p"]);
        close_rel(
            normal_quantile(p).unwrap(),
            f(&c["z"]),
            1e-12,
            &format!("normal quantile at {p}"),
        );
    }
}

#[test]
fn wilson_matches_statsmodels() {
    let r = reference();
    for c in cases(&r, "wilson") {
        let e = wilson(u(&c["successes"]), u(&c["n"]), f(&c["level"])).unwrap();
        let what = format!("Wilson {} of {} at {}", c["successes"], c["n"], c["level"]);
        close(e.ci_low, f(&c["low"]), 1e-12, &what);
        close(e.ci_high, f(&c["high"]), 1e-12, &what);
    }
}

#[test]
fn correlations_match_scipy() {
    let r = reference();
    for c in cases(&r, "correlation") {
        let (x, y, name) = (
            floats(&c["x"]),
            floats(&c["y"]),
            c["name"].as_str().unwrap(),
        );
        close(
            pearson(&x, &y).unwrap(),
            f(&c["pearson"]),
            ABS,
            &format!("Pearson {name}"),
        );
        close(
            spearman(&x, &y).unwrap(),
            f(&c["spearman"]),
            ABS,
            &format!("Spearman {name}"),
        );
    }
}

#[test]
fn kappas_match_scikit_learn() {
    let r = reference();
    for c in cases(&r, "cohen_kappa") {
        let got = cohen_kappa(&strings(&c["a"]), &strings(&c["b"])).unwrap();
        close(
            got,
            f(&c["kappa"]),
            ABS,
            &format!("Cohen's kappa {}", c["name"]),
        );
    }
    for c in cases(&r, "quadratic_kappa") {
        let got = quadratic_kappa(&ints(&c["a"]), &ints(&c["b"])).unwrap();
        close(
            got,
            f(&c["kappa"]),
            ABS,
            &format!("quadratic kappa {}", c["name"]),
        );
    }
}

#[test]
fn krippendorff_alpha_matches_the_krippendorff_package() {
    let r = reference();
    for c in cases(&r, "krippendorff_alpha") {
        let items = ratings(&c["items"]);
        let name = c["name"].as_str().unwrap();
        close(
            krippendorff_alpha(&items, AlphaLevel::Interval).unwrap(),
            f(&c["interval"]),
            ABS,
            &format!("alpha interval {name}"),
        );
        close(
            krippendorff_alpha(&items, AlphaLevel::Nominal).unwrap(),
            f(&c["nominal"]),
            ABS,
            &format!("alpha nominal {name}"),
        );
    }
}

#[test]
fn icc_matches_pingouin_and_anova() {
    let r = reference();
    for c in cases(&r, "icc_2_1") {
        let items: Vec<Vec<f64>> = c["items"].as_array().unwrap().iter().map(floats).collect();
        let got = icc_2_1(&items).unwrap();
        let name = c["name"].as_str().unwrap();
        close(
            got,
            f(&c["icc2_pingouin"]),
            ABS,
            &format!("ICC(2,1) vs pingouin {name}"),
        );
        close(
            got,
            f(&c["icc2_anova"]),
            ABS,
            &format!("ICC(2,1) vs numpy ANOVA {name}"),
        );
    }
}

#[test]
fn agreement_entry_point_gives_the_same_points() {
    let r = reference();
    let cfg = BootstrapConfig {
        resamples: 200,
        ..BootstrapConfig::default()
    };
    for c in cases(&r, "krippendorff_alpha") {
        let items = ratings(&c["items"]);
        close(
            agreement(Measure::AlphaInterval, &items, &cfg)
                .unwrap()
                .value,
            f(&c["interval"]),
            ABS,
            "agreement alpha",
        );
        close(
            agreement(Measure::AlphaNominal, &items, &cfg)
                .unwrap()
                .value,
            f(&c["nominal"]),
            ABS,
            "agreement alpha",
        );
    }
    for c in cases(&r, "correlation") {
        let items: Vec<Vec<Option<f64>>> = floats(&c["x"])
            .into_iter()
            .zip(floats(&c["y"]))
            .map(|(x, y)| vec![Some(x), Some(y)])
            .collect();
        close(
            agreement(Measure::Pearson, &items, &cfg).unwrap().value,
            f(&c["pearson"]),
            ABS,
            "agreement pearson",
        );
        close(
            agreement(Measure::Spearman, &items, &cfg).unwrap().value,
            f(&c["spearman"]),
            ABS,
            "agreement spearman",
        );
    }
    for c in cases(&r, "quadratic_kappa") {
        let items: Vec<Vec<Option<f64>>> = ints(&c["a"])
            .into_iter()
            .zip(ints(&c["b"]))
            .map(|(a, b)| vec![Some(a as f64), Some(b as f64)])
            .collect();
        close(
            agreement(Measure::QuadraticKappa, &items, &cfg)
                .unwrap()
                .value,
            f(&c["kappa"]),
            ABS,
            "agreement qwk",
        );
    }
}

#[test]
fn permutation_p_matches_brute_force() {
    let r = reference();
    let cfg = BootstrapConfig {
        resamples: 200,
        ..BootstrapConfig::default()
    };
    for c in cases(&r, "spearman_permutation") {
        let got = model_rank_correlation(&floats(&c["x"]), &floats(&c["y"]), &cfg).unwrap();
        close(got.rho.value, f(&c["rho"]), ABS, "rank correlation rho");
        assert!(got.permutation.exact);
        assert_eq!(got.permutation.permutations, u(&c["permutations"]));
        close(
            got.permutation.p_value,
            f(&c["p_value"]),
            1e-12,
            "permutation p",
        );
    }
}

#[test]
fn rogan_gladen_matches_exact_fractions() {
    let r = reference();
    let cfg = BootstrapConfig {
        resamples: 200,
        ..BootstrapConfig::default()
    };
    let flags = |yes: u64, n: u64| (0..n).map(|i| i < yes).collect::<Vec<bool>>();
    for c in cases(&r, "rogan_gladen") {
        let run = flags(u(&c["run_pass"]), u(&c["run_n"]));
        let mut calibration: Vec<(bool, bool)> =
            flags(u(&c["judge_pass_given_pass"]), u(&c["clinician_pass"]))
                .into_iter()
                .map(|j| (j, true))
                .collect();
        calibration.extend(
            flags(u(&c["judge_fail_given_fail"]), u(&c["clinician_fail"]))
                .into_iter()
                .map(|j| (!j, false)),
        );
        let got = corrected_pass_rate(&run, &calibration, &cfg).unwrap();
        close(
            got.corrected.value,
            f(&c["corrected"]),
            1e-12,
            "Rogan-Gladen",
        );
    }
}

/// Durkalski's cluster-adjusted McNemar against `fixtures/make_clustered_mcnemar.py` (NumPy and SciPy).
#[test]
fn clustered_mcnemar_matches_the_reference() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/clustered_mcnemar.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let r: Value = serde_json::from_str(&text).unwrap();
    let list = r["cases"].as_array().unwrap();
    assert!(list.len() >= 10);
    for c in list {
        let bools = |v: &Value| -> Vec<bool> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_bool().unwrap())
                .collect()
        };
        let clusters = strings(&c["clusters"]);
        let clusters: Vec<&str> = clusters.iter().map(String::as_str).collect();
        let m = mcnemar_clustered(&bools(&c["a"]), &bools(&c["b"]), &clusters).unwrap();
        let name = c["name"].as_str().unwrap();
        match c["statistic"].as_f64() {
            Some(x2) => assert!((m.statistic.unwrap() - x2).abs() <= ABS, "{name}: X²"),
            None => assert_eq!(m.statistic, None, "{name}"),
        }
        let want = f(&c["p_value"]);
        assert!(
            (m.p_value - want).abs() <= 1e-9 * want,
            "{name}: p {} vs {want}",
            m.p_value
        );
        assert_eq!(m.test, McNemarTest::ClusterAdjusted);
    }
}

/// Kendall's W with the ties correction, and rank flips, against `fixtures/make_concordance.py` (by hand in
/// NumPy, cross-checked there against SciPy's tie-corrected Friedman statistic, chi2 = m (n - 1) W).
#[test]
fn kendall_w_matches_the_reference() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/concordance.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let r: Value = serde_json::from_str(&text).unwrap();
    let list = cases(&r, "kendall_w");
    assert!(list.len() >= 10);
    for c in list {
        let name = c["name"].as_str().unwrap();
        let scores: Vec<Vec<f64>> = c["scores"].as_array().unwrap().iter().map(floats).collect();
        match c["w"].as_f64() {
            Some(w) => close(kendall_w(&scores).unwrap(), w, ABS, name),
            None => assert!(kendall_w(&scores).is_err(), "{name}: W is undefined"),
        }
        let want: Vec<RankFlip> = c["flips"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| RankFlip {
                a: u(&x["a"]) as usize,
                b: u(&x["b"]) as usize,
                a_ahead: x["a_ahead"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| u(v) as usize)
                    .collect(),
                b_ahead: x["b_ahead"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|v| u(v) as usize)
                    .collect(),
            })
            .collect();
        assert_eq!(rank_flips(&scores).unwrap(), want, "{name}: rank flips");
    }
}

fn classification_reference() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/classification.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path} is not JSON: {e}"))
}

/// Classification with abstentions against scikit-learn (`fixtures/make_classification.py`).
#[test]
fn classification_matches_scikit_learn() {
    let r = classification_reference();
    for (i, c) in cases(&r, "classification").iter().enumerate() {
        let classes = u(&c["classes"]) as usize;
        let truth: Vec<usize> = c["truth"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| u(v) as usize)
            .collect();
        let pred: Vec<Option<usize>> = c["pred"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().map(|p| p as usize))
            .collect();
        let m = classification(&truth, &pred, classes).unwrap();
        for (name, got) in [
            ("accuracy", m.accuracy),
            ("balanced_accuracy", m.balanced_accuracy),
            ("macro_f1", m.macro_f1),
            ("weighted_f1", m.weighted_f1),
            ("abstention_rate", m.abstention_rate),
        ] {
            let want = f(&c[name]);
            assert!(
                (got - want).abs() <= ABS,
                "case {i} {name}: {got} vs scikit-learn {want}"
            );
        }
        for (k, pc) in m.per_class.iter().enumerate() {
            assert!(
                (pc.precision - f(&c["precision"][k])).abs() <= ABS,
                "case {i} class {k} precision"
            );
            assert!(
                (pc.recall - f(&c["recall"][k])).abs() <= ABS,
                "case {i} class {k} recall"
            );
            assert!(
                (pc.f1 - f(&c["f1"][k])).abs() <= ABS,
                "case {i} class {k} f1"
            );
            assert_eq!(
                pc.support,
                u(&c["support"][k]),
                "case {i} class {k} support"
            );
        }
    }
}

/// ECE, adaptive ECE (by hand in NumPy), Brier and AUROC (scikit-learn) on the same answers.
#[test]
fn calibration_matches_scikit_learn_and_a_hand_computed_ece() {
    let r = classification_reference();
    for (i, c) in cases(&r, "calibration").iter().enumerate() {
        let conf = floats(&c["conf"]);
        let correct: Vec<bool> = c["correct"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_bool().unwrap())
            .collect();
        let close = |name: &str, got: f64| {
            let want = f(&c[name]);
            assert!(
                (got - want).abs() <= ABS,
                "case {i} {name}: {got} vs {want}"
            );
        };
        close("ece", ece(&conf, &correct, 10).unwrap());
        close("adaptive_ece", adaptive_ece(&conf, &correct, 10).unwrap());
        close("brier", brier(&conf, &correct).unwrap());
        match auroc(&conf, &correct).unwrap() {
            Some(a) => close("auroc", a),
            None => assert!(c["auroc"].is_null(), "case {i}: AUROC is defined"),
        }
        let counts: Vec<u64> = reliability(&conf, &correct, 10)
            .unwrap()
            .iter()
            .map(|b| b.count as u64)
            .collect();
        let want: Vec<u64> = c["bin_counts"].as_array().unwrap().iter().map(u).collect();
        assert_eq!(counts, want, "case {i} bin counts");
    }
}

#[test]
fn classification_and_calibration_intervals_cover_their_estimates() {
    let r = classification_reference();
    let c = &cases(&r, "classification")[1];
    let truth: Vec<usize> = c["truth"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| u(v) as usize)
        .collect();
    let pred: Vec<Option<usize>> = c["pred"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().map(|p| p as usize))
        .collect();
    // Pairs of items share a case: the interval must resample cases, not items.
    let clusters: Vec<Vec<usize>> = (0..truth.len())
        .collect::<Vec<_>>()
        .chunks(2)
        .map(<[usize]>::to_vec)
        .collect();
    let cfg = BootstrapConfig {
        resamples: 500,
        ..BootstrapConfig::default()
    };
    let est =
        classification_estimates(&truth, &pred, 5, &Design::Clusters(clusters), &cfg).unwrap();
    for e in [
        &est.accuracy,
        &est.balanced_accuracy,
        &est.macro_f1,
        &est.weighted_f1,
    ] {
        assert!(
            e.ci_low <= e.value && e.value <= e.ci_high && e.ci_high - e.ci_low > 0.0,
            "{e:?}"
        );
    }
    assert!((est.accuracy.value - f(&c["accuracy"])).abs() <= ABS);
    // Per class: the defined point estimates are scikit-learn's; an undefined one (a class never predicted has
    // no precision) is `None`, where scikit-learn reports 0 by its zero_division convention.
    for (k, pc) in est.per_class.iter().enumerate() {
        for (name, e) in [
            ("precision", &pc.precision),
            ("recall", &pc.recall),
            ("f1", &pc.f1),
        ] {
            match e {
                Some(e) => {
                    assert!((e.value - f(&c[name][k])).abs() <= ABS, "class {k} {name}");
                    assert!(e.ci_low <= e.value && e.value <= e.ci_high, "{e:?}");
                }
                None => assert_eq!(f(&c[name][k]), 0.0, "class {k} {name}"),
            }
        }
        assert_eq!(pc.support, u(&c["support"][k]));
    }
    // The shared-resample bootstrap gives each statistic exactly what bootstrap() alone gives.
    let design = Design::Units(truth.len());
    let acc = |idx: &[usize]| {
        Some(idx.iter().filter(|&&i| pred[i] == Some(truth[i])).count() as f64 / idx.len() as f64)
    };
    let alone = bootstrap(&design, &cfg, acc).unwrap();
    let many = bootstrap_many(&design, &cfg, 2, |idx| vec![acc(idx), Some(0.5)]).unwrap();
    assert_eq!(many[0], alone);
    let k = &cases(&r, "calibration")[1];
    let conf = floats(&k["conf"]);
    let correct: Vec<bool> = k["correct"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_bool().unwrap())
        .collect();
    let cal = calibration_estimates(&conf, &correct, 10, &Design::Units(conf.len()), &cfg).unwrap();
    assert!((cal.brier.value - f(&k["brier"])).abs() <= ABS);
    assert!(cal.auroc.is_some() && cal.bins.len() == 10);
}

/// Isotonic regression against scikit-learn's `IsotonicRegression(out_of_bounds="clip")`
/// (`fixtures/make_isotonic.py`): the fitted values at every distinct x, and predictions between and beyond.
#[test]
fn isotonic_matches_scikit_learn() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/isotonic.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let r: Value = serde_json::from_str(&text).unwrap();
    let list = cases(&r, "isotonic");
    assert!(list.len() >= 15);
    for c in list {
        let name = c["name"].as_str().unwrap();
        let weights = c["weights"].as_array().map(|_| floats(&c["weights"]));
        let fit = isotonic(&floats(&c["x"]), &floats(&c["y"]), weights.as_deref())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(fit.xs, floats(&c["xs"]), "{name}: distinct x");
        for (got, want) in fit.fitted.iter().zip(floats(&c["fitted"])) {
            close(*got, want, 1e-9, name);
        }
        for (q, want) in floats(&c["queries"])
            .into_iter()
            .zip(floats(&c["predicted"]))
        {
            close(fit.predict(q), want, 1e-9, &format!("{name} at {q}"));
        }
    }
}

/// Bradley–Terry strengths with Davidson's ties against `fixtures/make_bradley_terry.py` (the likelihood
/// maximised by SciPy, plain cases cross-checked there with choix).
#[test]
fn bradley_terry_matches_the_reference() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/bradley_terry.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let r: Value = serde_json::from_str(&text).unwrap();
    let list = cases(&r, "bradley_terry");
    assert!(list.len() >= 10);
    for c in list {
        let name = c["name"].as_str().unwrap();
        let votes: Vec<(usize, usize, Preference)> = (c["votes"].as_array().unwrap().iter())
            .map(|v| {
                let outcome = match v[2].as_str().unwrap() {
                    "a" => Preference::AWins,
                    "b" => Preference::BWins,
                    _ => Preference::Tie,
                };
                (u(&v[0]) as usize, u(&v[1]) as usize, outcome)
            })
            .collect();
        let s = bradley_terry(u(&c["items"]) as usize, &votes)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        for (got, want) in s.theta.iter().zip(floats(&c["theta"])) {
            close(*got, want, 1e-9, name);
        }
        close(s.nu, c["nu"].as_f64().unwrap(), 1e-9, name);
        close(
            s.log_likelihood,
            c["log_likelihood"].as_f64().unwrap(),
            1e-9,
            name,
        );
    }
}

/// Style-controlled Bradley–Terry with Davidson's ties against `fixtures/make_bradley_terry_styled.py` (the
/// likelihood maximised by SciPy; cases without ties cross-checked there with scikit-learn's logistic regression).
#[test]
fn styled_bradley_terry_matches_the_reference() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/fixtures/bradley_terry_styled.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let r: Value = serde_json::from_str(&text).unwrap();
    let list = cases(&r, "bradley_terry_styled");
    assert!(list.len() >= 10);
    for c in list {
        let name = c["name"].as_str().unwrap();
        let votes: Vec<(usize, usize, Preference)> = (c["votes"].as_array().unwrap().iter())
            .map(|v| {
                let outcome = match v[2].as_str().unwrap() {
                    "a" => Preference::AWins,
                    "b" => Preference::BWins,
                    _ => Preference::Tie,
                };
                (u(&v[0]) as usize, u(&v[1]) as usize, outcome)
            })
            .collect();
        let rows: Vec<Vec<f64>> = c["covariates"]
            .as_array()
            .unwrap()
            .iter()
            .map(floats)
            .collect();
        let s = bradley_terry_styled(u(&c["items"]) as usize, &votes, &rows)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (theta, beta) = (floats(&c["theta"]), floats(&c["beta"]));
        assert_eq!(
            (s.theta.len(), s.beta.len()),
            (theta.len(), beta.len()),
            "{name}"
        );
        for (got, want) in s.theta.iter().zip(theta).chain(s.beta.iter().zip(beta)) {
            close(*got, want, 1e-9, name);
        }
        close(s.nu, f(&c["nu"]), 1e-9, name);
        close(s.log_likelihood, f(&c["log_likelihood"]), 1e-9, name);
    }
}

/// The logistic fit and the corrected rates through the isotonic and logistic maps against scikit-learn
/// (`fixtures/make_calibrated.py`).
#[test]
fn calibrated_rates_match_scikit_learn() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/calibrated.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let r: Value = serde_json::from_str(&text).unwrap();
    let list = cases(&r, "calibrated");
    assert!(list.len() >= 8);
    for c in list {
        let name = c["name"].as_str().unwrap();
        let reviewed: Vec<(f64, bool)> = c["reviewed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (f(&p[0]), p[1].as_bool().unwrap()))
            .collect();
        let unreviewed = floats(&c["unreviewed"]);
        let x: Vec<f64> = reviewed.iter().map(|p| p.0).collect();
        let y: Vec<bool> = reviewed.iter().map(|p| p.1).collect();
        let fit = logistic(&x, &y).unwrap_or_else(|| panic!("{name}: no logistic fit"));
        close(
            fit.intercept,
            f(&c["intercept"]),
            1e-9,
            &format!("{name}: intercept"),
        );
        close(fit.slope, f(&c["slope"]), 1e-9, &format!("{name}: slope"));
        let cfg = BootstrapConfig {
            resamples: 10,
            ..Default::default()
        };
        let rate = calibrated_rate(&unreviewed, &reviewed, &cfg).unwrap();
        close(
            rate.corrected.value,
            f(&c["isotonic_rate"]),
            1e-9,
            &format!("{name}: isotonic rate"),
        );
        close(
            rate.logistic.unwrap(),
            f(&c["logistic_rate"]),
            1e-9,
            &format!("{name}: logistic rate"),
        );
    }
}

/// A judge's test–retest ICC, Fleiss' kappa between its repeats, its length slope at a fixed clinician grade,
/// its self-preference gap and the paired shift of showing it more against `fixtures/make_stability.py` (NumPy
/// formulas and least squares).
#[test]
fn stability_matches_the_reference() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/stability.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let r: Value = serde_json::from_str(&text).unwrap();
    let cfg = BootstrapConfig {
        resamples: 50,
        ..Default::default()
    };
    let matrix =
        |v: &Value| -> Vec<Vec<f64>> { v.as_array().unwrap().iter().map(floats).collect() };
    for c in cases(&r, "retest") {
        let scores = matrix(&c["scores"]);
        let name = c["name"].as_str().unwrap();
        let e = retest_icc(&scores, 0.95).unwrap();
        close(e.value, f(&c["icc_2_1"]), ABS, name);
        // The interval's ends go through F quantiles; scipy and statrs invert the incomplete beta separately.
        close(e.ci_low, f(&c["ci_low"]), 1e-7, name);
        close(e.ci_high, f(&c["ci_high"]), 1e-7, name);
    }
    for c in cases(&r, "kappa") {
        let codes: Vec<Vec<i64>> = c["codes"].as_array().unwrap().iter().map(ints).collect();
        close(
            fleiss_kappa(&codes).unwrap(),
            f(&c["fleiss_kappa"]),
            ABS,
            c["name"].as_str().unwrap(),
        );
    }
    for c in cases(&r, "slope") {
        let score = floats(&c["score"]);
        let design = Design::units(score.len());
        let e = length_slope(
            &score,
            &floats(&c["log2_words"]),
            &ints(&c["grade"]),
            &design,
            &cfg,
        )
        .unwrap();
        close(e.value, f(&c["slope"]), ABS, c["name"].as_str().unwrap());
    }
    for c in cases(&r, "gap") {
        let residual = floats(&c["residual"]);
        let own: Vec<bool> = c["own"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b.as_bool().unwrap())
            .collect();
        let e = group_gap(&residual, &own, &Design::units(own.len()), &cfg).unwrap();
        close(e.value, f(&c["gap"]), ABS, c["name"].as_str().unwrap());
    }
    let shifts = cases(&r, "shift");
    assert!(shifts.len() >= 5, "too few paired-shift cases in {path}");
    for c in shifts {
        let (shown, hidden) = (floats(&c["shown"]), floats(&c["hidden"]));
        let name = c["name"].as_str().unwrap();
        let e = paired_shift(
            &shown,
            &hidden,
            f(&c["pass"]),
            &Design::units(shown.len()),
            &cfg,
        )
        .unwrap();
        close(e.mean_difference.value, f(&c["mean_difference"]), ABS, name);
        close(e.flip_share.value, f(&c["flip_share"]), ABS, name);
    }
}

#[path = "support/simulation.rs"]
mod judge_simulation;
/// Balanced F1 of met / not-met decisions against scikit-learn's macro F1 (`fixtures/make_balanced_f1.py`),
/// every (grader, reviewer) pair counted as HealthBench's meta-evaluation counts them.
#[test]
fn balanced_f1_matches_scikit_learn() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/balanced_f1.json");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {path}: {e}"));
    let r: Value = serde_json::from_str(&text).unwrap();
    let list = r["cases"].as_array().unwrap();
    assert!(list.len() >= 10, "too few cases in {path}");
    for (n, c) in list.iter().enumerate() {
        let items: Vec<Vec<(bool, bool)>> = c["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|it| {
                let grader = it["grader"].as_bool().unwrap();
                it["reviewers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|r| (grader, r.as_bool().unwrap()))
                    .collect()
            })
            .collect();
        let flat: Vec<(bool, bool)> = items.iter().flatten().copied().collect();
        let want = f(&c["balanced_f1"]);
        close(
            balanced_f1(&flat).unwrap(),
            want,
            ABS,
            &format!("balanced F1, case {n}"),
        );
        let est = balanced_f1_estimate(
            &items,
            &Design::units(items.len()),
            &BootstrapConfig {
                resamples: 200,
                ..BootstrapConfig::default()
            },
        )
        .unwrap();
        close(
            est.value,
            want,
            ABS,
            &format!("balanced F1 estimate, case {n}"),
        );
        assert!(
            est.ci_low <= est.value && est.value <= est.ci_high,
            "{est:?}"
        );
    }
}

#[path = "reference/multiplicity.rs"]
mod multiplicity;
#[path = "reference/power.rs"]
mod power;
#[path = "reference/subgroups.rs"]
mod subgroups;
#[path = "reference/worst_at_k.rs"]
mod worst_at_k;
