//! Loading failures name the file and say what was expected; none of these need model weights.

use std::path::Path;

use nmb_local::{LocalError, LocalModel, LocalWeights};

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

/// A GGUF v3 file for the `llama` architecture holding one 32-value tensor of GGML type `type_id`.
fn gguf_with_tensor_type(type_id: u32, block_bytes: usize) -> Vec<u8> {
    gguf_of("llama", type_id, block_bytes)
}

/// A GGUF v3 file for architecture `arch` holding one 32-value tensor of GGML type `type_id`.
fn gguf_of(arch: &str, type_id: u32, block_bytes: usize) -> Vec<u8> {
    let string = |s: &str| {
        let mut b = (s.len() as u64).to_le_bytes().to_vec();
        b.extend(s.as_bytes());
        b
    };
    let mut bytes = b"GGUF".to_vec();
    bytes.extend(3u32.to_le_bytes());
    bytes.extend(1u64.to_le_bytes()); // tensors
    bytes.extend(1u64.to_le_bytes()); // metadata entries
    bytes.extend(string("general.architecture"));
    bytes.extend(8u32.to_le_bytes()); // a string
    bytes.extend(string(arch));
    bytes.extend(string("token_embd.weight"));
    bytes.extend(1u32.to_le_bytes()); // dimensions
    bytes.extend(32u64.to_le_bytes());
    bytes.extend(type_id.to_le_bytes());
    bytes.extend(0u64.to_le_bytes()); // offset
    bytes.resize(bytes.len().next_multiple_of(32), 0);
    bytes.resize(bytes.len() + block_bytes, 0);
    bytes
}

#[test]
fn an_unsupported_tensor_type_is_refused_with_what_is_supported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("iq4.gguf");
    // IQ4_NL (GGML type 20): 18-byte blocks of 32.
    std::fs::write(&path, gguf_with_tensor_type(20, 18)).expect("write");
    let err = LocalModel::load(&path).expect_err("IQ4_NL is not read");
    assert!(
        matches!(&err, LocalError::UnsupportedType { type_name, id: 20, .. } if type_name == "IQ4_NL"),
        "{err:?}"
    );
    let message = err.to_string();
    for name in [
        "iq4.gguf", "IQ4_NL", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K",
        "F16", "BF16",
    ] {
        assert!(message.contains(name), "{name} missing from: {message}");
    }
}

#[test]
fn an_unsupported_architecture_is_refused_with_what_is_supported() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("falcon.gguf");
    // F32 (GGML type 0): 4 bytes a value.
    std::fs::write(&path, gguf_of("falcon", 0, 128)).expect("write");
    let err = LocalModel::load(&path).expect_err("falcon is not run");
    assert!(
        matches!(&err, LocalError::UnsupportedArchitecture { arch, .. } if arch == "falcon"),
        "{err:?}"
    );
    let message = err.to_string();
    for name in [
        "falcon.gguf",
        "`falcon`",
        "llama",
        "mistral3",
        "qwen2",
        "qwen3",
        "gemma3",
    ] {
        assert!(message.contains(name), "{name} missing from: {message}");
    }
    let err = LocalWeights::load(&path).expect_err("nor through the weights alone");
    assert!(
        matches!(&err, LocalError::UnsupportedArchitecture { .. }),
        "{err:?}"
    );
}

#[test]
fn a_bias_the_engine_does_not_add_is_refused_naming_the_tensor() {
    let Some(path) = crate::common::tiny_gguf(
        "Q8_0",
        "tiny-llama-attn-output-bias",
        &["--attn-output-bias"],
    ) else {
        return;
    };
    let err = LocalModel::load(&path).expect_err("a file with attn_output.bias is refused");
    let message = err.to_string();
    assert!(
        matches!(&err, LocalError::Gguf { .. }) && message.contains("attn_output.bias"),
        "{message}"
    );
}
