//! `nmb review create|status|export|revoke`, `nmb agreement --review` and the report's "Judges against
//! clinicians" section, on a run of the sample suite scored by a scripted judge on a loopback server. The
//! clinicians' grades are written through the store's API, as the reviewer pages write them; the test works out
//! from the stored report what nmb must then print (each judge's observed pass rate, sensitivity and
//! specificity) and checks nmb's numbers against its own.

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_fake_server::{Config, FakeServer, ReceivedRequest, Reply};
use nmb_store::{Grade, Store};
use serde_json::Value;

use crate::common::*;

/// A scripted judge on a loopback server: rubric scores that vary with the answer (1 to 5), and `equivalent` as
/// its answer to every "are these the same diagnosis?" question.
pub(crate) fn judge_server(equivalent: bool) -> FakeServer {
    let reply = move |req: &ReceivedRequest| {
        let text = req.all_text();
        let answer = if text.contains("Candidate") && text.contains("\"equivalent\"") {
            format!(r#"{{"equivalent": {equivalent}, "rationale": "scripted"}}"#)
        } else if text.contains("Grade the MODEL ANSWER") {
            let s = (req.conversation_sha256.as_bytes()[0] % 5) + 1;
            format!(
                r#"{{"scores": {{"diagnostic_correctness": {s}, "multimodal_integration": {s}, "differential_reasoning": {s}, "lesion_localisation": {s}, "clinical_safety": {s}}}, "overall": {s}, "rationale": "scripted"}}"#
            )
        } else {
            r#"{"category": "knowledge_gap", "justification": "scripted"}"#.to_string()
        };
        Reply::Texts(vec![answer])
    };
    FakeServer::start_in_background(
        Config {
            responder: Arc::new(reply),
            ..Config::default()
        },
        1,
    )
    .unwrap()
}

/// The scored run: item key -> (grader's correctness, judge's overall).
fn judged(report: &Value) -> BTreeMap<String, (bool, u8)> {
    let run = report["run_id"].as_str().unwrap();
    let mut out = BTreeMap::new();
    for s in report["samples"].as_array().unwrap() {
        let (Some(correct), Some(overall)) = (
            s["correct"].as_bool(),
            s["rubric"]["judges"][0]["overall"].as_u64(),
        ) else {
            continue;
        };
        let key = format!(
            "{run}/{}#{}",
            s["task_id"].as_str().unwrap(),
            s["sample_index"]
        );
        out.insert(key, (correct, overall as u8));
    }
    out
}

/// Clinician grades that mostly follow the automatic ones: every third item of each reviewer is flipped.
fn grade_all(
    store: &Store,
    set: &str,
    reviewer: &str,
    truth: &BTreeMap<String, (bool, u8)>,
) -> usize {
    let mut position = 1;
    while let Some(a) = store.assigned_item(set, reviewer, position).unwrap() {
        let key = format!(
            "{}/{}#{}",
            a.item.run_id, a.item.task_id, a.item.sample_index
        );
        let (correct, overall) = truth[&key];
        let flip = position % 3 == 0;
        let grade = Grade {
            verdict: Some(
                if correct != flip {
                    "correct"
                } else {
                    "incorrect"
                }
                .into(),
            ),
            scores: [(
                "overall".to_string(),
                if flip { 5 - overall.min(5) } else { overall },
            )]
            .into(),
            taxonomy: None,
            comment: Some(format!("graded by {reviewer}")),
            criteria: Default::default(),
        };
        let hash = store.review_set(set).unwrap().unwrap().rubric_hash;
        store
            .append_grade(set, reviewer, a.item.item_no, &hash, &grade)
            .unwrap();
        position += 1;
    }
    (position - 1) as usize
}

/// What a corrected pass rate row must say, computed here: (observed, sensitivity, specificity).
fn expected_rates(run: &[bool], pairs: &[(bool, bool)]) -> (f64, f64, f64) {
    let share = |v: &[bool]| v.iter().filter(|b| **b).count() as f64 / v.len() as f64;
    let pos: Vec<bool> = pairs.iter().filter(|(_, c)| *c).map(|(j, _)| *j).collect();
    let neg: Vec<bool> = pairs
        .iter()
        .filter(|(_, c)| !*c)
        .map(|(j, _)| !*j)
        .collect();
    (share(run), share(&pos), share(&neg))
}

#[test]
fn a_review_set_is_graded_measured_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let model = server(Config::default());
    let judge_server = judge_server(false);
    let spec = format!("openai:model-a@{}/v1", model.url());
    let run = json_of(&nmb(
        runs,
        &[
            "eval",
            "--suite",
            "sample",
            "--model",
            &spec,
            "--samples",
            "2",
            "--json",
        ],
    ));
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let judge_spec = format!("openai:judge-x@{}/v1", judge_server.url());
    let report = json_of(&nmb(
        runs,
        &[
            "score",
            &run_id,
            "--judge",
            &judge_spec,
            "--resamples",
            "200",
            "--no-bertscore",
            "--json",
        ],
    ));
    let truth = judged(&report);
    assert!(truth.len() > 20, "too few judged samples: {}", truth.len());

    // Create: every answer reviewed, half of them by both reviewers.
    let created = json_of(&nmb(
        runs,
        &[
            "review",
            "create",
            &run_id,
            "--reviewers",
            "lee,park",
            "--overlap",
            "0.5",
            "--seed",
            "5",
            "--json",
        ],
    ));
    let set = created["set_id"].as_str().unwrap().to_string();
    assert_eq!(created["items"].as_u64().unwrap() as usize, truth.len());
    let people = created["reviewers"].as_array().unwrap();
    assert_eq!(people.len(), 2);
    for p in people {
        let url = p["url"].as_str().unwrap();
        assert!(
            url.starts_with(&format!("http://127.0.0.1:8686/review/{set}?token=")),
            "{url}"
        );
        assert!(p["token"].as_str().unwrap().len() >= 43);
    }
    let store = store(runs);
    let token = people[0]["token"].as_str().unwrap();
    assert!(
        !Store::open_dir(runs)
            .unwrap()
            .list_review_sets()
            .unwrap()
            .is_empty()
            && store.reviewer_by_token(token).unwrap().is_none(),
        "the plain token must not be what the store keeps"
    );
    let found = store
        .reviewer_by_token(&nmb_review::hash_token(token))
        .unwrap();
    assert_eq!(found, Some((set.clone(), "lee".to_string())));

    let lee = grade_all(&store, &set, "lee", &truth);
    let park = grade_all(&store, &set, "park", &truth);
    assert_eq!(
        lee + park,
        truth.len() + created["shared_items"].as_u64().unwrap() as usize
    );

    let status = json_of(&nmb(runs, &["review", "status", &set, "--json"]));
    for r in status["reviewers"].as_array().unwrap() {
        assert_eq!(r["graded"], r["assigned"], "{r}");
        assert_eq!(r["revoked"], false);
    }

    // Agreement straight from the store.
    let agreement = json_of(&nmb(
        runs,
        &[
            "agreement",
            "--review",
            &set,
            "--resamples",
            "200",
            "--json",
        ],
    ));
    assert_eq!(agreement["clinicians"], serde_json::json!(["lee", "park"]));
    let dims = agreement["dimensions"].as_array().unwrap();
    let dim = |name: &str| {
        dims.iter()
            .find(|d| d["dimension"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let verdict = dim("verdict");
    let grader = verdict["corrected_pass_rates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["judge"] == "judge:grader")
        .expect("the grader's corrected rate");
    assert_eq!(grader["run_items"].as_u64().unwrap() as usize, truth.len());

    // The same numbers, worked out here from the stored grades.
    let grades = store.latest_grades(&set).unwrap();
    let items: BTreeMap<u32, String> = store
        .review_items(&set)
        .unwrap()
        .into_iter()
        .map(|i| {
            (
                i.item_no,
                format!("{}/{}#{}", i.run_id, i.task_id, i.sample_index),
            )
        })
        .collect();
    let mut consensus: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for g in &grades {
        let v = if g.grade.verdict.as_deref() == Some("correct") {
            2.0
        } else {
            0.0
        };
        consensus
            .entry(items[&g.item_no].as_str())
            .or_default()
            .push(v);
    }
    let pairs: Vec<(bool, bool)> = consensus
        .iter()
        .map(|(k, v)| (truth[*k].0, v.iter().sum::<f64>() / v.len() as f64 >= 2.0))
        .collect();
    let run_verdicts: Vec<bool> = truth.values().map(|(c, _)| *c).collect();
    let (observed, se, sp) = expected_rates(&run_verdicts, &pairs);
    match grader.get("result") {
        Some(r) => {
            assert!(
                (r["observed"].as_f64().unwrap() - observed).abs() < 1e-12,
                "{r}"
            );
            assert!(
                (r["sensitivity"].as_f64().unwrap() - se).abs() < 1e-12,
                "{r} vs {se}"
            );
            assert!(
                (r["specificity"].as_f64().unwrap() - sp).abs() < 1e-12,
                "{r} vs {sp}"
            );
        }
        None => assert!(
            se + sp <= 1.0 || se.is_nan(),
            "undefined although Se {se} Sp {sp}: {grader}"
        ),
    }
    // The grader's verdicts mapped to the clinicians' on the reviewed items: with two scores the isotonic map
    // is the clinicians' pass share at each (pooled where the lower score would pass more often).
    let calibrated = verdict["calibrated_rates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["judge"] == "judge:grader")
        .expect("the grader's calibrated rate");
    let share = |grader: bool| {
        let v: Vec<bool> = pairs
            .iter()
            .filter(|p| p.0 == grader)
            .map(|p| p.1)
            .collect();
        (v.iter().filter(|x| **x).count() as f64, v.len() as f64)
    };
    let ((pass_yes, pass_n), (fail_yes, fail_n)) = (share(true), share(false));
    let pooled = (pass_yes + fail_yes) / (pass_n + fail_n);
    let (map_pass, map_fail) = match (pass_n > 0.0, fail_n > 0.0) {
        (true, true) if fail_yes / fail_n <= pass_yes / pass_n => {
            (pass_yes / pass_n, fail_yes / fail_n)
        }
        // One score alone, or the lower one passing more often: one value for both.
        _ => (pooled, pooled),
    };
    let reviewed_pass = pairs.iter().filter(|p| p.1).count() as f64;
    let unreviewed: f64 = truth
        .iter()
        .filter(|(k, _)| !consensus.contains_key(k.as_str()))
        .map(|(_, (c, _))| if *c { map_pass } else { map_fail })
        .sum();
    let want = (reviewed_pass + unreviewed) / truth.len() as f64;
    let got = calibrated["result"]["corrected"]["value"].as_f64().unwrap();
    assert!(
        (got - want).abs() < 1e-12,
        "calibrated {got} against {want}: {calibrated}"
    );
    assert!(
        calibrated["sentence"]
            .as_str()
            .unwrap()
            .contains("clinicians would pass"),
        "{calibrated}"
    );
    // How many reviews the target width needs, from the run's own calibrated rates, and which items first: a
    // second, smaller set leaves most answers unreviewed.
    let small = json_of(&nmb(
        runs,
        &[
            "review",
            "create",
            &run_id,
            "--reviewers",
            "kim",
            "--per-reviewer",
            "10",
            "--overlap",
            "0",
            "--json",
        ],
    ));
    let small = small["set_id"].as_str().unwrap().to_string();
    assert_eq!(grade_all(&store, &small, "kim", &truth), 10);
    let in_small: std::collections::BTreeSet<String> = store
        .review_items(&small)
        .unwrap()
        .into_iter()
        .map(|i| format!("{}/{}#{}", i.run_id, i.task_id, i.sample_index))
        .collect();
    let plan = json_of(&nmb(
        runs,
        &[
            "review",
            "plan",
            &run_id,
            "--target-ci",
            "0.05",
            "--first",
            "5",
            "--resamples",
            "200",
            "--json",
        ],
    ));
    let judges = plan["judges"].as_array().unwrap();
    let grader_plan = judges
        .iter()
        .find(|j| j["judge"] == "judge:grader" && j["dimension"] == "verdict")
        .expect("the grader's plan");
    let reviewed = grader_plan["reviewed"].as_f64().unwrap();
    let width = grader_plan["width"].as_f64().unwrap();
    let needed = grader_plan["needed"].as_f64().unwrap();
    assert_eq!(
        needed,
        (reviewed * (width / 0.05).powi(2)).ceil().max(reviewed),
        "{grader_plan}"
    );
    assert!(
        grader_plan["sentence"].as_str().unwrap().contains("in all"),
        "{grader_plan}"
    );
    let small_plan = judges
        .iter()
        .find(|j| j["set_id"] == small.as_str() && j["judge"] == "judge:grader")
        .expect("the small set's plan");
    assert_eq!(small_plan["reviewed"], 10, "{small_plan}");
    let first = plan["review_first"].as_array().unwrap();
    assert_eq!(first.len(), 5, "{plan}");
    for item in first {
        let item = item.as_str().unwrap();
        assert!(
            truth.contains_key(item) && !in_small.contains(item),
            "{item} is not an unreviewed item"
        );
    }
    let overall = dim("overall");
    let judge_row = overall["judge_vs_clinicians"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["judge"] == format!("judge:{judge_spec}"))
        .expect("the judge against the clinicians");
    assert_eq!(judge_row["items"].as_u64().unwrap() as usize, truth.len());

    // Export gives the same ratings a file-based run reads: same pair statistics.
    let csv = runs.join("ratings.csv");
    let out = nmb(
        runs,
        &[
            "review",
            "export",
            &set,
            "--csv",
            "--out",
            csv.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let from_file = json_of(&nmb(
        runs,
        &[
            "agreement",
            csv.to_str().unwrap(),
            "--resamples",
            "200",
            "--seed",
            &agreement["bootstrap"]["seed"].to_string(),
            "--json",
        ],
    ));
    let pairs_of = |a: &Value| -> Vec<Value> {
        a["dimensions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["pairs"].clone())
            .collect()
    };
    assert_eq!(pairs_of(&from_file), pairs_of(&agreement));

    // The report shows the agreement and the corrected rates.
    let out_dir = runs.join("report");
    let out = nmb(
        runs,
        &[
            "report",
            &run_id,
            "--out",
            out_dir.to_str().unwrap(),
            "--format",
            "html,md",
            "--resamples",
            "200",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let md = std::fs::read_to_string(out_dir.join("report.md")).unwrap();
    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    for doc in [&md, &html] {
        assert!(
            doc.contains("Judges against clinicians"),
            "no review section"
        );
        assert!(doc.contains(&set));
        assert!(doc.contains("judge:grader"));
    }
    if grader.get("result").is_some() {
        assert!(
            md.contains("clinician-corrected"),
            "the headline lacks the corrected accuracy"
        );
    }

    // The viewer's run page shows the same section.
    let (_server, url) = crate::serve_browser::start_server(runs);
    let page = http_get(&format!("{url}runs/{run_id}"));
    assert!(page.contains("Judges against clinicians"), "{page}");
    assert!(page.contains(&set) && page.contains("judge:grader"));

    // Revoking stops the token at once.
    let out = nmb(runs, &["review", "revoke", &set, "park"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let park_token = people[1]["token"].as_str().unwrap();
    assert_eq!(
        store
            .reviewer_by_token(&nmb_review::hash_token(park_token))
            .unwrap(),
        None
    );
    let out = nmb(runs, &["review", "revoke", &set, "park"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("no active reviewer"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn bad_review_requests_say_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let model = server(Config::default());
    let spec = format!("openai:model-a@{}/v1", model.url());
    let run = json_of(&nmb(
        runs,
        &["eval", "--suite", "sample", "--model", &spec, "--json"],
    ));
    let run_id = run["run_id"].as_str().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (
            &["review", "create", run_id, "--reviewers", "a,a"],
            "named twice",
        ),
        (
            &[
                "review",
                "create",
                run_id,
                "--reviewers",
                "a",
                "--overlap",
                "2",
            ],
            "--overlap",
        ),
        (
            &[
                "review",
                "create",
                run_id,
                "--reviewers",
                "a,b",
                "--per-reviewer",
                "1000",
            ],
            "lower --per-reviewer",
        ),
        (
            &["review", "create", "no-such-run", "--reviewers", "a"],
            "no-such-run",
        ),
    ];
    for (args, expected) in cases {
        let out = nmb(runs, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            text(&out.stderr).contains(expected),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
    let out = nmb(runs, &["review", "status", "rv-nothing"]);
    assert!(
        text(&out.stderr).contains("no review set"),
        "{}",
        text(&out.stderr)
    );
    let out = nmb(runs, &["agreement", "--review", "rv-nothing"]);
    assert!(
        text(&out.stderr).contains("no review set"),
        "{}",
        text(&out.stderr)
    );
}

/// `nmb review create --show-thinking`: the set keeps whether its reviewers see each answer's thinking and says
/// so when it is made, in `status` (text and JSON) and when it is exported; without the flag it is hidden.
#[test]
fn a_review_set_says_whether_its_reviewers_see_the_thinking() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let model = server(Config {
        responder: Arc::new(|req| match nmb_fake_server::default_reply(req) {
            Reply::Texts(texts) => Reply::Texts(
                texts
                    .into_iter()
                    .map(|t| format!("<think>Weighing it up.</think>{t}"))
                    .collect(),
            ),
            other => other,
        }),
        ..Config::default()
    });
    let spec = format!("openai:model-a@{}/v1", model.url());
    let args = eval_args("sample", &spec, &["--limit", "2", "--no-score", "--json"]);
    let run = json_of(&nmb_command(runs).args(args).output().unwrap());
    let run_id = run["run_id"].as_str().unwrap();
    let samples = store(runs).run_samples(run_id).unwrap();
    assert_eq!(
        samples[0].turns[0].thinking.as_deref(),
        Some("Weighing it up.")
    );
    for (flag, shown) in [(None, false), (Some("--show-thinking"), true)] {
        let mut args = vec!["review", "create", run_id, "--reviewers", "lee"];
        args.extend(flag);
        let text_out = text(&nmb(runs, &args).stdout);
        let said = if shown {
            "reviewers see each answer's thinking"
        } else {
            "hidden from reviewers"
        };
        assert!(text_out.contains(said), "{text_out}");
        args.push("--json");
        let created = json_of(&nmb(runs, &args));
        assert_eq!(created["show_thinking"], shown, "{created}");
        let set = created["set_id"].as_str().unwrap();
        let status = json_of(&nmb(runs, &["review", "status", set, "--json"]));
        assert_eq!(status["show_thinking"], shown, "{status}");
        let status_text = text(&nmb(runs, &["review", "status", set]).stdout);
        assert!(status_text.contains(said), "{status_text}");
        let export = nmb(runs, &["review", "export", set, "--csv"]);
        assert!(export.status.success(), "{}", text(&export.stderr));
        assert_eq!(
            text(&export.stderr).contains("reviewers see each answer's thinking"),
            shown,
            "{}",
            text(&export.stderr)
        );
        assert!(text(&export.stdout).starts_with("annotator,item,dimension,score\n"));
    }
}
