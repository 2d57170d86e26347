//! `nmb score --judge-repeats 3` against a noisy judge on loopback: the fake judge's grade moves with the seed
//! each request carries, so the repeats disagree on some items. The report must hold every repeat, use their
//! median, measure their agreement, list the unstable items, count what the repeats added, and a rescoring
//! (with or without repeats) must send nothing.

use std::collections::BTreeMap;
use std::sync::Arc;

use nmb_fake_server::{Config, FakeServer, ReceivedRequest, Reply};

use super::score_cli::{nmb, ok_json, stored_run};

/// A judge whose answers depend on the request's seed and the conversation: rubric grades 1 to 5 that differ
/// by seed on about half the items, and a yes/no that flips with the seed on some.
pub(crate) fn noisy_judge(req: &ReceivedRequest) -> Reply {
    let seed = req.params.seed.unwrap_or(0);
    let item = u64::from_str_radix(&req.conversation_sha256[..8], 16).unwrap_or(0);
    let text = req.all_text();
    let answer = if text.contains("Candidate") && text.contains("\"equivalent\"") {
        let yes = (item + seed * (item % 2)).is_multiple_of(2);
        format!(r#"{{"equivalent": {yes}, "rationale": "seed {seed}"}}"#)
    } else if text.contains("Grade the MODEL ANSWER") {
        let base = 1 + item % 3;
        let score = if item.is_multiple_of(2) {
            base + 2 * (seed % 2)
        } else {
            base + (seed % 2)
        };
        let s = score.min(5);
        format!(
            r#"{{"scores": {{"diagnostic_correctness": {s}, "multimodal_integration": 3, "differential_reasoning": {base}, "lesion_localisation": 3, "clinical_safety": 4}}, "overall": {s}, "rationale": "seed {seed}"}}"#
        )
    } else {
        r#"{"category": "knowledge_gap", "justification": "scripted"}"#.to_string()
    };
    Reply::Texts(vec![answer])
}

fn lower_median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

#[test]
fn repeats_are_asked_with_distinct_seeds_measured_and_never_paid_twice() {
    let model_server = FakeServer::start_in_background(Config::default(), 1).unwrap();
    let judge_server = FakeServer::start_in_background(
        Config {
            responder: Arc::new(noisy_judge),
            ..Config::default()
        },
        1,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().to_str().unwrap();
    let run_id = stored_run(dir.path(), &model_server, "model-a");
    let judge = format!("openai:judge-x@{}/v1", judge_server.url());
    let score = |repeats: &str| {
        nmb(&[
            "score",
            &run_id,
            "--runs-dir",
            runs,
            "--judge",
            &judge,
            "--judge-repeats",
            repeats,
            "--resamples",
            "200",
            "--no-bertscore",
            "--json",
        ])
    };

    let first = score("3");
    let report = ok_json(&first);
    let sent = judge_server.requests();
    assert!(!sent.is_empty());
    let mut per_seed: BTreeMap<u64, usize> = BTreeMap::new();
    for r in &sent {
        *per_seed
            .entry(r.params.seed.expect("judge calls carry a seed"))
            .or_default() += 1;
    }
    assert_eq!(
        per_seed.keys().copied().collect::<Vec<_>>(),
        vec![0, 1, 2],
        "{per_seed:?}"
    );
    // Not exactly equal: two identical questions in flight at once may both be sent, in any repeat.
    let counts: Vec<usize> = per_seed.values().copied().collect();

    assert_eq!(report["config"]["judge_repeats"], 3);
    let stability = &report["stability"];
    assert_eq!(stability["repeats"], 3, "{stability}");
    assert_eq!(stability["seeds"], serde_json::json!([0, 1, 2]));

    // Every graded sample carries its three repeats, and its grade is their median.
    let mut unstable_expected = 0;
    let mut graded = 0;
    for s in report["samples"].as_array().unwrap() {
        let Some(verdict) = s["rubric"]["judges"].get(0) else {
            continue;
        };
        let repeats = verdict["repeats"].as_array().expect("repeats kept");
        assert_eq!(repeats.len(), 3, "{verdict}");
        let overall: Vec<u64> = repeats
            .iter()
            .map(|r| r["overall"].as_u64().unwrap())
            .collect();
        assert_eq!(
            verdict["overall"].as_u64(),
            Some(lower_median(overall.clone())),
            "{verdict}"
        );
        graded += 1;
        let spread = |key: &str| {
            let v: Vec<u64> = repeats
                .iter()
                .map(|r| {
                    if key == "overall" {
                        r["overall"].as_u64().unwrap()
                    } else {
                        r["scores"][key].as_u64().unwrap()
                    }
                })
                .collect();
            v.iter().max().unwrap() - v.iter().min().unwrap()
        };
        let widest = [
            "overall",
            "diagnostic_correctness",
            "multimodal_integration",
            "differential_reasoning",
            "lesion_localisation",
            "clinical_safety",
        ]
        .into_iter()
        .map(spread)
        .max()
        .unwrap();
        if widest >= 2 {
            unstable_expected += 1;
        }
    }
    assert!(graded > 0);
    let unstable = stability["unstable"].as_array().unwrap();
    assert_eq!(unstable.len(), unstable_expected, "{stability}");
    assert!(
        unstable_expected > 0,
        "the noisy judge should leave some items unstable"
    );
    for u in unstable {
        assert!(u["spread"].as_f64().unwrap() >= 2.0, "{u}");
    }

    // ICC between repeats on the overall grade, and kappa on the verdicts, each with an interval.
    let overall = stability["measures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["quantity"] == "rubric:overall")
        .expect("overall measured");
    for key in ["icc", "kappa"] {
        let e = &overall[key];
        let (v, lo, hi) = (
            e["value"].as_f64().unwrap(),
            e["ci_low"].as_f64().unwrap(),
            e["ci_high"].as_f64().unwrap(),
        );
        assert!(lo <= v && v <= hi && v < 1.0, "{key}: {e}");
    }

    // What the repeats added: the calls of repeats 2 and 3, twice those of the first asking.
    let added = &stability["added"][0];
    assert_eq!(
        added["calls"].as_u64().unwrap() as usize,
        counts[1] + counts[2],
        "{added}"
    );
    assert_eq!(
        added["first_calls"].as_u64().unwrap() as usize,
        counts[0],
        "{added}"
    );
    assert_eq!(
        report["config"]["judges"][0]["repeat_runs"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // Rescoring pays nothing twice, and gives the same bytes.
    let before = judge_server.request_count();
    let again = score("3");
    assert_eq!(
        judge_server.request_count(),
        before,
        "rescoring asked the judge again"
    );
    assert_eq!(first.stdout, again.stdout, "rescoring changed the JSON");
    // The terminal summary says it in words.
    let text = nmb(&[
        "score",
        &run_id,
        "--runs-dir",
        runs,
        "--judge",
        &judge,
        "--judge-repeats",
        "3",
        "--resamples",
        "200",
        "--no-bertscore",
    ]);
    let text = String::from_utf8_lossy(&text.stdout).to_string();
    assert!(
        text.contains("ICC(2,1)") && text.contains("stability  "),
        "{text}"
    );
    assert!(
        text.contains(&format!("gave {} of", overall["unstable_items"])),
        "{text}"
    );
    assert_eq!(judge_server.request_count(), before);
    // Asked once, the judge's answers are repeat 1's, already stored.
    let once = ok_json(&score("1"));
    assert_eq!(
        judge_server.request_count(),
        before,
        "a single asking reuses repeat 1"
    );
    assert!(once.get("stability").is_none());
    assert!(once["config"].get("judge_repeats").is_none());
}

/// The fake server's simulated judge without noise grades from the answer and the conversation only, never the
/// seed, so its repeats always agree: the ICC is 1 with the interval [1, 1], and the summary and the report say
/// it is perfectly repeatable.
#[test]
fn a_judge_whose_repeats_always_agree_has_an_icc_of_one() {
    let model_server = FakeServer::start_in_background(Config::default(), 1).unwrap();
    let judge_server = FakeServer::start_in_background(
        Config {
            responder: nmb_fake_server::judge::SimJudge::default().responder(),
            ..Config::default()
        },
        1,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().to_str().unwrap();
    let run_id = stored_run(dir.path(), &model_server, "model-a");
    let judge = format!("openai:judge-x@{}/v1", judge_server.url());
    let score = |json: bool| {
        let mut args = vec![
            "score",
            &run_id,
            "--runs-dir",
            runs,
            "--judge",
            &judge,
            "--judge-repeats",
            "3",
            "--resamples",
            "200",
            "--no-bertscore",
        ];
        if json {
            args.push("--json");
        }
        nmb(&args)
    };
    let report = ok_json(&score(true));
    let overall = report["stability"]["measures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["quantity"] == "rubric:overall")
        .expect("overall measured")
        .clone();
    assert_eq!(overall["unstable_items"], 0, "{overall}");
    assert_eq!(overall["mean_spread"], 0.0, "{overall}");
    let icc = &overall["icc"];
    assert_eq!(
        (
            icc["value"].as_f64(),
            icc["ci_low"].as_f64(),
            icc["ci_high"].as_f64()
        ),
        (Some(1.0), Some(1.0), Some(1.0)),
        "{overall}"
    );
    assert!(overall.get("notes").is_none(), "{overall}");

    let said = String::from_utf8_lossy(&score(false).stdout).to_string();
    assert!(
        said.contains("ICC is 1 [1, 1], perfectly repeatable"),
        "{said}"
    );
    assert!(!said.contains("could not be measured"), "{said}");
    let out = dir.path().join("report");
    let written = nmb(&[
        "report",
        &run_id,
        "--runs-dir",
        runs,
        "--out",
        out.to_str().unwrap(),
        "--format",
        "md",
    ]);
    assert!(written.status.success(), "{written:?}");
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(md.contains("perfectly repeatable"), "{md}");
}
