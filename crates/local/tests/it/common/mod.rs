//! Finding the GGUFs the tests run on.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use nmb_test_support::assets::{py_dir, repo_root};
use nmb_test_support::need;

/// The SmolLM2 GGUF (see `nmb_test_support::assets`): `None` after a message locally, a failure under CI.
pub fn smollm2() -> Option<PathBuf> {
    nmb_test_support::assets::smollm2_gguf()
}

/// The Gemma 3 270M Q4_K_M GGUF: `None` after a message locally, a failure under CI.
pub fn gemma3() -> Option<PathBuf> {
    nmb_test_support::assets::gemma3_gguf()
}

/// A tiny random-weight GGUF with SmolLM2's tokenizer that `scripts/tiny-gguf.py` writes in weight type `ty`
/// into Cargo's scratch folder for tests, as `NAME.gguf`; `extra` are further arguments of the script (`--pre`,
/// `--chat-template`). Without extra arguments a file left by an earlier run is reused (the script writes the
/// same bytes); with them it is written once per test binary, so an edited fixture is never read stale.
pub fn tiny_gguf(ty: &str, name: &str, extra: &[&str]) -> Option<PathBuf> {
    static WRITTEN: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let smollm2 = smollm2()?;
    need(
        "Python's gguf and numpy (scripts/tiny-gguf.py)",
        "scripts/assets.sh installs them into .nmb-assets/py",
        Command::new("python3")
            .args(["-c", "import gguf, numpy"])
            .env("PYTHONPATH", py_dir())
            .output()
            .ok()
            .filter(|o| o.status.success()),
    )?;
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.gguf"));
    let mut written = WRITTEN.lock().unwrap_or_else(|e| e.into_inner());
    let written = written.get_or_insert_with(HashSet::new);
    let reusable = extra.is_empty() && out.exists();
    if !reusable && !written.contains(&out) {
        let partial = out.with_extension("partial");
        let run = Command::new("python3")
            .arg(repo_root().join("scripts/tiny-gguf.py"))
            .arg(&smollm2)
            .arg(ty)
            .arg(&partial)
            .args(extra)
            .env("PYTHONPATH", py_dir())
            .output()
            .expect("running python3 scripts/tiny-gguf.py");
        assert!(
            run.status.success(),
            "tiny-gguf.py {ty} {extra:?} failed: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        std::fs::rename(&partial, &out).expect("moves the GGUF into place");
        written.insert(out.clone());
    }
    Some(out)
}
