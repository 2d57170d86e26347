//! `connect_model`: every backend kind from a spec string, with the identity that goes into the manifest.

use nmb_test_support::assets::smollm2_gguf;
use std::path::PathBuf;

use nmb_requests::{BackendKind, ModelSpec};
use nmb_run::{connect_model, ConnectError, ConnectOptions};

fn parse(spec: &str) -> ModelSpec {
    ModelSpec::parse(spec).expect(spec)
}

fn smollm2() -> Option<PathBuf> {
    smollm2_gguf()
}

#[test]
fn api_models_with_a_base_url_need_no_key() {
    let o = ConnectOptions::default();
    for (spec, kind) in [
        ("openai:m@http://127.0.0.1:9/v1", BackendKind::OpenAi),
        ("anthropic:m@http://127.0.0.1:9", BackendKind::Anthropic),
        ("gemini:m@http://127.0.0.1:9", BackendKind::Gemini),
    ] {
        let m = connect_model(&parse(spec), &o).expect(spec);
        assert_eq!(m.spec.backend, kind);
        assert_eq!(m.backend.spec().to_string(), spec);
        assert!(m.identity.is_empty());
        assert!(m.backend.supports_images());
    }
}

#[test]
fn api_models_with_several_base_urls_send_to_each_replica() {
    let o = ConnectOptions::default();
    for (spec, replicas) in [
        (
            "openai:m@http://127.0.0.1:9/v1,http://127.0.0.2:9/v1",
            ["http://127.0.0.1:9/v1", "http://127.0.0.2:9/v1"],
        ),
        (
            "anthropic:m@http://127.0.0.1:9,http://127.0.0.2:9",
            ["http://127.0.0.1:9", "http://127.0.0.2:9"],
        ),
        (
            "gemini:m@http://127.0.0.1:9,https://u:p@127.0.0.2:9?x=1",
            ["http://127.0.0.1:9", "https://127.0.0.2:9"],
        ),
    ] {
        let m = connect_model(&parse(spec), &o).expect(spec);
        assert_eq!(m.backend.replicas(), replicas, "{spec}");
        assert!(m.spec.is_replicated());
        assert!(m.identity.is_empty());
    }
    // no base URL: the one replica is the public endpoint
    let keyed = ConnectOptions {
        backend: nmb_requests::BackendOptions {
            key: Some(nmb_requests::ApiKey::new("sk-test-not-a-key")),
            ..Default::default()
        },
        ..ConnectOptions::default()
    };
    let m = connect_model(&parse("openai:m"), &keyed).unwrap();
    assert_eq!(m.backend.replicas(), ["https://api.openai.com/v1"]);
}

#[test]
fn bad_specs_and_missing_files_say_what_is_wrong() {
    let o = ConnectOptions::default();
    let e = ModelSpec::parse("mistral:large").unwrap_err();
    assert!(e.to_string().contains("unknown backend"), "{e}");
    let e = connect_model(&parse("local:/no/such/model.gguf"), &o).unwrap_err();
    assert!(matches!(e, ConnectError::Local { .. }), "{e}");
    assert!(e.to_string().contains("/no/such/model.gguf"), "{e}");
}

#[test]
fn local_models_load_with_a_content_identity() {
    let Some(path) = smollm2() else { return };
    let m = connect_model(
        &parse(&format!("local:{}", path.display())),
        &ConnectOptions::default(),
    )
    .expect("SmolLM2 loads");
    assert_eq!(m.spec.backend, BackendKind::Local);
    assert!(!m.backend.supports_images());
    assert_eq!(m.backend.max_in_flight(), Some(8));
    assert!(m.backend.supports_n());
    let id = m.identity["local_model_id"].as_str().expect("model id");
    assert!(id.starts_with("SmolLM2-135M-Instruct.Q4_1.gguf@"), "{id}");
    assert_eq!(m.identity["context_length"], 8192);
}

/// Grammar is on by default and recorded in the identity; `no_grammar` leaves the identity as nmb recorded it
/// before it had grammar, so the two never share a configuration hash or a cached answer.
#[test]
fn a_local_models_identity_says_whether_it_decodes_under_grammar() {
    let Some(path) = smollm2() else { return };
    let spec = parse(&format!("local:{}", path.display()));
    let with = connect_model(&spec, &ConnectOptions::default()).expect("SmolLM2 loads");
    assert_eq!(with.identity["grammar"], nmb_local::GRAMMAR_IDENTITY);
    assert!(with.backend.constrained_output().is_some());
    let options = ConnectOptions {
        no_grammar: true,
        ..ConnectOptions::default()
    };
    let without = connect_model(&spec, &options).expect("SmolLM2 loads");
    assert!(
        !without.identity.contains_key("grammar"),
        "{:?}",
        without.identity
    );
    assert_eq!(without.backend.constrained_output(), None);
    let mut rest = with.identity.clone();
    rest.remove("grammar");
    assert_eq!(rest, without.identity, "nothing else differs");
}

/// A projector (`--mmproj`) is recorded in a `local:` model's identity by file and hash, so runs with another
/// projector or none never share a configuration hash or a cached answer; without one the identity holds the
/// fields it always had. A projector with an API model is refused.
#[test]
fn a_projector_is_recorded_in_the_identity_and_without_one_nothing_changes() {
    use nmb_test_support::gguf::Gguf;
    let dir = tempfile::tempdir().expect("tempdir");
    let (model, mmproj) = (dir.path().join("tiny.gguf"), dir.path().join("mmproj.gguf"));
    Gguf::tiny().write(&model);
    Gguf::tiny_projector().write(&mmproj);
    let spec = parse(&format!("local:{}", model.display()));
    let plain = connect_model(&spec, &ConnectOptions::default()).expect("loads");
    let keys: Vec<&String> = plain.identity.keys().collect();
    assert_eq!(
        keys,
        [
            "architecture",
            "chat_template_sha256",
            "context_length",
            "grammar",
            "local_model_id",
            "weights"
        ],
        "a model without a projector keeps the identity, so the hashes, it always had"
    );
    assert!(!plain.backend.supports_images());
    let options = ConnectOptions {
        mmproj: Some(mmproj.clone()),
        ..ConnectOptions::default()
    };
    let seeing = connect_model(&spec, &options).expect("loads with its projector");
    assert!(seeing.backend.supports_images());
    let hash = nmb_local::Projector::load(&mmproj)
        .expect("loads")
        .hash()
        .to_string();
    assert_eq!(seeing.identity["mmproj_id"], format!("mmproj.gguf@{hash}"));
    assert_eq!(seeing.identity["mmproj_type"], "gemma3");
    let mut rest = seeing.identity.clone();
    rest.remove("mmproj_id");
    rest.remove("mmproj_type");
    assert_eq!(rest, plain.identity, "nothing else differs");

    let api = parse("openai:m@http://127.0.0.1:9/v1");
    let err = connect_model(&api, &options).expect_err("refused");
    assert!(matches!(err, ConnectError::MmprojNotLocal { .. }), "{err}");
    assert!(err.to_string().contains("--mmproj"), "{err}");
    let missing = ConnectOptions {
        mmproj: Some(dir.path().join("none.gguf")),
        ..ConnectOptions::default()
    };
    let err = connect_model(&spec, &missing).expect_err("refused");
    assert!(err.to_string().contains("none.gguf"), "{err}");
}
