//! `hf://` downloads cannot be tested without network; this checks the failure a machine without it gets.
//! Its own test binary because it sets process environment variables.

#![cfg(feature = "hf")]

use nmb_local::{LocalError, LocalModel};

#[test]
fn unreachable_hub_gives_a_clear_download_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    // An empty cache and an endpoint nobody listens on (port 9 on loopback is refused at once).
    std::env::set_var("HF_HOME", dir.path());
    std::env::set_var("HF_ENDPOINT", "http://127.0.0.1:9");
    let err =
        LocalModel::open("hf://example-org/example-model/model.Q4_0.gguf").expect_err("offline");
    assert!(matches!(err, LocalError::Download { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("hf://example-org/example-model/model.Q4_0.gguf"),
        "{text}"
    );
    assert!(text.contains("local:PATH"), "{text}");
}
