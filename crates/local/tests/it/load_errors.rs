//! Loading failures name the file and say what was expected; none of these need model weights.

use std::path::Path;

use nmb_local::{LocalError, LocalModel};

#[test]
fn missing_file_is_an_io_error_naming_it() {
    let err = LocalModel::load(Path::new("/nonexistent/dir/model.gguf")).expect_err("no such file");
    assert!(matches!(err, LocalError::Io { .. }), "{err:?}");
    assert!(
        err.to_string().contains("/nonexistent/dir/model.gguf"),
        "{err}"
    );
}

#[test]
fn non_gguf_bytes_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("fake.gguf");
    std::fs::write(&path, b"this is not a GGUF file at all, just text").expect("write");
    let err = LocalModel::load(&path).expect_err("not GGUF");
    assert!(matches!(err, LocalError::Gguf { .. }), "{err:?}");
    assert!(err.to_string().contains("fake.gguf"), "{err}");
}

#[test]
fn truncated_gguf_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("truncated.gguf");
    // A valid GGUF v3 magic and version that promises 1 tensor and 5 metadata entries, then ends.
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(1u64.to_le_bytes());
    bytes.extend(5u64.to_le_bytes());
    std::fs::write(&path, bytes).expect("write");
    let err = LocalModel::load(&path).expect_err("truncated");
    assert!(matches!(err, LocalError::Gguf { .. }), "{err:?}");
}

#[test]
fn empty_spec_is_refused() {
    assert!(matches!(LocalModel::open(""), Err(LocalError::Spec { .. })));
}
