//! Turning the part after `local:` into a file on disk: a path as given, or an `hf://REPO/FILE.gguf` download.

use std::path::PathBuf;

use crate::LocalError;

const HF_PREFIX: &str = "hf://";

/// Resolves a local model spec (what follows `local:` in a model name) to a GGUF path.
///
/// - A plain path is returned as is (it is checked when the model loads).
/// - `hf://OWNER/NAME/FILE.gguf` downloads `FILE.gguf` from the Hugging Face Hub model repo `OWNER/NAME` into the
///   Hub cache (`HF_HOME`, default `~/.cache/huggingface`), or returns the cached copy without network access.
///   This needs the `hf` cargo feature (on by default) and network access to huggingface.co; it cannot be tested
///   on machines that only reach package registries, and there it fails with [`LocalError::Download`].
pub fn resolve_model_path(spec: &str) -> Result<PathBuf, LocalError> {
    let Some(rest) = spec.strip_prefix(HF_PREFIX) else {
        if spec.is_empty() {
            return Err(LocalError::Spec {
                spec: spec.into(),
                message: "expected a GGUF file path or hf://OWNER/NAME/FILE.gguf".into(),
            });
        }
        return Ok(PathBuf::from(spec));
    };
    let (repo, file) = split_hf(spec, rest)?;
    download(spec, &repo, &file)
}

/// `OWNER/NAME/FILE...` → (`OWNER/NAME`, `FILE...`).
fn split_hf(spec: &str, rest: &str) -> Result<(String, String), LocalError> {
    let mut parts = rest.splitn(3, '/');
    let (owner, name, file) = (parts.next(), parts.next(), parts.next());
    match (owner, name, file) {
        (Some(o), Some(n), Some(f)) if !o.is_empty() && !n.is_empty() && !f.is_empty() => {
            Ok((format!("{o}/{n}"), f.to_string()))
        }
        _ => Err(LocalError::Spec {
            spec: spec.into(),
            message: "expected hf://OWNER/NAME/FILE.gguf".into(),
        }),
    }
}

#[cfg(feature = "hf")]
fn download(spec: &str, repo: &str, file: &str) -> Result<PathBuf, LocalError> {
    let err = |e: hf_hub::api::sync::ApiError| LocalError::Download {
        spec: spec.into(),
        message: e.to_string(),
    };
    // `get` returns the cached copy when present and only then goes to the network.
    let api = hf_hub::api::sync::ApiBuilder::from_env()
        .with_progress(false)
        .build()
        .map_err(err)?;
    api.model(repo.to_string()).get(file).map_err(err)
}

#[cfg(not(feature = "hf"))]
fn download(spec: &str, _repo: &str, _file: &str) -> Result<PathBuf, LocalError> {
    Err(LocalError::HfDisabled { spec: spec.into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths_pass_through() {
        let p = resolve_model_path("/models/a.gguf").map_err(|e| e.to_string());
        assert_eq!(p, Ok(PathBuf::from("/models/a.gguf")));
    }

    #[test]
    fn hf_specs_need_owner_name_and_file() {
        for bad in [
            "hf://",
            "hf://owner",
            "hf://owner/name",
            "hf://owner/name/",
            "hf:///name/f.gguf",
            "",
        ] {
            assert!(
                matches!(resolve_model_path(bad), Err(LocalError::Spec { .. })),
                "{bad} should be rejected"
            );
        }
        let ok = split_hf("x", "owner/name/sub/f.gguf").map_err(|e| e.to_string());
        assert_eq!(ok, Ok(("owner/name".to_string(), "sub/f.gguf".to_string())));
    }
}
