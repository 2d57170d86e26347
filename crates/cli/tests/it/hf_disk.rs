//! Hugging Face `datasets` folders (`hf-disk:`): folders written by PyPI `datasets` itself (save_to_disk, offline)
//! from the shared VQA-RAD and SLAKE files load with the same tasks as the JSON loaders (counts and ids equal,
//! VQA-RAD's images from the Arrow data), and so do SLAKE from the Hub cache (`hf-cache:`) and VQA-RAD from a
//! downloaded Hub snapshot's Parquet; a DatasetDict needs --split where it has several splits; a folder
//! without state.json, an Arrow file whose columns differ from the features, a truncated Arrow file and image
//! bytes that are no image are clear errors naming what is wrong.

use std::path::{Path, PathBuf};

use nmb_suite::{load, LoadOptions, Loaded};

/// The shared data folder and the datasets written from it, or `None` (skipped locally) without them.
fn datasets() -> Option<(PathBuf, tempfile::TempDir)> {
    let python = nmb_test_support::assets::tools_python("datasets")?;
    let data = nmb_test_support::assets::shared_dir()?.join("data");
    let out = tempfile::tempdir().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf/make_datasets.py");
    let made = std::process::Command::new(python)
        .arg(script)
        .arg(&data)
        .arg(out.path())
        .env("HF_HOME", out.path().join("hf-home"))
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    Some((data, out))
}

fn opts(text_only: bool, split: Option<&str>) -> LoadOptions {
    LoadOptions {
        text_only,
        split: split.map(String::from),
        ..LoadOptions::default()
    }
}

fn task_ids(loaded: &Loaded) -> Vec<String> {
    let mut ids: Vec<String> = loaded
        .suite
        .cases
        .iter()
        .flat_map(|c| c.tasks.iter().map(|t| t.id.clone()))
        .collect();
    ids.sort();
    ids
}

fn errors(loaded: &Loaded) -> Vec<String> {
    loaded
        .problems
        .iter()
        .filter(|p| p.is_error())
        .map(|p| p.to_string())
        .collect()
}

fn error_of(spec: &str, opts: &LoadOptions) -> String {
    match load(spec, opts) {
        Ok(l) => errors(&l).join("\n"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn datasets_folders_load_the_same_tasks_as_the_json_files() {
    let Some((data, out)) = datasets() else {
        return;
    };
    let json = load(
        &format!("vqa-rad:{}", data.join("vqa-rad/trainset.json").display()),
        &opts(false, None),
    )
    .unwrap();
    let disk = load(
        &format!("hf-disk:{}", out.path().join("vqa-rad").display()),
        &opts(false, None),
    )
    .unwrap();
    assert!(errors(&disk).is_empty(), "{:?}", errors(&disk));
    assert!(!task_ids(&json).is_empty());
    assert_eq!(task_ids(&disk), task_ids(&json));
    assert_eq!(disk.suite.cases.len(), json.suite.cases.len());
    for case in &disk.suite.cases {
        assert_eq!(
            case.images.len(),
            1,
            "{}: its image from the Arrow data",
            case.id
        );
        let bytes = case.images[0].source.read().unwrap();
        assert!(nmb_imaging::sniff(&bytes).is_some(), "{}", case.id);
    }

    let slake_json = load(
        &format!("slake:{}", data.join("slake/test.json").display()),
        &opts(true, None),
    )
    .unwrap();
    let slake = out.path().join("slake");
    let slake_disk = load(
        &format!("hf-disk:slake:{}", slake.display()),
        &opts(true, Some("test")),
    )
    .unwrap();
    assert!(!task_ids(&slake_json).is_empty());
    assert_eq!(task_ids(&slake_disk), task_ids(&slake_json));

    // The Hub cache: HF_DATASETS_CACHE names it (the loader reads the environment, as `datasets` does).
    std::env::set_var("HF_DATASETS_CACHE", out.path().join("hf-cache"));
    let cached = load("hf-cache:slake:json", &opts(true, Some("test"))).unwrap();
    assert_eq!(task_ids(&cached), task_ids(&slake_json));

    let no_split = error_of(&format!("hf-disk:{}", slake.display()), &opts(true, None));
    assert!(
        no_split.contains("train, test") && no_split.contains("--split"),
        "{no_split}"
    );
}

#[test]
fn bad_folders_get_clear_errors() {
    let Some((_data, out)) = datasets() else {
        return;
    };
    let o = opts(false, None);

    let bad = out.path().join("bad-image");
    let err = error_of(&format!("hf-disk:{}", bad.display()), &o);
    assert!(
        err.contains("no image nmb can read") && err.contains("image") && err.contains("row 1"),
        "{err}"
    );

    let info = bad.join("dataset_info.json");
    let text = std::fs::read_to_string(&info).unwrap();
    let mut doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    doc["features"]["extra"] = serde_json::json!({"dtype": "string", "_type": "Value"});
    std::fs::write(&info, doc.to_string()).unwrap();
    let err = error_of(&format!("hf-disk:{}", bad.display()), &o);
    assert!(
        err.contains("differ from the features") && err.contains("extra"),
        "{err}"
    );
    std::fs::write(&info, text).unwrap();

    let arrow = bad.join("data-00000-of-00001.arrow");
    let bytes = std::fs::read(&arrow).unwrap();
    std::fs::write(&arrow, &bytes[..bytes.len() / 2]).unwrap();
    let err = error_of(&format!("hf-disk:{}", bad.display()), &o);
    assert!(
        err.contains("data-00000-of-00001.arrow") && err.contains("Arrow"),
        "{err}"
    );

    std::fs::remove_file(bad.join("state.json")).unwrap();
    let err = error_of(&format!("hf-disk:{}", bad.display()), &o);
    assert!(err.contains("no state.json"), "{err}");
}

/// The Hub cache as huggingface_hub lays it out (`HF_HOME/hub/datasets--OWNER--NAME/snapshots/REV/…` with
/// `refs/main`), its Parquet written by PyPI `datasets` from the shared VQA-RAD rows: `hf-cache:OWNER/NAME`
/// reads the snapshot's Parquet (offline, `datasets` itself will not prepare a Hub name's Arrow cache from it,
/// which the script reports) and has the JSON loader's tasks; the Arrow cache `load_dataset("parquet", …)`
/// writes from the same file (`HF_HOME/datasets/parquet/…`) has them too.
#[test]
fn the_hub_cache_of_a_downloaded_dataset_loads_the_same_tasks_as_the_json_file() {
    let Some(python) = nmb_test_support::assets::tools_python("datasets") else {
        return;
    };
    let Some(shared) = nmb_test_support::assets::shared_dir() else {
        return;
    };
    let data = shared.join("data");
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("hf-home");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hf/make_hub_cache.py");
    let made = std::process::Command::new(python)
        .arg(script)
        .arg(&data)
        .arg(&home)
        .arg("nmb-test/vqa-rad")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&made.stdout);
    assert!(
        made.status.success() && said.contains("parquet: ok"),
        "{said}\n{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let json = load(
        &format!("vqa-rad:{}", data.join("vqa-rad/trainset.json").display()),
        &opts(false, None),
    )
    .unwrap();
    let planned = |spec: &str| {
        let out = crate::common::nmb_command(&tmp.path().join("runs"))
            .env("HF_HOME", &home)
            .env("NMB_MAX_FILE_MIB", "512")
            .env_remove("HF_DATASETS_CACHE")
            .env_remove("HF_HUB_CACHE")
            .args([
                "eval",
                "--suite",
                spec,
                "--model",
                "openai:m@http://127.0.0.1:9/v1",
            ])
            .args(["--samples", "1", "--dry-run", "--json"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{spec}: {stderr}");
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(doc["tasks_failed"], 0, "{spec}: {doc}");
        let mut ids: Vec<String> = doc["per_task"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                assert_eq!(
                    t["images_sent"], 1,
                    "{spec}: {t}: its image from the Parquet data"
                );
                t["task_id"].as_str().unwrap().to_string()
            })
            .collect();
        ids.sort();
        ids
    };
    assert!(!task_ids(&json).is_empty());
    assert_eq!(planned("hf-cache:nmb-test/vqa-rad"), task_ids(&json));
    assert_eq!(planned("hf-cache:parquet"), task_ids(&json));
}
