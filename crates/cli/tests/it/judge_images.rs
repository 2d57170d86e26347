//! `--judge-images same`: judges see the image bytes the model received. Against the fake server's
//! [`VisualJudge`], which can tell a visual hallucination from a reasoning failure only from a marker in the
//! pixels, the taxonomy agrees with the designed truth when the judge sees the images and is at chance when it
//! does not; the judge's requests carry the model's very bytes on every wire; a judge that cannot take images is
//! refused before anything is sent; the scoring hash moves only when the images are sent.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use common::*;
use nmb_fake_server::visual_judge::{marker, VisualJudge};
use nmb_fake_server::{Config, FakeServer, ReceivedPart, ReceivedRequest, Wire};
use serde_json::Value;

/// The suite's cases: each case's image and whether it shows the finding the wrong answers claim.
struct Designed {
    suite: String,
    answers: String,
    /// Per case id: the image bytes and whether they carry the marker.
    cases: BTreeMap<String, (Vec<u8>, bool)>,
}

/// A native suite of `n` differential cases, each with one noise PNG whose marker is the designed truth (half
/// of the cases show the claimed finding, half do not, interleaved), and an answer key no fake answer matches.
fn designed_suite(dir: &Path, n: usize) -> Designed {
    let root = dir.join("suite");
    std::fs::create_dir_all(root.join("images")).unwrap();
    std::fs::write(
        root.join("suite.toml"),
        "id = \"judge-images\"\nversion = \"1\"\n[defaults]\nlevel = \"direct\"\n",
    )
    .unwrap();
    let mut lines = Vec::new();
    let mut key = Vec::new();
    let mut cases = BTreeMap::new();
    let mut seed = 0u64;
    for i in 0..n {
        let shows = i % 2 == 0;
        // The first noise image whose top-left pixel carries the designed marker.
        let png = loop {
            seed += 1;
            let png = nmb_fake_server::support::noise_png(16, seed);
            if marker(&png) == Some(shows) {
                break png;
            }
        };
        let name = format!("images/case{i}.png");
        std::fs::write(root.join(&name), &png).unwrap();
        let case = serde_json::json!({
            "case_id": format!("case{i}"),
            "images": [{"path": name, "modality": "MRI", "sequence": "FLAIR", "plane": "axial"}],
            "ehr": {"Age": 30 + i, "Sex": "female"},
            "notes": "Subacute visual loss and paraparesis.",
            "tasks": [{"id": format!("case{i}/dx"), "family": "differential", "question": "Most likely diagnosis?"}],
        });
        lines.push(case.to_string());
        key.push(format!(
            r#"{{"case_id": "case{i}", "diagnosis": "Neuromyelitis optica spectrum disorder"}}"#
        ));
        cases.insert(format!("case{i}"), (png, shows));
    }
    std::fs::write(root.join("cases.jsonl"), lines.join("\n") + "\n").unwrap();
    let answers = dir.join("answers.jsonl");
    std::fs::write(&answers, key.join("\n") + "\n").unwrap();
    Designed {
        suite: format!("native:{}", root.display()),
        answers: answers.display().to_string(),
        cases,
    }
}

fn judge_server(designed: &Designed) -> FakeServer {
    let images = designed.cases.values().map(|(png, _)| png.as_slice());
    server(Config {
        responder: VisualJudge::reading(images, 7).responder(),
        ..Config::default()
    })
}

/// The hashes of the images a request carries, in order.
fn image_hashes(req: &ReceivedRequest) -> Vec<String> {
    req.messages
        .iter()
        .flat_map(|m| m.parts.iter())
        .filter_map(|p| match p {
            ReceivedPart::Image { sha256, .. } => Some(sha256.clone()),
            _ => None,
        })
        .collect()
}

/// The case a judge question is about (its context opens with `CASE <id>`).
fn case_of(req: &ReceivedRequest) -> Option<String> {
    let text = req.all_text();
    let rest = text.split_once("CASE ")?.1;
    Some(rest.split_whitespace().next()?.to_string())
}

fn is_taxonomy(req: &ReceivedRequest) -> bool {
    req.all_text().contains("was graded WRONG")
}

fn is_rubric(req: &ReceivedRequest) -> bool {
    req.all_text().contains("Grade the MODEL ANSWER")
}

/// The designed label of each case: the claimed finding is in the image → the answer reasoned wrongly from it;
/// it is not → the answer saw what is not there.
fn truth(shows: bool) -> &'static str {
    match shows {
        true => "reasoning_failure",
        false => "visual_hallucination",
    }
}

/// How many judged taxonomy labels agree with the designed truth, of how many wrong answers were labelled.
fn agreement(report: &Value, designed: &Designed) -> (u64, u64) {
    let (mut agree, mut labelled) = (0, 0);
    for s in report["samples"].as_array().unwrap() {
        let Some(category) = s["taxonomy"]["category"].as_str() else {
            continue;
        };
        let case = s["task_id"].as_str().unwrap().split('/').next().unwrap();
        labelled += 1;
        if category == truth(designed.cases[case].1) {
            agree += 1;
        }
    }
    (agree, labelled)
}

/// Two-sided exact binomial p-value of `k` successes in `n` fair trials: the probability of an outcome at
/// most as likely as `k`.
fn binomial_p(k: u64, n: u64) -> f64 {
    let pmf = |i: u64| -> f64 {
        let ln_choose: f64 = (1..=i)
            .map(|j| ((n - i + j) as f64).ln() - (j as f64).ln())
            .sum();
        (ln_choose - n as f64 * std::f64::consts::LN_2).exp()
    };
    let observed = pmf(k);
    (0..=n)
        .map(pmf)
        .filter(|p| *p <= observed * (1.0 + 1e-9))
        .sum::<f64>()
        .min(1.0)
}

fn score(runs: &Path, run_id: &str, judges: &[String], extra: &[&str]) -> Value {
    let mut args = vec![
        "score",
        run_id,
        "--no-bertscore",
        "--resamples",
        "50",
        "--json",
    ];
    for j in judges {
        args.extend(["--judge", j.as_str()]);
    }
    args.extend_from_slice(extra);
    json_of(&nmb(runs, &args))
}

#[test]
fn the_taxonomy_follows_the_images_only_when_the_judge_sees_them() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let designed = designed_suite(dir.path(), 40);
    let model = server(Config::default());
    let judge = judge_server(&designed);
    let judge_spec = format!("openai:visual-judge@{}/v1", judge.url());
    // nmb eval scores at its end with the judge seeing the images.
    let seeing = json_of(&nmb(
        runs,
        &[
            "eval",
            "--suite",
            &designed.suite,
            "--answers",
            &designed.answers,
            "--model",
            &model_spec(Wire::OpenAi, &model),
            "--samples",
            "1",
            "--judge",
            &judge_spec,
            "--judge-images",
            "same",
            "--no-rubric",
            "--no-bertscore",
            "--json",
            "-q",
        ],
    ));
    let run_id = seeing["run_id"].as_str().unwrap().to_string();
    let sent_seeing = judge.requests();
    let report_seeing = score(
        runs,
        &run_id,
        std::slice::from_ref(&judge_spec),
        &["--judge-images", "same", "--no-rubric"],
    );
    assert_eq!(
        judge.requests().len(),
        sent_seeing.len(),
        "rescoring with the same options asks nothing again"
    );
    let blind = score(runs, &run_id, &[judge_spec], &["--no-rubric"]);
    let sent_blind: Vec<ReceivedRequest> = judge.requests()[sent_seeing.len()..].to_vec();

    let (agree, n) = agreement(&report_seeing, &designed);
    assert_eq!(n, 40, "every answer is wrong and labelled: {report_seeing}");
    assert!(
        agree * 10 >= n * 9,
        "with the images the labels follow the truth: {agree} of {n}"
    );
    eprintln!("seeing the images: {agree} of {n} labels agree with the designed truth");
    let (agree_blind, n_blind) = agreement(&blind, &designed);
    assert_eq!(n_blind, 40);
    let p = binomial_p(agree_blind, n_blind);
    eprintln!(
        "blind: {agree_blind} of {n_blind} agree (two-sided binomial p = {p:.3} against chance)"
    );
    assert!(
        p > 0.001,
        "without the images the labels are at chance: {agree_blind} of {n_blind} agree, p = {p}"
    );

    // Each taxonomy question carried its own case's image when seen, and none when not.
    let taxonomy_seeing: Vec<_> = sent_seeing.iter().filter(|r| is_taxonomy(r)).collect();
    assert_eq!(taxonomy_seeing.len(), 40);
    for r in taxonomy_seeing {
        let case = case_of(r).unwrap();
        let want = nmb_imaging::content_hash(&designed.cases[&case].0);
        assert_eq!(image_hashes(r), vec![want], "{case}");
        assert!(r.all_text().contains("attached below"), "{case}");
    }
    let taxonomy_blind: Vec<_> = sent_blind.iter().filter(|r| is_taxonomy(r)).collect();
    assert_eq!(taxonomy_blind.len(), 40);
    assert!(taxonomy_blind.iter().all(|r| image_hashes(r).is_empty()));

    // The prompt versions and the hash move only with the images.
    let prompts = |r: &Value| r["config"]["judge_prompts"]["judge-taxonomy-v1"].clone();
    assert_ne!(prompts(&report_seeing), prompts(&blind));
    assert_ne!(
        report_seeing["config"]["config_hash"],
        blind["config"]["config_hash"]
    );
    assert_eq!(report_seeing["config"]["judge_images"], "same");
    assert!(
        blind["config"].get("judge_images").is_none(),
        "{}",
        blind["config"]
    );
    // The judge paid for the images: every question carried one, and its input tokens say so.
    let tokens_in = |r: &Value| r["config"]["judges"][0]["tokens_in"].as_u64().unwrap();
    assert!(
        tokens_in(&report_seeing) > tokens_in(&blind),
        "{} vs {}",
        tokens_in(&report_seeing),
        tokens_in(&blind)
    );
}

#[test]
fn judges_get_the_models_image_bytes_on_every_wire_and_the_hash_moves_only_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let designed = designed_suite(dir.path(), 4);
    let model = server(Config::default());
    let judge = judge_server(&designed);
    let out = nmb(
        runs,
        &[
            "eval",
            "--suite",
            &designed.suite,
            "--answers",
            &designed.answers,
            "--model",
            &model_spec(Wire::OpenAi, &model),
            "--samples",
            "2",
            "--no-score",
            "--json",
            "-q",
        ],
    );
    let run_id = json_of(&out)["run_id"].as_str().unwrap().to_string();
    let model_images: BTreeSet<String> = model.requests().iter().flat_map(image_hashes).collect();
    let file_images: BTreeSet<String> = designed
        .cases
        .values()
        .map(|(png, _)| nmb_imaging::content_hash(png))
        .collect();
    assert_eq!(
        model_images, file_images,
        "the model was sent each case's file as it is"
    );

    let jury: Vec<String> = [Wire::OpenAi, Wire::Anthropic, Wire::Gemini]
        .into_iter()
        .map(|w| model_spec(w, &judge).replace("test-model", "visual-judge"))
        .collect();
    let plain = score(runs, &run_id, &jury, &[]);
    let none = score(runs, &run_id, &jury, &["--judge-images", "none"]);
    let before = judge.requests().len();
    let same = score(runs, &run_id, &jury, &["--judge-images", "same"]);
    let sent = judge.requests()[before..].to_vec();

    // Not giving the flag and giving `none` score alike, with the hash scorings before the flag had.
    let hash = |r: &Value| r["config"]["config_hash"].as_str().unwrap().to_string();
    assert_eq!(hash(&plain), hash(&none));
    assert_ne!(hash(&plain), hash(&same));
    assert!(plain["config"].get("judge_images").is_none());

    let mut seen_wires = BTreeSet::new();
    for r in &sent {
        if !(is_taxonomy(r) || is_rubric(r)) {
            assert!(
                image_hashes(r).is_empty(),
                "equivalence questions are about two names, not the case"
            );
            continue;
        }
        let case = case_of(r).unwrap();
        let want = nmb_imaging::content_hash(&designed.cases[&case].0);
        assert!(model_images.contains(&want));
        assert_eq!(image_hashes(r), vec![want], "{:?} {case}", r.wire);
        assert!(
            r.all_text().contains("Image 1: MRI FLAIR axial"),
            "its caption"
        );
        seen_wires.insert(format!("{:?}", r.wire));
    }
    assert_eq!(seen_wires.len(), 3, "{seen_wires:?}");
    // Each wire's judge asked the rubric and taxonomy of all 8 samples.
    let rubric: usize = sent.iter().filter(|r| is_rubric(r)).count();
    assert_eq!(rubric, 3 * 8);
}

#[test]
fn a_judge_that_cannot_take_images_is_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let designed = designed_suite(dir.path(), 2);
    let model = server(Config::default());
    let local = "local:/models/judge.gguf";
    let out = nmb(
        runs,
        &[
            "eval",
            "--suite",
            &designed.suite,
            "--model",
            &model_spec(Wire::OpenAi, &model),
            "--samples",
            "1",
            "--judge",
            local,
            "--judge-images",
            "same",
            "--json",
        ],
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(local) && stderr.contains("images"),
        "{stderr}"
    );
    assert_eq!(
        model.request_count(),
        0,
        "nothing was asked of the model either"
    );

    // A stored run: scoring it with that judge is refused the same way, before any judge is loaded.
    let run = json_of(&nmb(
        runs,
        &[
            "eval",
            "--suite",
            &designed.suite,
            "--model",
            &model_spec(Wire::OpenAi, &model),
            "--samples",
            "1",
            "--no-score",
            "--json",
            "-q",
        ],
    ));
    let run_id = run["run_id"].as_str().unwrap();
    let out = nmb(
        runs,
        &[
            "score",
            run_id,
            "--judge",
            local,
            "--judge-images",
            "same",
            "--no-bertscore",
        ],
    );
    let stderr = text(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(local) && stderr.contains("--judge-images"),
        "{stderr}"
    );
}

#[test]
fn a_text_only_judge_server_stops_the_scoring_once_and_is_refused_before_sending_after() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let designed = designed_suite(dir.path(), 6);
    let model = server(Config::default());
    // As llama.cpp's server without a vision projector answers images.
    let text_only = server(Config {
        responder: std::sync::Arc::new(|req: &ReceivedRequest| {
            if req.image_count() > 0 {
                return nmb_fake_server::Reply::Raw {
                    status: 500,
                    headers: Vec::new(),
                    body: r#"{"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj","type":"server_error"}}"#.into(),
                };
            }
            nmb_fake_server::judge::SimJudge::default().reply(req)
        }),
        ..Config::default()
    });
    let run = json_of(&nmb(
        runs,
        &[
            "eval",
            "--suite",
            &designed.suite,
            "--answers",
            &designed.answers,
            "--model",
            &model_spec(Wire::OpenAi, &model),
            "--samples",
            "1",
            "--no-score",
            "--json",
            "-q",
        ],
    ));
    let run_id = run["run_id"].as_str().unwrap();
    let judge = format!("openai:text-judge@{}/v1", text_only.url());
    let score_with = |extra: &[&str]| {
        let mut args = vec![
            "score",
            run_id,
            "--judge",
            &judge,
            "--judge-concurrency",
            "1",
            "--no-bertscore",
        ];
        args.extend_from_slice(extra);
        nmb(runs, &args)
    };
    let first = score_with(&["--judge-images", "same"]);
    let stderr = text(&first.stderr);
    assert!(!first.status.success());
    assert!(
        stderr.contains(&judge) && stderr.contains("unsupported_input"),
        "{stderr}"
    );
    let with_images: usize = text_only
        .requests()
        .iter()
        .filter(|r| r.image_count() > 0)
        .count();
    assert_eq!(with_images, 1, "it stops at the first refusal");
    let seen = text_only.request_count();
    let again = score_with(&["--judge-images", "same"]);
    let stderr = text(&again.stderr);
    assert!(!again.status.success());
    assert!(
        stderr.contains(&judge) && stderr.contains("earlier scoring"),
        "{stderr}"
    );
    assert_eq!(
        text_only.request_count(),
        seen,
        "refused before anything was sent"
    );
    // Without images the same judge reads the text as before.
    let plain = score_with(&["--json"]);
    assert!(plain.status.success(), "{}", text(&plain.stderr));
}

#[test]
fn a_dry_run_counts_the_images_judges_would_be_sent() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let designed = designed_suite(dir.path(), 5);
    let model = server(Config::default());
    let dry = |extra: &[&str]| {
        let model = model_spec(Wire::OpenAi, &model);
        let mut args = vec![
            "eval",
            "--suite",
            &designed.suite,
            "--model",
            &model,
            "--samples",
            "3",
            "--judge",
            "openai:j@http://127.0.0.1:9/v1",
            "--judge",
            "anthropic:k@http://127.0.0.1:9",
            "--dry-run",
            "--json",
        ];
        args.extend_from_slice(extra);
        json_of(&nmb(runs, &args))
    };
    let plain = dry(&[]);
    assert!(plain.get("judge_images").is_none(), "{plain}");
    let same = dry(&["--judge-images", "same"]);
    // One image per sample (single-turn tasks): the model's own count; rubric and taxonomy, two judges.
    let samples = 5 * 3;
    assert_eq!(same["images_sent"], samples);
    let per_sample = same["est_image_tokens"].as_u64().unwrap() / samples;
    assert!(per_sample > 0);
    let judged = &same["judge_images"];
    assert_eq!(judged["questions_per_sample"], 2 * 2, "{judged}");
    assert_eq!(judged["images_sent"], samples * 4);
    assert_eq!(judged["est_image_tokens"], samples * 4 * per_sample);
    let no_rubric = dry(&["--judge-images", "same", "--no-rubric"]);
    assert_eq!(no_rubric["judge_images"]["images_sent"], samples * 2);
    assert_eq!(model.request_count(), 0);
}

#[test]
fn judges_batched_carry_the_images_too() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path();
    let designed = designed_suite(dir.path(), 4);
    let model = server(Config::default());
    let images = designed.cases.values().map(|(png, _)| png.as_slice());
    let judge = server(Config {
        responder: VisualJudge::reading(images, 7).responder(),
        batch: nmb_fake_server::batch::BatchConfig {
            polls: 1,
            ..Default::default()
        },
        ..Config::default()
    });
    let run = json_of(&nmb(
        runs,
        &[
            "eval",
            "--suite",
            &designed.suite,
            "--answers",
            &designed.answers,
            "--model",
            &model_spec(Wire::OpenAi, &model),
            "--samples",
            "1",
            "--no-score",
            "--json",
            "-q",
        ],
    ));
    let run_id = run["run_id"].as_str().unwrap();
    let judge_spec = format!("anthropic:visual-judge@{}", judge.url());
    let report = score(
        runs,
        run_id,
        &[judge_spec],
        &[
            "--judge-images",
            "same",
            "--judge-batch",
            "--judge-batch-poll",
            "0.05",
        ],
    );
    let sent = judge.requests();
    let taxonomy: Vec<_> = sent.iter().filter(|r| is_taxonomy(r)).collect();
    assert_eq!(taxonomy.len(), 4);
    for r in taxonomy {
        assert!(r.batch.is_some());
        let case = case_of(r).unwrap();
        assert_eq!(
            image_hashes(r),
            vec![nmb_imaging::content_hash(&designed.cases[&case].0)]
        );
    }
    let (agree, n) = agreement(&report, &designed);
    assert_eq!((agree, n), (4, 4));
}
