//! Prompt sweeps: the template variants a `--template-variants` value names, and one report over every
//! variant's run (its prompt-sensitivity section compares them).

use std::path::{Path, PathBuf};

use nmb_run::TemplateChoice;
use nmb_store::Store;

use crate::OutcomeError;

/// Why a sweep's variants cannot be listed.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("--template-variants {}: expected a folder of *.jinja templates, or `bundled`: {source}", path.display())]
    List {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("--template-variants {}: the folder has no *.jinja template", path.display())]
    Empty { path: PathBuf },
}

/// One variant: its label (`default`, a bundled variant's name or a file's stem) and its template (none: the
/// built-in templates).
pub type Variant = (String, Option<TemplateChoice>);

/// The variants `source` names: `bundled` (the built-in templates first, then each bundled variant), else every
/// `*.jinja` file in the folder, in name order.
pub fn variants(source: &Path) -> Result<Vec<Variant>, SweepError> {
    if source == Path::new("bundled") {
        let bundled = nmb_plan::variant_names()
            .map(|n| (n.to_string(), Some(TemplateChoice::Bundled(n.to_string()))));
        return Ok(std::iter::once(("default".to_string(), None))
            .chain(bundled)
            .collect());
    }
    let list = |e| SweepError::List {
        path: source.to_path_buf(),
        source: e,
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(source).map_err(list)? {
        let path = entry.map_err(list)?.path();
        if path.is_file() && path.extension().is_some_and(|e| e == "jinja") {
            files.push(path);
        }
    }
    files.sort();
    if files.is_empty() {
        return Err(SweepError::Empty {
            path: source.to_path_buf(),
        });
    }
    let variant = |p: PathBuf| {
        let stem = (p.file_stem()).map_or_else(String::new, |s| s.to_string_lossy().into_owned());
        (stem, Some(TemplateChoice::File(p)))
    };
    Ok(files.into_iter().map(variant).collect())
}

/// One report over the runs `run_ids` (scored runs with their stored scores) in `dir`; returns the HTML page.
pub fn report(store: &Store, run_ids: &[&str], dir: &Path) -> Result<PathBuf, OutcomeError> {
    crate::outcome::write_runs(store, run_ids, &nmb_report::ReportOptions::new(dir))
}
