//! `nmb review judge --judge-images same`: pairwise judges see the images the models were shown. Two simulated
//! models (`nmb_fake_server::vision`) answer a suite of marked images; a pairwise set of their answers is put to
//! a judge on the fake server, once without images and once with: with `same`, every pairwise request carries
//! exactly the case's stored image bytes (by hash, once, captioned), without it none; the asking with images is
//! a judge run of its own, named apart beside the clinicians; a judge that cannot take images is refused.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::common::*;
use crate::perturb::{suite as marked_suite, CASES};
use nmb_fake_server::vision::{marker_png, text_only_reply, vision_reply};
use nmb_fake_server::{Config, FakeServer, ReceivedPart, ReceivedRequest, Reply};
use serde_json::Value;

fn models() -> FakeServer {
    server(Config {
        responder: Arc::new(|req| match req.model.as_str() {
            "vision" => vision_reply(req),
            _ => text_only_reply(req),
        }),
        ..Config::default()
    })
}

fn eval(runs: &std::path::Path, suite: &std::path::Path, srv: &FakeServer, model: &str) -> String {
    let spec = format!("openai:{model}@{}/v1", srv.url());
    let out = nmb_command(runs)
        .env("OPENAI_API_KEY", "k")
        .args(["eval", "--suite"])
        .arg(suite)
        .args(["--model", &spec, "--samples", "1", "--no-bertscore"])
        .args(["--json", "-q"])
        .output()
        .unwrap();
    json_of(&out)["run_id"].as_str().unwrap().to_string()
}

/// A judge that prefers answer 1 and keeps every request.
fn judge(refuse_images: bool) -> FakeServer {
    server(Config {
        responder: Arc::new(move |req: &ReceivedRequest| {
            if refuse_images && req.image_count() > 0 {
                // As llama.cpp's server without a vision projector answers images.
                return Reply::Raw {
                    status: 500,
                    headers: Vec::new(),
                    body: r#"{"error":{"code":500,"message":"image input is not supported - hint: if this is unexpected, you may need to provide the mmproj","type":"server_error"}}"#.into(),
                };
            }
            Reply::Texts(vec![r#"{"better": "1", "rationale": "r"}"#.into()])
        }),
        ..Config::default()
    })
}

/// The case a pairwise request is about (its question quotes the case's notes, `Patient N:`).
fn case_of(req: &ReceivedRequest) -> usize {
    let text = req.all_text();
    let rest = text.split_once("Patient ").expect("the notes are quoted").1;
    rest.split(':').next().unwrap().parse().unwrap()
}

fn images_of(req: &ReceivedRequest) -> Vec<String> {
    (req.messages.iter().flat_map(|m| &m.parts))
        .filter_map(|p| match p {
            ReceivedPart::Image { sha256, .. } => Some(sha256.clone()),
            _ => None,
        })
        .collect()
}

fn review_judge(
    runs: &std::path::Path,
    set: &str,
    spec: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut args = vec!["review", "judge", set, "--judge", spec, "--resamples", "50"];
    args.extend_from_slice(extra);
    args.push("--json");
    nmb(runs, &args)
}

#[test]
fn pairwise_questions_carry_the_case_images_only_with_same() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let suite = marked_suite(dir.path());
    let srv = models();
    let (vision, text_only) = (
        eval(&runs, &suite, &srv, "vision"),
        eval(&runs, &suite, &srv, "text-only"),
    );
    let created = json_of(&nmb(
        &runs,
        &[
            "review",
            "create",
            &vision,
            &text_only,
            "--mode",
            "pairwise",
            "--reviewers",
            "ann",
            "--overlap",
            "1",
            "--seed",
            "5",
            "--json",
        ],
    ));
    let set = created["set_id"].as_str().unwrap().to_string();
    let own: BTreeMap<usize, String> = (0..CASES)
        .map(|i| (i, nmb_imaging::content_hash(&marker_png(i, 32, i as u64))))
        .collect();

    let blind_server = judge(false);
    let spec = format!("openai:pair-judge@{}/v1", blind_server.url());
    let plain = review_judge(&runs, &set, &spec, &[]);
    assert!(plain.status.success(), "{}", text(&plain.stderr));
    let plain: Value = serde_json::from_slice(&plain.stdout).unwrap();
    assert!(plain.get("judge_images").is_none(), "{plain}");
    assert_eq!(plain["judges"][0]["judge"], spec.as_str());
    let sent = blind_server.requests();
    // Each pair in both orders (two identical answers make one conversation, which may be asked once).
    let asked = sent.len();
    assert!(asked > CASES && asked <= 2 * CASES, "{asked}");
    assert!(
        sent.iter().all(|r| images_of(r).is_empty()),
        "no image without --judge-images same"
    );

    let seeing = review_judge(&runs, &set, &spec, &["--judge-images", "same"]);
    assert!(seeing.status.success(), "{}", text(&seeing.stderr));
    let seeing: Value = serde_json::from_slice(&seeing.stdout).unwrap();
    assert_eq!(seeing["judge_images"], "same");
    assert_eq!(
        seeing["judges"][0]["judge"],
        format!("{spec} (with images)").as_str()
    );
    let sent = blind_server.requests();
    let total = sent.len();
    assert!(
        total - asked > CASES,
        "asked again: the questions with images are others"
    );
    for r in &sent[asked..] {
        let case = case_of(r);
        assert_eq!(
            images_of(r),
            vec![own[&case].clone()],
            "case {case}: its own image, once"
        );
        let text = r.all_text();
        assert!(text.contains("Image 1: "), "captioned: {text}");
        assert!(
            text.contains("exact images the models were shown"),
            "{text}"
        );
    }
    // Asked again, both askings are answered from the store.
    let again = review_judge(&runs, &set, &spec, &["--judge-images", "same"]);
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(blind_server.request_count(), total as u64);

    // The store keeps the two askings apart: one judge run sent images, the other did not.
    let store = store(&runs);
    let judge_runs: Vec<_> = (store.list_runs().unwrap().into_iter())
        .filter(|r| r.manifest.judged_run() == Some(vision.as_str()))
        .collect();
    let modes: Vec<_> = judge_runs.iter().map(|r| r.manifest.input_mode).collect();
    assert_eq!(modes.len(), 2, "{modes:?}");
    assert!(
        modes.contains(&nmb_store::InputMode::Text) && modes.contains(&nmb_store::InputMode::Full)
    );

    // A judge that cannot take images: `local:` is refused before anything is loaded or sent, and a server
    // answering unsupported_input stops the asking, then is refused before sending.
    let local = "local:/models/judge.gguf";
    let out = review_judge(&runs, &set, local, &["--judge-images", "same"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(local) && stderr.contains("--judge-images"),
        "{stderr}"
    );

    let refusing = judge(true);
    let spec = format!("openai:text-judge@{}/v1", refusing.url());
    let out = review_judge(&runs, &set, &spec, &["--judge-images", "same"]);
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&spec) && stderr.contains("unsupported_input"),
        "{stderr}"
    );
    let tried = refusing.request_count();
    assert!(
        (1..2 * CASES as u64).contains(&tried),
        "it stops at the refusal (at most the calls already in flight): {tried}"
    );
    let out = review_judge(&runs, &set, &spec, &["--judge-images", "same"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("earlier scoring"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        refusing.request_count(),
        tried,
        "refused before anything was sent"
    );
    let out = review_judge(&runs, &set, &spec, &[]);
    assert!(
        out.status.success(),
        "without images it reads the text: {}",
        text(&out.stderr)
    );
}
