//! SLAKE from its real file, whose images are not at hand: without `--inputs text` nothing can be asked and nmb
//! says why; with it, the English questions go over the OpenAI wire as text, and rescoring reloads the same
//! suite from the manifest.

use crate::common::*;
use nmb_fake_server::{Config, Wire};

#[test]
fn slake_without_images_is_asked_as_text_only_when_told() {
    let Some(shared) = nmb_test_support::assets::shared_dir() else {
        return;
    };
    let file = shared.join("data/slake/test.json");
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let srv = server(Config::default());
    let eval = |extra: &[&str]| {
        nmb_command(&runs)
            .env("OPENAI_API_KEY", "k")
            .args(["eval", "--suite"])
            .arg(&file)
            .args(["--filter", "language=en", "--limit", "12", "--samples", "1"])
            .args(["--no-bertscore", "--json", "-q"])
            .args(["--model", &model_spec(Wire::OpenAi, &srv)])
            .args(extra)
            .output()
            .unwrap()
    };
    let out = eval(&[]);
    let said = text(&out.stdout) + &text(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("--inputs text"),
        "the way out is named: {said}"
    );
    assert_eq!(srv.request_count(), 0, "nothing asked");

    let result = json_of(&eval(&["--inputs", "text"]));
    assert_eq!(result["summary"]["samples_ok"], 12, "{result}");
    for r in srv.requests() {
        assert_eq!(r.image_count(), 0, "text only");
        assert!(r.all_text().is_ascii(), "English questions only");
    }
    let run_id = result["run_id"].as_str().unwrap();
    let scored = json_of(&nmb(&runs, &["score", run_id, "--no-bertscore", "--json"]));
    assert_eq!(
        scored["config"]["suite_matches_run"], true,
        "the same suite, text-only, reloaded"
    );
    assert_eq!(scored["overall"]["n"], 12);
}
