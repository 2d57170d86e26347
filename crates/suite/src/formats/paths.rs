//! Image paths written in suite files: relative to a root directory, and never allowed to leave it.

use std::path::{Component, Path, PathBuf};

use crate::SuiteError;

/// The canonical form of a suite's root directory (symlinks resolved), so later checks compare like with like.
pub(super) fn canonical_root(dir: &Path) -> Result<PathBuf, SuiteError> {
    dir.canonicalize().map_err(|source| SuiteError::Read {
        path: dir.display().to_string(),
        source,
    })
}

/// Resolves `raw` against `root` and checks it names a non-empty regular file inside `root`.
///
/// Rejected: empty paths, absolute paths, `..` components, and symlinks whose target lies outside `root`.
/// Only metadata is read here; the bytes are read when the image is used.
pub(super) fn resolve(root: &Path, raw: &str) -> Result<PathBuf, String> {
    let rel = Path::new(raw);
    if raw.trim().is_empty() {
        return Err("empty path; expected a file path relative to the suite directory".into());
    }
    if rel.is_absolute() || rel.components().any(|c| matches!(c, Component::Prefix(_))) {
        return Err(format!(
            "absolute path {raw:?} is not allowed; expected a path relative to the suite directory"
        ));
    }
    if rel.components().any(|c| c == Component::ParentDir) {
        return Err(format!(
            "path {raw:?} escapes the suite directory (contains ..)"
        ));
    }
    let joined = root.join(rel);
    let real = joined
        .canonicalize()
        .map_err(|e| format!("image file {} not found: {e}", joined.display()))?;
    if !real.starts_with(root) {
        return Err(format!(
            "path {raw:?} escapes the suite directory through a symlink (resolves to {})",
            real.display()
        ));
    }
    check_file(&real)?;
    Ok(real)
}

/// Like [`resolve`], but a directory is accepted too (a DICOM series).
pub(super) fn resolve_entry(root: &Path, raw: &str) -> Result<PathBuf, String> {
    let joined = root.join(raw);
    if !joined.is_dir() {
        return resolve(root, raw);
    }
    let rel = Path::new(raw);
    if rel.is_absolute() || rel.components().any(|c| c == Component::ParentDir) {
        return resolve(root, raw);
    }
    let real = joined
        .canonicalize()
        .map_err(|e| format!("directory {} not found: {e}", joined.display()))?;
    if !real.starts_with(root) {
        return Err(format!(
            "path {raw:?} escapes the suite directory through a symlink (resolves to {})",
            real.display()
        ));
    }
    Ok(real)
}

fn check_file(path: &Path) -> Result<(), String> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.len() == 0 {
        return Err(format!(
            "image file {} is empty (0 bytes); expected PNG or JPEG bytes",
            path.display()
        ));
    }
    Ok(())
}
